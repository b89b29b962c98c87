//! Lazy guides on the embedded Mistral-7B tokenizer: shared by threads, and past their limits.
//! (Their masks are compared with the eager construction in `rust/tests/corpus.rs`, in
//! `crate::compiler`'s tests and in `crate::build::pre_tokenized`'s brute force.)

use std::sync::Arc;

use super::groups::NumberedWalk;
use crate::guide::lazy::LazyGuide;
use crate::guide::{Guide, Method};
use crate::regex::byte_dfa::{Bound, ByteDfa, DEAD};
use crate::regex::outline::OutlineOptions;
use crate::tokenizer::vocab::Vocabulary;
use crate::util::byte_set::ByteSet;
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

/// Panics at the first step of `walks` where `lazy`'s mask is not `eager`'s, naming `label`.
fn assert_same_masks(lazy: &Guide, eager: &Guide, walks: &[Vec<u32>], label: &str) {
    for (w, walk) in walks.iter().enumerate() {
        let (got, want) = (masks_along(lazy, walk), masks_along(eager, walk));
        if let Some(step) = (0..want.len()).find(|&i| got[i] != want[i]) {
            let bits = |m: &[u32]| m.iter().map(|w| w.count_ones()).sum::<u32>();
            panic!(
                "{label}, walk {w}, step {step}: lazy allows {} tokens, eager {}",
                bits(&got[step]),
                bits(&want[step])
            );
        }
    }
}

/// Thirteen random walks of `eager` (of up to `max_tokens`) and its spelling of each of the three
/// `texts`: the sixteen walks [`masks_from_threads`] takes.
fn walks_and_spellings(eager: &Guide, max_tokens: usize, texts: [&str; 3]) -> Vec<Vec<u32>> {
    let mut walks: Vec<Vec<u32>> = (0..13).map(|seed| eager.random_walk(seed, max_tokens).unwrap()).collect();
    for text in texts {
        walks.push(spelling(eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
    }
    walks
}

/// The masks along 16 walks, walked by 8 threads at once on one shared guide: thread `k` walks
/// `2k` and `2k + 1`, in opposite orders on odd threads.
fn masks_from_threads(guide: &Arc<Guide>, walks: &[Vec<u32>]) -> Vec<Vec<Vec<u32>>> {
    assert_eq!(walks.len(), 16);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|k| {
                let guide = guide.clone();
                scope.spawn(move || {
                    let mine = if k % 2 == 0 { [2 * k, 2 * k + 1] } else { [2 * k + 1, 2 * k] };
                    mine.map(|i| (i, masks_along(&guide, &walks[i])))
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
    })
}

#[test]
fn threads_sharing_a_fresh_guide_see_the_eager_masks() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let eager = compiler.compile_regex(REGEX, Method::Cartesian).unwrap();
    let walks: Vec<Vec<u32>> = (0..16).map(|seed| eager.random_walk(seed, 40).unwrap()).collect();
    let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&eager, w)).collect();
    for _round in 0..3 {
        let lazy = Arc::new(compiler.compile_regex_lazy(REGEX).unwrap());
        assert_eq!(masks_from_threads(&lazy, &walks), want);
        // The regex's DFA determinized on demand, by the threads themselves.
        let on_demand = Arc::new(compiler.compile_regex_lazy_with(REGEX, Bound::ON_DEMAND).unwrap());
        assert_eq!(masks_from_threads(&on_demand, &walks), want);
    }
}

/// Compiles each of `regexes` lazily on a thread of its own, in two rounds one after the other,
/// and asserts that each guide gives its eager guide's masks along 6 random walks of `len`
/// tokens; `after(guide, regex, round)` then checks what the guide shared.
fn fresh_guides_on_threads(
    compiler: &Compiler,
    regexes: &[&str],
    len: usize,
    after: impl Fn(&Guide, &str, usize) + Sync,
) {
    // Per regex: its walks, and the eager masks along each.
    type Case = (Vec<Vec<u32>>, Vec<Vec<Vec<u32>>>);
    let cases: Vec<Case> = (regexes.iter())
        .map(|regex| {
            let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
            let walks: Vec<Vec<u32>> = (0..6).map(|seed| eager.random_walk(seed, len).unwrap()).collect();
            let want = walks.iter().map(|w| masks_along(&eager, w)).collect();
            (walks, want)
        })
        .collect();
    for round in 0..2 {
        std::thread::scope(|scope| {
            for (regex, (walks, want)) in regexes.iter().zip(&cases) {
                let after = &after;
                scope.spawn(move || {
                    let lazy = compiler.compile_regex_lazy(regex).unwrap();
                    let got: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&lazy, w)).collect();
                    assert!(&got == want, "{regex}: the lazy masks differ from the eager ones");
                    after(&lazy, regex, round);
                });
            }
        });
    }
}

/// Guides of one `Compiler` share its hints (`Engine::hinted_live`): threads walking different
/// fresh guides at once, each seeding hints the others read, see each guide's eager masks.
#[test]
fn fresh_guides_of_one_compiler_on_threads_see_the_eager_masks() {
    let regexes = [
        REGEX,
        r#"\{"title": "[^"\\]*", "body": "[^"\\]{0,40}"\}"#,
        r#"\["([^"\\]|\\["\\n])*"(, "([^"\\]|\\["\\n])*"){0,3}\]"#,
        r#"\{"note": "[a-zA-Z .,!?']{1,30}", "n": [0-9]{1,4}\}"#,
    ];
    let compiler = Compiler::new(mistral(), Limits::default());
    fresh_guides_on_threads(&compiler, &regexes, 60, |_, _, _| {});
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

/// `max_compile_seconds` also times each call of a lazy guide: one that must walk or search
/// past it stops with `LimitExceeded` naming the limit and the call, not a wrong mask.
#[test]
fn a_call_past_its_clock_is_reported_by_name() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let parts = compiler.lazy_parts().unwrap().clone();
    let compile = |seconds| {
        let limits = Limits { max_compile_seconds: seconds, ..Limits::default() };
        LazyGuide::compile(parts.clone(), ByteDfa::from_regex(REGEX, 100_000).unwrap(), Vec::new(), limits)
    };
    let unlimited = compile(None).unwrap();
    assert!(!unlimited.mask(unlimited.initial_state()).unwrap().is_empty());
    // A fresh guide's first mask walks the trie from the start state: past a clock of 0 s.
    let outcome = compile(Some(0.0)).and_then(|g| g.mask(g.initial_state()).map(|m| m.len()));
    match outcome {
        Err(Error::LimitExceeded { limit: "max_compile_seconds", what, .. }) => {
            assert!(what.contains("one call of a lazy guide"), "{what}");
        }
        other => panic!("expected LimitExceeded(max_compile_seconds), got {other:?}"),
    }
    // Calls on other threads, and later calls on this one, have clocks of their own.
    let generous = Arc::new(compile(Some(60.0)).unwrap());
    let walk = unlimited.random_walk(5, 30).unwrap();
    assert_eq!(masks_along(&generous, &walk), masks_along(&unlimited, &walk));
}

/// Asserts that `lazy`, a lazy guide for `regex`, gives the masks of `regex`'s eager guide
/// along 8 random walks and the canonical spelling of `text`.
fn assert_gives_the_eager_masks(compiler: &Compiler, lazy: &Guide, regex: &str, text: &[u8]) {
    let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
    let mut walks: Vec<Vec<u32>> = (0..8).map(|seed| eager.random_walk(seed, 40).unwrap()).collect();
    walks.push(spelling(&eager, text, eager.initial_state()).expect("the guide spells it"));
    for walk in &walks {
        assert_eq!(masks_along(lazy, walk), masks_along(&eager, walk), "{regex}");
    }
}

/// A token sequence the guide allows that spells `text` from `state` (longest tokens first).
fn spelling(guide: &Guide, text: &[u8], state: u32) -> Option<Vec<u32>> {
    spelling_ending(guide, text, state, true)
}

/// A token sequence the guide allows that spells `text` from `state`, ending anywhere (longest
/// tokens first, a token ending inside `text`).
fn spelling_of_prefix(guide: &Guide, text: &[u8], state: u32) -> Option<Vec<u32>> {
    spelling_ending(guide, text, state, false)
}

/// [`spelling`], or with `at_end` false [`spelling_of_prefix`].
fn spelling_ending(guide: &Guide, text: &[u8], state: u32, at_end: bool) -> Option<Vec<u32>> {
    if text.is_empty() {
        return (!at_end || guide.is_final(state)).then(Vec::new);
    }
    let vocab = guide.vocabulary();
    let mut tokens: Vec<u32> = guide.allowed_tokens(state).unwrap();
    tokens.retain(|&t| !vocab.token_bytes(t).is_empty() && text.starts_with(vocab.token_bytes(t)));
    tokens.sort_by_key(|&t| std::cmp::Reverse(vocab.token_bytes(t).len()));
    tokens.into_iter().find_map(|t| {
        let next = guide.next_state(state, t).unwrap();
        let mut rest = spelling_ending(guide, &text[vocab.token_bytes(t).len()..], next, at_end)?;
        rest.insert(0, t);
        Some(rest)
    })
}

