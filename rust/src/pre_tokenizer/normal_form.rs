//! The language of NFC- (NFKC-) normalized text as a small DFA over character classes.
//!
//! A tokenizer with an NFC or NFKC normalizer encodes `normalize(text)`, so a canonical token
//! sequence decodes to text the normalizer leaves unchanged: guides must generate exactly the
//! normalized strings. Whether a string is normalized is a finite-state property, and this
//! module builds its minimal DFA from Hugging Face's own Unicode tables (the
//! `unicode-normalization-alignments` crate, Unicode 9.0, which `tokenizers` uses), so the
//! language is the tokenizer's, not a newer Unicode's.
//!
//! # Why a DFA suffices
//! Write `NFD(c)` for a character's full canonical decomposition and `ccc` for the canonical
//! combining class; call a character a *mark* when the first character of its `NFD` has
//! `ccc > 0`. Normalizing a string decomposes it, sorts each run of marks stably by `ccc`, and
//! composes left to right: each mark meets the current *starter* and composes with it unless a
//! mark before it that did not compose has a `ccc` at least its own (blocked); a non-mark that
//! is a composition's second half (Hangul vowel and trailing jamo, Indic length marks) composes
//! only with a starter right before it.
//!
//! Read a string `s` that is normalized so far. Its last non-mark `L` (none at the text start)
//! is followed by marks `x₁ … xₖ` that did not compose with it. Then `s x` is normalized iff
//! 1. `x`'s quick check is not *No* (a *No* character never occurs in normalized text);
//! 2. if `x` is a mark, it sorts after `xₖ`: its `ccc` is at least `xₖ`'s (the `x`s are never
//!    reordered among themselves in the output). It may sort *before* the marks inside `L`'s own
//!    decomposition: `é` + U+093C (nukta, 7) is normalized, since the decomposed nukta composes
//!    with nothing and the acute (230) then still composes with `e`;
//! 3. `x` does not compose. A mark of class `c` meets `L`'s starter composed with the marks of
//!    `NFD(L)` of class `≤ c` only (the others sort after it): `L`'s *profile* gives the set of
//!    characters that intermediate composes with, per class threshold (`é` + U+0323 is not
//!    normalized: the dot below meets the bare `e` and composes into `ẹ`). It is blocked when
//!    `xₖ` has its class. A non-mark composes when it follows `L` directly and `L` composes with it.
//!
//! Since `s` is normalized, no `xᵢ` composed, so `L` is fixed inside its run and only its profile
//! matters; the state is `(profile of L, ccc of xₖ)` (0 when no mark followed `L`): finite
//! (Unicode 9 has 96 distinct non-empty composition sets), and the minimal DFA has 4,812 states.
//! Normalized strings are prefix-closed, so every live state accepts and the DFA's language is
//! exactly the normalized strings. NFKC is the same with the NFKC quick check: a character that is
//! not *No* under it has no compatibility decomposition, so its `NFKD` is its `NFD`.
//!
//! The argument is checked, not trusted: `tests` compares the DFA with the crate's own
//! normalizer on every single character, every composite's decomposition written out, every
//! string of up to three characters over an alphabet of starters, marks, jamo, Indic, Thai,
//! Hebrew and Arabic cases, and 200,000 random strings weighted to marks (the nukta case above
//! was found that way).
//!
//! # Over bytes
//! Guides walk bytes. [`NormalForm::byte`] steps a state plus the character being read (a
//! decoding prefix, shared by all prefixes that can only complete into the same classes): the lazy
//! text states carry both as a component (`crate::lazy::text`), and [`Normalized`] folds them
//! into a pre-tokenizer's automaton for the eager construction.
//!
//! # Construction and costs
//! One pass over the 1.1 M code points reads their properties and the primary composites
//! (found from the decompositions: a composite `P` with `NFD(P)` minus one character `R`
//! renormalizing to one character `A` with `compose(A, R) = P`); code points with equal
//! behaviour share a class (406 classes); the reachable states are explored and minimized by
//! partition refinement. ~0.2-0.3 s in release builds, once per process and form
//! ([`NormalForm::get`]), or a file read where a compiler's cache directory keeps it
//! ([`NormalForm::get_cached`], `cache`); the table takes 4,812 × 406 × 4 bytes (7.8 MB).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::pre_tokenizer::char_classes::{restrict_utf8_runs, CharClasses, Runs, INVALID_CLASS};
use crate::pre_tokenizer::text_automaton::PieceBoundaries;
use crate::regex::minimize::coarsest_partition;
use unicode_normalization_alignments::char::{canonical_combining_class as ccc, compose, decompose_canonical};
use unicode_normalization_alignments::{is_nfc_quick, is_nfkc_quick, IsNormalized, UnicodeNormalization};

