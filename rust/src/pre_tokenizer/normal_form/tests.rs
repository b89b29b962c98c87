use unicode_normalization_alignments::UnicodeNormalization;

use super::*;
use crate::util::random::SplitMix64;

/// What Hugging Face's normalizer does: `text` is normalized iff normalizing leaves it unchanged.
fn reference(form: Form, text: &str) -> bool {
    match form {
        Form::Nfc => text.nfc().map(|(c, _)| c).eq(text.chars()),
        Form::Nfkc => text.nfkc().map(|(c, _)| c).eq(text.chars()),
    }
}

/// Starters, marks and the composition corner cases: Latin with stacked accents, Hangul jamo and
/// syllables, Indic nukta, virama and length marks, Thai tone marks, Hebrew points, Arabic
/// harakat, excluded composites, singletons, compatibility characters.
const ALPHABET: &[char] = &[
    'a', 'e', 'o', 'q', ' ', '"', 'é', 'ẹ', 'Å', '\u{212B}', '\u{0300}', '\u{0301}', '\u{0302}', '\u{0308}',
    '\u{0323}', '\u{0327}', '\u{0344}', '\u{0340}', '\u{1100}', '\u{1161}', '\u{11A8}', '\u{AC00}', '\u{AC01}',
    '\u{0928}', '\u{093C}', '\u{0929}', '\u{0958}', '\u{094D}', '\u{0915}', '\u{0BC6}', '\u{0BBE}', '\u{0BD7}',
    '\u{0BCA}', '\u{0B95}', '\u{0E01}', '\u{0E48}', '\u{0E49}', '\u{0E31}', '\u{05E9}', '\u{05C1}', '\u{05B8}',
    '\u{05BC}', '\u{0628}', '\u{0650}', '\u{0652}', '\u{0651}', '\u{FB01}', '\u{2460}', '\u{1E9B}', '\u{017F}',
];

#[test]
fn every_short_string_over_the_corner_cases_is_judged_as_the_normalizer_does() {
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        let mut checked = [0usize; 2];
        let mut text = String::new();
        for &a in ALPHABET {
            for &b in std::iter::once(&'\0').chain(ALPHABET) {
                for &c in std::iter::once(&'\0').chain(ALPHABET) {
                    text.clear();
                    text.extend([a, b, c].into_iter().filter(|&x| x != '\0'));
                    let expected = reference(form, &text);
                    assert_eq!(
                        nf.is_normalized(&text),
                        expected,
                        "{form:?} {text:?} ({:?})",
                        text.chars().collect::<Vec<_>>()
                    );
                    checked[expected as usize] += 1;
                }
            }
        }
        // Both answers occur often: the comparison is not vacuous.
        assert!(checked[0] > 10_000 && checked[1] > 10_000, "{form:?}: {checked:?}");
    }
}

#[test]
fn random_strings_weighted_to_marks_are_judged_as_the_normalizer_does() {
    // Every mark (ccc > 0 or a composition's second half) and a sample of starters.
    let marks: Vec<char> = (0..=0x10FFFFu32)
        .filter_map(char::from_u32)
        .filter(|&c| ccc(c) > 0 || (0x1161..=0x11C2).contains(&(c as u32)))
        .collect();
    let starters: Vec<char> =
        "aeiouyAEOUcnszgkrw ẹéêơưÅ가각\u{1100}\u{0928}\u{0915}\u{0BC6}\u{0B92}\u{0E01}\u{05D0}\u{0628}"
            .chars()
            .collect();
    let mut rng = SplitMix64::new(7);
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        let mut yes = 0;
        for _ in 0..200_000 {
            let len = 1 + rng.below(6);
            let text: String = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        starters[rng.below(starters.len())]
                    } else {
                        marks[rng.below(marks.len())]
                    }
                })
                .collect();
            let expected = reference(form, &text);
            yes += expected as usize;
            assert_eq!(nf.is_normalized(&text), expected, "{form:?} {:?}", text.chars().collect::<Vec<_>>());
        }
        assert!(yes > 20_000, "{form:?}: only {yes} normalized samples");
    }
}

