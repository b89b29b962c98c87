//! Walk probe: `cargo run --release --example doc_walk -- TOKENIZER_JSON REGEX IDS [ROUNDS]` compiles
//! the regex (`@FILE`: read from FILE; `@@FILE.jsonl`: each
//! `regex` of the file, best of `ROUNDS` compiles, the ids ignored) lazily `ROUNDS` times from one `Compiler` (fresh guide each time, as a server would)
//! and prints the mean time of each step's mask (first visits) along the comma-separated token ids (`-`: none, to time compiles).
use std::sync::Arc;
use std::time::Instant;

use propertok::tokenizer::vocab::Vocabulary;
use propertok::{compiler::Compiler, limits::Limits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = std::fs::read_to_string(&args[0]).expect("tokenizer.json");
    let ids: Vec<u32> = match args[2].as_str() {
        "-" => Vec::new(),
        list => list.split(',').map(|s| s.trim().parse().expect("token id")).collect(),
    };
    let rounds: usize = args.get(3).map_or(20, |s| s.parse().expect("rounds"));
    let vocab = Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"));
    let compiler = Compiler::new(vocab.clone(), Limits::default()).with_cache_dir(Some("/tmp/ptcache".into()));
    compiler.compile_regex_lazy("a").expect("warm-up");
    if let Some(file) = args[1].strip_prefix("@@") {
        // Every regex of a JSON-lines file (`regex` fields), compiled `ROUNDS` times each.
        let regexes: Vec<String> = std::fs::read_to_string(file)
            .expect("regex file")
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["regex"].as_str().map(String::from))
            .collect();
        let mut times: Vec<f64> = regexes
            .iter()
            .map(|r| {
                (0..rounds)
                    .map(|_| {
                        let started = Instant::now();
                        let _ = compiler.compile_regex_lazy(r);
                        started.elapsed().as_secs_f64()
                    })
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize] * 1e3;
        println!(
            "{} regexes, best of {rounds}: compile median {:.3} ms, p90 {:.2}, p99 {:.1}, all {:.1} ms",
            times.len(),
            at(0.5),
            at(0.9),
            at(0.99),
            times.iter().sum::<f64>() * 1e3
        );
        return;
    }
    let regex = match args[1].strip_prefix('@') {
        Some(file) => std::fs::read_to_string(file).expect("regex file").trim_end_matches('\n').to_string(),
        None => args[1].clone(),
    };
    let mut per_step = vec![0f64; ids.len()];
    let mut compile = 0f64;
    for _ in 0..rounds {
        let started = Instant::now();
        let guide = compiler.compile_regex_lazy(&regex).expect("compile");
        compile += started.elapsed().as_secs_f64();
        let mut out = vec![0u32; guide.mask_words()];
        let mut state = guide.initial_state();
        for (i, &t) in ids.iter().enumerate() {
            let started = Instant::now();
            guide.write_mask(state, &mut out).expect("mask");
            per_step[i] += started.elapsed().as_secs_f64();
            state = guide.next_state(state, t).expect("step");
        }
    }
    println!("compile {:.1} µs", compile / rounds as f64 * 1e6);
    for (i, &t) in ids.iter().enumerate() {
        let text = String::from_utf8_lossy(vocab.token_bytes(t)).into_owned();
        println!("{i:3} {text:?}: {:.1} µs", per_step[i] / rounds as f64 * 1e6);
    }
    println!("all steps {:.1} µs", per_step.iter().sum::<f64>() / rounds as f64 * 1e6);
}