/// No normalized string continues this way.
pub const DEAD: u32 = u32::MAX;

/// A Unicode normalization form a tokenizer applies before pre-tokenizing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    Nfc,
    Nfkc,
}

/// The minimal DFA of normalized strings over its character classes (see the module docs).
#[derive(Debug)]
pub struct NormalForm {
    /// The class of every code point.
    classes: CharClasses,
    /// The class of each code point below U+10000, read directly (the rest: `classes`).
    bmp: Box<[u16]>,
    /// `state * num_classes + class` → next state or [`DEAD`]; after the `num_states` rows of
    /// the DFA, the row of [`NormalForm::inert_only`].
    table: Vec<u32>,
    /// Inside a multi-byte character (see `Prefixes`).
    prefixes: Prefixes,
    num_states: usize,
    /// Per class: every state goes to one same live state (a starter that composes with nothing
    /// before it: ASCII, most letters and syllables), so what came before does not matter.
    inert: Vec<bool>,
    /// Per class: every state goes to one same state, maybe dead.
    uniform: Vec<bool>,
}

/// The state of the UTF-8 decoding inside a character: which classes its completions can have.
/// A prefix is identified by the classes over the code points it can still become, so
/// prefixes that can only complete into the same classes share an id (all of a CJK block's
/// three-byte prefixes are one), as the pre-tokenizer's automaton does: text states inside a
/// character are then as few as the classes allow, not one per byte value.
#[derive(Debug)]
struct Prefixes {
    /// Per lead byte of a multi-byte character: its prefix, or [`DEAD`].
    lead: [u32; 256],
    /// Per prefix and continuation byte (its low 6 bits): the next prefix, or, when the byte
    /// completes the character, its class; [`DEAD`] where no character completes.
    next: Vec<[u32; 64]>,
    /// Per prefix: whether the next byte completes the character.
    last: Vec<bool>,
    /// Per prefix: whether every class it may complete into is uniform (see `NormalForm`).
    uniform: Vec<bool>,
}

impl Prefixes {
    fn new(classes: &CharClasses) -> Prefixes {
        let mut p = Prefixes { lead: [DEAD; 256], next: Vec::new(), last: Vec::new(), uniform: Vec::new() };
        let mut ids: FxHashMap<(u32, Runs), u32> = FxHashMap::default();
        for (b, lead) in classes.utf8_lead_runs().into_iter().enumerate() {
            if let Some((k, runs)) = lead {
                p.lead[b] = p.intern(k, runs, &mut ids);
            }
        }
        p
    }

    /// The prefix with `k` continuation bytes to come over the class runs `runs`.
    fn intern(&mut self, k: u32, runs: Runs, ids: &mut FxHashMap<(u32, Runs), u32>) -> u32 {
        if let Some(&id) = ids.get(&(k, runs.clone())) {
            return id;
        }
        let id = self.next.len() as u32;
        self.next.push([DEAD; 64]);
        self.last.push(k == 1);
        ids.insert((k, runs.clone()), id);
        for c in 0..64u8 {
            let sub = restrict_utf8_runs(&runs, k - 1, 0x80 | c);
            self.next[id as usize][c as usize] = match k {
                1 => sub[0].1, // one code point: its class (INVALID_CLASS is DEAD)
                _ if sub.len() == 1 && sub[0].1 == INVALID_CLASS => DEAD,
                _ => self.intern(k - 1, sub.into_boxed_slice(), ids),
            };
        }
        id
    }
}

/// What a code point does to the state (equal keys: one class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    /// Quick check *No*: never in normalized text.
    Never,
    Char {
        /// `ccc` of the first and last character of its decomposition.
        first: u8,
        last: u8,
        /// The first character of its decomposition as a composition's second half (its index
        /// among all second halves), or `NO_SECOND`.
        second: u32,
        /// For a non-mark: the id of its [`Profile`] (0 for marks).
        profile: u32,
    },
}

