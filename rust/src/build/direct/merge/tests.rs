//! DirectMerge's tests: the blog's examples, every case of the merge rewrite (distinct and same
//! tokens, chains, conflicts), limits and bad inputs, and random tables against the reference
//! sequential tokenizer.

use std::collections::BTreeSet;

use super::*;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::util::random::SplitMix64;

const BIG: TokenDfaLimits = TokenDfaLimits { max_states: 100_000, max_transitions: 1_000_000 };

/// A tokenizer for tests: tokens are strings over a small alphabet of single characters
/// (ids `0..alphabet`), merged tokens get ids by their string, so one token made by two
/// merges has one id, as in a real table.
struct Table {
    names: Vec<String>,
    merges: Vec<Merge>,
}

impl Table {
    fn new(alphabet: &str, merges: &[(&str, &str)]) -> Table {
        let mut t = Table { names: alphabet.chars().map(String::from).collect(), merges: Vec::new() };
        for &(l, r) in merges {
            let (left, right) = (t.id(l), t.id(r));
            let merged = t.id(&format!("{l}{r}"));
            t.merges.push(Merge { left, right, merged });
        }
        t
    }

    /// The id of a token string, created if new.
    fn id(&mut self, s: &str) -> u32 {
        match self.names.iter().position(|n| n == s) {
            Some(i) => i as u32,
            None => {
                self.names.push(s.to_string());
                self.names.len() as u32 - 1
            }
        }
    }

    fn symbol(&self, c: char) -> u32 {
        self.names.iter().position(|n| n.len() == 1 && n.starts_with(c)).expect("base symbol") as u32
    }

    fn symbols(&self, s: &str) -> Vec<u32> {
        s.chars().map(|c| self.symbol(c)).collect()
    }

    fn show(&self, seq: &[u32]) -> String {
        seq.iter().map(|&t| self.names[t as usize].as_str()).collect::<Vec<_>>().join(" ")
    }

    fn tokenize_str(&self, s: &str) -> Vec<u32> {
        tokenize(&self.symbols(s), &self.merges)
    }
}

/// The appendix's `tokenize`: each merge in rank order, as one left-to-right pass over the
/// whole sequence (`merge_{a,b}`).
fn tokenize(symbols: &[u32], merges: &[Merge]) -> Vec<u32> {
    let mut seq = symbols.to_vec();
    for m in merges {
        let mut out = Vec::with_capacity(seq.len());
        let mut i = 0;
        while i < seq.len() {
            if i + 1 < seq.len() && seq[i] == m.left && seq[i + 1] == m.right {
                out.push(m.merged);
                i += 2;
            } else {
                out.push(seq[i]);
                i += 1;
            }
        }
        seq = out;
    }
    seq
}

/// The base-symbol DFA of `regex` over the table's alphabet (full match).
fn base_dfa_for_tests(regex: &str, table: &Table) -> TokenDfa {
    let byte_dfa = ByteDfa::from_regex(regex, 10_000).expect("regex compiles");
    let alphabet: Vec<(u8, u32)> = table
        .names
        .iter()
        .enumerate()
        .filter(|(_, n)| n.len() == 1)
        .map(|(i, n)| (n.as_bytes()[0], i as u32))
        .collect();
    let mut index: FxHashMap<u32, u32> = FxHashMap::default();
    let mut states = vec![byte_dfa.start()];
    index.insert(byte_dfa.start(), 0);
    let mut transitions = Vec::new();
    let mut i = 0;
    while i < states.len() {
        let q = states[i];
        i += 1;
        let mut tr = Vec::new();
        for &(byte, sym) in &alphabet {
            let to = byte_dfa.next(q, byte);
            if to == DEAD {
                continue;
            }
            let id = *index.entry(to).or_insert_with(|| {
                states.push(to);
                states.len() as u32 - 1
            });
            tr.push((sym, id));
        }
        tr.sort_unstable();
        transitions.push(tr);
    }
    let accepting = states.iter().map(|&q| byte_dfa.is_accepting(q)).collect();
    TokenDfa { start: 0, accepting, transitions }.trim()
}

/// A base-symbol DFA from explicit `(from, symbol, to)` edges, not trimmed.
fn explicit_dfa_for_tests(num_states: usize, start: u32, accepting: &[u32], edges: &[(u32, u32, u32)]) -> TokenDfa {
    let mut transitions = vec![Vec::new(); num_states];
    for &(p, t, q) in edges {
        transitions[p as usize].push((t, q));
    }
    for tr in &mut transitions {
        tr.sort_unstable();
        tr.dedup_by_key(|e| e.0);
    }
    let mut acc = vec![false; num_states];
    for &s in accepting {
        acc[s as usize] = true;
    }
    TokenDfa { start, accepting: acc, transitions }
}

/// The symbol strings of length `<= max_len` that `dfa` accepts.
fn accepted_strings(dfa: &TokenDfa, max_len: usize) -> Vec<Vec<u32>> {
    let mut found = Vec::new();
    if dfa.num_states() == 0 {
        return found;
    }
    let mut stack = vec![(dfa.start, Vec::new())];
    while let Some((s, w)) = stack.pop() {
        if dfa.accepting[s as usize] {
            found.push(w.clone());
        }
        if w.len() < max_len {
            for &(t, q) in &dfa.transitions[s as usize] {
                let mut w2 = w.clone();
                w2.push(t);
                stack.push((q, w2));
            }
        }
    }
    found
}

