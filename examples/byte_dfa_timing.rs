//! Byte-DFA construction probe: times `ByteDfa::from_regex` over a file of regexes and prints a
//! fingerprint of every DFA, so that two builds can be compared for speed and for identical
//! tables (`diff` the fingerprint files).
//!
//! ```text
//! cargo run --release --example byte_dfa_timing -- REGEXES.jsonl [ROUNDS] > fingerprints.txt
//! ```
//! `REGEXES.jsonl`: one JSON object per line with a string field `regex` (as in
//! `shared/data/jsonschemabench_regex.jsonl`); other lines are skipped. The timing summary goes to
//! stderr: the total of each round's best-of-rounds per regex, the median and the largest.
use std::hash::{Hash, Hasher};
use std::time::Instant;

use propertok::limits::DEFAULT_MAX_BYTE_DFA_STATES as DEFAULT_MAX_STATES;
use propertok::regex::byte_dfa::ByteDfa;

fn regexes(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("the regex file");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|row| row.get("regex")?.as_str().map(String::from))
        .collect()
}

fn fingerprint(d: &ByteDfa) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (d.num_states(), d.num_classes(), d.start()).hash(&mut h);
    for b in 0..=255u8 {
        d.byte_class(b).hash(&mut h);
    }
    for s in 0..d.num_states() as u32 {
        (d.is_accepting(s), d.distance_to_accept(s)).hash(&mut h);
        for b in 0..=255u8 {
            d.next(s, b).hash(&mut h);
        }
    }
    h.finish()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = regexes(&args[0]);
    let rounds: usize = args.get(1).map_or(3, |r| r.parse().expect("ROUNDS"));
    let mut best = vec![f64::INFINITY; all.len()];
    for _ in 0..rounds {
        for (i, re) in all.iter().enumerate() {
            let started = Instant::now();
            let dfa = ByteDfa::from_regex(re, DEFAULT_MAX_STATES);
            best[i] = best[i].min(started.elapsed().as_secs_f64());
            std::hint::black_box(&dfa);
        }
    }
    for re in &all {
        match ByteDfa::from_regex(re, DEFAULT_MAX_STATES) {
            Ok(d) => println!("{:016x} {}", fingerprint(&d), d.num_states()),
            Err(e) => println!("error {}", e.to_string().chars().take(60).collect::<String>()),
        }
    }
    let mut sorted = best.clone();
    sorted.sort_by(f64::total_cmp);
    eprintln!(
        "{} regexes, best of {rounds}: total {:.1} ms, median {:.1} µs, p90 {:.1} µs, max {:.2} ms",
        all.len(),
        best.iter().sum::<f64>() * 1e3,
        sorted[sorted.len() / 2] * 1e6,
        sorted[sorted.len() * 9 / 10] * 1e6,
        sorted.last().copied().unwrap_or(0.0) * 1e3
    );
}
