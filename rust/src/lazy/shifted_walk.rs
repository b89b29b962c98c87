//! Shifted walks: a wide text state's trie walk read off an earlier state's, where a renaming of
//! regex states carries one walk onto the other (two words of a count).
//!
//! `^(?:\S+\s+){0,99}\S+$` (at most 100 words, in 55 places of one JSONSchemaBench schema) has
//! a regex state per word: inside word `c`, `\S` loops and a space leads on to word `c + 1`. So
//! every word of a document is a new, wide text state, and its first visit walks every token
//! that leaves the word's slice by a space (` said`: ~60,000 on Llama 3), 7-9 ms a word in
//! every guide. Yet the walk from word `c + 1` is the walk from word `c` with every regex state
//! one word on, as long as no token reaches the count's end.
//!
//! # What is proved
//! Let `X` be the regex states of every trie node a walk from text state `(q, …)` reached alive
//! (its start, the nodes on its way and its targets). A new state `(q', …)` with the same other
//! components (pre-tokenizer, normal form, added-token prefix: a text step moves them by the
//! byte alone) takes the walk of `q` with each target's regex state `x` replaced by `σ(x)`, if
//! a map `σ` with `σ(q) = q'` exists such that, for every `x` in `X` and every byte `b`:
//! * `δ(x, b)` is dead exactly when `δ(σ(x), b)` is, and
//! * when alive, `σ(δ(x, b)) = δ(σ(x), b)`: one `σ` for every way to `δ(x, b)`.
//!
//! By induction on a token's bytes: a prefix alive from `q` reaches some `x` in `X` and reaches
//! `σ(x)` from `q'`; its next byte dies from both or neither. A prefix dead from `q` has a
//! first dead byte after an alive prefix, so it is dead from `q'` too. The two walks therefore
//! visit the same trie nodes, and a token's successor from `q'` is its successor from `q` with
//! `σ` applied to the regex state: the same groups, their targets renamed. [`shift_map`] builds
//! `σ` by a walk over pairs of regex states from `(q, q')`, expanding only pairs whose first
//! state is in `X`, one byte per byte class, and fails on the first pair that breaks either
//! condition (a token near the count's end, where `q'` has fewer words left than `q`).
//!
//! Nothing here is about counts: no count, chain or language inclusion is assumed, so any two
//! states whose walks agree this way share them, and a rename that would change a token's fate
//! is refused and the state walked. The liveness of the renamed targets is still judged node by
//! node as for any walk, so masks do not change. `lazy::tests::counted_words_take_shifted_walks`
//! holds them to the eager guide's at every word (GPT-2, Mistral-7B), and
//! `lazy::tests::shifted_walks_give_the_eager_masks_on_every_reachable_state` at every state
//! reachable with a character BPE whose tokens span words, every walk a candidate.
//!
//! # Costs
//! A walk records the states it reaches in a bitset, one store a step: on issue 17's inputs the
//! mask fills' instructions did not move (`benches/instructions.py`; a build with the shift and
//! the record turned off read the same). A walk of at least [`SHIFT_MIN_TOKENS`] tokens is kept
//! as a candidate, at most [`RECENT_WALKS`] per guide, each with its groups (~0.3 MB for a word
//! on Llama 3, held besides the guide's group cache) and the set `X` (a few dozen states). A new
//! walk tries each candidate with its other components: `|X|` times the byte classes in regex
//! steps, at most [`MAX_SHIFT_PAIRS`] pairs. A shifted walk then costs its regrouping and its
//! new targets' searches: a word of the pattern above ~2.5 ms on Llama 3 instead of ~9
//! (`docs/design.md` §8).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::groups::Groups;
use super::text::{TextKey, TextRegex};
use crate::regex::byte_dfa::DEAD;

/// Walks with fewer tokens are not kept as candidates: a narrow walk costs little more than
/// trying a shift. Counted words walk ~3,200 tokens at each space (Llama 3), besides the ~60,000
/// inside each word.
pub(crate) const SHIFT_MIN_TOKENS: usize = 2_048;

/// How many large walks a guide keeps as candidates, newest first: at most [`RECENT_PER_KEY`]
/// per other components and exit roots. A word after a full stop has other components than one
/// after a letter, and each word of `benches/counted_strings.py --words 99` (Llama 3) makes two
/// walks (inside the word, and at the piece start after its space): kept as the last four
/// walks, each sentence's first word was walked in full again, its candidate pushed out by the
/// words between.
const RECENT_WALKS: usize = 8;

/// How many of the kept walks may share their other components and roots: without a
/// pre-tokenizer (Mistral-7B) a word's state and the space after it have the same, and a word
/// shifts from the word before, not from the space between.
const RECENT_PER_KEY: usize = 2;

/// The most pairs of regex states [`shift_map`] may map before it gives up.
const MAX_SHIFT_PAIRS: usize = 4_096;

/// The regex states a walk reaches alive (`X` in the module docs), recorded as it steps: a
/// bitset by state id, one store a step (a wide walk's state changes at every character).
pub(crate) struct WalkedStates {
    bits: Vec<u64>,
}

