//! Brute force: on a small synthetic tokenizer with a hand-written pre-tokenizer automaton, the
//! guide accepts exactly the canonical encodings (reference split, then priority BPE per piece,
//! with and without `ignore_merges`, with and without an NFC normalizer) of the regex's strings.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use crate::limits::Deadline;
use crate::pre_tokenizer::normal_form::{Form, NormalForm, Normalized};
use crate::pre_tokenizer::text_automaton::PieceBoundaries;
use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer_dfa::lone_tokens::lone_tokens;
use crate::tokenizer_dfa::NO_CLASS;
use unicode_normalization_alignments::UnicodeNormalization;

/// Pieces are `" ?[^ ]+"` or a single space (the tests' letters are `a`, `b`, `e`, `é` and
/// combining marks): a space joins the letters after it, so whether a
/// boundary follows a space depends on the next character.
#[derive(Clone)]
struct SpaceJoinsWord;

// States: 0 start, 1 in a word, 2 a space just began a piece, 3 marked after a word,
// 4 marked after a lone space.
impl PieceBoundaries for SpaceJoinsWord {
    fn num_stages(&self) -> usize {
        1
    }
    fn start(&self) -> u32 {
        0
    }
    fn byte(&mut self, s: u32, b: u8) -> crate::Result<u32> {
        let letter = b != b' ';
        let space = b == b' ';
        Ok(match (s, letter, space) {
            (0..=2, true, _) => 1,
            (0 | 3 | 4, _, true) => 2,
            _ => DEAD,
        })
    }
    fn mark(&mut self, s: u32, _kind: usize) -> crate::Result<u32> {
        Ok(match s {
            1 => 3,
            2 => 4,
            _ => DEAD,
        })
    }
    fn accepts_end(&mut self, s: u32) -> crate::Result<bool> {
        Ok(matches!(s, 0..=2))
    }
}

fn reference_pieces(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i] == b' ' {
            i += 1;
            if i < b.len() && b[i] != b' ' {
                while i < b.len() && b[i] != b' ' {
                    i += 1;
                }
            }
        } else {
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
        }
        out.push(&text[start..i]);
    }
    out
}

fn reference_encode(vocab: &Vocabulary, table: &MergeTable, ignore_merges: bool, text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for piece in reference_pieces(text) {
        if ignore_merges {
            if let Some(id) = vocab.token_id(piece) {
                out.push(id);
                continue;
            }
        }
        let mut symbols = Vec::new();
        if !vocab.base_symbols(piece.as_bytes(), &mut symbols) {
            return None;
        }
        table.encode(&mut symbols);
        out.extend(symbols);
    }
    Some(out)
}

fn strings(alphabet: &[char], max_len: usize) -> Vec<String> {
    let mut all = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for &c in alphabet {
                let mut t = s.clone();
                t.push(c);
                next.push(t);
            }
        }
        all.extend(next.iter().cloned());
        frontier = next;
    }
    all
}

/// Every accepted sequence spelling at most `max_bytes` bytes.
fn accepted(guide: &Guide, max_bytes: usize) -> BTreeSet<Vec<u32>> {
    let vocab = guide.vocabulary();
    let mut out = BTreeSet::new();
    let mut stack = vec![(guide.initial_state(), Vec::new(), 0usize)];
    while let Some((s, path, len)) = stack.pop() {
        if guide.is_final(s) {
            out.insert(path.clone());
        }
        for (t, to) in guide.transitions(s).unwrap() {
            let l = len + vocab.token_bytes(t).len();
            if l <= max_bytes {
                let mut p = path.clone();
                p.push(t);
                stack.push((to, p, l));
            }
        }
    }
    out
}

const TOKENS: &[&str] = &["a", "b", " ", "ab", "ba", "aa", " a", " b", " ab", "bb", "aab", "  "];
const MERGES: &[(&str, &str)] =
    &[("a", "b"), (" ", "a"), ("b", "a"), ("a", "a"), (" a", "b"), (" ", "b"), ("a", "ab"), (" ", " ")];

fn check(pattern: &str, ignore_merges: bool, alphabet: &[char], max_len: usize) {
    let lone = if ignore_merges { vec![" ab", "bb"] } else { vec![] };
    check_tokenizer(TOKENS, MERGES, None, pattern, ignore_merges, &lone, alphabet, max_len)
}