const NO_SECOND: u32 = u32::MAX;

/// What a starter composes with, by the class of the mark that reaches it: `(k, set)` pairs
/// with ascending `k`; a mark of class `c` meets the set of the last pair with `k ≤ c`.
type Profile = Vec<(u8, u32)>;

/// A state before minimization: the last starter's profile, and the class of the last mark
/// after it (0: none; it blocks marks of its class and must not exceed the next one's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Raw {
    profile: u32,
    block: u8,
}

impl NormalForm {
    /// The DFA of `form`, built on first use and shared by the whole process.
    pub fn get(form: Form) -> &'static NormalForm {
        NormalForm::get_cached(form, None)
    }

    /// [`NormalForm::get`], read from `cache_dir` where an earlier process kept it (see
    /// `cache`), and kept there once made: a process's first use then costs a file read
    /// instead of the build.
    pub fn get_cached(form: Form, cache_dir: Option<&Path>) -> &'static NormalForm {
        static NFC: OnceLock<NormalForm> = OnceLock::new();
        static NFKC: OnceLock<NormalForm> = OnceLock::new();
        let cell = match form {
            Form::Nfc => &NFC,
            Form::Nfkc => &NFKC,
        };
        let path = cache_dir.map(|dir| cache::path(dir, form));
        let (mut made, mut read) = (false, false);
        let nf = cell.get_or_init(|| {
            made = true;
            let cached = path.as_deref().and_then(|path| cache::read_file(path, form).ok());
            read = cached.is_some();
            cached.unwrap_or_else(|| NormalForm::build(form))
        });
        // Kept in every cache directory a compiler names, whichever made the process's copy;
        // a damaged or stale file, refused above, is replaced. Best effort: a directory that
        // cannot be written costs the next process a build, nothing else.
        if let Some(path) = &path {
            let wanted = if made { !read } else { !path.exists() };
            if wanted {
                let _ = cache::write_file(nf, path, form);
            }
        }
        nf
    }

    /// The state before any text.
    pub const START: u32 = 0;

    /// The states of the DFA ([`NormalForm::inert_only`] is not one of them).
    pub fn num_states(&self) -> usize {
        self.num_states
    }

    /// A state outside the DFA that takes only inert characters, each to where every state
    /// takes it: its language is the normalized strings that are empty or start with an inert
    /// character, a subset of every state's. The start's language holds every state's (a
    /// normalized string's suffix after a character is normalized). So a property monotone in
    /// the language (some continuation exists) that holds here holds at every state, and one
    /// that fails at the start fails at every state.
    /// Lazy guides use it to decide a piece start's liveness for every normal-form state at once
    /// (`crate::lazy::slice::Region`).
    pub fn inert_only(&self) -> u32 {
        self.num_states as u32
    }

    pub fn num_classes(&self) -> usize {
        self.classes.num_classes()
    }

    /// The state after a character of class `class` ([`DEAD`] stays dead).
    pub fn step(&self, state: u32, class: u32) -> u32 {
        if state == DEAD {
            return DEAD;
        }
        self.table[state as usize * self.classes.num_classes() + class as usize]
    }

    #[inline]
    fn class_of_code_point(&self, cp: u32) -> u32 {
        match self.bmp.get(cp as usize) {
            Some(&c) => c as u32,
            None => self.classes.class_of(cp),
        }
    }

    /// The state after byte `b` from state `state` with partial character `partial` (0: none;
    /// else 1 + its prefix, see `Prefixes`); `None` when the text would not be normalized (or
    /// is not UTF-8).
    #[inline]
    pub fn byte(&self, state: u32, partial: u32, b: u8) -> Option<(u32, u32)> {
        let complete = |class: u32| match self.step(state, class) {
            DEAD => None,
            next => Some((next, 0)),
        };
        if partial == 0 {
            return match b {
                0x00..=0x7F => complete(self.bmp[b as usize] as u32),
                _ => match self.prefixes.lead[b as usize] {
                    DEAD => None,
                    prefix => Some((state, prefix + 1)),
                },
            };
        }
        if b & 0xC0 != 0x80 {
            return None;
        }
        let prefix = partial as usize - 1;
        match self.prefixes.next[prefix][(b & 0x3F) as usize] {
            DEAD => None,
            class if self.prefixes.last[prefix] => complete(class),
            next => Some((state, next + 1)),
        }
    }

    /// The number of distinct prefixes inside a character (see `Prefixes`).
    pub fn num_prefixes(&self) -> usize {
        self.prefixes.next.len()
    }

    /// Whether every state goes on alike after byte `b` from partial character `partial` (see
    /// [`NormalForm::byte`]): to one same state on the character `b` completes, or on each
    /// character the partial one after `b` may still complete into (dead counts as a state).
    pub fn forgets_state_after(&self, partial: u32, b: u8) -> bool {
        let (next, completes) = match partial {
            0 if b.is_ascii() => (self.bmp[b as usize] as u32, true),
            0 => (self.prefixes.lead[b as usize], false),
            _ if b & 0xC0 != 0x80 => return true,
            _ => (
                self.prefixes.next[partial as usize - 1][(b & 0x3F) as usize],
                self.prefixes.last[partial as usize - 1],
            ),
        };
        match (next, completes) {
            (DEAD, _) => true,
            (class, true) => self.uniform[class as usize],
            (prefix, false) => self.prefixes.uniform[prefix as usize],
        }
    }

    /// Whether every state goes to one same live state on `cp` (see `inert`).
    pub fn is_inert(&self, cp: u32) -> bool {
        self.inert[self.class_of_code_point(cp) as usize]
    }

    /// Whether the normalizer leaves `text` unchanged.
    pub fn is_normalized(&self, text: &str) -> bool {
        text.chars()
            .try_fold(Self::START, |s, c| Some(self.step(s, self.class_of_code_point(c as u32))).filter(|&t| t != DEAD))
            .is_some()
    }

    fn build(form: Form) -> NormalForm {
        let quick: fn(std::iter::Once<char>) -> IsNormalized = match form {
            Form::Nfc => is_nfc_quick,
            Form::Nfkc => is_nfkc_quick,
        };
        let scalars = || (0..=0x10FFFFu32).filter_map(char::from_u32);
        let decomposition = |c: char| {
            let mut d: Vec<char> = Vec::with_capacity(4);
            decompose_canonical(c, |x| d.push(x));
            d
        };
        // Primary composites: which second halves each character composes with.
        let mut sets_by_first: BTreeMap<char, Vec<char>> = BTreeMap::new();
        for p in scalars() {
            let d = decomposition(p);
            if d.len() < 2 {
                continue;
            }
            for i in 0..d.len() {
                let rest: String = d.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, &c)| c).collect();
                let mut first = rest.as_str().nfc().map(|(c, _)| c);
                if let (Some(a), None) = (first.next(), first.next()) {
                    if compose(a, d[i]) == Some(p) {
                        sets_by_first.entry(a).or_default().push(d[i]);
                    }
                }
            }
        }
        let mut seconds: Vec<char> = sets_by_first.values().flatten().copied().collect();
        seconds.sort_unstable();
        seconds.dedup();
        // Interned composition sets as sorted second-half indices; id 0 is the empty set.
        let mut sets: Vec<Vec<u32>> = vec![Vec::new()];
        let mut set_ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
        set_ids.insert(Vec::new(), 0);
        let mut set_of: FxHashMap<char, u32> = FxHashMap::default();
        for (&a, rs) in &sets_by_first {
            let mut idx: Vec<u32> = rs.iter().map(|r| seconds.binary_search(r).unwrap() as u32).collect();
            idx.sort_unstable();
            idx.dedup();
            let id = *set_ids.entry(idx.clone()).or_insert_with(|| {
                sets.push(idx);
                sets.len() as u32 - 1
            });
            set_of.insert(a, id);
        }
        // Interned profiles; id 0 is "composes with nothing" (also the text start).
        let mut profiles: Vec<Profile> = vec![vec![(0, 0)]];
        let mut profile_ids: FxHashMap<Profile, u32> = FxHashMap::default();
        profile_ids.insert(vec![(0, 0)], 0);
        // Classes: code points with equal keys, as runs.
        let mut key_ids: BTreeMap<Key, u32> = BTreeMap::new();
        let mut keys: Vec<Key> = Vec::new();
        let (mut run_starts, mut run_classes) = (Vec::new(), Vec::new());
        for c in scalars() {
            let key = if quick(std::iter::once(c)) == IsNormalized::No {
                Key::Never
            } else {
                let d = decomposition(c);
                let (first, last) = (ccc(d[0]), ccc(*d.last().unwrap()));
                let profile = if first > 0 {
                    0
                } else {
                    let profile = starter_profile(&d, |x| set_of.get(&x).copied().unwrap_or(0));
                    *profile_ids.entry(profile.clone()).or_insert_with(|| {
                        profiles.push(profile);
                        profiles.len() as u32 - 1
                    })
                };
                Key::Char { first, last, second: seconds.binary_search(&d[0]).map_or(NO_SECOND, |i| i as u32), profile }
            };
            let id = *key_ids.entry(key).or_insert_with(|| {
                keys.push(key);
                keys.len() as u32 - 1
            });
            if run_classes.last() != Some(&id) {
                run_starts.push(c as u32);
                run_classes.push(id);
            }
        }
        // The set the starter composes with when a mark of class `k` reaches it.
        let set_at = |profile: u32, k: u8| profiles[profile as usize].iter().rev().find(|e| e.0 <= k).unwrap().1;
        let step = |s: Raw, key: Key| -> Option<Raw> {
            let Key::Char { first, last, second, profile } = key else { return None };
            let reaches = if first == 0 { s.block == 0 } else { first > s.block };
            if first > 0 && first < s.block {
                return None; // the marks would be reordered
            }
            let k = if first == 0 { u8::MAX } else { first };
            if second != NO_SECOND && reaches && sets[set_at(s.profile, k) as usize].binary_search(&second).is_ok() {
                return None; // it would compose with the starter
            }
            Some(if first == 0 { Raw { profile, block: 0 } } else { Raw { profile: s.profile, block: last } })
        };
        // Reachable raw states.
        let start = Raw { profile: 0, block: 0 };
        let mut raw = vec![start];
        let mut raw_ids: FxHashMap<Raw, u32> = FxHashMap::default();
        raw_ids.insert(start, 0);
        let n = keys.len();
        let mut raw_table: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            let s = raw[i];
            for &key in &keys {
                let t = match step(s, key) {
                    None => DEAD,
                    Some(t) => *raw_ids.entry(t).or_insert_with(|| {
                        raw.push(t);
                        raw.len() as u32 - 1
                    }),
                };
                raw_table.push(t);
            }
            i += 1;
        }
        let (table, num_states) = minimize(&raw_table, raw.len(), n);
        assert!(n <= u16::MAX as usize, "normal form: {n} character classes");
        NormalForm::assemble(CharClasses::from_runs(&run_starts, &run_classes, n), table, num_states)
    }

    /// The normal form of the minimal DFA `table` (`num_states` rows of `classes`' classes),
    /// with what is derived from it: the lookups and the per-class and per-prefix facts.
    fn assemble(classes: CharClasses, table: Vec<u32>, num_states: usize) -> NormalForm {
        let n = classes.num_classes();
        let bmp: Vec<u16> = (0..0x10000).map(|cp| classes.class_of(cp) as u16).collect();
        let inert: Vec<bool> = (0..n)
            .map(|c| {
                let first = table[c];
                first != DEAD && (0..num_states).all(|s| table[s * n + c] == first)
            })
            .collect();
        let mut table = table;
        let inert_only: Vec<u32> = (0..n).map(|c| if inert[c] { table[c] } else { DEAD }).collect();
        table.extend(inert_only);
        let uniform: Vec<bool> = (0..n).map(|c| (0..num_states).all(|s| table[s * n + c] == table[c])).collect();
        let mut prefixes = Prefixes::new(&classes);
        // A prefix's next prefixes were interned after it.
        prefixes.uniform = vec![true; prefixes.next.len()];
        for p in (0..prefixes.next.len()).rev() {
            let of =
                |x: u32| x == DEAD || if prefixes.last[p] { uniform[x as usize] } else { prefixes.uniform[x as usize] };
            prefixes.uniform[p] = prefixes.next[p].iter().all(|&x| of(x));
        }
        NormalForm { classes, bmp: bmp.into_boxed_slice(), table, num_states, inert, uniform, prefixes }
    }
}