#[test]
fn every_single_character_and_every_composition_pair_is_judged_as_the_normalizer_does() {
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let mut buf = [0u8; 4];
            let s = c.encode_utf8(&mut buf);
            assert_eq!(nf.is_normalized(s), reference(form, s), "{form:?} U+{:04X}", c as u32);
        }
        // Every composite's decomposition, written out: the pair must be refused.
        for p in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s: String = std::iter::once(p).nfd().map(|(c, _)| c).collect();
            if s.chars().count() > 1 {
                assert_eq!(nf.is_normalized(&s), reference(form, &s), "{form:?} NFD of U+{:04X}", p as u32);
            }
        }
    }
}

#[test]
fn the_dfa_is_small() {
    for form in [Form::Nfc, Form::Nfkc] {
        let started = std::time::Instant::now();
        let nf = NormalForm::build(form);
        let (classes, states) = (nf.num_classes(), nf.num_states());
        let prefixes = nf.num_prefixes();
        eprintln!(
            "{form:?}: {classes} classes, {states} states, {prefixes} prefixes, built in {:?}",
            started.elapsed()
        );
        assert!(prefixes < 1 << 16, "{form:?}: {prefixes} prefixes");
        assert!(classes < 1_000 && states < 1 << 13, "{form:?}: {classes} classes, {states} states");
    }
}

/// Byte by byte (as guides walk text), the DFA agrees with the normalizer, and a text that is not
/// UTF-8 dies.
#[test]
fn bytes_are_judged_as_the_normalizer_judges_their_text() {
    let pool: Vec<char> =
        ALPHABET.iter().copied().chain("中文字日本語한국어😀\u{10FFFF}\u{E000}\u{FFFD}".chars()).collect();
    let mut rng = SplitMix64::new(11);
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        for _ in 0..50_000 {
            let text: String = (0..1 + rng.below(5)).map(|_| pool[rng.below(pool.len())]).collect();
            let mut state = Some((NormalForm::START, 0));
            for &b in text.as_bytes() {
                state = state.and_then(|(s, p)| nf.byte(s, p, b));
            }
            let by_bytes = state.is_some_and(|(_, partial)| partial == 0);
            assert_eq!(by_bytes, reference(form, &text), "{form:?} {text:?}");
        }
        // Bytes that are not UTF-8: continuation first, overlong, surrogate, past U+10FFFF.
        for bad in [&[0x80u8][..], &[0xC0, 0x80], &[0xE0, 0x80, 0x80], &[0xED, 0xA0, 0x80], &[0xF4, 0x90, 0x80, 0x80]] {
            let mut state = Some((NormalForm::START, 0));
            for &b in bad {
                state = state.and_then(|(s, p)| nf.byte(s, p, b));
            }
            assert!(state.is_none_or(|(_, partial)| partial != 0), "{bad:?}");
        }
    }
}

/// Whether every string `small`'s state continues with (a string it keeps normalized) also
/// keeps `big`'s normalized: a walk over the pairs of states both reach on the same characters
/// (every live state accepts, so only dying matters).
fn continues_within(nf: &NormalForm, small: u32, big: u32, seen: &mut rustc_hash::FxHashSet<(u32, u32)>) -> bool {
    let mut todo = vec![(small, big)];
    seen.insert((small, big));
    while let Some((s, b)) = todo.pop() {
        for class in 0..nf.num_classes() as u32 {
            let (s2, b2) = (nf.step(s, class), nf.step(b, class));
            if s2 == DEAD {
                continue;
            }
            if b2 == DEAD {
                return false;
            }
            if seen.insert((s2, b2)) {
                todo.push((s2, b2));
            }
        }
    }
    true
}