/// See [`check`]: any synthetic tokenizer (its lone tokens given), optionally normalizing.
#[allow(clippy::too_many_arguments)]
fn check_tokenizer(
    tokens: &[&str],
    merges: &[(&str, &str)],
    normal: Option<&'static NormalForm>,
    pattern: &str,
    ignore_merges: bool,
    lone: &[&str],
    alphabet: &[char],
    max_len: usize,
) {
    let vocab = Arc::new(Vocabulary::char_bpe_for_tests(tokens, merges).unwrap());
    let tok = Arc::new(TokenizerDfa::build(&vocab).unwrap());
    let want_lone = lone;
    let lone: Vec<u32> = if ignore_merges { lone_tokens(&vocab, &tok) } else { Vec::new() };
    assert_eq!(lone.iter().map(|&t| vocab.token_string(t).unwrap()).collect::<Vec<_>>(), want_lone);
    let trie = TokenTrie::new(
        (0..vocab.num_tokens() as u32)
            .filter(|&t| tok.class_of(t) != NO_CLASS || lone.contains(&t))
            .map(|t| (t, vocab.token_bytes(t))),
    );
    let splits = LoneSplits::new(&vocab, &lone);
    let dfa = ByteDfa::from_regex(pattern, 1000).unwrap();
    let limits = SearchLimits { max_states: 100_000, max_guide_bytes: 1 << 30, deadline: Deadline::none() };
    // The lazy engine over the same tables, compared with the eager build below.
    let pieces = crate::pre_tokenizer::piece_table::PieceTable::explore(&mut SpaceJoinsWord, 1000).unwrap();
    let parts = || {
        crate::lazy::TokenizerParts::new(
            vocab.clone(),
            tok.clone(),
            trie.clone(),
            splits.clone(),
            Some(Arc::new(pieces.clone())),
            ContentTrie::default(),
            normal,
            &lone,
            None,
        )
        .unwrap()
    };
    let lazy =
        crate::guide::lazy::LazyGuide::compile(Arc::new(parts()), dfa.clone(), Vec::new(), crate::Limits::default())
            .unwrap();
    let unsliced = Arc::new(parts().without_slices());
    let unsliced =
        crate::guide::lazy::LazyGuide::compile(unsliced, dfa.clone(), Vec::new(), crate::Limits::default()).unwrap();
    assert_eq!(unsliced.first_difference(&lazy), Ok(None), "{pattern}: with and without slices");
    let machine = Normalized::new(SpaceJoinsWord, normal);
    let tables = PreTokenizedTables { machine, contents: ContentTrie::default(), splits, trie };
    let guide = build(&vocab, &tok, &tables, dfa.clone(), &limits).unwrap();
    assert_eq!(guide.first_difference(&lazy), Ok(None), "{pattern}: eager and lazy");
    // A saved guide loads as the same automaton; corruption is refused.
    let bytes = crate::guide::io::guide_to_bytes(&guide).unwrap();
    let back = crate::guide::io::guide_from_bytes(&bytes, &vocab, || Ok(tok.clone())).unwrap();
    assert_eq!(guide.first_difference(&back), Ok(None), "{pattern}: round trip");
    for i in (0..bytes.len()).step_by(97) {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(crate::guide::io::guide_from_bytes(&b, &vocab, || Ok(tok.clone())).is_err(), "flip at {i}");
    }
    // Masks and steps agree: a token is in the mask exactly when it has a target.
    for st in 0..guide.num_states() as u32 {
        let allowed = guide.allowed_tokens(st).unwrap();
        for t in 0..vocab.num_tokens() as u32 {
            assert_eq!(
                allowed.contains(&t),
                guide.step(st, t).unwrap().is_some(),
                "{pattern}: mask and step disagree on {:?} in state {st}",
                vocab.token_string(t)
            );
        }
    }
    let table = MergeTable::new(vocab.merges());
    let want: BTreeSet<Vec<u32>> = strings(alphabet, max_len)
        .iter()
        .filter(|s| dfa.matches(s.as_bytes()))
        // The tokenizer encodes the normalized text: no sequence spells another text.
        .filter(|s| normal.is_none() || s.nfc().map(|(c, _)| c).eq(s.chars()))
        .filter_map(|s| reference_encode(&vocab, &table, ignore_merges, s))
        .collect();
    // Sequences of at most `max_len` characters (`accepted` bounds bytes).
    let widest = alphabet.iter().map(|c| c.len_utf8()).max().unwrap_or(1);
    let within = |guide: &Guide| -> BTreeSet<Vec<u32>> {
        accepted(guide, widest * max_len)
            .into_iter()
            .filter(|ids| {
                let text: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
                String::from_utf8_lossy(&text).chars().count() <= max_len
            })
            .collect()
    };
    let got = within(&guide);
    assert_eq!(within(&lazy), got, "{pattern}: the lazy guide's language");
    let show =
        |v: &Vec<u32>| v.iter().map(|&t| format!("{:?}", vocab.token_string(t).unwrap())).collect::<Vec<_>>().join(" ");
    let missing: Vec<String> = want.difference(&got).take(10).map(show).collect();
    let extra: Vec<String> = got.difference(&want).take(10).map(show).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{pattern} (ignore_merges={ignore_merges}): missing {missing:?}, extra {extra:?}"
    );
    // Every state can finish, and masks agree with steps.
    assert!(want.len() > 5, "{pattern}: too few strings to be a test");
    for s in 0..guide.num_states() as u32 {
        assert!(guide.shortest_path_to_final(s).unwrap().is_some(), "state {s} cannot finish");
    }
}