/// The most base symbols each token can stand for under sequential passes (1 for ids no
/// merge produces). Equal to the text length for a consistent table; for tables whose ids
/// collide (a merge producing a base symbol's id) it bounds every expansion.
fn max_expansion(merges: &[Merge]) -> FxHashMap<u32, usize> {
    let mut len: FxHashMap<u32, usize> = FxHashMap::default();
    for m in merges {
        let l = len.get(&m.left).copied().unwrap_or(1) + len.get(&m.right).copied().unwrap_or(1);
        let e = len.entry(m.merged).or_insert(1);
        *e = (*e).max(l);
    }
    len
}

/// The token sequences accepted by `dfa` that can stand for at most `max_len` symbols.
fn accepted_sequences(dfa: &TokenDfa, merges: &[Merge], max_len: usize) -> BTreeSet<Vec<u32>> {
    let len = max_expansion(merges);
    let mut found = BTreeSet::new();
    if dfa.num_states() == 0 {
        return found;
    }
    let mut stack = vec![(dfa.start, Vec::new(), 0usize)];
    while let Some((s, w, used)) = stack.pop() {
        if dfa.accepting[s as usize] {
            assert!(found.insert(w.clone()), "accepted twice: the output is not deterministic");
        }
        for &(t, q) in &dfa.transitions[s as usize] {
            let l = used + len.get(&t).copied().unwrap_or(1);
            if l <= max_len {
                let mut w2 = w.clone();
                w2.push(t);
                stack.push((q, w2, l));
            }
        }
    }
    found
}

/// Structural promises of the output: well-formed, deterministic, trimmed.
fn check_shape(out: &TokenDfa) {
    assert_eq!(out.accepting.len(), out.transitions.len());
    if out.num_states() == 0 {
        return;
    }
    assert_eq!(out.start, 0);
    for tr in &out.transitions {
        assert!(tr.windows(2).all(|w| w[0].0 < w[1].0), "transitions not strictly sorted");
        assert!(tr.iter().all(|e| (e.1 as usize) < out.num_states()));
    }
    assert_eq!(&out.trim(), out, "the output has irrelevant states");
}

/// Runs DirectMerge on `dfa` and compares with brute force up to `max_len` symbols:
/// `tokenize(w)` must be accepted for every `w` of `L` with `|w| <= max_len` (complete),
/// and every accepted sequence that stands for at most `max_len` symbols must be such a
/// `tokenize(w)` (sound). For a consistent table the two sets are equal.
fn check_merges(
    dfa: &TokenDfa,
    merges: &[Merge],
    max_len: usize,
    show: &dyn Fn(&[u32]) -> String,
) -> (TokenDfa, RunStats) {
    let (out, stats) = run(dfa, merges, &BIG, true).expect("DirectMerge succeeds");
    check_shape(&out);
    let expected: BTreeSet<Vec<u32>> = accepted_strings(dfa, max_len).iter().map(|w| tokenize(w, merges)).collect();
    let got = accepted_sequences(&out, merges, max_len);
    let missing: Vec<String> = expected.iter().filter(|s| !out.accepts(s)).take(5).map(|s| show(s)).collect();
    let extra: Vec<String> = got.difference(&expected).take(5).map(|s| show(s)).collect();
    if !missing.is_empty() || !extra.is_empty() {
        let table: Vec<String> =
            merges.iter().map(|m| format!("({}, {})", show(&[m.left]), show(&[m.right]))).collect();
        panic!("DirectMerge differs from brute force (merges {table:?}, dfa {dfa:?}):\n missing {missing:?}\n extra {extra:?}");
    }
    (out, stats)
}

fn check(dfa: &TokenDfa, table: &Table, max_len: usize) -> (TokenDfa, RunStats) {
    let (out, stats) = check_merges(dfa, &table.merges, max_len, &|s| table.show(s));
    // A consistent table: the accepted sequences of bounded text are exactly the expected.
    let expected: BTreeSet<Vec<u32>> =
        accepted_strings(dfa, max_len).iter().map(|w| tokenize(w, &table.merges)).collect();
    assert_eq!(accepted_sequences(&out, &table.merges, max_len), expected);
    (out, stats)
}

fn check_regex(regex: &str, table: &Table, max_len: usize) -> (TokenDfa, RunStats) {
    check(&base_dfa_for_tests(regex, table), table, max_len)
}

// ---- the reference and the helpers ----------------------------------------------------

#[test]
fn reference_tokenizer_is_sequential() {
    let t = Table::new("abc", &[("a", "b"), ("a", "a"), ("a", "c")]);
    assert_eq!(t.show(&t.tokenize_str("aaaabaacac")), "aa a ab aa c ac");
    let t = Table::new("a", &[("a", "a")]);
    assert_eq!(t.show(&t.tokenize_str("aaaaa")), "aa aa a");
    // Sequential, not priority: (b, cd) before (c, d) never fires.
    let t = Table::new("bcd", &[("b", "cd"), ("c", "d")]);
    assert_eq!(t.show(&t.tokenize_str("bcd")), "b cd");
    // One id for one string, whichever merge makes it.
    let t = Table::new("abc", &[("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")]);
    assert_eq!(t.merges[2].merged, t.merges[3].merged);
}

