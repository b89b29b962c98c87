//! Lazy-guide probe: `cargo run --release --example lazy_probe -- TOKENIZER_JSON REGEXES_JSONL
//! [N] [SUBSET_PREFIX]` compiles the first `N` regexes (of rows whose `subset` starts with the
//! prefix) lazily and eagerly and prints, per regex, the time to first mask of each, the mask
//! times of a lazy guide along 5 random walks (first visits included), the states built, the
//! memo's bytes, and whether both guides give the same masks along those walks. A diagnostic for
//! `docs/design.md`; the peer comparison is `benches/compare.py`.
use std::sync::Arc;
use std::time::Instant;

use propertok::guide::Method;
use propertok::tokenizer::vocab::Vocabulary;
use propertok::{compiler::Compiler, limits::Limits};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = std::fs::read_to_string(&args[0]).expect("tokenizer.json");
    let n: usize = args.get(2).map_or(20, |s| s.parse().expect("N"));
    let prefix = args.get(3).cloned().unwrap_or_default();
    let eager_too = std::env::var_os("PROBE_NO_EAGER").is_none();
    let vocab = Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"));
    let compiler = Compiler::new(vocab, Limits::default()).with_cache_dir(Some("/tmp/ptcache".into()));
    let started = Instant::now();
    compiler.compile_regex_lazy("a").expect("warm-up");
    println!("tokenizer parts: {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    let rows: Vec<String> = std::fs::read_to_string(&args[1])
        .expect("regexes")
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["subset"].as_str()?.starts_with(&prefix).then(|| v["regex"].as_str().map(str::to_string))?
        })
        .take(n)
        .collect();
    let (mut ttfm, mut masks) = (Vec::new(), Vec::new());
    for (i, regex) in rows.iter().enumerate() {
        let t0 = Instant::now();
        let lazy = match compiler.compile_regex_lazy(regex) {
            Ok(g) => g,
            Err(e) => {
                println!("{i}: lazy error {e}");
                continue;
            }
        };
        let lazy_ms = t0.elapsed().as_secs_f64() * 1e3;
        ttfm.push(lazy_ms);
        let mut out = vec![0u32; lazy.mask_words()];
        let mut worst = 0f64;
        let mut walks = Vec::new();
        for seed in 0..5 {
            let walk = lazy.random_walk(seed, 200).unwrap_or_default();
            let mut s = lazy.initial_state();
            for &t in &walk {
                let t1 = Instant::now();
                lazy.write_mask(s, &mut out).expect("mask");
                let us = t1.elapsed().as_secs_f64() * 1e6;
                masks.push(us);
                worst = worst.max(us);
                s = lazy.next_state(s, t).expect("step");
            }
            walks.push(walk);
        }
        let (memo, _) = lazy.lazy_memo_bytes().unwrap();
        let mut line = format!(
            "{i}: lazy {lazy_ms:.2} ms, {} states, memo {} kB, worst mask {worst:.0} µs",
            lazy.num_states(),
            memo / 1024
        );
        if eager_too {
            let t0 = Instant::now();
            match compiler.compile_regex(regex, Method::Cartesian) {
                Ok(eager) => {
                    line +=
                        &format!(", eager {:.1} ms ({} states)", t0.elapsed().as_secs_f64() * 1e3, eager.num_states());
                    for walk in &walks {
                        let (mut a, mut b) = (lazy.initial_state(), eager.initial_state());
                        for &t in walk {
                            assert_eq!(lazy.mask(a).unwrap(), eager.mask(b).unwrap(), "regex {i}: masks differ");
                            a = lazy.next_state(a, t).unwrap();
                            b = eager.next_state(b, t).unwrap();
                        }
                        assert_eq!(lazy.mask(a).unwrap(), eager.mask(b).unwrap(), "regex {i}: final masks differ");
                    }
                }
                Err(e) => line += &format!(", eager error {e}"),
            }
        }
        println!("{line}");
    }
    let q = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * p) as usize]
    };
    println!(
        "time to first mask (ms): median {:.2}, p90 {:.2}, max {:.2}; masks (µs): median {:.2}, p99 {:.1}, max {:.0}",
        q(&mut ttfm, 0.5),
        q(&mut ttfm, 0.9),
        q(&mut ttfm, 1.0),
        q(&mut masks, 0.5),
        q(&mut masks, 0.99),
        q(&mut masks, 1.0)
    );
}
