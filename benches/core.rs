//! Criterion benchmarks of each pipeline step, through the public Rust API, on the real
//! Mistral-7B and Llama 3 tokenizers and JSONSchemaBench regexes from the shared corpus
//! (`$PROPERTOK_SHARED`, default `../shared` next to the repository).
//!
//! ```sh
//! cargo bench --bench core                 # a few minutes on 2 cores
//! cargo bench --bench core -- --quick      # faster, rougher
//! cargo bench --bench core -- mask_fill    # one group
//! ```
//!
//! Steps: byte DFA (`ByteDfa::from_regex`), tokenizer DFA build (Mistral-7B; Llama 3's ~15–30 s
//! build runs once, untimed, into a disk cache under `target/propertok-bench-cache` that later runs
//! reuse) and load from the disk cache (both), agnostic index, CartesianMerge compile (pre-tokenized
//! guides for Llama 3), direct (explicit minimised token DFA) compile, and mask fill:
//! `Guide::write_mask` (computed into the caller's buffer) and the cached mask copied into it (what
//! the Python `Matcher.fill_next_token_bitmask` does), per state, along a random accepted path.
//! The regexes are picked deterministically: the Glaiveai2K rows at the 10th, 50th and 90th
//! percentile of regex length, and the Github_easy row at the median.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use propertok::guide::{Guide, Method};
use propertok::limits::DEFAULT_MAX_BYTE_DFA_STATES as DEFAULT_MAX_STATES;
use propertok::regex::byte_dfa::ByteDfa;
use propertok::tokenizer::vocab::Vocabulary;
use propertok::tokenizer_dfa::TokenizerDfa;
use propertok::{compiler::Compiler, limits::Limits};

fn shared_dir() -> PathBuf {
    match std::env::var_os("PROPERTOK_SHARED") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared"),
    }
}

fn load_vocab(name: &str) -> Arc<Vocabulary> {
    let path = shared_dir().join("tokenizers").join(name).join("tokenizer.json");
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Arc::new(Vocabulary::from_json(&json, None, None).expect("tokenizer.json parses"))
}

/// `(label, id, regex)`: Glaiveai2K at the 10th/50th/90th length percentile, Github_easy median.
fn regexes() -> Vec<(String, String, String)> {
    let path = shared_dir().join("data").join("jsonschemabench_regex.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut rows: Vec<(String, String, String)> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            Some((
                v.get("subset")?.as_str()?.to_string(),
                v.get("id")?.as_str()?.to_string(),
                v.get("regex")?.as_str()?.to_string(),
            ))
        })
        .collect();
    rows.sort_by(|a, b| (a.2.len(), &a.1).cmp(&(b.2.len(), &b.1)));
    let pick = |subset: &str, q: f64| {
        let sel: Vec<_> = rows.iter().filter(|r| r.0 == subset).collect();
        let r = sel[((sel.len() - 1) as f64 * q).round() as usize];
        (r.1.clone(), r.2.clone())
    };
    let mut out = Vec::new();
    for (label, subset, q) in [
        ("glaive-p10", "Glaiveai2K", 0.1),
        ("glaive-p50", "Glaiveai2K", 0.5),
        ("glaive-p90", "Glaiveai2K", 0.9),
        ("github-easy-p50", "Github_easy", 0.5),
    ] {
        let (id, re) = pick(subset, q);
        eprintln!("regex {label}: {id} ({} chars)", re.len());
        out.push((label.to_string(), id, re));
    }
    out
}

/// The states along a random accepted token path of `guide` (initial state included).
fn path_states(guide: &Guide, seed: u64) -> Vec<u32> {
    let tokens = guide.random_walk(seed, 256).expect("random walk");
    let mut s = guide.initial_state();
    let mut states = vec![s];
    for t in tokens {
        s = guide.next_state(s, t).expect("walk token allowed");
        states.push(s);
    }
    states
}

fn bench_byte_dfa(c: &mut Criterion, res: &[(String, String, String)]) {
    let mut g = c.benchmark_group("byte_dfa");
    for (label, _, re) in res {
        g.bench_with_input(BenchmarkId::from_parameter(label), re, |b, re| {
            b.iter(|| ByteDfa::from_regex(black_box(re), DEFAULT_MAX_STATES).expect("byte DFA"))
        });
    }
    g.finish();
}

/// A disk cache kept between runs, so Llama 3's tokenizer DFA is built once.
fn persistent_cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("propertok-bench-cache")
}

