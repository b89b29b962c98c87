//! Compile-time probe: `cargo run --release --example compile_timing -- TOKENIZER_JSON REGEX...`
//! (with `PROPERTOK_DEBUG=1` for the phases of pre-tokenized guides).
use std::sync::Arc;
use std::time::Instant;

use propertok::guide::Method;
use propertok::tokenizer::vocab::Vocabulary;
use propertok::{compiler::Compiler, limits::Limits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = std::fs::read_to_string(&args[0]).expect("tokenizer.json");
    let vocab = Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"));
    let compiler = Compiler::new(vocab, Limits::default())
        .with_cache_dir(std::env::var("PT_CACHE").ok().map(Into::into).or(Some("/tmp/ptcache".into())));
    let started = Instant::now();
    compiler.tokenizer_dfa().expect("tokenizer DFA");
    println!("tokenizer DFA: {:.3} s ({})", started.elapsed().as_secs_f64(), compiler.cache_status());
    for pattern in &args[1..] {
        let started = Instant::now();
        match compiler.compile_regex(pattern, Method::Cartesian) {
            Ok(g) => println!("{:.3} s, {} states", started.elapsed().as_secs_f64(), g.num_states()),
            Err(e) => println!("error: {e}"),
        }
    }
}