#[test]
fn brute_force_equals_reference_encoding() {
    for ignore_merges in [false, true] {
        check("[ab ]{0,6}", ignore_merges, &['a', 'b', ' '], 6);
        check("( ?[ab]+)+", ignore_merges, &['a', 'b', ' '], 6);
        check("a* b*|bb|  +b", ignore_merges, &['a', 'b', ' '], 6);
        check("(ab| |bb)*", ignore_merges, &['a', 'b', ' '], 7);
        // Loops on every character, and counts of them: the `.*` slice's groups stand in for a
        // full walk.
        check(".*", ignore_merges, &['a', 'b', ' '], 6);
        check("(a|b ).*", ignore_merges, &['a', 'b', ' '], 6);
        check("a.{0,4}|b.{2,3}", ignore_merges, &['a', 'b', ' '], 6);
    }
}

/// Letters and combining marks under NFC (the normal form over the pieces, as guides use it):
/// `é` has one spelling, marks stay only in canonical order and where they do not compose (the
/// dot below after `é` would), and the tokens that spell text NFC changes (`e` + acute, acute +
/// dot below, `é` + dot below) are never used. With `.*` the slice's groups stand in for a walk.
#[test]
fn brute_force_with_a_normalizer_equals_reference_encoding() {
    const TOKENS_NFC: &[&str] = &[
        "a",
        "e",
        "é",
        "\u{301}",
        "\u{323}",
        " ",
        "ae",
        " e",
        " é",
        "e\u{301}",
        "\u{301}\u{323}",
        "e\u{323}",
        "é\u{323}",
    ];
    const MERGES_NFC: &[(&str, &str)] = &[
        ("a", "e"),
        (" ", "e"),
        (" ", "é"),
        ("e", "\u{301}"),
        ("\u{301}", "\u{323}"),
        ("e", "\u{323}"),
        ("é", "\u{323}"),
    ];
    let nfc = Some(NormalForm::get(Form::Nfc));
    let alphabet = ['a', 'e', 'é', '\u{301}', '\u{323}', ' '];
    for pattern in [".*", "[ae ]+\u{323}?\u{301}?", "(e|a|\u{301}|\u{323}| )*", "a.{0,3}"] {
        check_tokenizer(TOKENS_NFC, MERGES_NFC, nfc, pattern, false, &[], &alphabet, 4);
    }
}

/// The reference for stages after `ByteLevel` (Falcon's `Digits` then `Split([0-9]{3})`),
/// written over bytes without the pre-tokenizer's automaton: runs of digit bytes (ASCII digits
/// and the continuation bytes whose stand-ins are numeric, `²³¹¼½¾`) and of other bytes, then
/// leftmost groups of three ASCII digits cut out of each run.
fn byte_mapped_pieces(piece: &[u8]) -> Vec<&[u8]> {
    let digit = |b: u8| b.is_ascii_digit() || [0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE].contains(&b);
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=piece.len() {
        if i == piece.len() || digit(piece[i]) != digit(piece[i - 1]) {
            runs.push(&piece[start..i]);
            start = i;
        }
    }
    let mut out = Vec::new();
    for run in runs {
        let (mut gap, mut i) = (0, 0);
        while i < run.len() {
            if i + 3 <= run.len() && run[i..i + 3].iter().all(u8::is_ascii_digit) {
                if gap < i {
                    out.push(&run[gap..i]);
                }
                out.push(&run[i..i + 3]);
                i += 3;
                gap = i;
            } else {
                i += 1;
            }
        }
        if gap < run.len() {
            out.push(&run[gap..]);
        }
    }
    out
}

