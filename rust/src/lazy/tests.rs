//! Lazy guides on the embedded Mistral-7B tokenizer: shared by threads, and past their limits.
//! (Their masks are compared with the eager construction in `rust/tests/corpus.rs`, in
//! `crate::compiler`'s tests and in `crate::build::pre_tokenized`'s brute force.)

use std::sync::Arc;

use crate::guide::{Guide, Method};
use crate::tokenizer::vocab::Vocabulary;
use crate::{Compiler, Error, Limits};

const REGEX: &str = r#"\{"name": "[^"\\]{0,24}", "age": (0|[1-9][0-9]{0,2}), "tags": \[("[a-z ]+"(, "[a-z ]+")*)?\]\}"#;

fn mistral() -> Arc<Vocabulary> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/python/propertok/data/mistral7b-tokenizer.json");
    let json = std::fs::read_to_string(path).expect("the embedded Mistral-7B tokenizer");
    Arc::new(Vocabulary::from_json(&json, None, None).expect("vocabulary"))
}

/// The masks along `walk` (one per step and the last), EOS included.
fn masks_along(guide: &Guide, walk: &[u32]) -> Vec<Vec<u32>> {
    let mut state = guide.initial_state();
    let mut out = Vec::new();
    for &t in walk {
        out.push(guide.mask(state).unwrap().into_owned());
        state = guide.next_state(state, t).unwrap();
    }
    out.push(guide.mask(state).unwrap().into_owned());
    out
}

#[test]
fn threads_sharing_a_fresh_guide_see_the_eager_masks() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let eager = compiler.compile_regex(REGEX, Method::Cartesian).unwrap();
    let walks: Vec<Vec<u32>> = (0..16).map(|seed| eager.random_walk(seed, 40).unwrap()).collect();
    let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&eager, w)).collect();
    for _round in 0..3 {
        let lazy = Arc::new(compiler.compile_regex_lazy(REGEX).unwrap());
        let got: Vec<Vec<Vec<u32>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|k| {
                    let (lazy, walks) = (lazy.clone(), &walks);
                    // Thread k walks 2k and 2k+1, in opposite orders on odd threads.
                    scope.spawn(move || {
                        let mine = if k % 2 == 0 { [2 * k, 2 * k + 1] } else { [2 * k + 1, 2 * k] };
                        mine.map(|i| (i, masks_along(&lazy, &walks[i])))
                    })
                })
                .collect();
            let mut got = vec![Vec::new(); walks.len()];
            for h in handles {
                for (i, masks) in h.join().unwrap() {
                    got[i] = masks;
                }
            }
            got
        });
        assert_eq!(got, want);
    }
}

#[test]
fn the_memo_limit_is_reported_by_name_and_the_guide_stays_usable() {
    let vocab = mistral();
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let eager = compiler.compile_regex(REGEX, Method::Cartesian).unwrap();
    let fresh = compiler.compile_regex_lazy(REGEX).unwrap();
    let (after_compile, _) = fresh.lazy_memo_bytes().unwrap();
    let limits = Limits { max_guide_bytes: after_compile + 64, ..Limits::default() };
    let tight = Compiler::new(vocab, limits).compile_regex_lazy(REGEX).unwrap();
    let walk = eager.random_walk(3, 40).unwrap();
    let (mut state, mut eager_state) = (tight.initial_state(), eager.initial_state());
    let mut stopped = None;
    for &t in &walk {
        match tight.next_state(state, t).and_then(|s| tight.mask(s).map(|m| (s, m.into_owned()))) {
            Ok((s, mask)) => {
                eager_state = eager.next_state(eager_state, t).unwrap();
                assert_eq!(mask, eager.mask(eager_state).unwrap().into_owned());
                state = s;
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    match stopped {
        Some(Error::LimitExceeded { limit: "max_guide_bytes", .. }) => {}
        other => panic!("expected LimitExceeded(max_guide_bytes), got {other:?}"),
    }
    // What was built stays usable: the initial mask, and the first step of the walk.
    assert_eq!(tight.mask(tight.initial_state()).unwrap(), eager.mask(eager.initial_state()).unwrap());
    assert!(tight.next_state(tight.initial_state(), walk[0]).is_ok());
}

#[test]
fn the_state_limit_is_reported_by_name() {
    let limits = Limits { max_product_states: 3, ..Limits::default() };
    let compiler = Compiler::new(mistral(), limits);
    let outcome = compiler.compile_regex_lazy(REGEX).and_then(|g| g.random_walk(0, 40).map(|_| g));
    match outcome {
        Err(Error::LimitExceeded { limit: "max_product_states", .. }) => {}
        other => panic!("expected LimitExceeded(max_product_states), got {:?}", other.err()),
    }
}