/// Regex states that loop on a slice (a JSON string's contents, `.*`) or count its characters
/// (`{2,12}`) take their groups from the tokenizer's shared slice: the masks stay the eager ones,
/// and a second guide reuses the first one's slice groups (and the first one's hints).
#[test]
fn sliced_text_states_give_the_eager_masks() {
    const LOOPS: &str = r#"\{"a": "([^"\\\x00-\x1F]|\\["\\/bfnrt])*", "b": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])+", "c": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){2,12}"\}\n(.)*"#;
    let compiler = Compiler::new(mistral(), Limits::default());
    let eager = compiler.compile_regex(LOOPS, Method::Cartesian).unwrap();
    // Random walks, and the eager guide's way of spelling texts that reach the counted string.
    let mut walks: Vec<Vec<u32>> = (0..12).map(|seed| eager.random_walk(seed, 80).unwrap()).collect();
    for c in ["ab", r#"Grüß \"x\""#, "東京タワー 12"] {
        let text = format!("{{\"a\": \"x\", \"b\": \"y z\", \"c\": \"{c}\"}}\n");
        walks.push(spelling(&eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
    }
    for _guide in 0..2 {
        let lazy = compiler.compile_regex_lazy(LOOPS).unwrap();
        assert_same_masks(&lazy, &eager, &walks, LOOPS);
        let (built, sliced) = lazy.lazy_text_states().unwrap();
        assert!(sliced >= 3 && sliced < built, "{sliced} of {built} text states sliced");
        // Witness tokens found by searches proved other nodes live (`Engine::hinted_live`).
        assert!(lazy.lazy_engine().unwrap().hinted_proofs() > 0);
        // Slice groups were taken as live through their hubs (`slice::Certificates`).
        assert!(lazy.lazy_engine().unwrap().settled_by_hubs() > 0);
    }
}

/// A JSON string's contents take the slice of characters and escapes, and so does the state
/// after an escape's backslash (the escape slice), for outlines-core's string and for ours (with
/// `\u` escapes, which leave the slice as exit tokens); a string without escapes takes the
/// character slice.
#[test]
fn json_string_contents_and_escapes_take_slices() {
    let body = r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#;
    let escape = r#"["\\/bfnrt]([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#;
    let chars = r#"[^"\\\x00-\x1F\x7F-\x9F]*"#;
    let compiler = Compiler::new(mistral(), Limits::default());
    let cases = [
        (r#"\{"a": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"\}"#, true),
        (r#"\{"a": "([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*"\}"#, true),
        (r#"\{"a": "[^"\\\x00-\x1F\x7F-\x9F]*"\}"#, false),
    ];
    for (regex, escapes) in cases {
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        let engine = lazy.lazy_engine().unwrap();
        let dfa = engine.space().dfa();
        let pattern = |text: &[u8]| {
            let q = text.iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
            assert_ne!(q, DEAD, "{regex} takes {}", String::from_utf8_lossy(text));
            engine.slice_use(q).unwrap().map(|u| u.pattern().to_string())
        };
        assert_eq!(pattern(br#"{"a": "x"#).as_deref(), Some(if escapes { body } else { chars }), "{regex}");
        assert_eq!(pattern(br#"{"a": "x""#), None, "{regex}");
        if escapes {
            assert_eq!(pattern(br#"{"a": "x\n y\"#).as_deref(), Some(escape), "{regex}");
        }
    }
}

/// A string with a minimum length and no maximum counts its characters up to the minimum only
/// (`Counting::Saturating`): at its first position `{1,}` counts to 1, `{3,}` to 3, after two of
/// `{3,}`'s characters to 1, and past the minimum the contents loop; a maximum further away
/// than the longest token (Mistral-7B's) counts up to that. The masks are held to the eager ones in `sliced_text_states_give_the_eager_masks`
/// (`+`) and `hub_chains_are_successors_in_the_guide` (`{2,}`).
#[test]
fn a_minimum_length_is_counted_up_to_the_minimum() {
    use crate::lazy::slice::Counting;
    let string = r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])"#;
    let compiler = Compiler::new(mistral(), Limits::default());
    let cases: [(&str, &[u8], Counting); 5] = [
        ("{1,}", b"", Counting::Saturating(1)),
        ("{3,}", b"", Counting::Saturating(3)),
        ("{3,}", b"ab", Counting::Saturating(1)),
        ("{3,}", b"abc", Counting::Loop),
        ("{0,20}", b"ab", Counting::UpTo),
    ];
    for (count, before, counting) in cases {
        let regex = format!(r#"\{{"a": "{string}{count}"\}}"#);
        let lazy = compiler.compile_regex_lazy(&regex).unwrap();
        let engine = lazy.lazy_engine().unwrap();
        let dfa = engine.space().dfa();
        let text = [&br#"{"a": ""#[..], before].concat();
        let q = text.iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
        assert_ne!(q, DEAD);
        let found = engine.slice_use(q).unwrap().map(|u| u.counting());
        assert_eq!(found, Some(counting), "{count} after {:?}", String::from_utf8_lossy(before));
    }
}

/// On a byte-level tokenizer with a pre-tokenizer (GPT-2), every step by which a hub of a JSON
/// string's slice groups reaches its root (`slice::chain_roots`) is a successor in the guide, so
/// that a live root proves its hubs live; the roots are fewer than the hubs, and the masks stay
/// the eager ones.
#[test]
fn hub_chains_are_successors_in_the_guide() {
    let vocab = Arc::new(crate::testing::shared_vocabulary("gpt2"));
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let string = r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])"#;
    // Loops, then a counted use (its chains count characters up to the longest token's).
    let cases = [
        (
            format!(r#"\{{"a": "{string}*", "b": \[("[^"\\\x00-\x1F\x7F-\x9F]*"(, )?)*\]\}}"#),
            &br#"{"a": "Hello world, \"x\" 12 ok", "b": ["one two", "", "3 4"]}"#[..],
        ),
        (format!(r#"\{{"c": "{string}{{0,20}}"\}}"#), &br#"{"c": "It was 42, then 7."}"#[..]),
        // A use that saturates (its count kept at 2).
        (format!(r#"\{{"d": "{string}{{2,}}"\}}"#), &br#"{"d": "It was 42, then 7."}"#[..]),
    ];
    for (regex, text) in &cases {
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        let walk = spelling(&eager, text, eager.initial_state()).expect("the guide spells it");
        assert_eq!(masks_along(&lazy, &walk), masks_along(&eager, &walk), "{regex}");
        let (steps, rooted, _) = lazy.lazy_engine().unwrap().check_chains(true).unwrap();
        assert!(steps > 0 && rooted > 0, "{regex}: {steps} chain steps, {rooted} hubs with a live root");
    }
}

/// Byte-fallback moves (`Engine::fallback_moves`, tried only for the bytes the regex takes):
/// on Mistral-7B, characters with no token of their own (`ꙮ`, `𝄞`, `‖`) are spelled by byte
/// tokens beside ones that have tokens, inside a string and alone; the lazy masks are the eager
/// ones along random walks and a spelling that takes them.
///
/// In a string's body the regex state after `E2` and after `EA` is one (a character's lead byte
/// with two to go), the tokenizer's states are not (the absent characters each begins): the
/// moves memoized per text state must tell them apart by the tokenizer's fallback context.
///
/// `Ā` has a token and `Ĉ`, with the same lead byte `C4`, has none: `<0xC4>` may begin a
/// character, but in `"(ꙮ|Ā)*"` none that the regex takes, so its move is dead there, though
/// `ꙮ`'s lead byte completes (`Engine::completes_live` must not take the one for the other).
#[test]
fn byte_fallback_moves_give_the_eager_masks() {
    let vocab = mistral();
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let cases = [
        (r#""(ꙮ|𝄞|[a-zé ])*""#, "\"a ꙮé𝄞b\""),
        ("(ꙮ|x)𝄞?", "ꙮ𝄞"),
        (r#""[^"\\\x00-\x1F]*""#, "\"a‖ꙮ‖b\""),
        (r#""(ꙮ|Ā)*""#, "\"ĀꙮĀ\""),
    ];
    for (regex, text) in cases {
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        assert_gives_the_eager_masks(&compiler, &lazy, regex, text.as_bytes());
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        let walk = spelling(&eager, text.as_bytes(), eager.initial_state()).unwrap();
        let lead = vocab.token_id("<0xEA>").expect("a byte token");
        assert!(walk.contains(&lead), "{regex}: the premise, ꙮ spelled by byte tokens");
        assert!(lazy.lazy_engine().unwrap().completed_moves() > 0, "{regex}: no move proved by its character");
    }
}

/// Dense masks after a class (a string's contents) are made from a part no class changes, kept
/// by the tokenizer (`crate::lazy::after_class`), and every guide gives its eager masks: a string
/// before `"}` and the same string before `", "n": ` (the pieces after a boundary inside it
/// differ where a token spans the closing quote), then the first regex again, whose parts the
/// first guide made. On a byte-level BPE with a pre-tokenizer and on a SentencePiece BPE with
/// byte fallback.
#[test]
fn masks_after_a_class_from_shared_parts_give_the_eager_masks() {
    const STRING: &str = r#""[^"\\\x00-\x1F]*""#;
    let before_brace = format!(r#"\{{"a": {STRING}\}}"#);
    let before_field = format!(r#"\{{"a": {STRING}, "n": [0-9]\}}"#);
    let texts = [r#"{"a": "Grüß Gott, x = y; ꙮ 東京"}"#, r#"{"a": "Grüß Gott, x = y; ꙮ 東京", "n": 7}"#];
    for vocab in [Arc::new(crate::testing::shared_vocabulary("llama3")), mistral()] {
        let compiler = Compiler::new(vocab, Limits::default());
        let mut parts = Vec::new();
        for (regex, text) in [(&before_brace, texts[0]), (&before_field, texts[1]), (&before_brace, texts[0])] {
            let lazy = compiler.compile_regex_lazy(regex).unwrap();
            assert_gives_the_eager_masks(&compiler, &lazy, regex, text.as_bytes());
            parts.push(lazy.lazy_engine().unwrap().parts().after_class.len());
        }
        assert!(parts[0] > 0, "no part made");
        assert_eq!(parts[2], parts[1], "the third guide made parts of its own: {parts:?}");
    }
}

/// A narrow mask of many tokens against a class's forbidden set of few (GPT-2's string opening
/// after ` "`: 637 tokens, 110 forbidden; o200k's 2,780 and 8,823) sets its tokens and clears the
/// set after them instead of looking each token up: the masks stay the eager ones, along random
/// walks and a spelling.
#[test]
fn narrow_masks_cleared_after_their_tokens_give_the_eager_masks() {
    let regex = r#"\{"(location|name)": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"\}"#;
    let text = br#"{"location": "New York City Hall, 5th Ave."}"#;
    let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary("gpt2")), Limits::default());
    let lazy = compiler.compile_regex_lazy(regex).unwrap();
    assert_gives_the_eager_masks(&compiler, &lazy, regex, text);
    let cleared = lazy.lazy_engine().unwrap().masks_cleared_after.load(std::sync::atomic::Ordering::Relaxed);
    assert!(cleared > 0, "no mask cleared its forbidden set after its tokens");
}

/// The ways that prove a key's piece starts live follow the bytes nearest to acceptance where
/// the pre-tokenizer takes them (`Engine::nearest_chain`), without a search: keys, literals and
/// numbers on GPT-2 and Llama 3, with the eager guide's masks.
#[test]
fn ways_along_nearest_bytes_give_the_eager_masks_without_searches() {
    let regex = r#"\{"first_name": "[a-z]{1,8}", "account_id": (0|[1-9][0-9]{0,3}), "is_active": (true|false)\}"#;
    let text = br#"{"first_name": "ada", "account_id": 42, "is_active": true}"#;
    for name in ["gpt2", "llama3"] {
        let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary(name)), Limits::default());
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        assert_gives_the_eager_masks(&compiler, &lazy, regex, text);
        let (searches, chains) = lazy.lazy_engine().unwrap().ways_found();
        assert!(chains > 2 * searches, "{name}: {chains} ways along nearest bytes, {searches} searched");
    }
}

/// On a DFA determinized on demand, a counted string's positions are told apart from their
/// neighbours within a few bytes (`slice::MAX_EQUIVALENCE_DEPTH`): the same masks as the lazy
/// guide of its minimal DFA (whose `{3,255}` product is too large for an eager guide).
#[test]
fn counted_positions_on_demand_give_the_minimal_dfas_masks() {
    let regex = r#"\{"a": "([^"\\\x00-\x1F]|\\["\\]){3,255}", "n": [0-9]\}"#;
    let text = r#"{"a": "Grüß Gott", "n": 7}"#;
    for vocab in [Arc::new(crate::testing::shared_vocabulary("llama3")), mistral()] {
        let compiler = Compiler::new(vocab, Limits::default());
        let minimal = compiler.compile_regex_lazy(regex).unwrap();
        let spelled = spelling(&minimal, text.as_bytes(), minimal.initial_state()).expect("the guide spells it");
        let on_demand = compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND).unwrap();
        assert!(on_demand.lazy_engine().unwrap().space().dfa().as_dfa().is_none(), "not determinized on demand");
        assert_same_masks(&on_demand, &minimal, std::slice::from_ref(&spelled), regex);
    }
}

/// A counted string's later positions take their slice uses from an earlier position's
/// (`SliceUse::shifted`): each is the use `Slices::find` finds there on its own, map and
/// counting alike, from the second position to the string's last but one (the last counts
/// nothing), far from the end (`Counting::UpTo`, the table walked on) and near it.
#[test]
fn later_positions_of_a_counted_string_shift_an_earlier_use() {
    for vocab in [Arc::new(crate::testing::shared_vocabulary("llama3")), mistral()] {
        let compiler = Compiler::new(vocab, Limits::default());
        // `{0,300}`: far from the end, positions count up to a token's length; `{0,40}`: on
        // Llama 3 every position counts to the end, and shifts a use that does.
        let (mut up_to, mut saturating) = (0, 0);
        for max in [300, 40] {
            let regex = format!(r#"\{{"a": "([^"\\\x00-\x1F]|\\["\\/bfnrt]){{0,{max}}}"\}}"#);
            let lazy = compiler.compile_regex_lazy(&regex).unwrap();
            let engine = lazy.lazy_engine().unwrap();
            let (dfa, parts) = (engine.space().dfa(), engine.parts());
            let mut q = br#"{"a": ""#.iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
            for count in 0..=max {
                let own = parts.slices.find(dfa, q, parts.slice_inputs()).map(|u| u.identity());
                match engine.shifted_use(q) {
                    Some(derived) => assert_eq!(Some(derived.identity()), own, "{regex}: count {count}"),
                    None => assert!(count == 0 || count == max, "{regex}: count {count} shifted no earlier use"),
                }
                let found = engine.slice_use(q).unwrap();
                assert_eq!(found.as_ref().map(|u| u.identity()), own, "{regex}: count {count}");
                match found.map(|u| u.counting()) {
                    Some(crate::lazy::slice::Counting::UpTo) => up_to += 1,
                    Some(crate::lazy::slice::Counting::Saturating(_)) => saturating += 1,
                    _ => {}
                }
                q = dfa.next(q, b'a');
            }
        }
        assert!(up_to > 10 && saturating > 10, "{up_to} counted up to a token's length, {saturating} to the end");
    }
}

/// Counted strings (`{0,16}` with escapes, `{3,12}`) read most nodes of their positions off the
/// same nodes at the string's horizon or at its first proved count (`crate::lazy::horizon`), and
/// where counts are not nested (`[a-z]{4}x|[a-z]{6}y`) nothing is read off: the masks are the
/// eager ones at every position, up to each string's last character, on GPT-2 and Mistral-7B,
/// from one thread and from threads sharing a fresh guide.
#[test]
fn counted_strings_read_their_nodes_at_the_horizon() {
    let regex = r#"\{"a": "([^"\\\x00-\x1F]|\\["\\/bfnrt]){0,16}", "b": "[^"\\\x00-\x1F]{3,12}", "c": "([a-z]{4}x|[a-z]{6}y)"\}"#;
    let texts = [
        r#"{"a": "0123456789abcdef", "b": "xyz", "c": "abcdx"}"#,
        r#"{"a": "Grüß \"x\" Gott ok", "b": "twelve chars", "c": "abcdefy"}"#,
        r#"{"a": "", "b": "a b c d", "c": "wxyzx"}"#,
    ];
    // Llama 3's eager guide of these strings takes ~15 s (past `max_compile_seconds` under a
    // loaded test run); GPT-2 has a pre-tokenizer too.
    for vocab in [Arc::new(crate::testing::shared_vocabulary("gpt2")), mistral()] {
        let compiler = Compiler::new(vocab, Limits::default());
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        let walks = walks_and_spellings(&eager, 60, texts);
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        assert_same_masks(&lazy, &eager, &walks, regex);
        assert!(lazy.lazy_engine().unwrap().horizon_answers() > 0, "no node read off a horizon");
        // Threads sharing a fresh guide table the strings and read their stand-ins at once.
        let shared = Arc::new(compiler.compile_regex_lazy(regex).unwrap());
        let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&eager, w)).collect();
        assert!(masks_from_threads(&shared, &walks) == want, "threads: the masks differ from the eager ones");
    }
}

/// Counted words (`(?:[^"\\ ]+ +){0,16}[^"\\ ]+`): each word is a new wide regex state, whose
/// walk is the previous word's with every regex state one word on until a token could reach the
/// count's end (`crate::lazy::shifted_walk`; GPT-2 has tokens of several words, ` . . .`). The
/// masks are the eager ones at every word up to the last, on GPT-2 and Mistral-7B, for a minimal
/// DFA and a DFA determinized on demand, from one thread and from threads sharing a fresh guide;
/// and walks were shifted.
#[test]
fn counted_words_take_shifted_walks() {
    let regex = r#"\{"a": "(?:[^"\\ ]+ +){0,16}[^"\\ ]+"\}"#;
    let texts = [
        r#"{"a": "one two three four five six seven eight nine ten eleven twelve 13 14 15 16 end"}"#,
        r#"{"a": "Grüße,  the quick brown fox jumps over the lazy dog. Twice!"}"#,
        r#"{"a": "a"}"#,
    ];
    for vocab in [Arc::new(crate::testing::shared_vocabulary("gpt2")), mistral()] {
        let compiler = Compiler::new(vocab, Limits::default());
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        let walks = walks_and_spellings(&eager, 80, texts);
        for guide in [compiler.compile_regex_lazy(regex), compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND)] {
            let lazy = guide.unwrap();
            assert_same_masks(&lazy, &eager, &walks, regex);
            let shifted = lazy.lazy_engine().unwrap().walks_shifted();
            assert!(shifted >= 5, "{shifted} walks shifted");
        }
        let shared = Arc::new(compiler.compile_regex_lazy(regex).unwrap());
        let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&eager, w)).collect();
        assert!(masks_from_threads(&shared, &walks) == want, "threads: the masks differ from the eager ones");
    }
}

/// Shifted walks by brute force: a character BPE whose tokens span words (`a b`, `b a b`), every
/// walk kept as a candidate, and every pair of lazy and eager states reachable from the start
/// (token by token, breadth first, both guides' masks) compared. Near the count's end a token
/// of several words would reach past it from the later word: a shift taken there would allow
/// it.
#[test]
fn shifted_walks_give_the_eager_masks_on_every_reachable_state() {
    let merges = [
        ("a", " "),
        ("a ", "b"),
        ("b", " "),
        (" ", "a"),
        ("b", " a"),
        ("a b", " "),
        ("b ", "a"),
        ("a", "b"),
        (" ", "b"),
        ("b a", " b"),
        ("a b", " a"),
    ];
    let mut tokens: Vec<String> = ["a", "b", " "].map(String::from).into();
    tokens.extend(merges.iter().map(|(x, y)| format!("{x}{y}")));
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let vocab = Arc::new(Vocabulary::char_bpe_for_tests(&tokens, &merges).unwrap());
    let compiler = Compiler::new(vocab, Limits::default());
    let mut shifted = 0;
    for regex in ["(?:[ab]+ ){0,12}[ab]+", "(?:[ab]+ +){1,10}[ab]+b", "(?:a b ){0,8}[ab]+"] {
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        for guide in [compiler.compile_regex_lazy(regex), compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND)] {
            let lazy = guide.unwrap();
            lazy.lazy_engine().unwrap().shift_every_walk();
            let mut seen = std::collections::HashSet::new();
            // Breadth first, as a document goes on: a candidate is the newest walk with the
            // state's other components, and from a word further on no shift holds.
            let mut queue =
                std::collections::VecDeque::from([(lazy.initial_state(), eager.initial_state(), Vec::new())]);
            while let Some((l, e, path)) = queue.pop_front() {
                if !seen.insert((l, e)) {
                    continue;
                }
                let (got, want) = (lazy.mask(l).unwrap().into_owned(), eager.mask(e).unwrap().into_owned());
                assert_eq!(got, want, "{regex}: after {path:?}");
                for t in (0..want.len() * 32).filter(|&t| want[t / 32] >> (t % 32) & 1 == 1) {
                    let t = t as u32;
                    if eager.eos_token_ids().contains(&t) {
                        continue;
                    }
                    let mut next = path.clone();
                    next.push(t);
                    queue.push_back((lazy.next_state(l, t).unwrap(), eager.next_state(e, t).unwrap(), next));
                }
            }
            assert!(seen.len() > 8, "{regex}: {} states", seen.len());
            shifted += lazy.lazy_engine().unwrap().walks_shifted();
        }
    }
    assert!(shifted >= 30, "{shifted} walks shifted");
}

/// Keys and literals: most candidates at a narrow text state are non-canonical prefixes of the
/// canonical token (` t`, ` tr`, ` tru` before ` true`), whose class nodes
/// `Engine::dead_by_pairs` proves dead without a search; the masks stay the eager ones, along
/// random walks and a canonical spelling, on a byte-level BPE with and without lone-token splits
/// and on a SentencePiece BPE with byte fallback.
#[test]
fn non_canonical_prefixes_are_dead_by_their_pair_conditions() {
    let regex = r#"\{([ ]?"include_lowercase"[ ]?:[ ]?(true|false)[ ]?,)?[ ]?"length"[ ]?:[ ]?(0|[1-9][0-9]*)[ ]?\}"#;
    let text = br#"{"include_lowercase": true, "length": 12}"#;
    let vocabularies = [
        Arc::new(crate::testing::shared_vocabulary("gpt2")),
        Arc::new(crate::testing::shared_vocabulary("llama3")),
        mistral(),
    ];
    for vocab in vocabularies {
        let compiler = Compiler::new(vocab, Limits::default());
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        assert_gives_the_eager_masks(&compiler, &lazy, regex, text);
        let proofs = lazy.lazy_engine().unwrap().dead_by_pairs_proofs();
        assert!(proofs >= 5, "{proofs} nodes dead by their pair conditions");
    }
}

/// Two schemas' numbers, booleans and keys in other orders: text states of one tokenizer reuse
/// each other's trie walks through their byte closures (`Engine::walk_or_reuse`).
const FIELDS_A: &str = r#"\{[ ]?"count"[ ]?:[ ]?(-)?(0|[1-9][0-9]*)[ ]?,[ ]?"flag"[ ]?:[ ]?(true|false)[ ]?\}"#;
const FIELDS_B: &str = r#"\{[ ]?"flag"[ ]?:[ ]?(true|false)[ ]?,[ ]?"size"[ ]?:[ ]?((-)?(0|[1-9][0-9]*))(\.[0-9]+)?[ ]?,[ ]?"count"[ ]?:[ ]?(-)?(0|[1-9][0-9]*)[ ]?\}"#;

/// Pre-tokenized vocabularies (without a pre-tokenizer a text state's byte closure is the rest of
/// its regex, seldom within bounds, and is not looked for); Qwen2's has a normalizer.
fn field_vocabularies() -> [Arc<Vocabulary>; 3] {
    ["gpt2", "llama3", "qwen2"].map(|name| Arc::new(crate::testing::shared_vocabulary(name)))
}

/// What makes reuse exact: text states whose byte closures have one shape, here or in another
/// guide, have the same trie walk up to the closure's numbering (each walked for itself).
#[test]
fn text_states_with_one_closure_shape_have_one_walk() {
    for vocab in field_vocabularies() {
        let compiler = Compiler::new(vocab, Limits::default());
        let mut by_shape: std::collections::HashMap<Box<[u32]>, Vec<NumberedWalk>> = Default::default();
        for regex in [FIELDS_A, FIELDS_B] {
            let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
            let lazy = compiler.compile_regex_lazy(regex).unwrap();
            for seed in 0..6 {
                masks_along(&lazy, &eager.random_walk(seed, 40).unwrap());
            }
            for (shape, walk) in lazy.lazy_engine().unwrap().walks_by_shape().unwrap() {
                by_shape.entry(shape).or_default().push(walk);
            }
        }
        let mut shared = 0;
        for walks in by_shape.values().filter(|w| w.len() > 1) {
            assert!(walks.iter().all(|w| w == &walks[0]), "one closure shape, two walks");
            shared += usize::from(walks[0].len() > 1);
        }
        assert!(shared >= 3, "{shared} shapes of several text states with several tokens");
    }
}

/// `FIELDS_B`'s lazy guide compiled after `FIELDS_A`'s walked 4 random walks on one `Compiler`
/// (without what the first shared of its first-token sets when `forget_first_sets`), checked
/// against its eager masks; with the compiler and `FIELDS_A`'s eager guide.
fn second_field_guide(vocab: Arc<Vocabulary>, forget_first_sets: bool) -> (Compiler, Guide, Guide) {
    let text = br#"{"flag": false, "size": 2.5, "count": 120}"#;
    let compiler = Compiler::new(vocab, Limits::default());
    let first = compiler.compile_regex_lazy(FIELDS_A).unwrap();
    let eager_first = compiler.compile_regex(FIELDS_A, Method::Cartesian).unwrap();
    for seed in 0..4 {
        masks_along(&first, &eager_first.random_walk(seed, 40).unwrap());
    }
    if forget_first_sets {
        first.lazy_engine().unwrap().forget_shared_first_sets();
    }
    let lazy = compiler.compile_regex_lazy(FIELDS_B).unwrap();
    assert_gives_the_eager_masks(&compiler, &lazy, FIELDS_B, text);
    (compiler, eager_first, lazy)
}

/// A guide whose walks come from an earlier guide's gives its eager guide's masks (the first
/// guide's first-token sets forgotten: shared, they would spare the second most of its walks).
#[test]
fn reused_walks_give_the_eager_masks() {
    for vocab in field_vocabularies() {
        let (_, _, lazy) = second_field_guide(vocab, true);
        let reused = lazy.lazy_engine().unwrap().walks_reused();
        assert!(reused >= 3, "{reused} walks reused");
    }
}

/// A guide whose first-token sets come from an earlier guide's (one key, literal and number
/// piece after another: `Engine::shared_first_key`) gives its eager guide's masks, and so does
/// a third guide of the first regex after it.
#[test]
fn shared_first_token_sets_give_the_eager_masks() {
    for vocab in field_vocabularies() {
        let (compiler, eager_first, lazy) = second_field_guide(vocab, false);
        let again = compiler.compile_regex_lazy(FIELDS_A).unwrap();
        let walks: Vec<Vec<u32>> = (0..8).map(|seed| eager_first.random_walk(seed, 40).unwrap()).collect();
        assert_same_masks(&again, &eager_first, &walks, FIELDS_A);
        let reused = lazy.lazy_engine().unwrap().first_sets_reused();
        assert!(reused >= 5, "{reused} first-token sets reused by the second guide");
    }
}

/// Fresh guides of one `Compiler` on threads, sharing first-token sets as they fill them (a
/// pre-tokenized vocabulary, where keys and numbers have keys: `Engine::shared_first_key`), see
/// their eager masks; in the second round every guide takes sets the first round left.
#[test]
fn fresh_guides_on_threads_sharing_first_token_sets_see_the_eager_masks() {
    let regexes = [
        FIELDS_A,
        FIELDS_B,
        r#"\{[ ]?"count"[ ]?:[ ]?[0-9]{1,3}[ ]?,[ ]?"name"[ ]?:[ ]?"[a-z]{1,8}"[ ]?\}"#,
        r#"\{[ ]?"flag"[ ]?:[ ]?(true|false|null)[ ]?,[ ]?"size"[ ]?:[ ]?(0|[1-9][0-9]*)[ ]?\}"#,
    ];
    let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary("gpt2")), Limits::default());
    fresh_guides_on_threads(&compiler, &regexes, 40, |lazy, regex, round| {
        let reused = lazy.lazy_engine().unwrap().first_sets_reused();
        assert!(round == 0 || reused > 0, "{regex}: no first-token set reused in round 2");
    });
}

/// One byte closure, other pieces after it: in `helloworld` a boundary after `hello` leads to a
/// piece start that no canonical text continues (the letters are one piece, whose tokens do
/// not start with `hello` on these tokenizers), in `hello(world|,)` to one before `,`, in
/// `hello(world)?` to the text's end. So `hello` is a first token of the last two only, though
/// the start's closures have one shape; each guide, compiled after the others on one
/// `Compiler`, keeps its own first tokens.
#[test]
fn one_closure_before_other_pieces_keeps_its_own_first_tokens() {
    let regexes = ["helloworld", "hello(world|,)", "hello(world)?"];
    for vocab in field_vocabularies() {
        let hello = vocab.token_id("hello").expect("a token of these tokenizers");
        for rotation in 0..regexes.len() {
            let compiler = Compiler::new(vocab.clone(), Limits::default());
            for regex in regexes.iter().cycle().skip(rotation).take(regexes.len()) {
                let lazy = compiler.compile_regex_lazy(regex).unwrap();
                let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
                let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| eager.random_walk(seed, 12).unwrap()).collect();
                walks.push(Vec::new());
                assert_same_masks(&lazy, &eager, &walks, regex);
                let first = eager.allowed_tokens(eager.initial_state()).unwrap();
                assert_eq!(first.contains(&hello), *regex != regexes[0], "{regex}: the premise");
            }
        }
    }
}

/// Byte closures that take bytes outside ASCII key first-token sets too: a date's `\d` is
/// Unicode, so the piece of digits after its opening quote takes multi-byte digits (157 text
/// states on Llama 3), and its set was found again in every guide (~330 µs). Guides compiled in
/// two orders on one `Compiler` give their eager masks, closures that differ only in a
/// multi-byte character or in what follows it keep their own sets, and later guides take sets
/// earlier ones made.
#[test]
fn closures_with_multi_byte_characters_share_first_token_sets() {
    let regexes = [r#""\d{4}-\d{2}""#, r#""\d{2}""#, r#""[0-9٠-٩]{2}""#, "é+(x|,)", "é+x", "ü+x"];
    for vocab in field_vocabularies() {
        let eager_compiler = Compiler::new(vocab.clone(), Limits::default());
        let eager: Vec<Guide> =
            regexes.iter().map(|r| eager_compiler.compile_regex(r, Method::Cartesian).unwrap()).collect();
        let walks: Vec<Vec<Vec<u32>>> = eager
            .iter()
            .map(|g| {
                let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| g.random_walk(seed, 10).unwrap()).collect();
                walks.push(Vec::new());
                walks
            })
            .collect();
        let mut reused = 0;
        // Two orders (a `Compiler` is slow to make): the eager guides' one, then from the
        // middle on a fresh `Compiler`.
        for rotation in [0, regexes.len() / 2] {
            let fresh;
            let compiler = if rotation == 0 {
                &eager_compiler
            } else {
                fresh = Compiler::new(vocab.clone(), Limits::default());
                &fresh
            };
            for i in (0..regexes.len()).cycle().skip(rotation).take(regexes.len()) {
                let lazy = compiler.compile_regex_lazy(regexes[i]).unwrap();
                assert_same_masks(&lazy, &eager[i], &walks[i], regexes[i]);
                reused += lazy.lazy_engine().unwrap().first_sets_reused();
            }
            // The same date again: the new guide finds no set of its own.
            let again = compiler.compile_regex_lazy(regexes[0]).unwrap();
            assert_same_masks(&again, &eager[0], &walks[0], regexes[0]);
            let engine = again.lazy_engine().unwrap();
            let found = engine.first_token_sets() - engine.first_sets_reused();
            assert_eq!(found, 0, "{}: sets found again", regexes[0]);
        }
        assert!(reused >= 10, "{reused} first-token sets reused");
    }
}

/// outlines-core's JSON string contents, and five regexes around them (`B`): a string alone,
/// before `,` and before `x`, a key's value, two strings in an array.
const STRING_BODY: &str = r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#;
const STRING_TEMPLATES: [&str; 5] = [r#""B""#, r#""B","#, r#""B"x"#, r#"\{"a":"B"\}"#, r#"\["B","B"\]"#];

/// Compiles `regexes` lazily in every rotation of their order, each rotation on a fresh
/// `Compiler`; every guide gives `reference[i]`'s masks along `walks[i]`. Returns how many
/// sliced first-token sets the guides took from earlier ones.
fn sliced_sets_reused_in_every_order(
    vocab: &Arc<Vocabulary>,
    regexes: &[String],
    reference: &[Guide],
    walks: &[Vec<Vec<u32>>],
) -> usize {
    let mut reused = 0;
    for rotation in 0..regexes.len() {
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        for i in (0..regexes.len()).cycle().skip(rotation).take(regexes.len()) {
            let lazy = compiler.compile_regex_lazy(&regexes[i]).unwrap();
            assert_same_masks(&lazy, &reference[i], &walks[i], &regexes[i]);
            reused += lazy.lazy_engine().unwrap().sliced_first_sets_reused();
        }
    }
    reused
}

/// Sliced text states share first-token sets across guides by their slice's region and what
/// follows the string (`Engine::shared_first_key`): strings closed by different text keep their
/// own sets (`",` is one piece on these tokenizers, `"x` two, and `"` may end the text or not),
/// every guide, compiled in every order on one `Compiler`, gives its eager masks, and later
/// guides take sets earlier ones made, at string contents and at a key's end before them
/// (`{"a":` then `"`, one piece with what follows), and between two strings (`","`).
#[test]
fn sliced_states_share_first_token_sets_by_region_and_exits() {
    let regexes: Vec<String> = STRING_TEMPLATES.iter().map(|r| r.replace('B', STRING_BODY)).collect();
    for name in ["gpt2", "llama3"] {
        let vocab = Arc::new(crate::testing::shared_vocabulary(name));
        let eager_compiler = Compiler::new(vocab.clone(), Limits::default());
        let eager: Vec<Guide> =
            regexes.iter().map(|r| eager_compiler.compile_regex(r, Method::Cartesian).unwrap()).collect();
        let walks: Vec<Vec<Vec<u32>>> =
            eager.iter().map(|g| (0..6).map(|seed| g.random_walk(seed, 12).unwrap()).collect()).collect();
        let reused = sliced_sets_reused_in_every_order(&vocab, &regexes, &eager, &walks);
        assert!(reused >= 20, "{name}: {reused} sliced first-token sets reused");
    }
}

/// With a normalizer (Qwen2's NFC), a region is explored without the normal form and keyed
/// with the normal-form state a guide enters it at (`crate::lazy::slice::Region`,
/// `NormalForm::inert_only`). Five string regexes compiled in every order on one `Compiler`
/// share first-token sets, and every guide gives the masks of a guide that keys none (Qwen2's
/// eager product of a free string passes `max_guide_bytes`) along random walks, which write
/// marks and other scripts, and spellings of texts whose words end in a letter a combining
/// acute composes with (`e`, so no mark may follow it) and in letters it does not (`q`,
/// followed by U+0301; `x` by U+0300): a key blind to the state a region is entered at fails it.
#[test]
fn normal_form_regions_share_first_token_sets() {
    let regexes: Vec<String> = STRING_TEMPLATES.iter().map(|r| r.replace('B', STRING_BODY)).collect();
    let texts = [
        "fine caf\u{e9} q\u{301}q e",
        "sq\u{301} \u{d55c}\u{ad6d}\u{c5b4} e",
        "\u{928}\u{92e}\u{938}\u{94d}\u{924}\u{947} x\u{300}",
    ];
    let vocab = Arc::new(crate::testing::shared_vocabulary("qwen2"));
    let mut walks: Vec<Vec<Vec<u32>>> = Vec::new();
    let mut unkeyed: Vec<Guide> = Vec::new();
    for (regex, template) in regexes.iter().zip(STRING_TEMPLATES) {
        let guide = Compiler::new(vocab.clone(), Limits::default()).compile_regex_lazy(regex).unwrap();
        guide.lazy_engine().unwrap().turn_keys_off();
        let mut these: Vec<Vec<u32>> = (0..6).map(|seed| guide.random_walk(seed, 16).unwrap()).collect();
        for text in texts {
            let spelled = template.replace('\\', "").replace('B', text);
            these.push(spelling(&guide, spelled.as_bytes(), guide.initial_state()).expect("the guide spells it"));
        }
        walks.push(these);
        unkeyed.push(guide);
    }
    let reused = sliced_sets_reused_in_every_order(&vocab, &regexes, &unkeyed, &walks);
    assert!(reused >= 20, "{reused} sliced first-token sets reused");
}

/// A free string among key-value pairs (as in `grammar_compare.py`'s key-value list: string
/// values after `=`, pairs after `;`) runs through `";` and the next `="` in one piece, so its key
/// describes the contents' region from every pre-tokenizer state a byte of the free class
/// leaves it in, and the next string's: more than eight regions on Llama 3 (`KEY_REGIONS`).
/// A second guide takes every first-token set from the first's, and both give the eager masks.
#[test]
fn free_strings_between_pairs_share_first_token_sets() {
    let value = r#"([0-9]+|"[^"]*")"#;
    let pair = format!(r"[a-z_]+=({value}|\[({value},)*{value}\])");
    let regex = format!("({pair};)*{pair}");
    let regex = regex.as_str();
    for name in ["gpt2", "llama3"] {
        let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary(name)), Limits::default());
        assert_a_second_guide_finds_no_set(&compiler, regex, br#"a=1;b="x y";c=[1,2,"3"]"#, regex);
    }
}

/// A state that takes a class once and then loops on it (a host name's first character before
/// `[a-z0-9-]*`, a `{1,}` class, a domain's first character after `@`) counts that character,
/// so it has no region of its own; a key's closure spells it out (`WideState::SpelledOut`) and
/// meets the loop's region after it. A second guide takes the first-token set at that state
/// from the first guide's, and every guide gives its eager masks. Without it, the key gave up
/// at the state and each guide found the set again.
#[test]
fn keys_spell_out_a_class_taken_once_before_its_loop() {
    // Each regex, a text it spells, and the text before the state that counts.
    let cases = [
        (r#"\{"host": "[a-z0-9][a-z0-9-]*\.org"\}"#, r#"{"host": "ex-1.org"}"#, r#"{"host": ""#),
        (r#"\{"a": "[A-Za-z0-9 ]{1,}", "b": [0-9]\}"#, r#"{"a": "x y", "b": 1}"#, r#"{"a": ""#),
        (r#"\{"e": "[a-z]+@[a-z0-9]([a-z0-9-]*[a-z0-9])?\.com"\}"#, r#"{"e": "ab@ex-1.com"}"#, r#"{"e": "ab@"#),
    ];
    for name in ["gpt2", "llama3"] {
        let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary(name)), Limits::default());
        for (regex, text, prefix) in cases {
            let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
            let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| eager.random_walk(seed, 20).unwrap()).collect();
            walks.push(spelling(&eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
            let tokens = spelling_of_prefix(&eager, prefix.as_bytes(), eager.initial_state()).expect("a prefix");
            let first = compiler.compile_regex_lazy(regex).unwrap();
            assert_same_masks(&first, &eager, &walks, regex);
            let at = |guide: &Guide| tokens.iter().fold(guide.initial_state(), |q, &t| guide.next_state(q, t).unwrap());
            first.mask(at(&first)).unwrap();
            let again = compiler.compile_regex_lazy(regex).unwrap();
            let state = at(&again);
            let engine = again.lazy_engine().unwrap();
            let found = || engine.first_token_sets() - engine.first_sets_reused();
            let before = found();
            assert_eq!(again.mask(state).unwrap(), eager.mask(at(&eager)).unwrap(), "{name}: {regex}");
            assert_eq!(found(), before, "{name}: {regex}: the set after {prefix:?} was found again");
            assert_same_masks(&again, &eager, &walks, regex);
        }
    }
}

/// A class of more than 32 ASCII characters that no slice takes (a UUID's `[a-z0-9]`, counted
/// too few times for a derived slice) is spelled out in a key's closure
/// (`WideState::SpelledOut`): a second guide of each regex takes every first-token set from
/// the first's, and every guide gives its eager masks. Without it, those states made no key.
#[test]
fn wide_ascii_classes_without_a_slice_share_first_token_sets() {
    let cases = [(r#""[a-z0-9]{4}-[a-z0-9]{4}""#, &b"\"ab12-3c4d\""[..]), (r#"\["[a-z0-9]{3}x"\]"#, b"[\"9z0x\"]")];
    for vocab in field_vocabularies() {
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        for (regex, text) in cases {
            assert_a_second_guide_finds_no_set(&compiler, regex, text, regex);
        }
    }
}

/// Without a pre-tokenizer (Mistral-7B) a small regex's states are keyed by their closure,
/// the whole rest of the text (`TextSpace::has_few_regex_states`): five greetings of shared
/// shapes and two regexes whose closures differ in acceptance only, compiled in every order on
/// one `Compiler`, each give their eager masks along random walks and a spelling, and later
/// guides take sets earlier ones made. A key blind to acceptance fails the masks.
#[test]
fn small_regexes_share_first_token_sets_without_a_pre_tokenizer() {
    let cases = [
        ("hello [a-z]+(, ?[a-z]+)*!?", "hello bob, al,cy!"),
        ("hi [a-z]+!", "hi bob!"),
        ("hi [a-z]+", "hi bob"),
        ("(hi|yo) [a-z]+\\.", "yo al."),
        ("[a-z]+ [a-z]+", "hi al"),
        // One closure shape from the start (`a` to a second state, `b` back), accepting at the
        // first state in one and the second in the other.
        ("(ab)*", "abab"),
        ("a(ba)*", "ababa"),
    ];
    let vocab = mistral();
    let eager_compiler = Compiler::new(vocab.clone(), Limits::default());
    let regexes: Vec<String> = cases.iter().map(|(r, _)| r.to_string()).collect();
    let eager: Vec<Guide> =
        regexes.iter().map(|r| eager_compiler.compile_regex(r, Method::Cartesian).unwrap()).collect();
    let walks: Vec<Vec<Vec<u32>>> = (eager.iter().zip(cases))
        .map(|(g, (_, text))| {
            let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| g.random_walk(seed, 12).unwrap()).collect();
            walks.push(spelling(g, text.as_bytes(), g.initial_state()).expect("the guide spells it"));
            walks
        })
        .collect();
    let mut reused = 0;
    for rotation in 0..regexes.len() {
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        for i in (0..regexes.len()).cycle().skip(rotation).take(regexes.len()) {
            let lazy = compiler.compile_regex_lazy(&regexes[i]).unwrap();
            assert!(lazy.lazy_engine().unwrap().space().has_few_regex_states(), "{}", regexes[i]);
            assert_same_masks(&lazy, &eager[i], &walks[i], &regexes[i]);
            reused += lazy.lazy_engine().unwrap().first_sets_reused();
        }
    }
    assert!(reused >= 10, "{reused} first-token sets reused");
    let compiler = Compiler::new(vocab, Limits::default());
    assert_a_second_guide_finds_no_set(&compiler, &regexes[0], cases[0].1.as_bytes(), &regexes[0]);
}

/// Two lazy guides of `regex`, one after the other on `compiler`, give its eager masks along 6
/// random walks and a spelling of `text`, and the second finds no first-token set of its own.
fn assert_a_second_guide_finds_no_set(compiler: &Compiler, regex: &str, text: &[u8], label: &str) {
    let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
    let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| eager.random_walk(seed, 20).unwrap()).collect();
    walks.push(spelling(&eager, text, eager.initial_state()).expect("the guide spells it"));
    let first = compiler.compile_regex_lazy(regex).unwrap();
    assert_same_masks(&first, &eager, &walks, label);
    let again = compiler.compile_regex_lazy(regex).unwrap();
    assert_same_masks(&again, &eager, &walks, label);
    let engine = again.lazy_engine().unwrap();
    let found = engine.first_token_sets() - engine.first_sets_reused();
    assert_eq!(found, 0, "{label}: {found} of {} sets found again", engine.first_token_sets());
}

/// propertok's own JSON string (`json_schema`'s: `\u` escapes, and U+007F-U+009F, which the
/// slice leaves to exit tokens) comes back into its contents at other pre-tokenizer states after
/// those exits: the key of a state inside it describes five regions on Llama 3, past the four
/// stop 73 allowed (`KEY_REGIONS`). A second guide of the regex takes every first-token set from
/// the first's, and every guide gives its eager masks.
#[test]
fn own_json_strings_share_first_token_sets() {
    let body = r#"(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u(?:(?:(?:[0-9a-cA-CeEfF]\p{AHex}|[dD][0-7])\p{AHex}{2})|[dD][89abAB]\p{AHex}{2}\\u[dD][c-fC-F]\p{AHex}{2})))*"#;
    let regex = r#"\{"a": "B", "b": "B"\}"#.replace('B', body);
    let text = "{\"a\": \"Hi there, w\u{f6}rld \\u00e9\u{85}!\", \"b\": \"x\"}";
    for name in ["gpt2", "llama3"] {
        let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary(name)), Limits::default());
        assert_a_second_guide_finds_no_set(&compiler, &regex, text.as_bytes(), name);
    }
}

/// A piece start is proved live by its shortest way alone (`Engine::live_by_clean_way`) only on
/// a tokenizer where every piece of text has canonical tokens. Falcon has no token for `\x0b`:
/// in `hello(\x0b|world)` the piece start after `hello` has a one-byte way that no tokens spell,
/// so it is dead, and `hello`, which `world` does not follow in one piece, is no first token.
/// Elsewhere clean ways prove piece starts live, added tokens' contents on the way or not
/// (GPT-NeoX's whitespace runs); lazy masks are the eager ones throughout.
#[test]
fn only_a_clean_way_on_a_tokenizer_that_spells_every_text_proves_a_piece_start_live() {
    let cases = [
        ("falcon", r"hello(\x0b|world)", false),
        ("gpt2", r"hello(\x0b|world)", true),
        ("gpt2", "hello(,|world)", true),
        ("llama3", "hello(,|world)", true),
        ("qwen2", r"hello(\x0b|world)", true),
        ("gpt-neox", "hello( {2,4}world|,)", true),
    ];
    for (name, regex, proves) in cases {
        let vocab = Arc::new(crate::testing::shared_vocabulary(name));
        let hello = vocab.token_id("hello").expect("a token of these tokenizers");
        let compiler = Compiler::new(vocab, Limits::default());
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        let mut walks: Vec<Vec<u32>> = (0..6).map(|seed| eager.random_walk(seed, 16).unwrap()).collect();
        walks.push(Vec::new());
        assert_same_masks(&lazy, &eager, &walks, regex);
        let engine = lazy.lazy_engine().unwrap();
        assert_eq!(engine.parts().clean_ways_prove_piece_starts, proves, "{name}");
        assert_eq!(engine.clean_way_proofs() > 0, proves, "{name}, {regex}: piece starts proved by clean ways");
        if name == "falcon" {
            assert!(!eager.allowed_tokens(eager.initial_state()).unwrap().contains(&hello), "the premise");
        }
    }
}

/// On Llama 3 (318 tokens start a lone token's split), a sliced text state's certificates give
/// each split starter a hub from the set's start: the hub must be a successor of the starter's
/// node in the guide, so that a live hub proves the starter live (the Python lazy/eager
/// differentials on Llama 3 hold the masks to the eager guide's). And every split token's
/// first byte, kept apart, is its first byte.
#[test]
fn split_starters_hubs_are_successors_in_the_guide() {
    let vocab = Arc::new(crate::testing::shared_vocabulary("llama3"));
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let string = r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])"#;
    let regex = format!(r#"\{{"a": "{string}*", "b": "{string}{{0,30}}"\}}"#);
    let text = br#"{"a": "It is 12, we go.", "b": "Yes - 'we' did"}"#;
    let lazy = compiler.compile_regex_lazy(&regex).unwrap();
    let walk = spelling(&lazy, text, lazy.initial_state()).expect("the guide spells it");
    assert_eq!(walk.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect::<Vec<u8>>(), text);
    let (_, _, conts) = lazy.lazy_engine().unwrap().check_chains(false).unwrap();
    assert!(conts > 50, "{conts} split starters checked");
    // The split tokens' first bytes, kept apart for first-token sets, are their bytes' first.
    let parts = lazy.lazy_engine().unwrap().parts();
    let mut firsts = 0;
    for u in 0..parts.splits.num_nodes() as u32 {
        for (i, &(t, _)) in parts.splits.next_tokens(u).iter().enumerate() {
            assert_eq!(Some(&parts.split_first_byte(u, i)), vocab.token_bytes(t).first(), "token {t} at node {u}");
            firsts += 1;
        }
    }
    assert!(firsts >= 318, "{firsts} split tokens' first bytes checked");
}

/// A grammar's special token between two regexes: before it the masks are the left regex's
/// eager guide's (with the token wherever that guide takes EOS), after it the right one's, bit
/// for bit; the real tokenizer splits special tokens out and tokenizes each side on its own.
#[test]
fn a_special_token_joins_two_independently_canonical_texts() {
    let (left, right) = (r#"\{"a": [0-9]{1,3}\}"#, r"(yes|no)( [a-z]{2,6})?");
    let compiler = Compiler::new(mistral(), Limits::default());
    let grammar =
        crate::grammar::parse(&format!("start: /{left}/ <s> /{right}/\n"), crate::grammar::Syntax::Lark, None);
    let options = crate::grammar::lower::LowerOptions::default();
    let guide = compiler.compile_grammar(&grammar.unwrap(), options, Some(Method::Cartesian), true).unwrap();
    let (a, b) = (
        compiler.compile_regex(left, Method::Cartesian).unwrap(),
        compiler.compile_regex(right, Method::Cartesian).unwrap(),
    );
    let (bos, eos) = (1u32, 2u32);
    let with_token = |mut mask: Vec<u32>| {
        if mask[(eos / 32) as usize] & (1 << (eos % 32)) != 0 {
            mask[(eos / 32) as usize] &= !(1 << (eos % 32));
            mask[(bos / 32) as usize] |= 1 << (bos % 32);
        }
        mask
    };
    for seed in 0..8 {
        let (wa, wb) = (a.random_walk(seed, 10).unwrap(), b.random_walk(seed, 10).unwrap());
        let mut walk = wa.clone();
        walk.push(bos);
        walk.extend(&wb);
        let got = masks_along(&guide, &walk);
        let want: Vec<Vec<u32>> =
            masks_along(&a, &wa).into_iter().map(with_token).chain(masks_along(&b, &wb)).collect();
        assert_eq!(got, want, "seed {seed}");
    }
    assert!(matches!(crate::build::materialize(&guide), Err(Error::Unsupported(_))));
    let eager = compiler.compile_grammar(
        &crate::grammar::parse("start: \"a\" <s>\n", crate::grammar::Syntax::Lark, None).unwrap(),
        options,
        Some(Method::Cartesian),
        false,
    );
    assert!(matches!(eager, Err(Error::Unsupported(_))));
}

/// Threads sharing a fresh guide whose grammar names special tokens see the masks a guide used
/// from one thread gives, whatever the interleaving (the token successors are lazy facts too).
#[test]
fn threads_sharing_a_guide_with_special_tokens_agree() {
    let text = format!("start: (/{REGEX}/ <s>)+ /[a-z]{{1,8}}/ <unk>?\n");
    let grammar = crate::grammar::parse(&text, crate::grammar::Syntax::Lark, None).unwrap();
    let options = crate::grammar::lower::LowerOptions::default();
    let compiler = Compiler::new(mistral(), Limits::default());
    let compile = || compiler.compile_grammar(&grammar, options, Some(Method::Cartesian), true).unwrap();
    let reference = compile();
    let walks: Vec<Vec<u32>> = (0..16).map(|seed| reference.random_walk(seed, 60).unwrap()).collect();
    assert!(walks.iter().all(|w| w.contains(&1)), "every walk takes <s>");
    let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&reference, w)).collect();
    for _round in 0..2 {
        let shared = Arc::new(compile());
        assert_eq!(masks_from_threads(&shared, &walks), want);
    }
}

/// JSON-like values nested without bound: `value` → `array` / `object` → `value`.
const NESTED: &str = r#"
root   ::= value
value  ::= object | array | string | [0-9]+
object ::= "{" (pair (", " pair)*)? "}"
pair   ::= string ": " value
array  ::= "[" (value (", " value)*)? "]"
string ::= "\"" [a-z ]{0,6} "\""
"#;

fn nested_guide(compiler: &Compiler, depth: Option<u32>, lazy: bool) -> Guide {
    let grammar = crate::grammar::parse(NESTED, crate::grammar::Syntax::Gbnf, None).unwrap();
    let options = crate::grammar::lower::LowerOptions { max_recursion_depth: depth, ..Default::default() };
    compiler.compile_grammar(&grammar, options, Some(Method::Cartesian), lazy).unwrap()
}

/// With a nesting bound `d`, the grammar's pushdown automaton gives the masks of the eager guide
/// of its regex unrolled to depth `d`, bit for bit (the same language, two constructions).
#[test]
fn a_bounded_pushdown_guide_is_the_unrolled_regex_guide() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let eager = nested_guide(&compiler, Some(2), false);
    let lazy = nested_guide(&compiler, Some(2), true);
    assert!(crate::build::materialize(&lazy).is_err(), "a pushdown automaton has no eager form");
    for seed in 0..24 {
        let walk = eager.random_walk(seed, 80).unwrap();
        let (got, want) = (masks_along(&lazy, &walk), masks_along(&eager, &walk));
        assert!(
            got == want,
            "seed {seed}: the masks differ at step {:?}",
            (0..want.len()).find(|&i| got[i] != want[i])
        );
    }
}

/// Without a bound, the masks are those of a guide unrolled deeper than the text goes: at every
/// step whose text is at most `D - 3` brackets deep (a token opens at most a few at once), the
/// unbounded guide and the eager guide unrolled to depth `D` agree bit for bit. Walks of the
/// unbounded guide reach depths no bound would allow.
#[test]
fn an_unbounded_pushdown_guide_agrees_with_deep_unrolling() {
    const D: u32 = 5;
    let vocab = mistral();
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let eager = nested_guide(&compiler, Some(D), false);
    let unbounded = nested_guide(&compiler, None, true);
    let depth_after = |walk: &[u32]| {
        let text: Vec<u8> = walk.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
        let (mut depth, mut in_string) = (0i32, false);
        for b in text {
            match b {
                b'"' => in_string = !in_string,
                b'[' | b'{' if !in_string => depth += 1,
                b']' | b'}' if !in_string => depth -= 1,
                _ => {}
            }
        }
        depth as u32
    };
    let mut compared = 0;
    for seed in 0..64 {
        let walk = eager.random_walk(seed, 60).unwrap();
        let (got, want) = (masks_along(&unbounded, &walk), masks_along(&eager, &walk));
        for i in 0..want.len() {
            if depth_after(&walk[..i]) <= D - 3 {
                assert!(got[i] == want[i], "seed {seed}, step {i}: the masks differ");
                compared += 1;
            }
        }
    }
    assert!(compared > 300, "{compared} masks compared");
    // Deeper than any bound used here: 40 open arrays, then closed, one token at a time.
    let text = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let walk = spelling(&unbounded, text.as_bytes(), unbounded.initial_state()).expect("the guide spells it");
    let end = walk.iter().try_fold(unbounded.initial_state(), |s, &t| unbounded.next_state(s, t)).unwrap();
    assert!(unbounded.is_final(end));
    let threads = Arc::new(nested_guide(&compiler, None, true));
    let walks: Vec<Vec<u32>> = (0..16).map(|seed| unbounded.random_walk(seed, 80).unwrap()).collect();
    let want: Vec<Vec<Vec<u32>>> = walks.iter().map(|w| masks_along(&unbounded, w)).collect();
    assert_eq!(masks_from_threads(&threads, &walks), want, "threads sharing a fresh guide agree");
}

/// JSON objects nested without bound, with keys, numbers and free strings: the pieces of
/// `KEYED_REGEX`, here in a grammar.
const KEYED_NESTED: &str = r#"
root   ::= object
value  ::= object | string | [0-9]{1,3}
object ::= "{" (pair (", " pair)*)? "}"
pair   ::= ("\"name\"" | "\"id\"") ": " value
string ::= "\"" ([^"\\\x00-\x1F] | "\\" ["\\/bfnrt])* "\""
"#;

/// One object of `KEYED_NESTED`'s keys, a string and a number.
const KEYED_REGEX: &str = r#"\{"name": "([^"\\\x00-\x1F]|\\["\\/bfnrt])*", "id": [0-9]{1,3}\}"#;

/// A grammar's guides take first-token sets by key as a regex's do (`Engine::shared_first_key`:
/// keys, `": "`, digits and a string's contents, after a regex guide of the same pieces and
/// after one another on one `Compiler`), and give the masks of the grammar's eager guide
/// unrolled to depth `D`, bit for bit: with the bound `D`, along every walk; without a bound,
/// at every step at most `D - 2` braces deep. Before stop 67 a grammar's states all looked wide
/// (`TextSpace::bytes_taken` answered every byte), so none had a key. Without a bound, piece
/// starts are proved live by the grammar's shortest text (`Engine::live_by_shortest_text`),
/// with a bound never (its distances depend on the rules open).
#[test]
fn grammar_guides_share_first_token_sets_and_give_the_unrolled_masks() {
    const D: u32 = 3;
    let grammar = crate::grammar::parse(KEYED_NESTED, crate::grammar::Syntax::Gbnf, None).unwrap();
    for name in ["gpt2", "llama3"] {
        let vocab = Arc::new(crate::testing::shared_vocabulary(name));
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        let guide = |depth: Option<u32>, lazy: bool| {
            let options = crate::grammar::lower::LowerOptions { max_recursion_depth: depth, ..Default::default() };
            compiler.compile_grammar(&grammar, options, Some(Method::Cartesian), lazy).unwrap()
        };
        let eager = guide(Some(D), false);
        let walks: Vec<Vec<u32>> = (0..12).map(|seed| eager.random_walk(seed, 48).unwrap()).collect();
        let eager_regex = compiler.compile_regex(KEYED_REGEX, Method::Cartesian).unwrap();
        let regex_walks: Vec<Vec<u32>> = (0..4).map(|seed| eager_regex.random_walk(seed, 24).unwrap()).collect();
        assert_same_masks(&compiler.compile_regex_lazy(KEYED_REGEX).unwrap(), &eager_regex, &regex_walks, KEYED_REGEX);
        let depth_after = |walk: &[u32]| {
            let text: Vec<u8> = walk.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
            let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
            for b in text {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' if in_string => escaped = true,
                    b'"' => in_string = !in_string,
                    b'{' if !in_string => depth += 1,
                    b'}' if !in_string => depth -= 1,
                    _ => {}
                }
            }
            depth as u32
        };
        let (mut reused, mut compared, mut by_text) = (Vec::new(), 0, Vec::new());
        for round in 0..2 {
            let bounded = guide(Some(D), true);
            assert_same_masks(&bounded, &eager, &walks, &format!("{name}, bound {D}, round {round}"));
            let unbounded = guide(None, true);
            for (w, walk) in walks.iter().enumerate() {
                let (got, want) = (masks_along(&unbounded, walk), masks_along(&eager, walk));
                for i in (0..want.len()).filter(|&i| depth_after(&walk[..i]) <= D - 2) {
                    assert!(got[i] == want[i], "{name}, no bound, round {round}, walk {w}, step {i}: the masks differ");
                    compared += 1;
                }
            }
            for lazy in [&bounded, &unbounded] {
                reused.push(lazy.lazy_engine().unwrap().first_sets_reused());
                by_text.push(lazy.lazy_engine().unwrap().shortest_text_proofs());
            }
        }
        assert!(compared > 200, "{name}: {compared} masks compared");
        assert!(reused.iter().all(|&n| n >= 3), "{name}: first-token sets reused by each grammar guide: {reused:?}");
        assert!(by_text[0] == 0 && by_text[2] == 0 && by_text[1] > 0 && by_text[3] > 0, "{name}: {by_text:?}");
    }
}

/// A regex whose every string is thousands of bytes long (a large schema's required keys): the
/// searches for a shortest way to acceptance scale their budget with the regex's distance, so
/// none gives up, and the probe proves the start live along that way instead of leaving it to
/// the full search. With fixed budgets (4,096 text states, 512 nodes) every way search from
/// the start failed: Github_ultra/o16062 (~6,000 bytes) took 1.3 s to its first mask on
/// Llama 3. The masks stay the eager guide's.
#[test]
fn a_distant_acceptance_is_found_without_failed_way_searches() {
    let regex = r#"\{("k[0-9]": [0-9], ){700}"end": true\}"#;
    let compiler = Compiler::new(mistral(), Limits::default());
    let lazy = compiler.compile_regex_lazy(regex).unwrap();
    let engine = lazy.lazy_engine().unwrap();
    assert_eq!(engine.space().distance(engine.key(engine.start())), 6_313);
    assert_eq!(engine.way_search_failures(), 0);
    let (built, _) = lazy.lazy_text_states().unwrap();
    assert!(built < 3 * 6_313, "{built} text states to prove the start live");
    let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
    for seed in 0..2 {
        let walk = eager.random_walk(seed, 60).unwrap();
        assert_eq!(masks_along(&lazy, &walk), masks_along(&eager, &walk));
    }
}

/// An array of up to `max` objects, each with a list of up to 3 tags.
fn items_regex(max: u32) -> String {
    let item = r#"\{"id": [0-9]{1,3}, "tags": \[("[a-z]{1,8}"(, "[a-z]{1,8}"){0,2})?\]\}"#;
    format!(r#"\{{"items": \[({item}(, {item}){{0,{}}})?\]\}}"#, max - 1)
}

/// A regex written as rules whose counted repetitions repeat calls (`crate::regex::outline`)
/// gives the eager guide's masks, bit for bit: every repeated operand outlined (the item, the
/// tag list, the digits' and letters' runs stay inline), along random walks and the eager
/// guide's spelling of documents that fill the arrays to their bounds and try one more.
#[test]
fn an_outlined_regex_gives_the_eager_masks() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let regex = items_regex(3);
    let eager = compiler.compile_regex(&regex, Method::Cartesian).unwrap();
    let outlined = compiler.compile_regex_lazy_outlined(&regex, OutlineOptions::EVERY).unwrap();
    assert_eq!(outlined.lazy_text_automaton(), Some("outlined rules"));
    let mut walks: Vec<Vec<u32>> = (0..16).map(|seed| eager.random_walk(seed, 80).unwrap()).collect();
    let item = r#"{"id": 7, "tags": ["ab", "c", "def"]}"#;
    for n in [1, 3] {
        let text = format!(r#"{{"items": [{}]}}"#, vec![item; n].join(", "));
        walks.push(spelling(&eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
    }
    for (w, walk) in walks.iter().enumerate() {
        assert!(masks_along(&outlined, walk) == masks_along(&eager, walk), "walk {w}");
    }
    let four = format!(r#"{{"items": [{}]}}"#, [item; 4].join(", "));
    assert_eq!(spelling(&outlined, four.as_bytes(), outlined.initial_state()), None, "a fourth item");
}

/// With the default options only large copies are outlined: 600 items of ~100 NFA states each
/// are (60,000 states as copies), their tags are not. The masks are those of the same regex as
/// one automaton, along walks long enough to open several items.
#[test]
fn large_copies_are_outlined_by_default() {
    let compiler = Compiler::new(mistral(), Limits::default());
    let regex = items_regex(600);
    let outlined = compiler.compile_regex_lazy(&regex).unwrap();
    assert_eq!(outlined.lazy_text_automaton(), Some("outlined rules"));
    let whole = compiler.compile_regex_lazy_outlined(&regex, OutlineOptions::NONE).unwrap();
    assert_ne!(whole.lazy_text_automaton(), Some("outlined rules"));
    for seed in 0..8 {
        let walk = whole.random_walk(seed, 120).unwrap();
        assert!(masks_along(&outlined, &walk) == masks_along(&whole, &walk), "seed {seed}");
    }
}

/// An outlined regex with no string is refused as a regex, not as a grammar.
#[test]
fn an_empty_outlined_regex_names_the_regex() {
    let compiler = Compiler::new(mistral(), Limits::default());
    match compiler.compile_regex_lazy_outlined(r"(ab[^\x00-\x{10FFFF}]){2}", OutlineOptions::EVERY) {
        Err(Error::EmptyLanguage(message)) => assert!(message.contains("no string matches the regex"), "{message}"),
        other => panic!("{:?}", other.map(|g| g.lazy_text_automaton())),
    }
}

/// A grammar's rules are outlined too: a list of up to 400 items (~100 NFA states each) is
/// rules that the repetition calls, with the masks of the same grammar as one regex DFA (a
/// nesting bound, which the grammar never reaches, turns outlining off).
#[test]
fn a_grammars_large_copies_are_outlined() {
    const ITEMS: &str = r#"root ::= "[" item (", " item){0,399} "]"
item ::= "{\"id\": " [0-9]{1,3} ", \"tags\": [" (tag (", " tag){0,2})? "]}"
tag  ::= "\"" [a-z]{1,8} "\""
"#;
    let compiler = Compiler::new(mistral(), Limits::default());
    let grammar = crate::grammar::parse(ITEMS, crate::grammar::Syntax::Gbnf, None).unwrap();
    let compile = |depth| {
        let options = crate::grammar::lower::LowerOptions { max_recursion_depth: depth, ..Default::default() };
        compiler.compile_grammar(&grammar, options, Some(Method::Cartesian), true).unwrap()
    };
    let (outlined, whole) = (compile(None), compile(Some(1)));
    assert_eq!(outlined.lazy_text_automaton(), Some("pushdown"));
    assert_eq!(whole.lazy_text_automaton(), Some("minimal DFA"));
    for seed in 0..8 {
        let walk = whole.random_walk(seed, 120).unwrap();
        assert!(masks_along(&outlined, &walk) == masks_along(&whole, &walk), "seed {seed}");
    }
}

/// Prefetching (`Limits::prefetch_seconds`) fills first-token sets in the compile and never
/// changes a mask: prefetched guides give their eager guides' masks on a byte-level BPE with a
/// pre-tokenizer, one with a normalizer, and a SentencePiece BPE with byte fallback; the compile
/// filled many sets where one without prefetching fills the initial state's alone.
#[test]
fn prefetched_guides_give_the_eager_masks() {
    let text = br#"{"flag": false, "size": 2.5, "count": 120}"#;
    let [gpt2, llama3, qwen2] = field_vocabularies();
    for vocab in [gpt2, llama3, qwen2, mistral()] {
        let plain = Compiler::new(vocab.clone(), Limits::default());
        let filled = |g: &Guide| g.lazy_engine().unwrap().first_token_sets();
        assert!(filled(&plain.compile_regex_lazy(FIELDS_B).unwrap()) <= 2);
        let compiler = Compiler::new(vocab, Limits { prefetch_seconds: 30.0, ..Limits::default() });
        let lazy = compiler.compile_regex_lazy(FIELDS_B).unwrap();
        let prefetched = filled(&lazy);
        assert!(prefetched >= 20, "{prefetched} first-token sets filled in the compile");
        assert_gives_the_eager_masks(&compiler, &lazy, FIELDS_B, text);
    }
}

/// Prefetching stops at half of `max_product_states` text states, so decoding keeps room: where
/// a short document needs few of the text states a full prefetch makes, a limit of about twice
/// the document's stops the prefetch early, and the document still decodes with the eager masks.
#[test]
fn prefetching_leaves_decoding_room_within_the_limits() {
    let regex =
        r#"\{"on": (true|false)(, "note": "[a-z ]*")?(, "sizes": \[((0|[1-9][0-9]*)(, (0|[1-9][0-9]*))*)?\])?\}"#;
    let text = br#"{"on": true}"#;
    let vocab = Arc::new(crate::testing::shared_vocabulary("llama3"));
    let unlimited = Compiler::new(vocab.clone(), Limits { prefetch_seconds: 30.0, ..Limits::default() });
    let all = unlimited.compile_regex_lazy(regex).unwrap().lazy_engine().unwrap().text_states().0;
    let plain = Compiler::new(vocab.clone(), Limits::default());
    let lazy = plain.compile_regex_lazy(regex).unwrap();
    let walk = spelling(&lazy, text, lazy.initial_state()).expect("the guide spells it");
    masks_along(&lazy, &walk);
    let needed = lazy.lazy_engine().unwrap().text_states().0;
    let max = 2 * needed + 2;
    assert!(all > max, "{all} text states prefetched without a limit, {needed} needed for the document");
    let limits = Limits { prefetch_seconds: 30.0, max_product_states: max, ..Limits::default() };
    let compiler = Compiler::new(vocab, limits);
    let tight = compiler.compile_regex_lazy(regex).unwrap();
    let prefetched = tight.lazy_engine().unwrap().text_states().0;
    // Half of `max` and what the last member visited added (107 / 49 / 100 / 70 when written):
    // a prefetch that ran to the limit would leave decoding no room.
    assert!(prefetched < max, "{prefetched} of at most {max} text states taken by the prefetch");
    let eager = plain.compile_regex(regex, Method::Cartesian).unwrap();
    assert_eq!(masks_along(&tight, &walk), masks_along(&eager, &walk));
}

/// Regex states that take many characters to one same state but loop on none of
/// `SLICE_PATTERNS` take a slice derived from those characters (`slice::derived_class`): the
/// states of a lazy `.*?` watching for its suffix (the first takes every character but `.` and
/// the newline to itself), a counted class of its own, and a host name's characters. The masks
/// stay the eager ones, on a tokenizer with a pre-tokenizer (GPT-2) and one without
/// (Mistral-7B), along random walks (which spell other scripts too) and spelled documents.
#[test]
fn derived_slices_give_the_eager_masks() {
    use crate::lazy::slice::SliceId;
    // Each regex, texts it spells, and prefixes after which the state takes a derived slice.
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            r"(.*?)\.alfred3?workflow",
            &["my.tools.v2.alfredworkflow", "Grüß.alfred.alfred3workflow"],
            &["ab", "a.b", "a.alf"],
        ),
        ("[A-Za-z0-9 &,./@-]{1,10}", &["Smith & Co"], &["", "Sm"]),
        (r"[a-z0-9-]+(\.[a-z0-9-]+)*", &["mail.example-1.org"], &["ma", "mail.ex"]),
    ];
    for vocab in [mistral(), Arc::new(crate::testing::shared_vocabulary("gpt2"))] {
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        for (regex, texts, sliced_after) in cases {
            let derived = |id: Option<SliceId>| matches!(id, Some(SliceId::Derived(_)));
            assert_derived_slices_give_the_eager_masks(&compiler, regex, texts, sliced_after, 6, derived);
        }
        assert!(compiler.lazy_parts().unwrap().slices.num_derived() >= 3);
    }
}

/// Two lazy guides of `regex` give its eager masks along `walks` random walks and spellings of
/// `texts`, and after each of `sliced_after` their state takes a slice that `taken` accepts.
fn assert_derived_slices_give_the_eager_masks(
    compiler: &Compiler,
    regex: &str,
    texts: &[&str],
    sliced_after: &[&str],
    walks: u64,
    taken: impl Fn(Option<crate::lazy::slice::SliceId>) -> bool,
) {
    let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
    let mut paths: Vec<Vec<u32>> = (0..walks).map(|seed| eager.random_walk(seed, 40).unwrap()).collect();
    for text in texts {
        paths.push(spelling(&eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
    }
    for _guide in 0..2 {
        let lazy = compiler.compile_regex_lazy(regex).unwrap();
        assert_same_masks(&lazy, &eager, &paths, regex);
        let engine = lazy.lazy_engine().unwrap();
        let dfa = engine.space().dfa();
        for prefix in sliced_after {
            let q = prefix.bytes().fold(dfa.start(), |q, b| dfa.next(q, b));
            assert_ne!(q, DEAD, "{prefix}");
            let id = engine.slice_use(q).unwrap().map(|u| u.slice_id());
            assert!(taken(id), "{regex} after {prefix:?}: {id:?}");
        }
    }
}

/// A state that takes the Unicode word characters (`\w` as outlines-core's regexes mean it)
/// takes a derived slice with them (`NonAscii::Word`): an e-mail's local part and domain, on
/// Mistral-7B, GPT-2 and Llama 3. The masks stay the eager ones along random walks (which spell
/// other scripts) and spellings with accents and CJK.
#[test]
fn unicode_word_classes_take_a_derived_slice() {
    use crate::lazy::slice::{NonAscii, SliceId};
    const EMAIL: &str = r#"\{"email": "[\w|-|.]+@[\w]+\.[A-Za-z]{2,4}", "n": [0-9]+\}"#;
    let texts = [
        r#"{"email": "john.doe@example.com", "n": 1}"#,
        "{\"email\": \"j\u{f6}rg_\u{fc}.x@ex\u{e4}mple.org\", \"n\": 22}",
        "{\"email\": \"\u{540d}\u{524d}@\u{4f8b}\u{3048}.jp\", \"n\": 3}",
    ];
    // Prefixes after which the state loops on the class: the local part, the domain.
    let sliced_after = [r#"{"email": "jo"#, r#"{"email": "a@ex"#];
    let vocabs = ["gpt2", "llama3"].map(|name| Arc::new(crate::testing::shared_vocabulary(name)));
    for vocab in [mistral()].into_iter().chain(vocabs) {
        let compiler = Compiler::new(vocab.clone(), Limits::default());
        let word = |id: Option<SliceId>| matches!(id, Some(SliceId::Derived(c)) if c.non_ascii == NonAscii::Word);
        assert_derived_slices_give_the_eager_masks(&compiler, EMAIL, &texts, &sliced_after, 8, word);
    }
}

/// Past `MAX_DERIVED_SLICES` classes a tokenizer derives no more slices: the states are walked
/// in full, with the same masks.
#[test]
fn derived_slices_stop_at_their_limit() {
    use crate::lazy::slice::MAX_DERIVED_SLICES;
    let compiler = Compiler::new(mistral(), Limits::default());
    let parts = compiler.lazy_parts().unwrap();
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
    let mut made = Vec::new();
    for i in 0..MAX_DERIVED_SLICES + 4 {
        // Each regex's class leaves out another letter: one derived slice per regex.
        let class: String = (letters.iter().enumerate()).filter(|&(j, _)| j != i).map(|(_, c)| *c).collect();
        let regex = format!("[{class}0-9 ]{{1,12}}");
        let lazy = compiler.compile_regex_lazy(&regex).unwrap();
        let eager = compiler.compile_regex(&regex, Method::Cartesian).unwrap();
        let walk = eager.random_walk(i as u64, 8).unwrap();
        assert!(masks_along(&lazy, &walk) == masks_along(&eager, &walk), "{regex}");
        made.push(parts.slices.num_derived());
    }
    let want: Vec<usize> = (1..=MAX_DERIVED_SLICES).chain([MAX_DERIVED_SLICES; 4]).collect();
    assert_eq!(made, want);
}

/// A regex that watches for a suffix inside a free class runs the watch beside everything after
/// it: each state after the watch's start parts from the loop state on a few bytes, and takes
/// its first-token set from the loop state's (`Engine::neighbour`); beside a JSON string's
/// contents the watch takes every character from U+00A0 on, a derived slice of its own
/// (`NonAscii::AboveC1`), and a URL's path beside what follows it every character but the
/// Unicode spaces (`NonAscii::NotSpace`). Determinized on demand, such a state is a union of
/// threads instead (`Engine::first_tokens_of_threads`). The masks stay the eager ones.
#[test]
fn neighbours_and_watches_beside_strings_give_the_eager_masks() {
    use crate::lazy::slice::{NonAscii, SliceId};
    const WATCH: &str = r#"\{"file": "(.*?)\.alfred3?workflow", "readme": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*", "tags": \["[^"\\]*"(, "[^"\\]*")*\]\}"#;
    const URL: &str = r#"\{"loc": "https://[a-z.]+(/[^\s?#]*)?(\?[^\s#]*)?", "n": [0-9]+\}"#;
    const DOTS: &str = r#"\{"a": "([^".\\]|\.[^".@\\])*", "b": [0-9]\}"#;
    // Each regex, texts it spells, and a prefix after which the state takes a derived slice
    // with those non-ASCII characters.
    type Case<'a> = (&'a str, &'a [&'a str], Option<(&'a str, NonAscii)>);
    let cases: [Case; 3] = [
        (
            WATCH,
            &[
                r#"{"file": "My Workflow.alfredworkflow", "readme": "READ.me Grüß \"x\"", "tags": ["a.b", "c"]}"#,
                r#"{"file": "a.alf.alfred3workflow", "readme": "", "tags": [".alfred"]}"#,
            ],
            Some((r#"{"file": "a.alfredworkflow", "readme": "x"#, NonAscii::AboveC1)),
        ),
        (
            URL,
            &[r#"{"loc": "https://example.com/a?b=c", "n": 12}"#, r#"{"loc": "https://a.b/x", "n": 0}"#],
            Some((r#"{"loc": "https://a.b/x"#, NonAscii::NotSpace)),
        ),
        // After a dot the state dies on `.`, `@` and `"`, where its loop state goes on.
        (DOTS, &[r#"{"a": "x.y@z.com and more", "b": 1}"#], None),
    ];
    // Sets from neighbours, per case, over the tokenizers (a tokenizer may key a state's set
    // instead, `Engine::shared_first_key`).
    let (mut by_neighbour, mut by_neighbour_on_demand) = ([0; 3], [0; 3]);
    let vocabs = ["gpt2", "llama3"].map(|name| Arc::new(crate::testing::shared_vocabulary(name)));
    // The eager guide of WATCH takes ~7 s on Llama 3: a busy machine passed the default 30 s.
    let limits = Limits { max_compile_seconds: Some(300.0), ..Limits::default() };
    for vocab in [mistral()].into_iter().chain(vocabs) {
        let compiler = Compiler::new(vocab.clone(), limits);
        for (case, (regex, texts, derived)) in cases.into_iter().enumerate() {
            let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
            let mut walks: Vec<Vec<u32>> = (0..8).map(|seed| eager.random_walk(seed, 60).unwrap()).collect();
            for text in texts {
                walks.push(spelling(&eager, text.as_bytes(), eager.initial_state()).expect("the guide spells it"));
            }
            for _guide in 0..2 {
                // The regex's DFA determinized on demand (a pushdown automaton's states) too.
                let on_demand = compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND).unwrap();
                assert_same_masks(&on_demand, &eager, &walks, regex);
                // On demand, a watch's state is a union of threads (the watch beside its loop),
                // which takes it before a neighbour would (`Engine::first_tokens_of_threads`).
                let on_demand = on_demand.lazy_engine().unwrap();
                by_neighbour_on_demand[case] += on_demand.first_sets_by_neighbour() + on_demand.thread_unions();
                let lazy = compiler.compile_regex_lazy(regex).unwrap();
                assert_same_masks(&lazy, &eager, &walks, regex);
                let engine = lazy.lazy_engine().unwrap();
                by_neighbour[case] += engine.first_sets_by_neighbour();
                if let Some((prefix, non_ascii)) = derived {
                    let dfa = engine.space().dfa();
                    let q = prefix.bytes().fold(dfa.start(), |q, b| dfa.next(q, b));
                    let id = engine.slice_use(q).unwrap().map(|u| u.slice_id());
                    let taken = matches!(id, Some(SliceId::Derived(c)) if c.non_ascii == non_ascii);
                    assert!(taken, "{regex} after {prefix:?}: {id:?}, want {non_ascii:?}");
                }
            }
        }
    }
    // Determinized on demand, `DOTS`'s state after a dot leads to a copy of its loop state
    // (states are not minimal): no neighbour there, the same masks. `by_neighbour_on_demand`
    // counts unions of threads too.
    let all = by_neighbour.iter().chain(&by_neighbour_on_demand[..2]).all(|&n| n > 0);
    assert!(all, "first-token sets from neighbours: {by_neighbour:?}, on demand {by_neighbour_on_demand:?}");
}

/// A shared first-token set's key asks for the slice uses of its closure's wide states only
/// as far as a loop use is found (`Slices::find_loop`), since only a loop use makes a key:
/// where that decides, it is `Slices::find`'s answer (a loop use, of a fixed or a derived
/// slice, or none); it leaves counted uses undecided.
#[test]
fn loop_uses_are_found_without_counted_tables() {
    use crate::lazy::slice::{Counting, SliceId};
    const REGEXES: [&str; 3] = [
        r#"\{"a": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*", "b": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){2,12}", "c": "[A-Za-z0-9 ,.]{1,32}"\}"#,
        r#"\{"loc": "https://([^\s:@]+@)?[a-zA-Z\d.-]+(/[^\s?#]*)?"\}"#,
        r#"\{"file": "(.*?)\.alfred3?workflow"\}"#,
    ];
    // Loop uses found by `find_loop` (of derived slices), and counted uses it left to `find`
    // (per regex, over the tokenizers).
    let (mut loops, mut derived_loops, mut counted) = ([0; 3], [0; 3], [0; 3]);
    for vocab in [mistral(), Arc::new(crate::testing::shared_vocabulary("llama3"))] {
        let compiler = Compiler::new(vocab, Limits::default());
        for (i, regex) in REGEXES.into_iter().enumerate() {
            let lazy = compiler.compile_regex_lazy(regex).unwrap();
            let engine = lazy.lazy_engine().unwrap();
            let (dfa, parts) = (engine.space().dfa(), engine.parts());
            let states = dfa.as_dfa().expect("a minimal DFA").num_states() as u32;
            for q in (0..states).filter(|&q| q != crate::regex::byte_dfa::DEAD) {
                let found = parts.slices.find(dfa, q, parts.slice_inputs()).map(|u| u.identity());
                match parts.slices.find_loop(dfa, q, parts.slice_inputs()) {
                    Some(looped) => {
                        let looped = looped.map(|u| u.identity());
                        loops[i] += looped.is_some() as usize;
                        derived_loops[i] += matches!(looped, Some((SliceId::Derived(_), _, _))) as usize;
                        assert_eq!(looped, found, "{regex}: state {q}");
                        let counts = matches!(&looped, Some((_, c, _)) if *c != Counting::Loop);
                        assert!(!counts, "{regex}: state {q}'s count was made for a key");
                    }
                    None => counted[i] += matches!(&found, Some((_, c, _)) if *c != Counting::Loop) as usize,
                }
            }
        }
    }
    // A string's contents loop on a fixed slice, a URL's path on a derived one; the watch's
    // states count `.*`'s characters.
    let all = loops[0] > 0 && derived_loops[1] > 0 && counted.iter().all(|&n| n > 0);
    assert!(all, "loop uses {loops:?} ({derived_loops:?} derived), counted uses left {counted:?}");
}

/// Slice group sets kept in a cache directory (`crate::lazy::slice_store`) are read back by
/// another compiler, as by another process, instead of walked, and give the same masks, as do
/// derived slices' and the patterns' slices' tables; a damaged file, or a whole file under
/// another set's name, is made and written again.
#[test]
fn slice_sets_from_the_disk_cache_give_the_walked_masks() {
    const STRINGS: &str = r#"\{"a": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*", "b": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){2,12}", "c": "[A-Za-z0-9 ,.]{1,32}"\}"#;
    for (name, vocab) in [("mistral7b", mistral()), ("gpt2", Arc::new(crate::testing::shared_vocabulary("gpt2")))] {
        let dir = std::env::temp_dir().join(format!("propertok-slice-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let compiler = || Compiler::new(vocab.clone(), Limits::default()).with_cache_dir(Some(dir.clone()));
        let first = compiler();
        let lazy = first.compile_regex_lazy(STRINGS).unwrap();
        let mut walks: Vec<Vec<u32>> = (0..8).map(|seed| lazy.random_walk(seed, 40).unwrap()).collect();
        let text = "{\"a\": \"Grüß 2024, \\\"x\\\" at 10:30\", \"b\": \"東京 12\", \"c\": \"Hello, World 42.\"}";
        walks.push(spelling(&lazy, text.as_bytes(), lazy.initial_state()).expect("the guide spells it"));
        let want: Vec<_> = walks.iter().map(|w| masks_along(&lazy, w)).collect();
        let (walked, loaded) = first.slice_sets_made().unwrap();
        assert!(walked >= 3 && loaded == 0, "{name}: {walked} sets walked, {loaded} read");
        let slice_dir = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
        let mut files: Vec<_> = std::fs::read_dir(&slice_dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let (tables, files): (Vec<_>, Vec<_>) = files.into_iter().partition(|p| p.extension().unwrap() == "tables");
        let (regions, files): (Vec<_>, Vec<_>) = files.into_iter().partition(|p| p.extension().unwrap() == "region");
        let (contents, files): (Vec<_>, Vec<_>) = files.into_iter().partition(|p| p.extension().unwrap() == "set");
        assert_eq!(files.len(), walked, "{name}: one key's file per set, no temporary left");
        assert!(!contents.is_empty() && contents.len() <= walked, "{name}: {} contents", contents.len());
        let (found, read) = first.slice_regions_made().unwrap();
        assert_eq!((regions.len(), read), (found, 0), "{name}: one file per region found");
        // Without a pre-tokenizer no first-token set is shared, so no region is asked for.
        assert_eq!(found == 0, name == "mistral7b", "{name}: {found} regions");
        let derived = first.lazy_parts().unwrap().slices.num_derived();
        assert!(derived >= 1, "{name}: field c takes a derived slice");
        let fixed = super::slice::SLICE_PATTERNS.len();
        assert_eq!(tables.len(), derived + fixed, "{name}: one tables file per derived slice and per pattern");
        assert_eq!(first.lazy_parts().unwrap().slices.num_fixed_loaded(), 0, "{name}");

        let second = compiler();
        let lazy = second.compile_regex_lazy(STRINGS).unwrap();
        let got: Vec<_> = walks.iter().map(|w| masks_along(&lazy, w)).collect();
        assert!(got == want, "{name}: masks from the disk cache differ");
        assert_eq!(second.slice_sets_made(), Some((0, walked)), "{name}");
        assert_eq!(second.slice_regions_made(), Some((0, found)), "{name}");
        assert_eq!(second.lazy_parts().unwrap().slices.regions_found_again(), found, "{name}: regions read back");
        assert_eq!(second.lazy_parts().unwrap().slices.num_derived_loaded(), derived, "{name}");
        assert_eq!(second.lazy_parts().unwrap().slices.num_fixed_loaded(), fixed, "{name}");
        // Files are edited in place below, by this test only: no compiler that mapped them is
        // left (the maps' contract, `crate::util::u32_storage`).
        drop((first, second, lazy));

        // A truncated set file, a whole set file under another set's name, and tables cut short
        // (a derived slice's, named `c…`, and the first pattern's, `p0`).
        let bytes = std::fs::read(&files[0]).unwrap();
        std::fs::write(&files[0], &bytes[..bytes.len() / 2]).unwrap();
        std::fs::copy(&files[1], &files[2]).unwrap();
        let table_bytes = std::fs::read(&tables[0]).unwrap();
        std::fs::write(&tables[0], &table_bytes[..table_bytes.len() - 1]).unwrap();
        let p0 = tables.iter().find(|p| p.file_name().unwrap() == "p0.tables").expect("the first pattern's tables");
        let p0_bytes = std::fs::read(p0).unwrap();
        std::fs::write(p0, &p0_bytes[..p0_bytes.len() - 1]).unwrap();
        // A region file cut short.
        let region_bytes = regions.first().map(|r| std::fs::read(r).unwrap());
        if let (Some(r), Some(bytes)) = (regions.first(), &region_bytes) {
            std::fs::write(r, &bytes[..bytes.len() - 1]).unwrap();
        }
        let third = compiler();
        let lazy = third.compile_regex_lazy(STRINGS).unwrap();
        let got: Vec<_> = walks.iter().map(|w| masks_along(&lazy, w)).collect();
        assert!(got == want, "{name}: masks after damaged files differ");
        assert_eq!(third.slice_sets_made(), Some((2, walked - 2)), "{name}");
        assert_eq!(third.lazy_parts().unwrap().slices.num_derived_loaded(), derived - 1, "{name}");
        assert_eq!(third.lazy_parts().unwrap().slices.num_fixed_loaded(), fixed - 1, "{name}");
        assert_eq!(std::fs::read(&files[0]).unwrap().len(), bytes.len(), "{name}: rewritten whole");
        assert_eq!(std::fs::read(&tables[0]).unwrap(), table_bytes, "{name}: tables rebuilt as they were");
        assert_eq!(std::fs::read(p0).unwrap(), p0_bytes, "{name}: the pattern's tables rebuilt as they were");
        assert_eq!(third.slice_regions_made(), Some((found.min(1), found - found.min(1))), "{name}");
        if let (Some(r), Some(bytes)) = (regions.first(), region_bytes) {
            assert_eq!(std::fs::read(r).unwrap(), bytes, "{name}: the region found and written as it was");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Slice sets are kept by their contents (`crate::lazy::slice_store`, "Layout and keys"): on
/// Llama 3, a counted class of letters and one of letters and digits, from the same starts
/// inside a word, have the same sets, so their keys name one file each, fewer files than keys.
/// A new process reads each file once and shares the set between its keys, with the masks of
/// the process that walked them; a file of contents cut short is refused, walked and written
/// again whole, and a key never names another set's contents (a different set placed under a
/// set's name is compared, not trusted).
#[test]
fn slice_sets_of_the_same_contents_are_kept_and_read_once() {
    let regexes = [r#"\{"a": "[A-Za-z]{1,30}"\}"#, r#"\{"a": "[A-Za-z0-9]{1,30}"\}"#];
    let texts = [r#"{"a": "Hello"}"#, r#"{"a": "Mississippi"}"#];
    let vocab = Arc::new(crate::testing::shared_vocabulary("llama3"));
    let dir = std::env::temp_dir().join(format!("propertok-slice-contents-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let compiler = || Compiler::new(vocab.clone(), Limits::default()).with_cache_dir(Some(dir.clone()));
    let masks = |compiler: &Compiler| -> Vec<Vec<Vec<u32>>> {
        let mut all = Vec::new();
        for regex in regexes {
            let lazy = compiler.compile_regex_lazy(regex).unwrap();
            for text in texts {
                let walk = spelling(&lazy, text.as_bytes(), lazy.initial_state()).expect("the guide spells it");
                all.push(masks_along(&lazy, &walk));
            }
        }
        all
    };
    let first = compiler();
    let want = masks(&first);
    let (walked, _) = first.slice_sets_made().unwrap();
    let slice_dir = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let files_of = |extension: &str| -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = (std::fs::read_dir(&slice_dir).unwrap().map(|e| e.unwrap().path()))
            .filter(|p| p.extension().unwrap() == extension)
            .collect();
        files.sort();
        files
    };
    let (keys, contents) = (files_of("bin"), files_of("set"));
    assert_eq!(keys.len(), walked);
    assert!(contents.len() < keys.len(), "{} contents for {} keys", contents.len(), keys.len());

    let second = compiler();
    assert!(masks(&second) == want, "masks from shared contents differ");
    assert_eq!(second.slice_sets_made(), Some((0, walked)));
    assert_eq!(second.slice_set_contents_read(), Some(contents.len()), "each file read once");
    // Read sets are used where they lie in their mapped files (`crate::util::u32_storage`);
    // walked ones are not.
    let parts = |c: &Compiler| c.lazy_parts().unwrap().slices.sets_mapped();
    assert_eq!(parts(&second), (contents.len(), contents.len()), "every set read is mapped");
    let (mapped, held) = parts(&first);
    assert!(mapped == 0 && held > 0, "{held} walked sets, {mapped} of them mapped");
    // Files are only ever edited in place below, by this test: no compiler that mapped them is
    // left (the maps' contract).
    drop((first, second));

    // Contents cut short: refused; the sets naming them are walked and the file written whole.
    let bytes = std::fs::read(&contents[0]).unwrap();
    std::fs::write(&contents[0], &bytes[..bytes.len() - 1]).unwrap();
    let third = compiler();
    assert!(masks(&third) == want, "masks after damaged contents differ");
    let (walked_again, _) = third.slice_sets_made().unwrap();
    assert!(walked_again >= 1, "the damaged contents' sets are walked");
    assert_eq!(std::fs::read(&contents[0]).unwrap(), bytes, "written again whole");
    drop(third);

    // Other contents under a set's name: compared and found different, so the set takes the
    // next name (two files), and every key still reads its own set.
    let largest = contents.iter().max_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
    let smallest = contents.iter().min_by_key(|p| std::fs::metadata(p).unwrap().len()).unwrap();
    assert_ne!(largest, smallest);
    std::fs::copy(smallest, largest).unwrap();
    for key in &keys {
        std::fs::remove_file(key).unwrap();
    }
    let fourth = compiler();
    assert!(masks(&fourth) == want, "masks beside other contents under a set's name differ");
    assert_eq!(files_of("set").len(), contents.len() + 1, "the displaced set under the next name");
    let fifth = compiler();
    assert!(masks(&fifth) == want, "masks read beside other contents under a set's name differ");
    assert_eq!(fifth.slice_sets_made(), Some((0, walked)));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The forbidden sets a tokenizer keeps as bitsets for its lazy guides, made on first use
/// (`TokenizerParts::clear_forbidden`), clear what the tokenizer DFA's own sets clear: every
/// class of GPT-2, twice, so that the second round reads the bitsets made in the first.
#[test]
fn forbidden_sets_cached_as_bitsets_clear_the_same_tokens() {
    let compiler = Compiler::new(Arc::new(crate::testing::shared_vocabulary("gpt2")), Limits::default());
    let parts = compiler.lazy_parts().unwrap();
    let tok = &parts.tok;
    let words = crate::util::bitset::words_for(parts.vocab.vocab_size());
    let mut made = 0;
    for round in 0..2 {
        for c in 0..tok.num_classes() as u32 {
            let (mut got, mut want) = (vec![u32::MAX; words], vec![u32::MAX; words]);
            parts.clear_forbidden(c, &mut got);
            tok.clear_forbidden(c, &mut want);
            assert!(got == want, "class {c}, round {round}");
            made += (round == 0 && tok.forbidden_bits(c).is_none() && tok.forbidden(c).len() * 2 >= words) as usize;
        }
    }
    assert!(made > 0, "no class took a cached bitset");
}

/// A state of a regex determinized on demand that is a union of threads (a URL's user name
/// beside its host; an object's free keys beside a named one) takes the union of its threads'
/// first-token sets (`Engine::first_tokens_of_threads`): the masks of the lazy guide of its
/// minimal DFA, which has no threads, along random walks and spellings on GPT-2, Llama 3 and
/// Mistral-7B. Leaving a thread out of every union changes a mask.
#[test]
fn unions_of_threads_give_the_minimal_dfas_masks() {
    let regex = r#"\{"loc": "https?://([^\s:@"]+(:[^\s:@"]*)?@)?([a-zA-Z0-9.-]+\.[a-zA-Z]{2,}|localhost)(/[^\s"]*)?", ("tag": "[a-z]{1,6}"|"[^"\\]{1,12}": [0-9]{1,3})\}"#;
    let texts = [
        r#"{"loc": "https://example.com/badge1", "tag": "new"}"#,
        r#"{"loc": "http://ada:pw@localhost/a/b", "top": 42}"#,
        r#"{"loc": "https://x.y.org", "tail": 7}"#,
    ];
    for vocab in [
        Arc::new(crate::testing::shared_vocabulary("gpt2")),
        Arc::new(crate::testing::shared_vocabulary("llama3")),
        mistral(),
    ] {
        let compiler = Compiler::new(vocab, Limits::default());
        let minimal = compiler.compile_regex_lazy(regex).unwrap();
        assert!(minimal.lazy_engine().unwrap().space().dfa().as_dfa().is_some(), "no minimal DFA");
        let mut walks: Vec<Vec<u32>> = (0..8).map(|seed| minimal.random_walk(seed, 60).unwrap()).collect();
        for text in texts {
            walks.push(spelling(&minimal, text.as_bytes(), minimal.initial_state()).expect("the guide spells it"));
        }
        let on_demand = compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND).unwrap();
        assert!(on_demand.lazy_engine().unwrap().space().dfa().as_dfa().is_none(), "not determinized on demand");
        assert_same_masks(&on_demand, &minimal, &walks, regex);
        let unions = on_demand.lazy_engine().unwrap().thread_unions();
        assert!(unions > 0, "no first-token set was a union of threads");
        // The same walks on a guide whose unions leave a thread out.
        let wrong = compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND).unwrap();
        wrong.lazy_engine().unwrap().drop_a_thread();
        wrong.lazy_engine().unwrap().turn_keys_off();
        let differs = walks.iter().any(|walk| masks_along(&wrong, walk) != masks_along(&minimal, walk));
        assert!(differs, "{unions} unions, and leaving a thread out changed no mask");
    }
}

/// A union whose thread leads back to it on most bytes (`(?:(?:.)+)*` with its repeated
/// operands outlined into rules: the thread's neighbour is the union itself) is found whole, where splitting it recursed until the stack overflowed
/// (found by the `regex_guide` fuzz target, on its synthetic vocabulary): the eager masks at
/// every state.
#[test]
fn unions_whose_threads_lead_back_are_found_whole() {
    let regex = "(?:(?:.)+)*";
    let tokens = ["a", "b", "aa", "aaaa", "aaaaaa", "aaaaa", "baa"];
    let merges = [("aa", "aa"), ("aa", "aaaa"), ("a", "aaaa"), ("b", "aa")];
    let vocab = Arc::new(Vocabulary::char_bpe_for_tests(&tokens, &merges).unwrap());
    {
        let compiler = Compiler::new(vocab, Limits::default());
        let eager = compiler.compile_regex(regex, Method::Cartesian).unwrap();
        // Every state the guides reach, compared mask by mask: the DFA on demand, and the
        // repeated operands outlined into rules (where it recursed).
        let on_demand = compiler.compile_regex_lazy_with(regex, Bound::ON_DEMAND).unwrap();
        assert_eq!(on_demand.first_difference(&eager).unwrap(), None, "{regex} on demand");
        let outlined = compiler.compile_regex_lazy_outlined(regex, OutlineOptions::EVERY).unwrap();
        assert_eq!(outlined.first_difference(&eager).unwrap(), None, "{regex} outlined");
    }
}

/// `TokenizerDfa::fallback_bytes`, which a search enumerates byte-fallback successors from, is
/// the set of bytes `step_byte` takes, at every state of Mistral-7B's tokenizer DFA (classes and
/// states inside a character), as built and as read back from its cache bytes.
#[test]
fn fallback_bytes_are_the_bytes_step_byte_takes() {
    let vocab = mistral();
    let compiler = Compiler::new(vocab.clone(), Limits::default());
    let built = compiler.tokenizer_dfa().unwrap().clone();
    let read = crate::tokenizer_dfa::TokenizerDfa::from_bytes(&built.to_bytes(&vocab), &vocab).unwrap();
    let mut inside = 0;
    for tok in [&*built, &read] {
        for q in 0..tok.num_states() as u32 {
            let want: ByteSet = (0..=255u8).filter(|&b| tok.step_byte(q, b).is_some()).collect();
            assert_eq!(tok.fallback_bytes(q), want, "state {q}");
            inside += (q as usize >= tok.num_classes() && !want.is_empty()) as usize;
        }
    }
    // Both kinds of state are met: after a token, and inside a character.
    assert!(inside > 0 && !built.fallback_bytes(0).is_empty());
}