/// A byte-level tokenizer whose pre-tokenizer has Falcon's stages after `ByteLevel`: `ü`
/// (`C3 BC`) and `²` (`C2 B2`) are cut inside, `1111` is `111` + `1`. Eager, lazy and the
/// reference encoding (split above, then priority BPE per piece) give the same language.
#[test]
fn brute_force_with_byte_mapped_stages_equals_reference_encoding() {
    use crate::compiler::Compiler;
    use crate::tokenizer::vocab::byte_to_unicode_table;
    let map = byte_to_unicode_table();
    let spell = |bytes: &[u8]| bytes.iter().map(|&b| map[b as usize]).collect::<String>();
    let base: &[&[u8]] = &[b"a", b"1", b" ", b"\xC3", b"\xBC", b"\xC2", b"\xB2"];
    let merges: &[(&[u8], &[u8])] = &[
        (b"a", b"\xC3"),
        (b"\xBC", b"1"),
        (b"1", b"1"),
        (b" ", b"a"),
        (b"\xC3", b"\xBC"),
        (b"\xC2", b"\xB2"),
        (b"11", b"1"),
        (b" ", b"1"),
        (b"a", b"1"),
        (b"\xB2", b"1"),
    ];
    let mut tokens: Vec<Vec<u8>> = base.iter().map(|b| b.to_vec()).collect();
    tokens.extend(merges.iter().map(|(l, r)| [*l, *r].concat()));
    let vocab_json: serde_json::Map<String, serde_json::Value> =
        tokens.iter().enumerate().map(|(i, t)| (spell(t), i.into())).collect();
    let json = serde_json::json!({
        "added_tokens": [{"id": tokens.len(), "content": "</s>", "special": true}],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": " ?[^ ]+| "}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
            {"type": "Digits", "individual_digits": false},
            {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": false},
        ]},
        "model": {"type": "BPE", "vocab": vocab_json,
                  "merges": merges.iter().map(|(l, r)| [spell(l), spell(r)]).collect::<Vec<_>>()},
    });
    let vocab = Arc::new(Vocabulary::from_json(&json.to_string(), None, None).unwrap());
    assert_eq!(vocab.canonical_unsupported_reason(), None);
    assert_eq!(vocab.pre_tokenizer().unwrap().byte_mapped_stages, [r"\p{N}+", "[0-9][0-9][0-9]"]);
    let table = MergeTable::new(vocab.merges());
    let encode = |text: &str| -> Vec<u32> {
        let mut out = Vec::new();
        for piece in reference_pieces(text) {
            for bytes in byte_mapped_pieces(piece.as_bytes()) {
                let mut symbols = Vec::new();
                assert!(vocab.base_symbols(bytes, &mut symbols), "{text:?}");
                table.encode(&mut symbols);
                out.extend(symbols);
            }
        }
        out
    };
    let id = |bytes: &[u8]| tokens.iter().position(|t| t == bytes).unwrap() as u32;
    assert_eq!(encode("aü"), [id(b"a\xC3"), id(b"\xBC")]);
    assert_eq!(encode("²1111"), [id(b"\xC2"), id(b"\xB2"), id(b"111"), id(b"1")]);
    let compiler = Compiler::new(vocab.clone(), crate::Limits::default());
    let alphabet = ['a', '1', ' ', 'ü', '²'];
    for pattern in [".*", "[a ]*ü?1{0,5}", "(a|ü|²|1)* 1*", "²?1{2,4}|a.{0,3}"] {
        let eager = compiler.compile_regex(pattern, crate::guide::Method::Cartesian).unwrap();
        let lazy = compiler.compile_regex_lazy(pattern).unwrap();
        assert_eq!(eager.first_difference(&lazy), Ok(None), "{pattern}: eager and lazy");
        let dfa = ByteDfa::from_regex(pattern, 1000).unwrap();
        let want: BTreeSet<Vec<u32>> =
            strings(&alphabet, 4).iter().filter(|s| dfa.matches(s.as_bytes())).map(|s| encode(s)).collect();
        let got: BTreeSet<Vec<u32>> = accepted(&eager, 8)
            .into_iter()
            .filter(|ids| {
                // (the tokens also spell `¼` = C2 BC and `ò` = C3 B2, outside the alphabet)
                let text: Vec<u8> = ids.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
                String::from_utf8(text)
                    .is_ok_and(|t| t.chars().count() <= 4 && t.chars().all(|c| alphabet.contains(&c)))
            })
            .collect();
        assert!(want.len() > 5, "{pattern}: too few strings to be a test");
        let missing: Vec<_> = want.difference(&got).take(5).collect();
        let extra: Vec<_> = got.difference(&want).take(5).collect();
        assert!(missing.is_empty() && extra.is_empty(), "{pattern}: missing {missing:?}, extra {extra:?}");
    }
}