#[test]
fn base_dfa_helpers() {
    let t = Table::new("ab", &[]);
    let d = base_dfa_for_tests("a*b", &t);
    assert_eq!(d.num_states(), 2);
    assert!(d.accepts(&t.symbols("aaab")) && d.accepts(&t.symbols("b")) && !d.accepts(&t.symbols("ba")));
    assert_eq!(accepted_strings(&d, 3).len(), 3);
    let e = explicit_dfa_for_tests(3, 0, &[1], &[(0, 0, 1), (2, 1, 1)]);
    assert_eq!(e.trim().num_states(), 2);
}

// ---- the blog's example ---------------------------------------------------------------

#[test]
fn blog_example_string() {
    let t = Table::new("abc", &[("a", "b"), ("a", "a"), ("a", "c")]);
    let (out, _) = check_regex("aaaabaacac", &t, 10);
    let expected = t.tokenize_str("aaaabaacac");
    assert_eq!(t.show(&expected), "aa a ab aa c ac");
    assert!(out.accepts(&expected));
    assert_eq!(out.num_states(), 7, "a chain of six tokens");
}

#[test]
fn blog_table_on_sigma_star() {
    // tokenize(Σ*) for the blog's table (Figure 9): every state accepting, and every
    // transition on one token goes to the same state.
    let t = Table::new("abc", &[("a", "b"), ("a", "a"), ("a", "c")]);
    let (out, _) = check_regex("[abc]*", &t, 9);
    assert!(out.accepting.iter().all(|&a| a));
    let mut target: FxHashMap<u32, u32> = FxHashMap::default();
    for tr in &out.transitions {
        for &(tok, q) in tr {
            assert_eq!(*target.entry(tok).or_insert(q), q, "token {} has two targets", t.show(&[tok]));
        }
    }
}

// ---- Algorithm 1: the four situations of ProcessState ----------------------------------

#[test]
fn distinct_yes_yes() {
    // S after "xa" and "a" (so both entered by `a` and otherwise), leaves by b and c.
    let t = Table::new("abcx", &[("a", "b")]);
    let (out, _) = check_regex("(x|xa|a)(b|c)", &t, 5);
    assert!(out.accepts(&t.tokenize_str("xab")) && out.accepts(&t.tokenize_str("xac")));
    assert!(!out.accepts(&t.symbols("ab")));
    check_regex("(x|a)(b|c)?", &t, 5);
}

#[test]
fn distinct_yes_no() {
    // The state after "a" / "x" only continues with b.
    let t = Table::new("abx", &[("a", "b")]);
    check_regex("(a|x)b", &t, 5);
    check_regex("x*(a|x)b", &t, 6);
}

#[test]
fn distinct_no_yes() {
    // Only `a` enters; the state accepts or continues otherwise.
    let t = Table::new("abx", &[("a", "b")]);
    check_regex("a(b|x)", &t, 5);
    check_regex("ab?", &t, 5);
    check_regex("xa(b|x)*", &t, 8);
}

#[test]
fn distinct_no_no() {
    let t = Table::new("abx", &[("a", "b")]);
    let (out, _) = check_regex("(x|xx)ab", &t, 6);
    // The state between a and b is gone.
    assert_eq!(out.num_states(), 4);
    check_regex("(ab)*", &t, 10);
}

#[test]
fn distinct_self_loops() {
    let t = Table::new("abc", &[("a", "b")]);
    for re in ["a*b", "a*b*", "(a|b)*", "a*bc*", "(ab)*a*", "b*a*b*", "(a|c)*b(a|b)*", "a(a|b)*", "(aa*b)*", "(ba)*"] {
        check_regex(re, &t, 10);
    }
    // A `b` self-loop on S.
    check_regex("a(b|c)*", &t, 8);
    check_regex("(a|c)b*", &t, 8);
}

#[test]
fn distinct_start_and_accept_are_merge_states() {
    let t = Table::new("abx", &[("a", "b")]);
    // The start state has a loop on a and an outgoing b: it is S.
    check_regex("a*(b|x)?", &t, 8);
    check_regex("(a|x)*b?", &t, 8);
    // S accepting.
    check_regex("x?a+b?", &t, 8);
    // Explicit DFA: state 0 is start and accepting, a-loop, b to 1, 1 --a--> 0.
    let d = explicit_dfa_for_tests(2, 0, &[0], &[(0, 0, 0), (0, 1, 1), (1, 0, 0)]);
    check(&d, &t, 10);
}

#[test]
fn distinct_a_incoming_and_other_incoming() {
    let t = Table::new("abc", &[("a", "b")]);
    check_regex("(a|c)(a|c)b", &t, 6);
    check_regex("[ac]*b[ac]*b", &t, 8);
    check_regex("(ca|cc|a)b(b|c)", &t, 6);
}