/// The profile of a starter with decomposition `d` (`d[0]` a starter, then its marks in
/// canonical order): a mark of class `c` meets the starter composed with the marks of class
/// `≤ c` only (those sort before it, the others after it).
fn starter_profile(d: &[char], set_of: impl Fn(char) -> u32) -> Profile {
    let mut profile = vec![(0, set_of(d[0]))];
    let mut current = d[0];
    for &m in &d[1..] {
        // A normalized starter's decomposition recomposes mark by mark.
        current = compose(current, m).unwrap_or(current);
        let entry = (ccc(m), set_of(current));
        match profile.last_mut() {
            Some(last) if last.0 == entry.0 => *last = entry,
            _ => profile.push(entry),
        }
    }
    profile
}

/// The minimal table of a DFA whose live states all accept and whose missing transitions are
/// [`DEAD`] (with its number of states; state 0 stays the start), by the project's Hopcroft
/// refinement over the table completed with a sink.
fn minimize(table: &[u32], states: usize, classes: usize) -> (Vec<u32>, usize) {
    let sink = states as u32;
    let mut complete: Vec<u32> = table.iter().map(|&t| if t == DEAD { sink } else { t }).collect();
    complete.extend(std::iter::repeat_n(sink, classes));
    let accepting: Vec<bool> = (0..=states).map(|s| s < states).collect();
    let block = coarsest_partition(states + 1, classes, &complete, &accepting);
    // Renumber the live blocks in order of first appearance, so that the start's is 0.
    let mut id = vec![DEAD; states + 1];
    let mut count = 0;
    for s in 0..states {
        if id[block[s] as usize] == DEAD {
            id[block[s] as usize] = count;
            count += 1;
        }
    }
    let mut out = vec![DEAD; count as usize * classes];
    for s in 0..states {
        let b = id[block[s] as usize] as usize;
        for c in 0..classes {
            out[b * classes + c] = id[block[complete[s * classes + c] as usize] as usize];
        }
    }
    (out, count as usize)
}

