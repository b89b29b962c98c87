//! Splits texts with a [`PieceMachine`], for comparison with Hugging Face `tokenizers`
//! (`tests/pretokenizer_split_check.py`).
//!
//! Reads one JSON object from stdin: `{"stages": [pattern, ...], "texts": [text, ...]}`
//! (optionally `"added": [content, ...]`: added tokens cut out first, as a final stage 0), and
//! prints `{"pieces": [[piece, ...] | null, ...], "errors": [message | null, ...], "states": n}`.
//! With `{"classes": [pattern, ...]}` instead, prints the code point ranges each one-class
//! pattern (`\p{L}`, `\s`) consumes, as `split_pattern` parses it: `{"ranges": [[[lo, hi],
//! ...], ...]}`.

use std::io::Read;

use propertok::pre_tokenizer::piece_machine::{added_tokens_pattern, PieceMachine, PieceMachineSpec};
use propertok::pre_tokenizer::split_nfa::{Node, SplitNfa};
use serde_json::{json, Value};

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("stdin");
    let req: Value = serde_json::from_str(&input).expect("JSON request");
    let strings = |key: &str| -> Vec<String> {
        req[key].as_array().expect(key).iter().map(|v| v.as_str().expect(key).to_string()).collect()
    };
    if req.get("classes").is_some() {
        let ranges: Vec<Value> = strings("classes")
            .iter()
            .map(|p| {
                let nfa = SplitNfa::new(p).expect("pattern");
                let r: Vec<[u32; 2]> = nfa
                    .nodes
                    .iter()
                    .find_map(|n| match n {
                        Node::Class { ranges, .. } => Some(ranges.iter().map(|&(a, b)| [a as u32, b as u32]).collect()),
                        _ => None,
                    })
                    .expect("one class");
                json!(r)
            })
            .collect();
        println!("{}", json!({ "ranges": ranges }));
        return;
    }
    let added = if req.get("added").is_some() { strings("added") } else { Vec::new() };
    let mut stages = strings("stages");
    if !added.is_empty() {
        stages.insert(0, added_tokens_pattern(&added));
    }
    let spec = PieceMachineSpec { stages, allowed_chars: None, added };
    let mut machine = match PieceMachine::new(&spec, 1_000_000) {
        Ok(m) => m,
        Err(e) => {
            println!("{}", json!({ "fatal": e.to_string() }));
            return;
        }
    };
    let (mut pieces, mut errors) = (Vec::new(), Vec::new());
    for text in strings("texts") {
        match machine.split(&text) {
            Ok(p) => {
                pieces.push(json!(p));
                errors.push(Value::Null);
            }
            Err(e) => {
                pieces.push(Value::Null);
                errors.push(json!(e.to_string()));
            }
        }
    }
    println!("{}", json!({ "pieces": pieces, "errors": errors, "states": machine.num_states() }));
}