// ---- Algorithm 2: (a, a) --------------------------------------------------------------

#[test]
fn same_runs_of_every_length() {
    let t = Table::new("ab", &[("a", "a")]);
    for re in [
        "a*", "a+", "(aa)*", "a(aa)*", "a*b", "ba*b", "(ab)*a*", "a*ba*", "(a|b)*", "(b|aaa)*", "a?b+a?", "(aab)*a",
        "b(aa)*b", "ba(aa)*b",
    ] {
        check_regex(re, &t, 12);
    }
    // Exact shape for a* as one state: "even" (accepting, aa loop, a out) and "odd"
    // (accepting, nothing out).
    let d = explicit_dfa_for_tests(1, 0, &[0], &[(0, 0, 0)]);
    let (out, _) = check(&d, &t, 12);
    assert_eq!(out.num_states(), 2);
    assert_eq!(out.num_transitions(), 2);
}

#[test]
fn same_parity_only_odd_or_only_even() {
    let t = Table::new("ab", &[("a", "a")]);
    // Odd numbers of a before b: the state after an odd run has parity {1} only.
    check_regex("a(aa)*b", &t, 12);
    check_regex("(aa)*b", &t, 12);
    check_regex("(aa)+b|a", &t, 12);
    // Explicit: 0 --a--> 1, 1 --a--> 2, 2 --a--> 1, 1 --b--> 3 (accepting).
    let d = explicit_dfa_for_tests(4, 0, &[3], &[(0, 0, 1), (1, 0, 2), (2, 0, 1), (1, 1, 3)]);
    check(&d, &t, 12);
}

#[test]
fn same_start_and_accept_in_e() {
    let t = Table::new("ab", &[("a", "a")]);
    // The start state is in E (a self-loop) and accepting.
    let d = explicit_dfa_for_tests(1, 0, &[0], &[(0, 0, 0)]);
    check(&d, &t, 12);
    // Start in E, reached again by a after b.
    let d = explicit_dfa_for_tests(2, 0, &[0, 1], &[(0, 0, 0), (0, 1, 1), (1, 0, 0), (1, 1, 1)]);
    check(&d, &t, 11);
    // A cycle of a's of length 3 through the start.
    let d = explicit_dfa_for_tests(3, 0, &[0], &[(0, 0, 1), (1, 0, 2), (2, 0, 0), (1, 1, 0)]);
    check(&d, &t, 12);
}

#[test]
fn same_with_a_and_other_incoming() {
    let t = Table::new("abc", &[("a", "a")]);
    for re in ["(a|b)a*c", "(ba|c)a*(b|c)?", "[bc]*a[ab]*", "(ab|a|c)*", "c(a|ca)*a"] {
        check_regex(re, &t, 10);
    }
}

// ---- tables -----------------------------------------------------------------------------

#[test]
fn chains() {
    let tables: Vec<Table> = vec![
        Table::new("abc", &[("a", "b"), ("ab", "c")]),
        Table::new("abc", &[("b", "c"), ("a", "bc")]),
        Table::new("a", &[("a", "a"), ("aa", "aa")]),
        Table::new("a", &[("a", "a"), ("aa", "a")]),
        Table::new("a", &[("a", "a"), ("a", "aa")]),
        Table::new("a", &[("a", "a"), ("aa", "aa"), ("aaaa", "aaaa"), ("aa", "a")]),
        Table::new("ab", &[("a", "a"), ("aa", "b"), ("a", "b"), ("ab", "ab")]),
        Table::new("ab", &[("a", "b"), ("ab", "ab"), ("a", "a"), ("abab", "aa")]),
    ];
    for t in &tables {
        // Runs of `a` up to 12 long; all strings of up to 9 letters over three.
        let max_len = if t.names.iter().filter(|n| n.len() == 1).count() == 3 { 9 } else { 12 };
        for re in ["[abc]*", "a*", "a+b?", "(ab)*a*", "a*b", "b(a|c)*b", "(aab|c)*", "a*bc(a|b)*"] {
            if re
                .chars()
                .filter(|c| c.is_ascii_lowercase())
                .all(|c| t.names.iter().any(|n| n.len() == 1 && n.starts_with(c)))
            {
                check_regex(re, t, max_len);
            }
        }
    }
}

#[test]
fn mixed_tables() {
    let t =
        Table::new("abc", &[("a", "b"), ("a", "a"), ("a", "c"), ("aa", "ab"), ("c", "c"), ("ab", "c"), ("ac", "ac")]);
    for re in ["[abc]*", "(a|b)*c", "a*(bc)*a*", "(ab|ac|aa)*", "c*a*c*", "a[bc]*a"] {
        check_regex(re, &t, 10);
    }
    let t =
        Table::new("ab", &[("b", "b"), ("a", "b"), ("a", "a"), ("bb", "a"), ("aa", "bb"), ("ab", "ab"), ("b", "a")]);
    for re in ["[ab]*", "a*b*", "(ab)*", "b(ab)*a", "(aab|bba)*"] {
        check_regex(re, &t, 11);
    }
}

