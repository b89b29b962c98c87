//! Mask-time probe: `cargo run --release --example mask_timing -- TOKENIZER_JSON REGEX` writes the
//! mask of every state of the regex's canonical guide once and prints the distribution of
//! `Guide::write_mask` times (the work of a first visit, before the mask cache).
use std::sync::Arc;
use std::time::Instant;

use propertok::guide::Method;
use propertok::tokenizer::vocab::Vocabulary;
use propertok::{compiler::Compiler, limits::Limits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = std::fs::read_to_string(&args[0]).expect("tokenizer.json");
    let vocab = Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"));
    let compiler = Compiler::new(vocab, Limits::default()).with_cache_dir(Some("/tmp/ptcache".into()));
    let guide = compiler.compile_regex(&args[1], Method::Cartesian).expect("compile");
    let mut out = vec![0u32; guide.mask_words()];
    for _ in 0..2 {
        let started = Instant::now();
        guide.write_mask(guide.initial_state(), &mut out).expect("mask");
        println!("initial state: {:.2} µs", started.elapsed().as_secs_f64() * 1e6);
    }
    let mut times: Vec<(f64, u32)> = (0..guide.num_states() as u32)
        .map(|s| {
            let started = Instant::now();
            guide.write_mask(s, &mut out).expect("mask");
            (started.elapsed().as_secs_f64() * 1e6, s)
        })
        .collect();
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    if std::env::var_os("PROBE_REPEAT").is_some() {
        let slow: Vec<u32> = times[times.len() * 9 / 10..].iter().map(|t| t.1).collect();
        let started = Instant::now();
        for _ in 0..20 {
            for &s in &slow {
                guide.write_mask(s, &mut out).expect("mask");
            }
        }
        println!(
            "slowest 10 %: {:.2} µs each on repeat",
            started.elapsed().as_secs_f64() * 1e6 / (20.0 * slow.len() as f64)
        );
    }
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize].0;
    println!(
        "{} states: write_mask median {:.2} µs, p90 {:.2}, p99 {:.2}, max {:.2} (state {})",
        times.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        times.last().unwrap().0,
        times.last().unwrap().1
    );
}