fn bench_tokenizer_dfa(c: &mut Criterion, mistral: &Arc<Vocabulary>, llama3: &Arc<Vocabulary>) {
    let mut g = c.benchmark_group("tokenizer_dfa");
    g.sample_size(10).warm_up_time(Duration::from_millis(100)).measurement_time(Duration::from_secs(15));
    g.bench_function("build/mistral7b", |b| b.iter(|| TokenizerDfa::build(black_box(mistral)).expect("build")));
    let dir = std::env::temp_dir().join(format!("propertok-bench-cache-{}", std::process::id()));
    let warm = Compiler::new(mistral.clone(), Limits::default()).with_cache_dir(Some(dir.clone()));
    warm.tokenizer_dfa().expect("build + write cache");
    g.bench_function("cache_load/mistral7b", |b| {
        b.iter(|| {
            let c = Compiler::new(mistral.clone(), Limits::default()).with_cache_dir(Some(dir.clone()));
            c.tokenizer_dfa().expect("load").num_states();
            assert_eq!(c.cache_status(), "hit");
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    let dir = persistent_cache_dir();
    Compiler::new(llama3.clone(), Limits::default())
        .with_cache_dir(Some(dir.clone()))
        .tokenizer_dfa()
        .expect("Llama 3 tokenizer DFA");
    g.bench_function("cache_load/llama3", |b| {
        b.iter(|| {
            let c = Compiler::new(llama3.clone(), Limits::default()).with_cache_dir(Some(dir.clone()));
            c.tokenizer_dfa().expect("load").num_states();
            assert_eq!(c.cache_status(), "hit");
        })
    });
    g.finish();
}

struct Tok {
    name: &'static str,
    compiler: Compiler,
    /// The methods benchmarked (Llama 3's `direct` guides materialise tens of thousands of
    /// states of ~128k transitions each: past the limits for most glaive schemas, so skipped).
    methods: &'static [Method],
}

fn bench_compile(c: &mut Criterion, toks: &[Tok], res: &[(String, String, String)]) {
    for (group, method) in
        [("agnostic", Method::Agnostic), ("cartesian", Method::Cartesian), ("direct", Method::Direct)]
    {
        let mut g = c.benchmark_group(format!("compile_{group}"));
        g.sample_size(10).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(3));
        for tok in toks {
            if !tok.methods.contains(&method) {
                continue;
            }
            for (label, id, re) in res {
                // Only regexes that compile within the default limits are timed.
                if let Err(e) = tok.compiler.compile_regex(re, method) {
                    eprintln!("compile_{group}/{}/{label} ({id}): skipped: {e}", tok.name);
                    continue;
                }
                g.bench_with_input(BenchmarkId::new(tok.name, label), re, |b, re| {
                    b.iter(|| tok.compiler.compile_regex(black_box(re), method).expect("compile"))
                });
            }
        }
        g.finish();
    }
}

/// Time to first mask of a lazy guide (`compile_regex_lazy` computes the initial mask): a fresh
/// guide per iteration, so every first visit is included.
fn bench_compile_lazy(c: &mut Criterion, toks: &[Tok], res: &[(String, String, String)]) {
    let mut g = c.benchmark_group("compile_lazy");
    g.sample_size(20).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(2));
    for tok in toks {
        tok.compiler.compile_regex_lazy("a").expect("warm-up: the tokenizer's lazy parts");
        for (label, id, re) in res {
            if let Err(e) = tok.compiler.compile_regex_lazy(re) {
                eprintln!("compile_lazy/{}/{label} ({id}): skipped: {e}", tok.name);
                continue;
            }
            g.bench_with_input(BenchmarkId::new(tok.name, label), re, |b, re| {
                b.iter(|| tok.compiler.compile_regex_lazy(black_box(re)).expect("compile"))
            });
        }
    }
    g.finish();
}

fn bench_mask_fill(c: &mut Criterion, toks: &[Tok], res: &[(String, String, String)]) {
    let mut g = c.benchmark_group("mask_fill");
    g.sample_size(20).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_secs(2));
    for tok in toks {
        for &method in tok.methods {
            for (label, _, re) in res {
                let Ok(guide) = tok.compiler.compile_regex(re, method) else { continue };
                let states = path_states(&guide, 7);
                let mut buf = vec![0u32; guide.mask_words()];
                let n = states.len();
                let name = format!("{}/{}", tok.name, method.name());
                // Per call: one state's mask into the caller's buffer, cycling along the path.
                let mut i = 0usize;
                g.bench_function(BenchmarkId::new(format!("write_mask/{name}"), label), |b| {
                    b.iter(|| {
                        let s = states[i % n];
                        i = i.wrapping_add(1);
                        guide.write_mask(black_box(s), &mut buf).expect("mask");
                    })
                });
                for &s in &states {
                    guide.copy_mask(s, &mut buf).unwrap(); // fill the mask cache first
                }
                let mut i = 0usize;
                g.bench_function(BenchmarkId::new(format!("cached_copy/{name}"), label), |b| {
                    b.iter(|| {
                        let s = states[i % n];
                        i = i.wrapping_add(1);
                        guide.copy_mask(black_box(s), &mut buf).unwrap();
                    })
                });
            }
        }
    }
    g.finish();
}

fn all(c: &mut Criterion) {
    let res = regexes();
    let mistral = load_vocab("mistral7b");
    let llama3 = load_vocab("llama3");
    bench_byte_dfa(c, &res);
    bench_tokenizer_dfa(c, &mistral, &llama3);
    let toks = [
        Tok {
            name: "mistral7b",
            compiler: Compiler::new(mistral.clone(), Limits::default()),
            methods: &[Method::Cartesian, Method::Direct, Method::Agnostic],
        },
        Tok {
            name: "llama3",
            compiler: Compiler::new(llama3.clone(), Limits::default()).with_cache_dir(Some(persistent_cache_dir())),
            methods: &[Method::Cartesian, Method::Agnostic],
        },
    ];
    for t in &toks {
        t.compiler.tokenizer_dfa().expect("tokenizer DFA");
        t.compiler.compile_regex("a", Method::Agnostic).expect("warm-up");
    }
    bench_compile(c, &toks, &res);
    bench_compile_lazy(c, &toks, &res);
    bench_mask_fill(c, &toks, &res);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = all
}
criterion_main!(benches);