#[test]
fn duplicate_pairs_and_merged_tokens() {
    // A pair listed twice: the second pass finds nothing.
    let t = Table::new("ab", &[("a", "b"), ("a", "b"), ("a", "a"), ("a", "a")]);
    check_regex("[ab]*", &t, 10);
    // One token made by two merges: abc from (ab, c) and from (a, bc).
    let t = Table::new("abc", &[("b", "c"), ("a", "b"), ("ab", "c"), ("a", "bc")]);
    for re in ["[abc]*", "abc", "a(bc)*", "(abc|ab)*c?"] {
        check_regex(re, &t, 10);
    }
    let t = Table::new("ab", &[("a", "a"), ("a", "b"), ("aa", "b"), ("a", "ab"), ("aab", "a"), ("aa", "ba")]);
    check_regex("[ab]*", &t, 11);
}

#[test]
fn consistent_tables_never_conflict() {
    // Tokens made by several merges (as in real tables) never meet an existing transition
    // on the merged token: see the module docs.
    let mut rng = SplitMix64::new(7);
    for _ in 0..300 {
        let t = random_table(&mut rng, "ab", 7, true);
        let d = base_dfa_for_tests("[ab]*", &t);
        assert_eq!(check(&d, &t, 9).1.conflicts, 0);
    }
}

#[test]
fn colliding_ids_are_determinised() {
    // Id-level tables whose merged ids reuse base symbols and other tokens: one (state,
    // token) can then get two targets, which the subset construction must resolve exactly
    // (the semantics is still the sequential passes over ids).
    let mut rng = SplitMix64::new(77);
    let mut conflicts = 0;
    let mut sweeps = 0;
    for _ in 0..1500 {
        let k = 2 + rng.below(2);
        let ids = k + 3;
        let mut merges = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let (left, right, merged) = (rng.below(ids) as u32, rng.below(ids) as u32, rng.below(ids) as u32);
            if merged != left && merged != right {
                merges.push(Merge { left, right, merged });
            }
        }
        let d = random_dfa(&mut rng, k);
        let stats = check_merges(&d, &merges, 8, &|s| format!("{s:?}")).1;
        conflicts += stats.conflicts;
        sweeps += stats.sweeps;
    }
    assert!(conflicts > 0, "no conflict was exercised");
    let _ = sweeps;
}