/// A pre-tokenizer's automaton restricted to normalized text: its states paired with the normal
/// form's (interned; without a normalizer, the inner automaton's own ids).
#[derive(Clone, Debug)]
pub struct Normalized<M> {
    inner: M,
    normal: Option<&'static NormalForm>,
    /// `(inner state, normal-form state, partial character)` by id, and back.
    states: Vec<(u32, u32, u32)>,
    ids: FxHashMap<(u32, u32, u32), u32>,
}

impl<M: PieceBoundaries> Normalized<M> {
    pub fn new(inner: M, normal: Option<&'static NormalForm>) -> Normalized<M> {
        let mut n = Normalized { inner, normal, states: Vec::new(), ids: FxHashMap::default() };
        if normal.is_some() {
            n.id((n.inner.start(), NormalForm::START, 0)); // the start is id 0
        }
        n
    }

    fn id(&mut self, key: (u32, u32, u32)) -> u32 {
        if key.0 == DEAD {
            return DEAD;
        }
        *self.ids.entry(key).or_insert_with(|| {
            self.states.push(key);
            self.states.len() as u32 - 1
        })
    }
}

impl<M: PieceBoundaries> PieceBoundaries for Normalized<M> {
    fn num_stages(&self) -> usize {
        self.inner.num_stages()
    }
    fn start(&self) -> u32 {
        match self.normal {
            None => self.inner.start(),
            Some(_) => 0,
        }
    }
    fn byte(&mut self, state: u32, b: u8) -> Result<u32> {
        let Some(nf) = self.normal else { return self.inner.byte(state, b) };
        let (m, f, partial) = self.states[state as usize];
        let Some((f, partial)) = nf.byte(f, partial, b) else { return Ok(DEAD) };
        let m = self.inner.byte(m, b)?;
        Ok(self.id((m, f, partial)))
    }
    fn mark(&mut self, state: u32, kind: usize) -> Result<u32> {
        if self.normal.is_none() {
            return self.inner.mark(state, kind);
        }
        let (m, f, partial) = self.states[state as usize];
        let m = self.inner.mark(m, kind)?;
        Ok(self.id((m, f, partial)))
    }
    fn accepts_end(&mut self, state: u32) -> Result<bool> {
        if self.normal.is_none() {
            return self.inner.accepts_end(state);
        }
        let (m, _, partial) = self.states[state as usize];
        Ok(partial == 0 && self.inner.accepts_end(m)?)
    }
}

mod cache;
#[cfg(test)]
mod tests;