impl WalkedStates {
    /// A record that starts with the walk's own regex state.
    pub(crate) fn new(q: u32) -> WalkedStates {
        let mut seen = WalkedStates { bits: Vec::new() };
        seen.see(q);
        seen
    }

    /// Notes regex state `q` at a node the walk reached alive.
    #[inline]
    pub(crate) fn see(&mut self, q: u32) {
        let word = (q / 64) as usize;
        if word >= self.bits.len() {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (q % 64);
    }

    /// The states noted, ascending.
    pub(crate) fn into_sorted(self) -> Box<[u32]> {
        let mut states = Vec::new();
        for (w, &word) in self.bits.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                states.push(w as u32 * 64 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        states.into()
    }
}

/// A large walk a later text state may take shifted: the text state walked, the exit roots it
/// walked below (`None`: the whole trie), the regex states it reached, and its groups. The
/// groups are held here, not only in the guide's group cache, which empties when full: with
/// them gone, every word's candidate was lost at once, every few dozen words (~0.3 MB a
/// candidate on Llama 3, at most [`RECENT_WALKS`] of them).
pub(crate) struct RecentWalk {
    pub(crate) key: TextKey,
    pub(crate) roots: Option<Box<[u32]>>,
    pub(crate) states: Box<[u32]>,
    pub(crate) groups: Arc<Groups>,
}

/// The regex states a walk reached, and the roots it walked below: what a [`RecentWalk`] keeps
/// besides its text state and groups.
pub(crate) struct WalkRecord {
    pub(crate) roots: Option<Box<[u32]>>,
    pub(crate) states: Box<[u32]>,
}

impl RecentWalk {
    /// Whether `key` and `roots` have this walk's other components and roots.
    fn fits(&self, key: TextKey, roots: Option<&[u32]>) -> bool {
        self.key.with_regex_state(key.regex_state()) == key && self.roots.as_deref() == roots
    }
}

/// The large walks a guide keeps as candidates (see [`RECENT_WALKS`]), newest first.
#[derive(Default)]
pub(crate) struct RecentWalks(Mutex<VecDeque<Arc<RecentWalk>>>);

impl RecentWalks {
    /// The candidates for a walk from `key` below `roots`: walks from another regex state with
    /// the same other components, below the same roots.
    pub(crate) fn candidates(&self, key: TextKey, roots: Option<&[u32]>) -> Vec<Arc<RecentWalk>> {
        let walks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        walks.iter().filter(|r| r.key != key && r.fits(key, roots)).cloned().collect()
    }

    /// Keeps `walk`, in place of the oldest it supersedes (see [`RECENT_PER_KEY`]).
    pub(crate) fn push(&self, walk: RecentWalk) {
        let mut walks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        walks.retain(|r| r.key != walk.key || r.roots != walk.roots);
        let mut alike = 0;
        walks.retain(|r| {
            alike += usize::from(r.fits(walk.key, walk.roots.as_deref()));
            alike < RECENT_PER_KEY
        });
        walks.push_front(Arc::new(walk));
        walks.truncate(RECENT_WALKS);
    }
}

/// One byte of each of the regex's byte classes.
pub(crate) fn class_bytes(dfa: &TextRegex) -> Vec<u8> {
    let mut seen = [false; 256];
    (0..=255u8)
        .filter(|&b| {
            let class = dfa.byte_class(b) as usize;
            !std::mem::replace(&mut seen[class], true)
        })
        .collect()
}

/// The map `σ` of the module docs from `from` (whose walk reached `states`, sorted) to `to`, or
/// `None` where a pair breaks it, or past [`MAX_SHIFT_PAIRS`].
pub(crate) fn shift_map(
    dfa: &TextRegex,
    bytes: &[u8],
    states: &[u32],
    from: u32,
    to: u32,
) -> Option<FxHashMap<u32, u32>> {
    let mut sigma = FxHashMap::default();
    sigma.insert(from, to);
    let mut stack = vec![(from, to)];
    while let Some((x, y)) = stack.pop() {
        for &b in bytes {
            let (x2, y2) = (dfa.next(x, b), dfa.next(y, b));
            if (x2 == DEAD) != (y2 == DEAD) {
                return None;
            }
            if x2 == DEAD {
                continue;
            }
            match sigma.get(&x2) {
                Some(&known) if known != y2 => return None,
                Some(_) => {}
                None => {
                    if sigma.len() == MAX_SHIFT_PAIRS {
                        return None;
                    }
                    sigma.insert(x2, y2);
                    if states.binary_search(&x2).is_ok() {
                        stack.push((x2, y2));
                    }
                }
            }
        }
    }
    Some(sigma)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lazy::groups::Walked;
    use crate::regex::byte_dfa::ByteDfa;
    use rustc_hash::FxHashSet;

    fn dfa(pattern: &str) -> TextRegex {
        ByteDfa::from_regex(pattern, 100_000).unwrap().into()
    }

    /// The states reached from `q` by strings over `alphabet` of up to `depth` bytes.
    fn reached(dfa: &TextRegex, q: u32, alphabet: &[u8], depth: usize) -> Box<[u32]> {
        let mut seen = FxHashSet::from_iter([q]);
        let mut layer = vec![q];
        for _ in 0..depth {
            layer = (layer.iter())
                .flat_map(|&x| alphabet.iter().map(move |&b| dfa.next(x, b)))
                .filter(|&x| x != DEAD && seen.insert(x))
                .collect();
        }
        let mut states: Vec<u32> = seen.into_iter().collect();
        states.sort_unstable();
        states.into()
    }

    fn run(dfa: &TextRegex, q: u32, text: &[u8]) -> u32 {
        text.iter().fold(q, |q, &b| if q == DEAD { DEAD } else { dfa.next(q, b) })
    }

    #[test]
    fn words_shift_by_a_word_until_the_count_end_is_in_reach() {
        let d = dfa(r"(?:[a-z]+ ){0,9}[a-z]+");
        let bytes = class_bytes(&d);
        let word = |c: usize| run(&d, d.start(), "ab ".repeat(c).as_bytes());
        let (w0, w1) = (run(&d, word(0), b"a"), run(&d, word(1), b"a"));
        // Walks of up to 4 bytes reach two words on at most: far from the 10th word.
        let states = reached(&d, w0, b"a ", 4);
        let sigma = shift_map(&d, &bytes, &states, w0, w1).expect("a word on");
        assert_eq!(sigma[&run(&d, w0, b" b")], run(&d, w1, b" b"));
        // From word 7, 4 bytes reach word 9, where word 8 would have no word left.
        let (w7, w8) = (run(&d, word(7), b"a"), run(&d, word(8), b"a"));
        let states = reached(&d, w7, b"a ", 4);
        assert!(shift_map(&d, &bytes, &states, w7, w8).is_none());
        // Every byte is tried from every state the walk reached: a walk of 2 bytes reaches word
        // 8, where a space parts the two. With walks of 1 byte the shift holds.
        assert!(shift_map(&d, &bytes, &reached(&d, w7, b"a ", 2), w7, w8).is_none());
        assert!(shift_map(&d, &bytes, &reached(&d, w7, b"a ", 1), w7, w8).is_some());
    }

    #[test]
    fn two_ways_to_one_state_must_shift_alike() {
        // From `a`, `x` and `yy` meet in one state; from `b`, `x` and `yy` part.
        let d = dfa(r"a(?:x|yy)z|b(?:xz|yyw)");
        let bytes = class_bytes(&d);
        let (a, b) = (run(&d, d.start(), b"a"), run(&d, d.start(), b"b"));
        let states = reached(&d, a, b"xyzw", 3);
        assert!(shift_map(&d, &bytes, &states, a, b).is_none());
        // Without the walk reaching the meeting state, nothing is asked of it.
        assert!(shift_map(&d, &bytes, &[a], a, b).is_some());
    }

    #[test]
    fn walked_states_come_out_sorted_once_each() {
        let mut seen = WalkedStates::new(130);
        for q in [5, 130, 64, 0, 63, 5, 1000] {
            seen.see(q);
        }
        assert_eq!(&*seen.into_sorted(), &[0, 5, 63, 64, 130, 1000]);
    }

    #[test]
    fn recent_walks_are_candidates_for_the_same_other_components_only() {
        let walks = RecentWalks::default();
        // Keys with other components `A` and `B`, whatever their layout.
        let (a, b) = (TextKey::from_bits(1 << 100), TextKey::from_bits(2 << 100));
        let groups = Arc::new(Groups::assemble(Walked::default(), &[], |_| 0, None));
        let walk = |key: TextKey, roots: Option<Box<[u32]>>| RecentWalk {
            key,
            roots,
            states: Box::new([key.regex_state()]),
            groups: groups.clone(),
        };
        walks.push(walk(a.with_regex_state(10), None));
        walks.push(walk(b.with_regex_state(11), None));
        walks.push(walk(a.with_regex_state(12), Some(Box::new([7]))));
        let found = |key: TextKey, roots: Option<&[u32]>| -> Vec<u32> {
            walks.candidates(key, roots).iter().map(|r| r.key.regex_state()).collect()
        };
        assert_eq!(found(a.with_regex_state(20), None), vec![10]);
        assert_eq!(found(a.with_regex_state(20), Some(&[7])), vec![12]);
        assert!(found(a.with_regex_state(10), None).is_empty(), "not its own candidate");
        // Newer walks with the same other components and roots supersede the oldest.
        walks.push(walk(a.with_regex_state(13), None));
        assert_eq!(found(a.with_regex_state(20), None), vec![13, 10]);
        walks.push(walk(a.with_regex_state(14), None));
        assert_eq!(found(a.with_regex_state(20), None), vec![14, 13]);
        for m in 3..20u128 {
            walks.push(walk(TextKey::from_bits(m << 100).with_regex_state(1), None));
        }
        assert!(found(a.with_regex_state(20), None).is_empty(), "the oldest are dropped");
        assert!(walks.0.lock().unwrap().len() == RECENT_WALKS);
    }
}