#[test]
fn garbage_is_swept_at_the_limit() {
    // Colliding ids leave unreachable states behind; a tight state limit makes DirectMerge
    // sweep them instead of failing, with the same result as without the limit.
    let mut rng = SplitMix64::new(31);
    let (mut sweeps, mut ok, mut refused) = (0, 0, 0);
    for _ in 0..5000 {
        let k = 2 + rng.below(2);
        let ids = k + 3;
        let merges: Vec<Merge> = (0..1 + rng.below(8))
            .map(|_| Merge { left: rng.below(ids) as u32, right: rng.below(ids) as u32, merged: rng.below(ids) as u32 })
            .filter(|m| m.merged != m.left && m.merged != m.right)
            .collect();
        let d = random_dfa(&mut rng, k);
        let (full, stats) = run(&d, &merges, &BIG, true).unwrap();
        if stats.conflicts == 0 {
            continue;
        }
        let input = d.trim();
        let tight = TokenDfaLimits {
            max_states: full.num_states().max(input.num_states()),
            max_transitions: full.num_transitions().max(input.num_transitions()),
        };
        match run(&d, &merges, &tight, true) {
            Ok((out, s)) => {
                assert_eq!(out, full);
                sweeps += s.sweeps;
                ok += 1;
            }
            // Intermediate automata can be larger than the result.
            Err(Error::LimitExceeded { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sweeps > 0 && ok > 0, "sweeps {sweeps}, ok {ok}, refused {refused}");
}

// ---- edge cases and errors ------------------------------------------------------------

#[test]
fn no_merges_and_untouched_tokens() {
    let t = Table::new("ab", &[]);
    let d = base_dfa_for_tests("(ab)*a", &t);
    assert_eq!(direct_merge(&d, &[], &BIG).unwrap(), d);
    // Merges whose tokens label no transition change nothing.
    let t = Table::new("abcd", &[("c", "d"), ("d", "d"), ("cd", "c")]);
    let d = base_dfa_for_tests("(ab)*a", &t);
    let (out, stats) = run(&d, &t.merges, &BIG, true).unwrap();
    assert_eq!(out, d);
    assert_eq!(stats.merges_applied, 0);
}

#[test]
fn untrimmed_and_empty_inputs() {
    let t = Table::new("ab", &[("a", "b"), ("a", "a")]);
    // Unreachable state 3, dead state 2.
    let d = explicit_dfa_for_tests(4, 0, &[1], &[(0, 0, 0), (0, 1, 1), (0, 0, 2), (1, 0, 2), (3, 0, 1), (3, 1, 0)]);
    check(&d, &t, 10);
    // Empty language.
    let d = explicit_dfa_for_tests(2, 0, &[], &[(0, 0, 1), (1, 1, 0)]);
    assert_eq!(direct_merge(&d, &t.merges, &BIG).unwrap(), TokenDfa::default());
    assert_eq!(direct_merge(&TokenDfa::default(), &t.merges, &BIG).unwrap(), TokenDfa::default());
    // The empty string only.
    let d = explicit_dfa_for_tests(1, 0, &[0], &[]);
    assert_eq!(direct_merge(&d, &t.merges, &BIG).unwrap(), d);
    // A merge that removes everything but the start: L = {ab}.
    let (out, _) = check_regex("ab", &t, 4);
    assert_eq!(out.num_states(), 2);
}

#[test]
fn invalid_inputs_are_errors() {
    let t = Table::new("ab", &[("a", "b")]);
    let good = base_dfa_for_tests("(ab)*", &t);
    let mut bad = good.clone();
    bad.start = 9;
    assert!(matches!(direct_merge(&bad, &t.merges, &BIG), Err(Error::InvalidArgument(_))));
    let mut bad = good.clone();
    bad.transitions[0].push((0, 0));
    assert!(matches!(direct_merge(&bad, &t.merges, &BIG), Err(Error::InvalidArgument(_))));
    let mut bad = good.clone();
    bad.transitions[0] = vec![(0, 7)];
    assert!(matches!(direct_merge(&bad, &t.merges, &BIG), Err(Error::InvalidArgument(_))));
    let mut bad = good.clone();
    bad.accepting.push(true);
    assert!(matches!(direct_merge(&bad, &t.merges, &BIG), Err(Error::InvalidArgument(_))));
    let selfish = [Merge { left: 0, right: 1, merged: 1 }];
    assert!(matches!(direct_merge(&good, &selfish, &BIG), Err(Error::InvalidArgument(_))));
    // Odd token ids are fine.
    let huge = [Merge { left: 0, right: 1, merged: u32::MAX }];
    let out = direct_merge(&good, &huge, &BIG).unwrap();
    assert!(out.accepts(&[u32::MAX, u32::MAX]));
}

#[test]
fn limits_stop_the_rewrite() {
    let t = Table::new("abc", &[("a", "b"), ("a", "a"), ("a", "c"), ("b", "c"), ("aa", "a")]);
    let d = base_dfa_for_tests("[abc]*", &t);
    let full = direct_merge(&d, &t.merges, &BIG).unwrap();
    let tight = TokenDfaLimits { max_states: full.num_states() - 1, max_transitions: 1_000 };
    match direct_merge(&d, &t.merges, &tight) {
        Err(Error::LimitExceeded { limit, value, what }) => {
            assert_eq!(limit, "max_direct_states");
            assert_eq!(value, tight.max_states.to_string());
            assert!(what.contains("merge rank"), "{what}");
        }
        other => panic!("expected a state limit error, got {other:?}"),
    }
    let tight = TokenDfaLimits { max_states: 1_000, max_transitions: full.num_transitions() - 1 };
    assert!(matches!(
        direct_merge(&d, &t.merges, &tight),
        Err(Error::LimitExceeded { limit: "max_direct_transitions", .. })
    ));
    // The input itself is checked.
    let tiny = TokenDfaLimits { max_states: 0, max_transitions: 0 };
    match direct_merge(&d, &[], &tiny) {
        Err(Error::LimitExceeded { limit: "max_direct_states", what, .. }) => {
            assert!(what.contains("input"), "{what}")
        }
        other => panic!("expected a state limit error, got {other:?}"),
    }
    // Limits that are not reached change nothing.
    let roomy = TokenDfaLimits { max_states: 100, max_transitions: 1_000 };
    assert_eq!(direct_merge(&d, &t.merges, &roomy).unwrap(), full);
}

// ---- randomized -------------------------------------------------------------------------

/// A random table over `alphabet`: each merge joins two tokens that exist already (base
/// symbols or earlier results, so the table is well-ordered), or — with `any_order` —
/// also tokens that only a later merge will create.
fn random_table(rng: &mut SplitMix64, alphabet: &str, max_merges: usize, any_order: bool) -> Table {
    let mut known: Vec<String> = alphabet.chars().map(String::from).collect();
    let mut pairs: Vec<(String, String)> = Vec::new();
    let n = 1 + rng.below(max_merges);
    for _ in 0..n {
        let l = known[rng.below(known.len())].clone();
        let r = known[rng.below(known.len())].clone();
        if l.len() + r.len() > 6 {
            continue;
        }
        known.push(format!("{l}{r}"));
        pairs.push((l, r));
    }
    if any_order && pairs.len() > 1 {
        for i in (1..pairs.len()).rev() {
            if rng.one_in(3) {
                let j = rng.below(i + 1);
                pairs.swap(i, j);
            }
        }
    }
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(l, r)| (l.as_str(), r.as_str())).collect();
    Table::new(alphabet, &refs)
}

/// A random DFA over the table's base symbols, not trimmed.
fn random_dfa(rng: &mut SplitMix64, alphabet_size: usize) -> TokenDfa {
    let n = 1 + rng.below(6);
    let mut edges = Vec::new();
    for p in 0..n as u32 {
        for sym in 0..alphabet_size as u32 {
            if !rng.one_in(3) {
                edges.push((p, sym, rng.below(n) as u32));
            }
        }
    }
    let accepting: Vec<u32> = (0..n as u32).filter(|_| rng.one_in(2)).collect();
    explicit_dfa_for_tests(n, rng.below(n) as u32, &accepting, &edges)
}

#[test]
fn random_well_ordered_tables() {
    let mut rng = SplitMix64::new(2024);
    let mut well_ordered = 0;
    for case in 0..300 {
        let alphabet = if case % 3 == 0 { "abc" } else { "ab" };
        let t = random_table(&mut rng, alphabet, 8, false);
        well_ordered += crate::tokenizer::bpe::MergeTable::is_well_ordered(&t.merges) as usize;
        let d = random_dfa(&mut rng, alphabet.len());
        check(&d, &t, if alphabet.len() == 3 { 8 } else { 10 });
    }
    // Parts always exist before use; `is_well_ordered` also wants a part's *last* producer
    // to come first, which tables making one token twice can miss.
    assert!(well_ordered > 200, "{well_ordered}");
}

#[test]
fn sequential_equals_priority_when_well_ordered() {
    // The module docs' premise: on a well-ordered table without repeated pairs, the
    // appendix's sequential passes give what `crate::tokenizer::bpe` (Hugging Face's priority BPE)
    // gives, so DirectMerge's language is the tokenizer's.
    let mut rng = SplitMix64::new(11);
    let mut compared = 0;
    for _ in 0..300 {
        let any_order = rng.one_in(2);
        let t = random_table(&mut rng, "abc", 10, any_order);
        let mut pairs: Vec<(u32, u32)> = t.merges.iter().map(|m| (m.left, m.right)).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let well_ordered =
            crate::tokenizer::bpe::MergeTable::is_well_ordered(&t.merges) && pairs.len() == t.merges.len();
        let priority = crate::tokenizer::bpe::MergeTable::new(&t.merges);
        for _ in 0..50 {
            let text: Vec<u32> = (0..rng.below(12)).map(|_| rng.below(3) as u32).collect();
            let mut by_priority = text.clone();
            priority.encode(&mut by_priority);
            if well_ordered {
                assert_eq!(tokenize(&text, &t.merges), by_priority, "{}", t.show(&text));
                compared += 1;
            }
        }
    }
    assert!(compared > 5_000, "{compared}");
}

#[test]
fn random_any_order_tables() {
    let mut rng = SplitMix64::new(99);
    for case in 0..200 {
        let alphabet = if case % 2 == 0 { "abc" } else { "ab" };
        let t = random_table(&mut rng, alphabet, 8, true);
        let d = random_dfa(&mut rng, alphabet.len());
        check(&d, &t, if alphabet.len() == 3 { 8 } else { 10 });
    }
}

#[test]
fn random_same_heavy_tables() {
    // Tables made mostly of (x, x) merges and their chains, over runs of one letter.
    let mut rng = SplitMix64::new(5);
    for _ in 0..150 {
        let mut known = vec!["a".to_string(), "b".to_string()];
        let mut pairs = Vec::new();
        for _ in 0..1 + rng.below(6) {
            let l = known[rng.below(known.len())].clone();
            let r = if rng.one_in(2) { l.clone() } else { known[rng.below(known.len())].clone() };
            if l.len() + r.len() <= 8 {
                known.push(format!("{l}{r}"));
                pairs.push((l, r));
            }
        }
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(l, r)| (l.as_str(), r.as_str())).collect();
        let t = Table::new("ab", &refs);
        let d = random_dfa(&mut rng, 2);
        check(&d, &t, 12);
    }
}

// ---- real tables (ignored: reads the shared corpus, prints timings) ---------------------

/// The regex's DFA over a character-level BPE's base symbols (characters absent from the
/// vocabulary are left out: no byte fallback here).
fn char_base_dfa(regex: &str, vocab: &crate::tokenizer::vocab::Vocabulary) -> (TokenDfa, FxHashMap<u32, Vec<u32>>) {
    let byte_dfa = ByteDfa::from_regex(regex, 100_000).expect("regex compiles");
    let mut symbols: Vec<(Vec<u8>, u32)> = Vec::new();
    for id in 0..vocab.num_tokens() as u32 {
        let bytes = vocab.token_bytes(id);
        let Ok(text) = std::str::from_utf8(bytes) else { continue };
        let mut chars = text.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            if vocab.char_symbol(c) == Some(id) {
                symbols.push((bytes.to_vec(), id));
            }
        }
    }
    let mut index: FxHashMap<u32, u32> = FxHashMap::default();
    let mut states = vec![byte_dfa.start()];
    index.insert(byte_dfa.start(), 0);
    let mut transitions = Vec::new();
    let mut i = 0;
    while i < states.len() {
        let q = states[i];
        i += 1;
        let mut tr = Vec::new();
        for (bytes, sym) in &symbols {
            let to = byte_dfa.walk(q, bytes);
            if to != DEAD {
                let id = *index.entry(to).or_insert_with(|| {
                    states.push(to);
                    states.len() as u32 - 1
                });
                tr.push((*sym, id));
            }
        }
        tr.sort_unstable();
        transitions.push(tr);
    }
    let accepting = states.iter().map(|&q| byte_dfa.is_accepting(q)).collect();
    // Every token's base symbols, for decoding sampled token sequences.
    let by_bytes: FxHashMap<Vec<u8>, u32> = symbols.into_iter().collect();
    let mut spell: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for id in 0..vocab.num_tokens() as u32 {
        let Ok(text) = std::str::from_utf8(vocab.token_bytes(id)) else { continue };
        let syms: Option<Vec<u32>> =
            text.chars().map(|c| by_bytes.get(c.encode_utf8(&mut [0u8; 4]).as_bytes()).copied()).collect();
        if let Some(syms) = syms {
            spell.insert(id, syms);
        }
    }
    (TokenDfa { start: 0, accepting, transitions }.trim(), spell)
}