/// What `NormalForm::inert_only` promises lazy guides: its language is within every state's, and
/// every state's within the start's.
#[test]
fn the_inert_only_state_continues_within_every_state_and_every_state_within_the_start() {
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        let mut seen = rustc_hash::FxHashSet::default();
        for f in 0..nf.num_states() as u32 {
            assert!(continues_within(nf, f, NormalForm::START, &mut seen), "{form:?}: state {f} not within the start");
        }
        let mut seen = rustc_hash::FxHashSet::default();
        for f in 0..nf.num_states() as u32 {
            assert!(continues_within(nf, nf.inert_only(), f, &mut seen), "{form:?}: inert-only not within state {f}");
        }
        // It is not the start: it refuses a text's leading mark, which the start takes.
        let acute = nf.class_of_code_point(0x301);
        assert_ne!(nf.step(NormalForm::START, acute), DEAD);
        assert_eq!(nf.step(nf.inert_only(), acute), DEAD);
    }
}

/// The two facts behind `NormalForm::inert_only`, asked of the normalizer itself: a normalized
/// text's suffix after a character is normalized, and a normalized text that starts with an
/// inert character stays normalized after any normalized text.
#[test]
fn suffixes_and_inert_starts_keep_text_normalized_by_the_normalizer() {
    let mut rng = SplitMix64::new(17);
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        let (mut suffixes, mut joined) = (0, 0);
        for _ in 0..100_000 {
            let pick = |rng: &mut SplitMix64| -> String {
                (0..rng.below(4)).map(|_| ALPHABET[rng.below(ALPHABET.len())]).collect()
            };
            let (head, tail) = (pick(&mut rng), pick(&mut rng));
            let whole = format!("{head}{tail}");
            if reference(form, &whole) {
                suffixes += 1;
                assert!(reference(form, &tail), "{form:?}: {whole:?} normalized, its suffix {tail:?} not");
            }
            if reference(form, &head)
                && reference(form, &tail)
                && tail.chars().next().is_some_and(|c| nf.is_inert(c as u32))
            {
                joined += 1;
                assert!(reference(form, &whole), "{form:?}: {head:?} and {tail:?} normalized, {whole:?} not");
            }
        }
        assert!(suffixes > 10_000 && joined > 10_000, "{form:?}: {suffixes} suffixes and {joined} joins checked");
    }
}

/// `NormalForm::forgets_state_after` against its definition, read off the table: a byte that
/// completes a character forgets the state when every state goes to one same state on that
/// character; a lead byte when every character it may begin does. All of ASCII and of the
/// two-byte characters (the combining marks among them), and a CJK lead byte.
#[test]
fn a_byte_forgets_the_state_where_every_state_goes_on_alike() {
    for form in [Form::Nfc, Form::Nfkc] {
        let nf = NormalForm::get(form);
        let alike = |cp: u32| {
            let class = nf.class_of_code_point(cp);
            (0..nf.num_states() as u32).all(|s| nf.step(s, class) == nf.step(NormalForm::START, class))
        };
        for b in 0..0x80u8 {
            assert_eq!(nf.forgets_state_after(0, b), alike(b as u32), "{form:?} {b:#x}");
        }
        for lead in 0xC2..=0xDFu8 {
            let chars: Vec<u32> = (0..64).map(|low| ((lead as u32 & 0x1F) << 6) | low).collect();
            assert_eq!(nf.forgets_state_after(0, lead), chars.iter().all(|&c| alike(c)), "{form:?} lead {lead:#x}");
            let (_, partial) = nf.byte(NormalForm::START, 0, lead).unwrap();
            for &c in &chars {
                let last = 0x80 | (c & 0x3F) as u8;
                assert_eq!(nf.forgets_state_after(partial, last), alike(c), "{form:?} U+{c:04X}");
            }
        }
        // A combining acute's lead byte remembers the state; a CJK ideograph's does not.
        assert!(!nf.forgets_state_after(0, 0xCC));
        assert!(nf.forgets_state_after(0, 0xE4));
    }
}

/// Whether `a` and `b` are the same normal form, field by field (the classes by their runs).
fn same_normal_form(a: &NormalForm, b: &NormalForm) -> bool {
    a.classes.run_starts_and_ids() == b.classes.run_starts_and_ids()
        && a.classes.num_classes() == b.classes.num_classes()
        && a.bmp == b.bmp
        && a.table == b.table
        && a.num_states == b.num_states
        && a.inert == b.inert
        && a.uniform == b.uniform
        && a.prefixes.lead == b.prefixes.lead
        && a.prefixes.next == b.prefixes.next
        && a.prefixes.last == b.prefixes.last
        && a.prefixes.uniform == b.prefixes.uniform
}

fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("propertok-normal-form-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_kept_normal_form_reads_back_as_built() {
    let dir = scratch_dir("kept");
    for form in [Form::Nfc, Form::Nfkc] {
        let built = NormalForm::build(form);
        let path = cache::path(&dir, form);
        cache::write_file(&built, &path, form).unwrap();
        let read = cache::read_file(&path, form).unwrap();
        assert!(same_normal_form(&built, &read), "{form:?}");
        // Both forms are kept apart: one's file is refused as the other's.
        let other = if form == Form::Nfc { Form::Nfkc } else { Form::Nfc };
        assert!(cache::read_file(&path, other).is_err(), "{form:?} read as {other:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_normal_form_file_is_refused_and_a_missing_one_kept_again() {
    let dir = scratch_dir("damaged");
    let form = Form::Nfc;
    let path = cache::path(&dir, form);
    // The process's copy (built here or by another test) is written where none is kept.
    let nf = NormalForm::get_cached(form, Some(&dir));
    assert!(same_normal_form(nf, &cache::read_file(&path, form).unwrap()));
    let good = std::fs::read(&path).unwrap();
    for (what, bytes) in [
        ("a flipped payload byte", {
            let mut b = good.clone();
            let at = b.len() / 2;
            b[at] ^= 0x10;
            b
        }),
        ("truncated", good[..good.len() - 7].to_vec()),
        ("header only", good[..40].to_vec()),
        ("empty", Vec::new()),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache::read_file(&path, form).is_err(), "{what}");
    }
    std::fs::remove_file(&path).unwrap();
    assert!(std::ptr::eq(NormalForm::get_cached(form, Some(&dir)), nf), "one copy per process");
    assert_eq!(std::fs::read(&path).unwrap(), good, "kept again, byte for byte");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_whose_checksum_holds_but_whose_table_does_not_is_refused() {
    // Re-sealed with a valid checksum: only the load's own checks stand between these and a
    // panic or a wrong answer.
    use crate::util::serialize::{Sink, Writer};
    let dir = scratch_dir("checked");
    let form = Form::Nfkc;
    let nf = NormalForm::get(form);
    let (starts, ids) = nf.classes.run_starts_and_ids();
    let n = nf.classes.num_classes();
    let table = &nf.table[..nf.num_states * n];
    let seal = |n: u32, states: u32, starts: &[u32], ids: &[u32], table: &[u32]| {
        let mut w = Writer::default();
        w.u32(n);
        w.u32(states);
        w.u32s(starts);
        w.u32s(ids);
        w.u32s(table);
        w.finish(b"NFRM", 1, cache::fingerprint(form))
    };
    let path = cache::path(&dir, form);
    std::fs::write(&path, seal(n as u32, nf.num_states as u32, starts, ids, table)).unwrap();
    assert!(same_normal_form(nf, &cache::read_file(&path, form).unwrap()), "the honest file reads");
    let mut bad_target = table.to_vec();
    bad_target[3] = nf.num_states as u32;
    let mut bad_class = ids.to_vec();
    bad_class[1] = n as u32;
    let mut unordered = starts.to_vec();
    unordered.swap(1, 2);
    for (what, bytes) in [
        ("a transition past the states", seal(n as u32, nf.num_states as u32, starts, ids, &bad_target)),
        ("a class id past the classes", seal(n as u32, nf.num_states as u32, starts, &bad_class, table)),
        ("runs out of order", seal(n as u32, nf.num_states as u32, &unordered, ids, table)),
        ("a table of another size", seal(n as u32, nf.num_states as u32 + 1, starts, ids, table)),
        ("no classes", seal(0, nf.num_states as u32, starts, ids, table)),
    ] {
        std::fs::write(&path, bytes).unwrap();
        assert!(cache::read_file(&path, form).is_err(), "{what}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