#[test]
#[ignore = "reads ../shared tokenizers; prints timings (run with --ignored --nocapture)"]
fn real_tables_timing() {
    // Regexes of fixed words, digits and short classes: what DirectMerge is for. Loops over
    // large classes (`[a-z]+`, JSON strings) make the explicit token DFA a product with the
    // tokenizer DFA — millions of transitions — and are run under small limits below.
    let regexes = [
        ("ipv4", r"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"),
        (
            "date_time",
            r#""(-?(?:[1-9][0-9]*)?[0-9]{4})-(1[0-2]|0[1-9])-(3[01]|0[1-9]|[12][0-9])T(2[0-3]|[01][0-9]):([0-5][0-9]):([0-5][0-9])(\.[0-9]+)?(Z|[+-](2[0-3]|[01][0-9]):([0-5][0-9]))?""#,
        ),
        (
            "json_fixed_keys",
            r#"\{[ ]?"name"[ ]?:[ ]?"(Alice|Bob|Carol)"[ ]?,[ ]?"age"[ ]?:[ ]?(-)?(0|[1-9][0-9]*)[ ]?,[ ]?"active"[ ]?:[ ]?(true|false)[ ]?,[ ]?"role"[ ]?:[ ]?("admin"|"user"|"guest")[ ]?\}"#,
        ),
        ("uuid", r#""[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}""#),
        (
            "words",
            r"(The|the|quick|brown|fox|jumps|over|lazy|dog)( (The|the|quick|brown|fox|jumps|over|lazy|dog)){0,8}\.",
        ),
    ];
    let large = [
        (
            "email",
            r"[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?",
        ),
        ("json_string", r#""([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*""#),
    ];
    for name in ["mistral7b", "llama2"] {
        let vocab = crate::testing::shared_vocabulary(name);
        let merges = vocab.merges();
        for (label, regex) in large {
            let (base, _) = char_base_dfa(regex, &vocab);
            let limits = TokenDfaLimits { max_states: 100_000, max_transitions: 1_000_000 };
            let t0 = std::time::Instant::now();
            let result = direct_merge(&base, merges, &limits);
            eprintln!(
                "{name} {label}: base {} states / {} transitions, limits 100k / 1M -> {} after {:.1} ms",
                base.num_states(),
                base.num_transitions(),
                match &result {
                    Ok(out) => format!("{} states / {} transitions", out.num_states(), out.num_transitions()),
                    Err(e) => e.to_string(),
                },
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        for (label, regex) in regexes {
            let (base, spell) = char_base_dfa(regex, &vocab);
            let limits = TokenDfaLimits { max_states: 1_000_000, max_transitions: 50_000_000 };
            let t0 = std::time::Instant::now();
            let (out, stats) = run(&base, merges, &limits, false).expect("DirectMerge succeeds");
            let secs = t0.elapsed().as_secs_f64();
            eprintln!(
                "{name} {label}: {} merges; base {} states / {} transitions -> {} states / {} transitions in {:.1} ms ({} merges changed the DFA, {} conflicts)",
                merges.len(),
                base.num_states(),
                base.num_transitions(),
                out.num_states(),
                out.num_transitions(),
                secs * 1e3,
                stats.merges_applied,
                stats.conflicts
            );
            // Spot checks against the sequential reference: random walks on the result
            // must be tokenize(their text), and sampled strings must be accepted.
            let mut rng = SplitMix64::new(1);
            for _ in 0..20 {
                let mut s = out.start;
                let mut seq = Vec::new();
                while seq.len() < 40
                    && !(out.accepting[s as usize] && (rng.one_in(4) || out.transitions[s as usize].is_empty()))
                {
                    let tr = &out.transitions[s as usize];
                    let (t, q) = tr[rng.below(tr.len())];
                    seq.push(t);
                    s = q;
                }
                if !out.accepting[s as usize] {
                    continue;
                }
                let text: Vec<u32> = seq.iter().flat_map(|t| spell[t].iter().copied()).collect();
                assert!(base.accepts(&text));
                assert_eq!(tokenize(&text, merges), seq, "{name} {label}: a walk is not tokenize(text)");
            }
            for sample in ByteDfa::from_regex(regex, 100_000).unwrap().sample(20, 3, 60) {
                let Ok(text) = std::str::from_utf8(&sample) else { continue };
                let syms: Option<Vec<u32>> = text.chars().map(|c| vocab.char_symbol(c)).collect();
                if let Some(syms) = syms {
                    assert!(out.accepts(&tokenize(&syms, merges)), "{name} {label}: {text:?} rejected");
                }
            }
        }
    }
}
