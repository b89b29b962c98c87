//! Slices: per tokenizer, the tokens that stay inside a loop on a common character class, grouped
//! by where they take the pre-tokenizer, shared by every lazy guide of a `Compiler`.
//!
//! A JSON string's contents are a *wide* text state: ~120,000 of Llama 3's tokens may come next,
//! and its first visit cost a trie walk of 2-6 ms plus grouping. Yet almost all of those tokens
//! stay inside the string's loop, and where they lead depends only on the pre-tokenizer state,
//! not on the schema: every string field of every schema walks the same tokens to the same
//! pre-tokenizer states. A *slice* is that shared part.
//!
//! # The construction
//! A slice is a small byte DFA `S` for a character class's star (the JSON string character
//! `[^"\\\x00-\x1F\x7F-\x9F]*`, or `.*`). A regex state `q` *loops on* `S` when there is a map
//! `φ` from `S`'s states to regex states with `φ(s₀) = q` and, for every transition
//! `s --b--> s'` of `S`, `q' = φ(s)` has the transition `q' --b--> φ(s')`. [`simulate`] checks
//! this by a search over the pairs `(s, φ(s))` reachable from `(s₀, q)`, failing on a pair whose
//! regex state is dead or on an `S` state met with two regex states. Then, by induction on a
//! token's bytes, a token whose walk through `S` from `s₀` ends in `s'` walks the regex from `q`
//! to `φ(s')`: its successor from a text state `(q, m, n)` is `(φ(s'), m', n')`, where
//! `(s', m', n')` is its successor from `(s₀, m, n)` in the text space over `S` instead of the
//! regex. Those successors, grouped by class, are the slice's groups for `(s₀, m, n)`
//! ([`SliceGroups`]): one trie walk per pre-tokenizer state and added-token prefix, per
//! tokenizer, whatever the guide.
//!
//! A counted string (`[^"]{0,100}`) has no state that loops: each character position is its own
//! regex state. There the map is over pairs `(s, k)`, `k` the characters completed since `s₀`
//! ([`simulate_counted`]): a token's end `s'` in `S` and its number of characters `k` (tabled
//! per token) decide where it leads, so the slice's groups of a *counted use* split each target
//! `(s', m', n')` by `k` as `(s' + |S|·k, m', n')`. Where the map stops changing from some
//! count `c` on (`(…){1,}`, a string with a `minLength` and no `maxLength`), counts past `c`
//! read count `c`'s entry ([`Counting::Saturating`]): the slice set stays the counted one, but
//! its ~100 counted targets lead to a handful of the guide's.
//!
//! The other tokens, those whose walk through `S` dies (a `"`, a `\`, a byte that cannot start a
//! character), are the slice's *exit tokens*: a few thousand, kept as subtrees of the
//! tokenizer's trie by where they leave (the slice state before the byte `S` does not take, and
//! that byte) and walked through the guide's text space as usual, but only those leaving by a
//! byte the regex takes there (`"` and `\` inside a JSON string, not the newlines and tabs that
//! half of Llama 3's exit tokens leave by). Slice groups and exit walk together hold every
//! token of the text state with its successor, exactly as a full walk would
//! ([`crate::lazy::groups`]); tests compare the two.
//!
//! A DFA determinized on demand is not minimal: two byte strings that reach one slice state may
//! lead the regex to two distinct states with the same future (a character's lead bytes take
//! different NFA states to the same position). The map then keeps the first, once a small
//! search has proved the two equivalent ([`equivalent`]); a token's group may name that state
//! where its walk gives the other, which changes which text state a fact is recorded at, never
//! a mask (every answer depends on the regex state only through its future).
//!
//! # Certificates
//! A first-token set needs every slice group's node `(target, class, NONE)` judged live or dead,
//! ~30,000 of them for a JSON string's contents on Llama 3; judging each with the guide's own
//! witnesses and searches cost ~0.5 ms per text state, in every guide. But most of the proof
//! does not depend on the guide: a node is live when it has a live successor, and a successor
//! reached by a token that stays inside the slice, or by a boundary, is the same node of the
//! slice's text space for every guide (the map `φ` carries it, as it carries the groups). So
//! [`SliceGroups`] carry, per group, a *hub* ([`Certificates`]): the piece start after a
//! boundary the target allows (every group of such a target shares it), else the node after the
//! first *witness* token the group's class allows (a few one-byte tokens: common letters and
//! digits, then the UTF-8 continuation bytes for targets inside a character). A guide proves
//! the hubs live or dead, a few dozen searches shared by every first-token set of the guide, and
//! takes each group with a live hub as live; only the groups without a hub (lone tokens with no
//! boundary, classes that forbid every witness), those whose hub is dead, and the exit tokens'
//! groups are judged one by one as before. Every hub is a real successor, so this only ever
//! proves nodes live that are live: the sets are the same (tests hold lazy guides to the eager
//! masks), found with about 1 % of the judgements (a few dozen hubs and the groups left over).
//!
//! For a counted use a hub carries its number of characters like any target (`s'' + |S|·k`):
//! a witness that completes a character counts one more, and none past the count.
//!
//! The hubs themselves are chained ([`chain_roots`]): each node of the slice's text space gets
//! one successor (a boundary where it may end its piece, else its first allowed witness), and
//! hubs whose successors meet share a *root*: 1-9 roots for the 3-79 hubs of each set on the way
//! through a JSON string on Llama 3. A guide proves the roots and takes a hub live where its
//! root is, judging a hub on its own only where its root is dead. On the three-string document
//! of `docs/design.md` §8 this took a guide's instructions from 20.9 M to 18.1 M (callgrind).
//! A counted use's chains count characters as its hubs do, and meet less (30-162 roots for
//! 76-266 hubs): 100.6 M to 85.4 M instructions a guide along a `{0,255}` string.
//!
//! The tokens that start a lone token's split (318 on Llama 3), which a first-token set at a
//! piece start judges apart from the groups, get hubs the same way
//! ([`SliceGroups::cont_hub`]): the piece start after a boundary where the split may end the
//! piece. That took the three-string document's guides from 18.06 M to 14.95 M instructions.
//!
//! # Regions: first-token sets shared across guides
//! A guide still judged its sliced states' groups itself (their hubs' roots, the exit walk,
//! the groups left over): ~170 µs per first visit on Llama 3, at every string field of every
//! guide, although two fields followed by the same text have the same set. A loop use's
//! [`Region`] is what such a set depends on inside the string: the states of the slice's text
//! space that bytes reach from `(s₀, m, n, f)` without a boundary (300-1,500 on Llama 3, each
//! stepped by all 256 bytes once per tokenizer: ~1 ms), the piece starts after their
//! boundaries, and where bytes the slice does not take leave it (`(s, byte)`, with the other
//! components after that byte). A guide's state that loops on the slice has the region, with
//! `φ(s)` for each slice state, as its byte closure up to the exits, so a key made of the
//! region's serial, the exits its regex takes and what follows them decides its first-token
//! set (`crate::lazy::engine::Engine::shared_first_key`); so does a key's end whose closure
//! runs on into a string's contents (`":"` is one piece, and may go on with punctuation inside
//! the string), with the region in place of those. Past [`MAX_REGION_STATES`] states or
//! [`MAX_REGION_BYTES`] a region is not made and sets are found per guide as before.
//!
//! # With a normalizer
//! The normal form is a component of the text state (`crate::lazy::text`), and it differs after
//! almost every letter (after `e` an acute accent would compose, after `q` it would not), so a
//! string's contents would take one slice walk per normal-form state. But a token whose first
//! character is *inert* (every normal-form state goes to one same state on it: ASCII, most
//! letters) has the same successor from every normal-form state. So the groups from a state
//! `(s₀, m, n, f)` are those of the inert-first tokens from `(s₀, m, n, f₀)` (`f₀` the start,
//! walked once) plus a walk of the other tokens (marks, vowel signs, a character's continuation
//! bytes: a few thousand) from `(s₀, m, n, f)` itself.
//!
//! A region leaves the normal form out ([`TextSpace::byte_ignoring_composition`]: it decodes
//! characters, but its state stays the start): with it, one region held 38,000-138,000 states
//! from each of ~70 starts on Qwen2, and none was made. A key then holds the normal-form state
//! the guide enters the region at, and what the region leaves out stays exact:
//! - inside it, each step of the normal form is a function of that state and the bytes;
//! - past an exit the regex takes, the state must be the same from every state before it: the
//!   exit completes a character, or starts one, whose every completion takes every state to one
//!   same state (`NormalForm::forgets_state_after`; `"`, `\` and ASCII in general). A region
//!   marks the other exits (`Region::remembers_normal`), and a key that takes one is not made;
//! - a piece start after a boundary inside the region stands for one per normal-form state. Its
//!   liveness is monotone in the texts the normal form allows, and those of every state lie
//!   between the inert-only state's (`NormalForm::inert_only`) and the start's: where both
//!   agree, every state agrees, and otherwise no key is made.
//!
//! Along `benches/step_tail.py`'s 300 Qwen2 documents this took the string steps over 30 µs
//! from ~2,900 to ~1,200-1,400 (`docs/design.md` §8).
//!
//! # Derived slices
//! The patterns above are the classes JSON uses. Regexes written by people have classes of
//! their own: a lazy `(.*?)\.alfred3?workflow` (each of its states watches for the suffix, so
//! none loops on `.*`), `[A-Za-z0-9 &,./@-]{1,32}`, a host name's `[a-z0-9-]`. Each such state
//! was walked in full, 10-25 ms per first visit on Llama 3, at every step of a document that
//! stays in it. So where no pattern fits, [`Slices::find`] reads a class off the regex state
//! ([`derived_class`]): the ASCII characters that take it to the state most of them lead to
//! (at least [`MIN_DERIVED_ASCII`]), plus every non-ASCII character if the state takes every
//! UTF-8 lead byte, or the Unicode word characters ([`NonAscii::Word`], `\w` in a regex written
//! for outlines-core) if it takes their lead bytes. The class's star is checked like a pattern,
//! by [`simulate`] or [`simulate_counted`] (a class of every non-ASCII character that fails is
//! tried again with those from U+00A0 on, [`NonAscii::AboveC1`], as beside a JSON string's
//! contents, with those that are not spaces, [`NonAscii::NotSpace`], as in a URL's
//! `[^\s?#]*`, then without them; a class of word characters, without them), so a derived
//! slice is exact for the same reasons; the class only decides which slice to try. Its other
//! characters leave it as exit tokens (the suffix's `.` above). A state a few bytes away from
//! such a loop (`.alf` of the suffix, a key beside the watch) takes its first-token set from the
//! loop state's instead (`crate::lazy::engine::Engine::neighbour`).
//!
//! A derived slice is identified by its class ([`SliceId::Derived`]), so its group sets are
//! shared by every guide and process like a pattern's, and kept on disk under the class's
//! name. A counted use must still be alive [`MIN_DERIVED_COUNT`] characters on: `(.)` in an
//! address pattern counts one character of `[^0-9]` and then takes digits only, and a slice
//! set (every token of the class) would cost ~100 times the walk that stops at the second
//! character. A tokenizer derives at most [`MAX_DERIVED_SLICES`] slices; past them states are
//! walked in full. Each costs one preorder pass over the token trie (~13 M instructions on
//! Llama 3, 3-4 ms; token by token it took 12-32 ms, chasing each token's bytes) and keeps its
//! exit subtrees' nodes. With a cache directory the pass's tables (each token's characters, the
//! exit subtrees, the witnesses) are kept on disk too, ~0.14 MB per class on Llama 3, and a new
//! process reads them instead of making the pass again ([`Slice::read_tables`]): its first use
//! of a class was the largest single mask of a run that meets each class once.
//!
//! Measured by callgrind over `compare.py`'s 300 Llama 3 documents in one process, slice sets
//! read from the disk cache: see `docs/design.md` §8.
//!
//! # Costs and limits
//! [`Slices::find`] runs once per regex state a guide walks, narrow ones included, so it first
//! checks per slice, without allocating, that the state takes every byte the slice takes from
//! its start (most states fail there, in well under a microsecond), and derives a class from
//! one step per ASCII byte class; a full [`simulate`] visits `S`'s ~10 states × 256 bytes,
//! [`simulate_counted`] `S`'s states × the joint byte classes × the counts up to a token's most
//! characters, or up to the first count that repeats the one before (then every later one does:
//! [`count_on`]). A slice group set holds the ~120,000 tokens of one `(s₀, m, n)` and ~50,000
//! groups (~1 MB); the cache keeps them within [`SLICE_CACHE_BYTES`] per tokenizer and is
//! emptied when full (they are a pure function of the tokenizer, so dropping them costs a walk,
//! never a different mask). With a cache directory they are also kept on disk, and a new
//! process reads them instead of walking them ([`crate::lazy::slice_store`]).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::groups::Walked;
use super::slice_store::{ContentId, SliceKey, SliceStore};
use super::text::{TextKey, TextRegex, TextSpace};
use crate::error::{Error, Result};
use crate::limits::{REGION_CACHE_BYTES, SLICE_CACHE_BYTES};
use crate::pre_tokenizer::normal_form::NormalForm;
use crate::pre_tokenizer::piece_table::PieceTable;
use crate::pre_tokenizer::text_automaton::ContentTrie;
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT};
use crate::tokenizer_dfa::side::{class_or_lone, mark_allowed, LONE, NONE, START};
use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};
use crate::util::concurrent::{compute_once, BoundedCache};
use crate::util::long_work;
use crate::util::serialize::{Reader, Sink, Writer};
use crate::util::u32_storage::U32Storage;
use memmap2::Mmap;

/// The languages sliced, widest first (a regex state takes the first it loops on): any line; a
/// JSON string's contents with their short escapes; the same without escapes; and the contents
/// after an escape's backslash, so that the state there (it takes `"`, `\`, `/`, `b`, `f`, `n`,
/// `r`, `t`, and `u` in our strings: ~2,300 groups on Llama 3) is not walked in full in every
/// guide. The JSON class is outlines-core's; propertok's own `[^"\\\x00-\x1F]` and its `\u`
/// escapes loop on it too, with the few tokens holding U+007F-U+009F or `\u` as exit tokens.
pub(crate) const SLICE_PATTERNS: [&str; 4] = [
    r".*",
    r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#,
    r#"[^"\\\x00-\x1F\x7F-\x9F]*"#,
    r#"["\\/bfnrt]([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#,
];

/// The tokens from `(s₀, m, n)` that stay inside a slice, grouped by successor `(s', m', n')`
/// (in the slice's text space) and class.
pub(crate) struct SliceGroups {
    targets: Box<[TextKey]>,
    /// `groups[target_groups[j]..target_groups[j + 1]]` are target `j`'s.
    target_groups: Box<[u32]>,
    /// `class, start, end` of each group (its tokens are `tokens[start..end]`), flat as the file
    /// holds them: as `(class, range)` pairs they were a second copy, ~0.6 MB on Qwen2, made at
    /// each read from the cache directory.
    groups: U32Storage,
    tokens: U32Storage,
    /// Every token of the groups, as a bitset: the start of a first-token set (see
    /// `crate::lazy::engine::Engine::first_tokens`).
    bits: Box<[u32]>,
    /// How each group's node is shown live through a hub.
    certificates: Certificates,
}

/// For the groups of a [`SliceGroups`], a successor of each group's node `(target, class, NONE)`
/// inside the slice's text space, its *hub* (see the module docs, "Certificates"): the piece
/// start `(key, START, ROOT)` after a boundary the target allows, or the node `(key, class of
/// w, NONE)` after a witness token `w` its pair condition allows. The group is live in a guide
/// wherever its hub is.
#[derive(Default)]
pub(crate) struct Certificates {
    /// `(text key in the slice's space, side, lone-token split node)`.
    hubs: Box<[Hub]>,
    /// Per group (in [`SliceGroups`]' order), its hub, or [`NO_HUB`].
    hub_of: U32Storage,
    /// `target_hubs[ranges[j]..ranges[j + 1]]`: the distinct hubs of target `j`'s groups.
    ranges: Box<[u32]>,
    target_hubs: Box<[u32]>,
    /// Per target: whether every group of it has a hub.
    complete: Box<[bool]>,
    /// Nodes that the hubs reach by successors inside the slice (see [`chain_roots`]): a hub
    /// is live where its root is. `root_of[h]` is hub `h`'s root.
    roots: Box<[Hub]>,
    root_of: Box<[u32]>,
    /// Per token that starts a lone token's split ([`SliceInputs::root_conts`], in its order),
    /// the hub of its node from the set's start, or [`NO_HUB`]: the piece start after a
    /// boundary there, where its split may end the piece (it does not spell a lone token).
    cont_hubs: Box<[u32]>,
}

/// A node of a slice's text space: `(text key, side, lone-token split node)`.
pub(crate) type Hub = (TextKey, u32, u32);

/// A group without a hub: its class is a lone token's (no token may follow it in the piece) or
/// no witness token is allowed after it.
pub(crate) const NO_HUB: u32 = u32::MAX;

/// A loop use's *region*: the states of the slice's text space that bytes reach from one start
/// `(s₀, m, n)` without a boundary, the normal form left out (see the module docs), reduced to
/// what a guide's first-token set there depends on besides its regex (see
/// `crate::lazy::engine::Engine::shared_first_key`). A guide's state `(q, m, n, f)` that loops
/// on the slice has the region's states, with `φ(s)` for each slice state `s`, as its byte
/// closure inside the slice; the rest of its closure starts where bytes the slice does not take
/// leave it, and those bytes lead, for the components other than the regex's, to the same
/// states in every guide (the normal form's only past an exit that forgets it:
/// `remembers_normal`). A region is a function of the slice and its start, so it is kept in
/// the disk cache with the slice's sets (`crate::lazy::slice_store`): found, 0.3-1 ms; read,
/// 18-32 µs.
pub(crate) struct Region {
    /// Tells regions apart in the keys of shared first-token sets: unique among the regions
    /// the tokenizer made.
    pub(crate) serial: u32,
    /// Where bytes the slice does not take leave the region: `(slice state, byte, range of
    /// after)`, ascending, for the bytes the other components take from some region state with
    /// that slice state.
    pub(crate) exits: Box<[(u32, u8, Range<u32>)]>,
    /// The states after an exit's byte, in the slice's space: their regex component stays the
    /// slice state the byte left (a guide puts its own regex state there).
    pub(crate) after: Box<[TextKey]>,
    /// Per exit, with a normal form: whether the states after it depend on the normal-form
    /// state before it (see `TextSpace::byte_ignoring_composition`), which the region leaves
    /// out. A key can describe the region only where its regex takes no such exit.
    pub(crate) remembers_normal: Box<[bool]>,
    /// The distinct piece starts after a boundary at a region state, in the slice's space.
    pub(crate) piece_starts: Box<[TextKey]>,
}

impl Region {
    /// The region from `from` (a state of `slice`'s space), or `None` past
    /// [`MAX_REGION_STATES`] states or [`MAX_REGION_BYTES`].
    fn find(slice: &Slice, from: TextKey) -> Option<Region> {
        let space = &slice.space;
        let normal = space.normal_form();
        let mut states = vec![from];
        let mut seen: rustc_hash::FxHashSet<TextKey> = std::iter::once(from).collect();
        let mut piece_starts = Vec::new();
        let mut starts_seen = rustc_hash::FxHashSet::default();
        // `(slice state, byte, state after)`, sorted and deduplicated at the end.
        let mut left: Vec<(u32, u8, TextKey)> = Vec::new();
        let mut remembering: Vec<(u32, u8)> = Vec::new();
        let mut at = 0;
        while let Some(&k) = states.get(at) {
            at += 1;
            let taken = space.bytes_taken(k.regex_state());
            for b in 0..=255u8 {
                if taken.contains(b) {
                    if let Some(to) = space.byte_ignoring_composition(k, b) {
                        if seen.insert(to) {
                            if states.len() == MAX_REGION_STATES {
                                return None;
                            }
                            states.push(to);
                        }
                    }
                } else if let Some(to) = space.byte_beside_regex(k, b) {
                    if normal.is_some_and(|nf| !nf.forgets_state_after(k.partial_char(), b)) {
                        remembering.push((k.regex_state(), b));
                    }
                    left.push((k.regex_state(), b, to));
                }
            }
            for kind in 0..space.num_stages() {
                if let Some(start) = space.mark(k, kind) {
                    if starts_seen.insert(start) {
                        piece_starts.push(start);
                    }
                }
            }
        }
        left.sort_unstable();
        left.dedup();
        let after: Vec<TextKey> = left.iter().map(|&(_, _, to)| to).collect();
        let exits: Box<[(u32, u8, Range<u32>)]> = (left.chunk_by(|x, y| (x.0, x.1) == (y.0, y.1)))
            .scan(0u32, |start, run| {
                let range = *start..*start + run.len() as u32;
                *start = range.end;
                Some((run[0].0, run[0].1, range))
            })
            .collect();
        remembering.sort_unstable();
        let remembers_normal = exits.iter().map(|&(s, b, _)| remembering.binary_search(&(s, b)).is_ok()).collect();
        let region =
            Region { serial: 0, exits, after: after.into(), remembers_normal, piece_starts: piece_starts.into() };
        (region.heap_bytes() <= MAX_REGION_BYTES).then_some(region)
    }

    fn heap_bytes(&self) -> usize {
        self.exits.len() * 17 + (self.after.len() + self.piece_starts.len()) * 16
    }

    /// Writes the region (or that `region` passed its bound) for [`Region::read`].
    fn write(region: Option<&Region>, w: &mut Writer) {
        let Some(region) = region else {
            return w.u8(0);
        };
        w.u8(1);
        let exits: Vec<u32> = (region.exits.iter()).flat_map(|(s, b, r)| [*s, *b as u32, r.start, r.end]).collect();
        w.u32s(&exits);
        w.u32s(&keys_to_words(region.after.iter().copied()));
        w.u32s(&region.remembers_normal.iter().map(|&r| r as u32).collect::<Vec<_>>());
        w.u32s(&keys_to_words(region.piece_starts.iter().copied()));
    }

    /// A region [`Region::write`] wrote for `slice`, its indices checked: its exits ascending,
    /// their ranges covering `after` in order, every slice state one of `slice`'s.
    fn read(r: &mut Reader, slice: &Slice) -> Result<Option<Region>> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid propertok region cache: {what}"));
        if r.u8()? == 0 {
            r.expect_end()?;
            return Ok(None);
        }
        let flat = r.u32s()?;
        let after = words_to_keys(&r.u32s()?).ok_or_else(|| bad("states after exits"))?;
        let remembers = r.u32s()?;
        let piece_starts = words_to_keys(&r.u32s()?).ok_or_else(|| bad("piece starts"))?;
        r.expect_end()?;
        if flat.len() % 4 != 0 {
            return Err(bad("exits"));
        }
        let exits: Box<[(u32, u8, Range<u32>)]> =
            flat.chunks_exact(4).map(|e| (e[0], e[1].min(255) as u8, e[2]..e[3])).collect();
        let states = slice.dfa.num_states() as u32;
        let valid = flat.chunks_exact(4).all(|e| e[0] < states && e[1] < 256)
            && exits.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1))
            && exits
                .iter()
                .scan(0, |end, e| Some(std::mem::replace(end, e.2.end) == e.2.start && e.2.start < e.2.end))
                .all(|ok| ok)
            && exits.last().map_or(0, |e| e.2.end) as usize == after.len()
            && remembers.len() == exits.len()
            && remembers.iter().all(|&r| r <= 1)
            && after.iter().chain(&piece_starts).all(|k| k.regex_state() < states);
        if !valid {
            return Err(bad("inconsistent tables"));
        }
        Ok(Some(Region {
            serial: 0,
            exits,
            after: after.into(),
            remembers_normal: remembers.iter().map(|&r| r == 1).collect(),
            piece_starts: piece_starts.into(),
        }))
    }
}

/// Names of sets' contents [`Slices`] keeps before it forgets those of sets no longer held:
/// a tokenizer's documents meet a few hundred sets.
const MAX_CONTENT_NAMES: usize = 4096;

/// States a [`Region`] may have: past them, a sliced state's first-token set is not shared.
/// Llama 3's JSON string contents have 300-1,500 from each start. Qwen2's, whose normal form
/// tells apart what follows most letters, passed 4,096 from each of ~70 starts before regions
/// left the normal form out.
const MAX_REGION_STATES: usize = 4096;

/// The most heap bytes of a region kept ([`Region::heap_bytes`]); a larger one is not made, as
/// past [`MAX_REGION_STATES`]. Why: a region of a class of Unicode word characters
/// ([`NonAscii::Word`]) lists an exit at each of its ~300 slice states' bytes that leave the
/// class, 0.1-0.35 MB each, and 47 of them over issue 17's Llama 3 samples filled the
/// tokenizer's [`REGION_CACHE_BYTES`] (4 MB) and emptied it again and again: +2 % mask-fill
/// instructions. The others' regions take 0.1-9.3 KB.
const MAX_REGION_BYTES: usize = 64 << 10;

impl SliceGroups {
    /// The groups of a walk from a slice's state, its targets in the order met; `words`: the
    /// words of a token bitset.
    pub(crate) fn from_walk(walked: Walked, words: usize) -> SliceGroups {
        let targets: Box<[TextKey]> = walked.targets.clone().into();
        let order: Vec<u32> = (0..targets.len() as u32).collect();
        let (tokens, own) = walked.sorted(&order);
        let mut target_groups = vec![0u32; targets.len() + 1];
        for &(j, _, _) in &own {
            target_groups[j as usize + 1] += 1;
        }
        for j in 0..targets.len() {
            target_groups[j + 1] += target_groups[j];
        }
        let groups =
            U32Storage::Owned(own.into_iter().flat_map(|(_, class, range)| [class, range.start, range.end]).collect());
        let mut bits = vec![0u32; words].into_boxed_slice();
        tokens.iter().for_each(|&t| crate::util::bitset::set(&mut bits, t as usize));
        let certificates = Certificates::default();
        SliceGroups { targets, target_groups: target_groups.into(), groups, tokens: tokens.into(), bits, certificates }
    }

    /// Finds each group's hub (see [`Certificates`]): the piece start after a boundary at its
    /// target, else the node after the first of the slice's witnesses its class allows whose
    /// walk from the target stays in the slice. For a counted use (`counted`), a target's slice
    /// state `s' + n·k` is `s'` after `k` characters, and a witness (one byte) that completes a
    /// character leads to `k + 1`, past `max_chars` to no hub.
    fn certify(&mut self, slice: &Slice, counted: bool, from: TextKey, parts: SliceInputs) {
        let (tok, vocab) = (parts.tok, parts.vocab);
        let (space, witnesses) = (&slice.space, &slice.witnesses[..]);
        let mut index: rustc_hash::FxHashMap<Hub, u32> = Default::default();
        let mut hubs = Vec::new();
        let mut hub_of = Vec::with_capacity(self.groups.len() / 3);
        let mut ranges = vec![0u32];
        let mut target_hubs = Vec::new();
        let mut complete = Vec::with_capacity(self.targets.len());
        // Per witness, its successor from the current target (walked once per target).
        let mut successor: Vec<Option<Option<TextKey>>> = vec![None; witnesses.len()];
        for (j, &target) in self.targets.iter().enumerate() {
            successor.iter_mut().for_each(|s| *s = None);
            let (from, chars) = if counted { slice.uncounted(target) } else { (target, 0) };
            // The piece start after a boundary here, for a class node and for a lone token's.
            let (after_class, after_lone) = (boundary_start(space, target, NONE), boundary_start(space, target, LONE));
            let first_hub = target_hubs.len();
            let mut all = true;
            for (class, _) in self.groups_of(j as u32) {
                let found = match class {
                    LONE => after_lone,
                    _ => after_class.or_else(|| {
                        witnesses.iter().enumerate().find_map(|(i, &w)| {
                            if tok.forbids(class, w) {
                                return None;
                            }
                            let to = *successor[i].get_or_insert_with(|| {
                                space
                                    .walk(from, vocab.token_bytes(w))
                                    .and_then(|to| slice.after_witness(to, chars, counted))
                            });
                            to.map(|to| (to, tok.class_of(w), NONE))
                        })
                    }),
                };
                let hub = match found {
                    Some(hub) => *index.entry(hub).or_insert_with(|| {
                        hubs.push(hub);
                        hubs.len() as u32 - 1
                    }),
                    None => NO_HUB,
                };
                all &= hub != NO_HUB;
                if hub != NO_HUB && !target_hubs[first_hub..].contains(&hub) {
                    target_hubs.push(hub);
                }
                hub_of.push(hub);
            }
            ranges.push(target_hubs.len() as u32);
            complete.push(all);
        }
        // The split starters' nodes from the set's start (a piece start): where the split may
        // end the piece, the piece start after a boundary is a successor, as for a group.
        let cont_hubs: Box<[u32]> = (parts.root_conts.iter())
            .map(|&(t, child)| {
                let Some(to) = space.walk(from, vocab.token_bytes(t)) else { return NO_HUB };
                if parts.splits.spells_lone_token(child) {
                    return NO_HUB;
                }
                let chars = if counted { slice.chars[t as usize] as u32 } else { 0 };
                match boundary_start(space, to, class_or_lone(tok, t)) {
                    Some((start, side, split)) => {
                        let hub = (slice.counted(start, chars), side, split);
                        *index.entry(hub).or_insert_with(|| {
                            hubs.push(hub);
                            hubs.len() as u32 - 1
                        })
                    }
                    None => NO_HUB,
                }
            })
            .collect();
        let (roots, root_of) = chain_roots(&hubs, slice, counted, parts);
        self.certificates = Certificates {
            roots: roots.into(),
            root_of: root_of.into(),
            cont_hubs,
            hubs: hubs.into(),
            hub_of: hub_of.into(),
            ranges: ranges.into(),
            target_hubs: target_hubs.into(),
            complete: complete.into(),
        };
    }

    /// Whether the set's large arrays are views into its mapped file (all three or none).
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        let views = [&self.groups, &self.tokens, &self.certificates.hub_of].map(|v| v.is_mapped());
        assert!(views.iter().all(|&v| v == views[0]), "groups, tokens and hubs mapped alike");
        views[0]
    }

    /// The number of hubs (0 without certificates).
    pub(crate) fn num_hubs(&self) -> usize {
        self.certificates.hubs.len()
    }
    /// Hub `h`.
    pub(crate) fn hub(&self, h: u32) -> Hub {
        self.certificates.hubs[h as usize]
    }
    /// The number of roots (see [`chain_roots`]).
    pub(crate) fn num_roots(&self) -> usize {
        self.certificates.roots.len()
    }
    /// Root `r`.
    pub(crate) fn root(&self, r: u32) -> Hub {
        self.certificates.roots[r as usize]
    }
    /// The hub of the node of [`SliceInputs::root_conts`]' `i`-th token from the set's start,
    /// or [`NO_HUB`] (see [`Certificates`]).
    pub(crate) fn cont_hub(&self, i: usize) -> u32 {
        self.certificates.cont_hubs.get(i).copied().unwrap_or(NO_HUB)
    }
    /// Hub `h`'s root: live there proves `h` live.
    pub(crate) fn root_of(&self, h: u32) -> u32 {
        self.certificates.root_of[h as usize]
    }
    /// Target `j`'s group `k`'s hub, or [`NO_HUB`].
    pub(crate) fn hub_of(&self, j: u32, k: usize) -> u32 {
        match self.certificates.hub_of.get(self.target_groups[j as usize] as usize + k) {
            Some(&h) => h,
            None => NO_HUB,
        }
    }
    /// The distinct hubs of target `j`'s groups, and whether every group of it has one.
    pub(crate) fn hubs_of_target(&self, j: u32) -> (&[u32], bool) {
        let c = &self.certificates;
        match c.ranges.get(j as usize + 1) {
            Some(&end) => (&c.target_hubs[c.ranges[j as usize] as usize..end as usize], c.complete[j as usize]),
            None => (&[], false),
        }
    }
    pub(crate) fn targets(&self) -> &[TextKey] {
        &self.targets
    }
    pub(crate) fn tokens(&self) -> &[u32] {
        &self.tokens
    }
    pub(crate) fn bits(&self) -> &[u32] {
        &self.bits
    }
    /// The number of target `j`'s groups.
    pub(crate) fn num_groups_of(&self, j: u32) -> usize {
        (self.target_groups[j as usize + 1] - self.target_groups[j as usize]) as usize
    }
    /// Target `j`'s group `k` as `(class, range of tokens)`.
    pub(crate) fn group_of(&self, j: u32, k: usize) -> (u32, Range<u32>) {
        let g = 3 * (self.target_groups[j as usize] as usize + k);
        (self.groups[g], self.groups[g + 1]..self.groups[g + 2])
    }
    /// Target `j`'s groups as `(class, range of tokens)`.
    pub(crate) fn groups_of(&self, j: u32) -> impl Iterator<Item = (u32, Range<u32>)> + '_ {
        let range = 3 * self.target_groups[j as usize] as usize..3 * self.target_groups[j as usize + 1] as usize;
        self.groups[range].chunks_exact(3).map(|g| (g[0], g[1]..g[2]))
    }
    /// Writes the set for [`SliceGroups::read`] (the disk cache, `crate::lazy::slice_store`).
    pub(crate) fn write(&self, w: &mut impl Sink) {
        let c = &self.certificates;
        w.u32s(&keys_to_words(self.targets.iter().copied()));
        w.u32s(&self.target_groups);
        w.u32s(&self.groups);
        w.u32s(&self.tokens);
        w.u32s(&self.bits);
        for hubs in [&c.hubs, &c.roots] {
            w.u32s(&keys_to_words(hubs.iter().map(|h| h.0)));
            w.u32s(&hubs.iter().flat_map(|h| [h.1, h.2]).collect::<Vec<_>>());
        }
        for v in [&c.hub_of[..], &c.ranges, &c.target_hubs, &c.root_of, &c.cont_hubs] {
            w.u32s(v);
        }
        w.u32s(&c.complete.iter().map(|&b| b as u32).collect::<Vec<_>>());
    }

    /// A set written by [`SliceGroups::write`], for the tokenizer of `parts`. Every index into
    /// the set's own tables and the token ids are checked, so a file cut short or written by
    /// other code is an error, never a panic later; the text keys and the token bitset are taken
    /// as they are (the container's checksum and fingerprint say this build wrote them for these
    /// tables). With `map`, the mapped file `r` reads, the groups, tokens and hubs per group are
    /// views into it ([`U32Storage::view_or_copy`]); without, copies.
    ///
    /// A read is a first visit's cost in every new process (265 of them over issue 17's 300
    /// Qwen2 documents), so the checks run over whole arrays without stopping early (`fold`
    /// with `&`, `max`), which the compiler vectorizes, and the bitset is read, not set token
    /// by token: a load (file, checksum and this) took 2.3 M instructions before, 1.4 M now.
    pub(crate) fn read(r: &mut Reader, parts: SliceInputs, map: Option<&Arc<Mmap>>) -> Result<SliceGroups> {
        let (num_tokens, words) = (parts.vocab.num_tokens(), parts.words);
        let bad = |what: &str| Error::InvalidArgument(format!("invalid propertok slice cache: {what}"));
        let targets = words_to_keys(&r.u32s()?).ok_or_else(|| bad("targets"))?;
        let target_groups = r.u32s()?;
        let flat = U32Storage::view_or_copy(map, r.u32s_bytes()?);
        let tokens = U32Storage::view_or_copy(map, r.u32s_bytes()?);
        let bits = r.u32s()?;
        let mut hubs_and_roots = Vec::new();
        for _ in 0..2 {
            let keys = words_to_keys(&r.u32s()?).ok_or_else(|| bad("hubs"))?;
            let sides = r.u32s()?;
            if sides.len() != keys.len() * 2 {
                return Err(bad("hub sides"));
            }
            hubs_and_roots.push(keys.iter().zip(sides.chunks_exact(2)).map(|(&k, s)| (k, s[0], s[1])).collect());
        }
        let hub_of = U32Storage::view_or_copy(map, r.u32s_bytes()?);
        let (ranges, target_hubs) = (r.u32s()?, r.u32s()?);
        let (root_of, cont_hubs, complete) = (r.u32s()?, r.u32s()?, r.u32s()?);
        r.expect_end()?;
        let roots: Vec<Hub> = hubs_and_roots.pop().expect("two");
        let hubs: Vec<Hub> = hubs_and_roots.pop().expect("two");
        let ascending = |v: &[u32], end: usize| {
            v.first() == Some(&0)
                && v.windows(2).fold(true, |ok, w| ok & (w[0] <= w[1]))
                && v.last() == Some(&(end as u32))
        };
        let below = |v: &[u32], end: usize| v.iter().copied().max().is_none_or(|m| (m as usize) < end);
        let hub_or_none = |v: &[u32]| v.iter().fold(true, |ok, &h| ok & ((h == NO_HUB) | ((h as usize) < hubs.len())));
        let num_groups = flat.len() / 3;
        let valid = flat.len().is_multiple_of(3)
            && target_groups.len() == targets.len() + 1
            && ascending(&target_groups, num_groups)
            && flat.chunks_exact(3).fold(true, |ok, g| ok & (g[1] <= g[2]) & (g[2] as usize <= tokens.len()))
            && below(&tokens, num_tokens.min(words * 32))
            && bits.len() == words
            && hub_of.len() == num_groups
            && hub_or_none(&hub_of)
            && hub_or_none(&cont_hubs)
            && cont_hubs.len() == parts.root_conts.len()
            && ranges.len() == targets.len() + 1
            && ascending(&ranges, target_hubs.len())
            && below(&target_hubs, hubs.len())
            && complete.len() == targets.len()
            && root_of.len() == hubs.len()
            && below(&root_of, roots.len());
        if !valid {
            return Err(bad("inconsistent tables"));
        }
        Ok(SliceGroups {
            targets: targets.into(),
            target_groups: target_groups.into(),
            groups: flat,
            tokens,
            bits: bits.into(),
            certificates: Certificates {
                hubs: hubs.into(),
                hub_of,
                ranges: ranges.into(),
                target_hubs: target_hubs.into(),
                complete: complete.iter().map(|&b| b != 0).collect(),
                roots: roots.into(),
                root_of: root_of.into(),
                cont_hubs: cont_hubs.into(),
            },
        })
    }

    fn heap_bytes(&self) -> usize {
        self.targets.len() * std::mem::size_of::<TextKey>()
            + self.target_groups.len() * 4
            + self.groups.len() * 4
            + self.tokens.len() * 4
            + self.bits.len() * 4
            + (self.certificates.hubs.len() + self.certificates.roots.len()) * std::mem::size_of::<Hub>()
            + self.certificates.root_of.len() * 4
            + (self.certificates.hub_of.len() + self.certificates.ranges.len() + self.certificates.target_hubs.len())
                * 4
            + self.certificates.complete.len()
    }
}

/// One slice: its DFA as a text space (same pre-tokenizer and added-token prefixes as the
/// guides), its exit tokens, and per token the characters its walk through the slice completes.
pub(crate) struct Slice {
    id: SliceId,
    pattern: String,
    dfa: ByteDfa,
    space: TextSpace,
    /// The exit tokens by where they leave: `(slice state, byte)`, the slice state their walk
    /// from the start reaches before the first byte the slice does not take, and that byte.
    exits: Vec<Exit>,
    /// Per token id: how many characters its walk from the slice's start completes (0 for exit
    /// tokens and tokens outside the trie), at most 255.
    chars: Box<[u8]>,
    max_chars: usize,
    /// The witness tokens a group's certificate tries, in order (see [`Certificates`]).
    witnesses: Box<[u32]>,
    /// Whether every character the slice completes brings it back to its start, which it
    /// accepts (a class's star): then a counted use's table serves later positions
    /// ([`SliceUse::shifted`]).
    returns_to_start: bool,
}

/// [`Slice::returns_to_start`] of the slice DFA `dfa`.
fn returns_to_start(dfa: &ByteDfa) -> bool {
    let start = dfa.start();
    dfa.is_accepting(start)
        && (0..dfa.num_states() as u32).all(|s| {
            (0..=255u8).all(|b| {
                let s2 = dfa.next(s, b);
                s2 == DEAD || !dfa.is_accepting(s2) || s2 == start
            })
        })
}

/// The exit tokens of a slice that leave it at one place, as subtrees of the tokenizer's trie:
/// a guide walks the subtrees of the exits its regex state takes
/// ([`TokenTrie::for_each_walk_below`]). Why not tries of their own: a derived slice of a narrow
/// class (`[a-z]*`) has most of the vocabulary as exit tokens, its tries would hold it again in
/// every process, and exits leaving by different bytes after one prefix walked it once each.
struct Exit {
    at: u32,
    byte: u8,
    /// The trie nodes whose subtrees leave here, ascending, as
    /// [`TokenTrie::for_each_walk_or_leave`] leaves them.
    nodes: Box<[u32]>,
}

impl std::fmt::Debug for Slice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slice({})", self.pattern)
    }
}

/// A slice's identity, the same in every process (the disk cache's files are named by it):
/// one of [`SLICE_PATTERNS`], or the star of a character class read off a regex state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SliceId {
    Pattern(u8),
    Derived(CharClass),
}

impl SliceId {
    /// The name a file of the disk cache carries.
    pub(crate) fn name(&self) -> String {
        match self {
            SliceId::Pattern(i) => format!("p{i}"),
            SliceId::Derived(c) => format!("c{:032x}{}", c.ascii, c.non_ascii as u8),
        }
    }
}

/// A set of characters: ASCII bytes as a bitset, and which non-ASCII characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CharClass {
    pub(crate) ascii: u128,
    pub(crate) non_ascii: NonAscii,
}

/// The non-ASCII characters of a [`CharClass`] (its number is part of a cache file's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NonAscii {
    None = 0,
    All = 1,
    /// From U+00A0 on: a JSON string's characters (`[^"\\\x00-\x1F\x7F-\x9F]`) leave out the
    /// C1 controls. A state that watches for a suffix beside a string's contents
    /// (`"(.*?)\.alfred3?workflow"` before a `"readme"` string) takes every character, but the
    /// C1 controls to another state: with no such class, its ~40,000 non-ASCII tokens on
    /// Llama 3 were exit tokens, walked in every guide (~4 ms a first visit).
    AboveC1 = 2,
    /// Every character but the Unicode spaces (`\s` past ASCII: U+0085, U+00A0, U+2000...):
    /// a URL's `[^\s?#]*` beside another part of the regex.
    NotSpace = 3,
    /// The Unicode word characters past ASCII (`\w` in Unicode mode: letters, marks, digits,
    /// connector punctuation), for a state that takes the lead bytes of those and not every
    /// lead byte: an e-mail's `[\w.]+` in a regex written for outlines-core, where `\w` is
    /// Unicode. Without it their ~30,000 non-ASCII tokens on Llama 3 were exit tokens walked in
    /// every guide, and a key's closure ran past its edges through the class's UTF-8 states:
    /// 1.0-2.6 ms a step, the largest masks of issue 17's documents. Its DFA has ~300 states
    /// ([`MAX_WORD_DFA_STATES`]); the others' a few.
    Word = 4,
}

impl CharClass {
    /// The class's star as a regex of our syntax.
    fn star(&self) -> String {
        let mut members = String::new();
        for b in (0..128u8).filter(|&b| self.ascii >> b & 1 == 1) {
            members.push_str(&format!("\\x{b:02X}"));
        }
        let others = match self.non_ascii {
            NonAscii::None => return format!("[{members}]*"),
            NonAscii::All => "[^\\x00-\\x7F]",
            NonAscii::AboveC1 => "[^\\x00-\\x9F]",
            NonAscii::NotSpace => "[^\\x00-\\x7F\\s]",
            NonAscii::Word => WORD_PAST_ASCII,
        };
        match members.is_empty() {
            false => format!("([{members}]|{others})*"),
            true => format!("{others}*"),
        }
    }
}

impl Slice {
    /// A counted use's key for slice key `to` after `k` characters (regex state `s + |S|·k`).
    fn counted(&self, to: TextKey, k: u32) -> TextKey {
        to.with_regex_state(to.regex_state() + self.dfa.num_states() as u32 * k)
    }
    /// A counted use's `key` as the slice key and its number of characters.
    fn uncounted(&self, key: TextKey) -> (TextKey, u32) {
        let n = self.dfa.num_states() as u32;
        (key.with_regex_state(key.regex_state() % n), key.regex_state() / n)
    }
    /// The key a witness (one byte or one character) leads to, reaching slice key `to` from a
    /// node after `chars` characters: for a counted use, counting the character it completes,
    /// none past `max_chars`.
    fn after_witness(&self, to: TextKey, chars: u32, counted: bool) -> Option<TextKey> {
        if !counted {
            return Some(to);
        }
        let k = chars + self.dfa.is_accepting(to.regex_state()) as u32;
        (k as usize <= self.max_chars).then(|| self.counted(to, k))
    }
}

/// The most characters a use counts before a loop for [`SliceUse::enters_a_loop`]: a key's
/// closure spells such a state out (`crate::lazy::engine::Engine::shared_first_key`), and each
/// character more is another class's worth of edges.
const ENTRY_CHARS: usize = 2;

/// How a slice use counts characters (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counting {
    /// A loop: the regex state does not depend on the count.
    Loop,
    /// A counted repetition, tabled up to the slice's `max_chars` (the most characters of one
    /// token).
    UpTo,
    /// A counted repetition whose regex state stops depending on the count at `c` characters
    /// (`(…){1,}`, a JSON string with a `minLength`; or a `maxLength` within one token of its
    /// end, dead past it): the map keeps counts `0..=c`, and a later count reads count `c`'s
    /// entry.
    ///
    /// Why: mapped count by count, a `{1,}` string's first position had ~100 counted targets
    /// of the slice set leading to as many targets of the guide, each interned and judged, for
    /// two regex states; its first visit cost ~40 % more than a `*` string's on Llama 3
    /// (callgrind). The slice set itself stays the counted one (one per start): a set per `c`
    /// would be a set per position of a `maxLength` string.
    Saturating(u32),
}

/// How a regex state takes a slice's tokens (see the module docs): `map[s]` is the regex state
/// paired with slice state `s` (a loop), or `map[s + n·k]` with slice state `s` after `k`
/// characters, `n` the slice's number of states (a counted repetition; see [`Counting`]);
/// [`DEAD`] where the regex dies.
#[derive(Clone, Debug)]
pub(crate) struct SliceUse {
    slice: Arc<Slice>,
    counting: Counting,
    /// The slice's number of states (`n`).
    states: u32,
    map: Arc<[u32]>,
}

impl SliceUse {
    /// The guide's text state for a target `(s', m', n')` of the slice's groups (in their
    /// space: `s' + n·k` for a counted use); `None` where the regex dies.
    #[inline]
    pub(crate) fn target(&self, k: TextKey) -> Option<TextKey> {
        let at = match self.counting {
            Counting::Saturating(c) => {
                let (s, chars) = (k.regex_state() % self.states, k.regex_state() / self.states);
                s + self.states * chars.min(c)
            }
            Counting::Loop | Counting::UpTo => k.regex_state(),
        };
        match self.map[at as usize] {
            DEAD => None,
            q => Some(k.with_regex_state(q)),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.map.len() * 4
    }

    /// The regex state a loop use pairs with slice state `s` ([`DEAD`] where none).
    pub(crate) fn paired(&self, s: u32) -> u32 {
        debug_assert!(!self.counts_chars());
        self.map.get(s as usize).copied().unwrap_or(DEAD)
    }

    /// The slice's number of states.
    pub(crate) fn num_slice_states(&self) -> u32 {
        self.states
    }

    /// The slice's DFA where the use counts characters to an end: past what one token
    /// completes ([`Counting::UpTo`]), or to a count from which the regex is dead (a
    /// `maxLength` within a token of its end). Each position of such a string is a regex state
    /// of its own.
    pub(crate) fn counted_slice(&self) -> Option<&ByteDfa> {
        let n = self.states as usize;
        let ends = match self.counting {
            Counting::Loop => false,
            Counting::UpTo => true,
            Counting::Saturating(c) => self.map[n * c as usize..].iter().all(|&q| q == DEAD),
        };
        ends.then_some(&self.slice.dfa)
    }

    /// The later positions of a counted string that the use's table reaches (a slice's
    /// characters counted, [`Counting::UpTo`], or to a count past which the regex is dead):
    /// `(regex state after k characters, k)`, each a use [`SliceUse::shifted`] derives.
    pub(crate) fn later_positions(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (n, start) = (self.states as usize, self.slice.dfa.start() as usize);
        let end = match self.counted_slice() {
            Some(_) => self.map.len() / n - 1,
            None => 0,
        };
        (1..end).filter_map(move |k| Some((self.map[start + n * k], k as u32)).filter(|&(q, _)| q != DEAD))
    }

    /// The use of the position `k` characters on ([`SliceUse::later_positions`]), read off this
    /// use's map: from there, the states after `j` characters are this map's after `k + j`,
    /// and the last `k` counts of its table are walked on from this table's last
    /// ([`count_on`]). That holds where every character the slice completes brings it back to
    /// its start (a class's star, a JSON string's characters and escapes), so that every
    /// string reaching `k + j` characters passes the start after `k`. `None` elsewhere, and
    /// where [`Slices::find`] would not count there (the position takes no character).
    ///
    /// Why: each position of a counted string simulated its map anew (~70 µs on Llama 3, a
    /// quarter of such a step's instructions), though its predecessor's map holds most of it.
    pub(crate) fn shifted(&self, k: u32, dfa: &TextRegex) -> Option<SliceUse> {
        let (n, k) = (self.states as usize, k as usize);
        let slice = &self.slice.dfa;
        let start = slice.start();
        let last = self.map.len() / n - 1;
        if self.counted_slice().is_none() || k == 0 || k >= last {
            return None;
        }
        let q = self.map[start as usize + n * k];
        // `simulate_counted`'s own refusal at the first character, over one count.
        if q == DEAD || !self.slice.returns_to_start || simulate_counted(slice, 1, dfa, q).is_none() {
            return None;
        }
        let mut map = match self.counting {
            // Dead from count `c - k` on, and alive before it (as `c` was this map's first dead
            // count): what `saturation` finds on the position's own table.
            Counting::Saturating(c) => {
                let counting = Counting::Saturating(c - k as u32);
                return Some(SliceUse {
                    slice: self.slice.clone(),
                    counting,
                    states: self.states,
                    map: self.map[n * k..].into(),
                });
            }
            _ => vec![UNSEEN; self.map.len()],
        };
        map[..n * (last - k + 1)].copy_from_slice(&self.map[n * k..]);
        // Every slice state at this table's last count, dead ones too (a string dying there
        // that another one reaching the same pair does not is a disagreement, as in
        // `simulate_counted`).
        let mut map = count_on(slice, dfa, map, last - k, (0..n as u32).collect(), false)?;
        let counting = match saturation(&map, n) {
            Some(c) => {
                map.truncate(n * (c as usize + 1));
                Counting::Saturating(c)
            }
            None => Counting::UpTo,
        };
        Some(SliceUse { slice: self.slice.clone(), counting, states: self.states, map: map.into() })
    }

    /// The most characters the use's table counts (a token's most, or where it saturates).
    pub(crate) fn max_count(&self) -> usize {
        self.map.len() / self.states as usize - 1
    }

    /// Whether the use counts characters.
    pub(crate) fn counts_chars(&self) -> bool {
        self.counting != Counting::Loop
    }

    /// Whether the use counts at most [`ENTRY_CHARS`] characters and then loops (its table
    /// saturates there, alive): a class taken once before its loop (`[a-z0-9][a-z0-9-]*`,
    /// `{1,}`).
    pub(crate) fn enters_a_loop(&self) -> bool {
        matches!(self.counting, Counting::Saturating(c) if c as usize <= ENTRY_CHARS) && self.counted_slice().is_none()
    }

    /// The pattern of the slice taken.
    #[cfg(test)]
    pub(crate) fn pattern(&self) -> &str {
        &self.slice.pattern
    }

    /// The identity of the slice taken.
    #[cfg(test)]
    pub(crate) fn slice_id(&self) -> SliceId {
        self.slice.id
    }

    /// What tells two uses apart: the slice, the counting and the map.
    #[cfg(test)]
    pub(crate) fn identity(&self) -> (SliceId, Counting, Vec<u32>) {
        (self.slice.id, self.counting, self.map.to_vec())
    }

    /// How the use counts characters.
    #[cfg(test)]
    pub(crate) fn counting(&self) -> Counting {
        self.counting
    }

    /// A use that maps nothing (for tests of the groups alone).
    #[cfg(test)]
    pub(crate) fn unmapped() -> SliceUse {
        let dfa = ByteDfa::from_regex(".*", 64).unwrap();
        let space = TextSpace::new(dfa.clone(), None, Arc::new(ContentTrie::default()), None).unwrap();
        let (id, pattern) = (SliceId::Pattern(0), ".*".to_string());
        let (exits, chars, witnesses) = (Vec::new(), Box::new([]) as Box<[u8]>, Box::new([]) as Box<[u32]>);
        let returns_to_start = returns_to_start(&dfa);
        let slice = Slice { id, pattern, dfa, space, exits, chars, max_chars: 0, witnesses, returns_to_start };
        SliceUse { slice: Arc::new(slice), counting: Counting::Loop, states: 1, map: Arc::from(Vec::new()) }
    }
}

/// With a normalizer: which tokens start with an inert character (see the module docs), and the
/// others as a trie.
struct NormalSplit {
    inert_first: Box<[bool]>,
    sensitive: TokenTrie,
}

/// A class's derived slice: its star's DFA (`None` if it did not build), and the slice, built
/// the first time a regex state uses the class (`None` if that failed).
struct Derived {
    dfa: Option<ByteDfa>,
    slice: std::sync::OnceLock<Option<Arc<Slice>>>,
}

/// The slices of one tokenizer and their cache (see the module docs).
pub(crate) struct Slices {
    /// The slices of [`SLICE_PATTERNS`], in order, and how many had their tables read from
    /// `store`.
    fixed: Vec<Arc<Slice>>,
    fixed_loaded: usize,
    /// The slices derived from regex states' character classes (see the module docs), by class,
    /// made on first use.
    derived: std::sync::RwLock<rustc_hash::FxHashMap<CharClass, Arc<Derived>>>,
    /// The derived slices made, at most [`MAX_DERIVED_SLICES`], and those of them whose tables
    /// were read from `store`.
    derived_built: AtomicUsize,
    derived_loaded: AtomicUsize,
    /// What a derived slice's text space is built from.
    pieces: Option<Arc<PieceTable>>,
    contents: Arc<ContentTrie>,
    normal_form: Option<&'static NormalForm>,
    normal: Option<NormalSplit>,
    /// Keyed by (slice, counted, start in the slice's space).
    cache: BoundedCache<SliceKey, Arc<SliceGroups>>,
    /// Loop uses' regions, keyed as `cache` (`None`: past [`MAX_REGION_STATES`]), and the
    /// serial of the next one made.
    regions: BoundedCache<SliceKey, Option<Arc<Region>>>,
    next_region: std::sync::atomic::AtomicU32,
    /// Regions found by this process, and regions read from `store`.
    regions_found: AtomicUsize,
    regions_loaded: AtomicUsize,
    /// Every region made, with its slice (for [`Slices::regions_found_again`]).
    #[cfg(test)]
    regions_made: std::sync::Mutex<Vec<(Arc<Slice>, TextKey)>>,
    /// The sets kept on disk between processes, with a cache directory.
    store: Option<SliceStore>,
    /// The sets of `cache` (and of guides' groups) by the name of their contents in `store`: two
    /// keys whose sets are the same share one in memory, read once (see
    /// `crate::lazy::slice_store`, "Layout and keys").
    by_contents: std::sync::Mutex<rustc_hash::FxHashMap<ContentId, std::sync::Weak<SliceGroups>>>,
    /// Sets whose contents were read from `store`.
    contents_read: AtomicUsize,
    /// Sets walked, and sets read from `store` (their contents read or shared), by this process.
    walked: AtomicUsize,
    loaded: AtomicUsize,
}

impl Slice {
    /// The slice of `pattern` (whose DFA is `dfa`) over the tokens of `trie`: one preorder pass
    /// over the trie finds the exit tokens and each other token's characters.
    fn build(
        id: SliceId,
        pattern: String,
        dfa: ByteDfa,
        trie: &TokenTrie,
        vocab: &Vocabulary,
        tok: &TokenizerDfa,
        slices: &Slices,
    ) -> Result<Slice> {
        let mut leaving: std::collections::BTreeMap<(u32, u8), Vec<u32>> = Default::default();
        let mut chars = vec![0u8; vocab.num_tokens()].into_boxed_slice();
        trie.for_each_walk_or_leave(
            (dfa.start(), 0usize),
            |(s, k), b| match dfa.next(s, b) {
                DEAD => None,
                next => Some((next, k + dfa.is_accepting(next) as usize)),
            },
            |t, (_, k)| {
                chars[t as usize] = k.min(255) as u8;
            },
            |(s, _), b, node| leaving.entry((s, b)).or_default().push(node),
        );
        let max_chars = chars.iter().copied().max().unwrap_or(0) as usize;
        let space = TextSpace::new(dfa.clone(), slices.pieces.clone(), slices.contents.clone(), slices.normal_form)?;
        let witnesses = witness_tokens(trie, vocab, tok, &chars);
        let exits = (leaving.into_iter()).map(|((at, byte), nodes)| Exit { at, byte, nodes: nodes.into() }).collect();
        let returns_to_start = returns_to_start(&dfa);
        Ok(Slice { id, pattern, dfa, space, exits, chars, max_chars, witnesses, returns_to_start })
    }

    /// Writes the tables [`Slice::build`] made, for [`Slice::read_tables`] (the disk cache,
    /// `crate::lazy::slice_store`): each token's characters, the witnesses and the exit
    /// tokens by where they leave.
    fn write_tables(&self, w: &mut impl Sink) {
        w.u64(self.chars.len() as u64);
        w.put(&self.chars);
        w.u32s(&self.witnesses);
        w.u64(self.exits.len() as u64);
        for exit in &self.exits {
            w.u32(exit.at);
            w.u8(exit.byte);
            w.u32s(&exit.nodes);
        }
    }

    /// The slice of `pattern` (whose DFA is `dfa`) with tables written by
    /// [`Slice::write_tables`] for the tokens of `trie`. The counts and indices are checked (a
    /// file cut short or written by other code is an error, never a panic later); that no exit
    /// node lies below another is taken as it is, as the container's checksum and fingerprint
    /// say this build wrote them for these tokens.
    fn read_tables(
        r: &mut Reader,
        id: SliceId,
        pattern: String,
        dfa: ByteDfa,
        trie: &TokenTrie,
        vocab: &Vocabulary,
        slices: &Slices,
    ) -> Result<Slice> {
        let bad = |what: &str| Error::InvalidArgument(format!("invalid propertok slice tables: {what}"));
        let num_tokens = vocab.num_tokens();
        if r.u64()? != num_tokens as u64 {
            return Err(bad("number of tokens"));
        }
        let chars: Box<[u8]> = r.bytes(num_tokens)?.into();
        let witnesses: Box<[u32]> = r.u32s()?.into();
        let num_exits = r.u64()?;
        let mut exits = Vec::new();
        let mut previous = None;
        for _ in 0..num_exits {
            let (at, byte, nodes) = (r.u32()?, r.u8()?, r.u32s()?);
            // Strictly ascending by place and by node, as the build leaves them.
            let valid_nodes = nodes.first() != Some(&0)
                && nodes.windows(2).all(|w| w[0] < w[1])
                && nodes.last().is_none_or(|&n| (n as usize) < trie.num_nodes());
            if at as usize >= dfa.num_states() || previous >= Some((at, byte)) || !valid_nodes {
                return Err(bad("exits"));
            }
            previous = Some((at, byte));
            exits.push(Exit { at, byte, nodes: nodes.into() });
        }
        r.expect_end()?;
        if witnesses.iter().any(|&t| t as usize >= num_tokens) {
            return Err(bad("witnesses"));
        }
        let max_chars = chars.iter().copied().max().unwrap_or(0) as usize;
        let space = TextSpace::new(dfa.clone(), slices.pieces.clone(), slices.contents.clone(), slices.normal_form)?;
        let returns_to_start = returns_to_start(&dfa);
        Ok(Slice { id, pattern, dfa, space, exits, chars, max_chars, witnesses, returns_to_start })
    }
}

impl Slices {
    /// The slices of the tokens of `trie`: those of [`SLICE_PATTERNS`] now (their tables read
    /// from `store` when it holds them, else built and written there), derived ones on first
    /// use. With `store`, the sets and tables are kept between processes (see
    /// [`crate::lazy::slice_store`]).
    pub(crate) fn new(
        trie: &TokenTrie,
        vocab: &Vocabulary,
        tok: &TokenizerDfa,
        pieces: Option<Arc<PieceTable>>,
        contents: Arc<ContentTrie>,
        normal: Option<&'static NormalForm>,
        store: Option<SliceStore>,
    ) -> Result<Slices> {
        let split = normal.map(|nf| {
            let mut inert_first = vec![false; vocab.num_tokens()].into_boxed_slice();
            let mut sensitive = Vec::new();
            trie.for_each_token(|t| {
                let bytes = vocab.token_bytes(t);
                let first = std::str::from_utf8(&bytes[..bytes.len().min(4)])
                    .or_else(|e| std::str::from_utf8(&bytes[..e.valid_up_to()]))
                    .ok()
                    .and_then(|s| s.chars().next());
                match first {
                    Some(c) if nf.is_inert(c as u32) => inert_first[t as usize] = true,
                    _ => sensitive.push((t, bytes)),
                }
            });
            NormalSplit { inert_first, sensitive: TokenTrie::new(sensitive) }
        });
        let mut slices = Slices { pieces, contents, normal_form: normal, normal: split, store, ..Slices::none() };
        slices.cache = BoundedCache::new(SLICE_CACHE_BYTES);
        slices.regions = BoundedCache::new(REGION_CACHE_BYTES);
        // Read, the four patterns' tables cost a few M instructions instead of four passes over
        // the trie (~80 M on Llama 3) in every process's first lazy compile.
        for (i, pattern) in SLICE_PATTERNS.iter().enumerate() {
            let (id, dfa) = (SliceId::Pattern(i as u8), ByteDfa::from_regex(pattern, 64)?);
            let read =
                |r: &mut Reader| Slice::read_tables(r, id, pattern.to_string(), dfa.clone(), trie, vocab, &slices);
            let slice = match slices.store.as_ref().and_then(|store| store.load_tables(id, read)) {
                Some(slice) => {
                    slices.fixed_loaded += 1;
                    slice
                }
                None => {
                    let slice = Slice::build(id, pattern.to_string(), dfa, trie, vocab, tok, &slices)?;
                    if let Some(store) = &slices.store {
                        store.save_tables(id, |w| slice.write_tables(w));
                    }
                    slice
                }
            };
            slices.fixed.push(Arc::new(slice));
        }
        Ok(slices)
    }

    /// How many of the [`SLICE_PATTERNS`]' slices had their tables read from the store.
    #[cfg(test)]
    pub(crate) fn num_fixed_loaded(&self) -> usize {
        self.fixed_loaded
    }

    /// The sets this process walked and read from the disk cache, in that order.
    pub(crate) fn sets_made(&self) -> (usize, usize) {
        (self.walked.load(Ordering::Relaxed), self.loaded.load(Ordering::Relaxed))
    }

    /// How many sets had their contents read from the store (the others it gave were shared
    /// with a set of the same contents in memory).
    pub(crate) fn contents_read(&self) -> usize {
        self.contents_read.load(Ordering::Relaxed)
    }

    /// How many sets held in memory use their large arrays where they lie in their mapped
    /// files (`SliceStore::load_contents`), and how many sets are held.
    #[cfg(test)]
    pub(crate) fn sets_mapped(&self) -> (usize, usize) {
        let known = self.by_contents.lock().unwrap_or_else(|e| e.into_inner());
        let held: Vec<_> = known.values().filter_map(std::sync::Weak::upgrade).collect();
        let mapped = held.iter().filter(|set| set.is_mapped()).count();
        (mapped, held.len())
    }

    /// The regions this process found and read from the disk cache, in that order.
    pub(crate) fn regions_made(&self) -> (usize, usize) {
        (self.regions_found.load(Ordering::Relaxed), self.regions_loaded.load(Ordering::Relaxed))
    }

    /// For tests: every region made so far (read from the disk cache or not) is the one
    /// [`Region::find`] finds again, field by field; returns how many were compared.
    #[cfg(test)]
    pub(crate) fn regions_found_again(&self) -> usize {
        let made = self.regions_made.lock().unwrap().clone();
        for (slice, start) in &made {
            let kept = self.regions.get(&(slice.id, false, *start)).expect("a region made is kept");
            let found = Region::find(slice, *start);
            let fields =
                |r: &Region| (r.exits.clone(), r.after.clone(), r.remembers_normal.clone(), r.piece_starts.clone());
            assert!(
                kept.as_deref().map(fields) == found.as_ref().map(fields),
                "region of {:?} from {start:?}",
                slice.id
            );
        }
        made.len()
    }

    /// The slices derived so far (see [`MAX_DERIVED_SLICES`]).
    #[cfg(test)]
    pub(crate) fn num_derived(&self) -> usize {
        self.derived_built.load(Ordering::Relaxed)
    }

    /// The derived slices whose tables were read from the disk cache.
    #[cfg(test)]
    pub(crate) fn num_derived_loaded(&self) -> usize {
        self.derived_loaded.load(Ordering::Relaxed)
    }

    /// No slices: every text state is walked in full (for tests that compare the two).
    pub(crate) fn none() -> Slices {
        Slices {
            fixed: Vec::new(),
            fixed_loaded: 0,
            derived: Default::default(),
            derived_built: AtomicUsize::new(0),
            derived_loaded: AtomicUsize::new(0),
            pieces: None,
            contents: Default::default(),
            normal_form: None,
            normal: None,
            cache: BoundedCache::new(0),
            regions: BoundedCache::new(0),
            next_region: Default::default(),
            regions_found: AtomicUsize::new(0),
            regions_loaded: AtomicUsize::new(0),
            #[cfg(test)]
            regions_made: Default::default(),
            store: None,
            walked: AtomicUsize::new(0),
            loaded: AtomicUsize::new(0),
            by_contents: Default::default(),
            contents_read: AtomicUsize::new(0),
        }
    }

    /// How regex state `q` of `dfa` takes a slice's tokens: the first of [`SLICE_PATTERNS`] it
    /// loops on, else the first whose characters it counts, else the slice of the characters
    /// it takes to one same state, if they are many ([`derived_class`]).
    pub(crate) fn find(&self, dfa: &TextRegex, q: u32, parts: SliceInputs) -> Option<SliceUse> {
        self.find_use(dfa, q, parts, true).flatten()
    }

    /// [`Slices::find`]'s answer where it comes before any counted use's table: a loop use,
    /// or none; `None` where a count would be tried first. Why: a counted use's table
    /// ([`simulate_counted`], every slice state at every count up to a token's length) cost
    /// 0.2-0.8 ms a regex state on Llama 3, and a URL's path runs a new such state beside every
    /// step after it (`Github_easy/o21869`), where a shared first-token set's key, which only a
    /// loop use makes, asked for it at every step, to give up on a count.
    pub(crate) fn find_loop(&self, dfa: &TextRegex, q: u32, parts: SliceInputs) -> Option<Option<SliceUse>> {
        self.find_use(dfa, q, parts, false)
    }

    /// [`Slices::find`], or without `counted` [`Slices::find_loop`] (with it, never `None`).
    fn find_use(&self, dfa: &TextRegex, q: u32, parts: SliceInputs, counted: bool) -> Option<Option<SliceUse>> {
        // A necessary condition of both uses, and the one most regex states fail: once per slice.
        let taken = (self.fixed.iter().enumerate())
            .filter(|(_, s)| takes_first_byte(&s.dfa, dfa, q))
            .fold(0u64, |taken, (i, _)| taken | 1 << i);
        let candidates = || self.fixed.iter().enumerate().filter(move |&(i, _)| taken >> i & 1 == 1);
        if let Some(found) = candidates().find_map(|(_, s)| use_as_loop(s, dfa, q)) {
            return Some(Some(found));
        }
        if !counted && taken != 0 {
            return None;
        }
        if let Some(found) = candidates().find_map(|(_, s)| use_as_count(s, dfa, q)) {
            return Some(Some(found));
        }
        // A derived slice: its class with every non-ASCII character where `q` takes them, else
        // with fewer (the others leave as exit tokens). The slice's own DFA is checked first:
        // its tables are made only for a class a state uses ([`counts_long`] for a count).
        for class in self.derived_classes(dfa, q) {
            let Some(derived) = self.derived(class) else { continue };
            let Some(slice_dfa) = derived.dfa.as_ref() else { continue };
            let looped = simulate(slice_dfa, dfa, q).is_some();
            if !looped && !counts_long(slice_dfa, dfa, q) {
                continue;
            }
            if !looped && !counted {
                return None;
            }
            let Some(slice) = self.derived_slice(class, &derived, parts) else { continue };
            let found = match looped {
                true => use_as_loop(&slice, dfa, q),
                false => use_as_count(&slice, dfa, q),
            };
            if found.is_some() {
                return Some(found);
            }
        }
        Some(None)
    }

    /// The classes of [`derived_class`] a derived slice of `q` is tried with, in order: every
    /// non-ASCII character where `q` takes them, then without the C1 controls, without the
    /// Unicode spaces, then without non-ASCII characters.
    fn derived_classes(&self, dfa: &TextRegex, q: u32) -> Vec<CharClass> {
        if self.fixed.is_empty() {
            return Vec::new();
        }
        let Some(class) = derived_class(dfa, q) else {
            return Vec::new();
        };
        let fewer = match class.non_ascii {
            NonAscii::All => &[NonAscii::AboveC1, NonAscii::NotSpace, NonAscii::None][..],
            NonAscii::Word => &[NonAscii::None][..],
            NonAscii::AboveC1 | NonAscii::NotSpace | NonAscii::None => &[],
        };
        std::iter::once(class).chain(fewer.iter().map(|&non_ascii| CharClass { non_ascii, ..class })).collect()
    }

    /// The slice of derived class `class`, read or made on its first use; `None` past
    /// [`MAX_DERIVED_SLICES`] (its states are walked in full).
    fn derived_slice(&self, class: CharClass, derived: &Derived, parts: SliceInputs) -> Option<Arc<Slice>> {
        let slice_dfa = derived.dfa.as_ref()?;
        let slice = compute_once(&derived.slice, || {
            // Read from disk or made by a pass over the trie: milliseconds.
            long_work::notify();
            if self.derived_built.fetch_add(1, Ordering::Relaxed) >= MAX_DERIVED_SLICES {
                self.derived_built.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
            let id = SliceId::Derived(class);
            let (trie, vocab, tok) = (parts.trie, parts.vocab, parts.tok);
            let read = |r: &mut Reader| Slice::read_tables(r, id, class.star(), slice_dfa.clone(), trie, vocab, self);
            if let Some(slice) = self.store.as_ref().and_then(|store| store.load_tables(id, read)) {
                self.derived_loaded.fetch_add(1, Ordering::Relaxed);
                return Some(Arc::new(slice));
            }
            let slice = Slice::build(id, class.star(), slice_dfa.clone(), trie, vocab, tok, self).ok()?;
            if let Some(store) = &self.store {
                store.save_tables(id, |w| slice.write_tables(w));
            }
            Some(Arc::new(slice))
        });
        slice.clone()
    }

    /// The derived slice of `class` (its DFA built on first use, outside the lock: two threads
    /// may both build it, and the first one kept serves both), or `None` for a new class past
    /// [`MAX_DERIVED_CLASSES`].
    fn derived(&self, class: CharClass) -> Option<Arc<Derived>> {
        let known = self.derived.read().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = known.get(&class) {
            return Some(known.clone());
        }
        if known.len() >= MAX_DERIVED_CLASSES {
            return None;
        }
        drop(known);
        let dfa = match class.non_ascii {
            NonAscii::Word => word_star(self.store.as_ref())
                .map(|word| word.with_start_loops(|b| b < 128 && class.ascii >> b & 1 == 1)),
            _ => ByteDfa::from_regex(&class.star(), 64).ok(),
        };
        let made = Arc::new(Derived { dfa, slice: Default::default() });
        let mut derived = self.derived.write().unwrap_or_else(|e| e.into_inner());
        Some(derived.entry(class).or_insert(made).clone())
    }

    /// The slice's groups from its start with the pre-tokenizer and added-token sides of `at`;
    /// for a counted use, with each target's slice state `s'` as `s' + n·k` for its tokens'
    /// number of characters `k`.
    pub(crate) fn groups(&self, parts: SliceInputs, slice: &SliceUse, at: TextKey) -> Arc<SliceGroups> {
        let s = &*slice.slice;
        let from = at.with_regex_state(s.dfa.start());
        let key = (s.id, slice.counts_chars(), from);
        if let Some(known) = self.cache.get(&key) {
            return known;
        }
        // Read from disk or walked: milliseconds.
        long_work::notify();
        if let Some(store) = &self.store {
            if let Some(id) = store.load_id(&key) {
                // Another key's set with the same contents, in memory: not read again.
                let found = match self.with_contents(id) {
                    Some(found) => Some(found),
                    None => store.load_contents(id, parts).map(|found| {
                        self.contents_read.fetch_add(1, Ordering::Relaxed);
                        self.remember_contents(id, Arc::new(found))
                    }),
                };
                if let Some(found) = found {
                    self.loaded.fetch_add(1, Ordering::Relaxed);
                    let bytes = found.heap_bytes();
                    return self.cache.insert(key, found, bytes);
                }
            }
        }
        let mut walked = Walked::default();
        let mut trie = parts.trie;
        if let (Some(split), Some(base)) = (&self.normal, from.normal_start()) {
            // The inert-first tokens lead where they lead from the normal form's start.
            let shared = self.groups(parts, slice, base);
            for (j, &to) in shared.targets.iter().enumerate() {
                for (class, range) in shared.groups_of(j as u32) {
                    for &t in &shared.tokens[range.start as usize..range.end as usize] {
                        if split.inert_first[t as usize] {
                            walked.push(t, to, class);
                        }
                    }
                }
            }
            trie = &split.sensitive;
        }
        trie.for_each_walk_narrowed(
            from,
            |z| s.space.bytes_taken(z.regex_state()),
            |k, b| Ok::<_, std::convert::Infallible>(s.space.byte(k, b)),
            |t, to| {
                let to = match slice.counts_chars() {
                    true => s.counted(to, s.chars[t as usize] as u32),
                    false => to,
                };
                walked.push(t, to, class_or_lone(parts.tok, t))
            },
        )
        .unwrap_or_else(|never| match never {});
        let mut made = SliceGroups::from_walk(walked, parts.words);
        made.certify(s, slice.counts_chars(), from, parts);
        self.walked.fetch_add(1, Ordering::Relaxed);
        let bytes = made.heap_bytes();
        let made = match self.store.as_ref().and_then(|store| store.save(&key, &made)) {
            // Kept once in memory, whichever key met it first.
            Some(id) => self.with_contents(id).unwrap_or_else(|| self.remember_contents(id, Arc::new(made))),
            None => Arc::new(made),
        };
        self.cache.insert(key, made, bytes)
    }

    /// The set in memory whose contents are named `id` in the store, if one is.
    fn with_contents(&self, id: ContentId) -> Option<Arc<SliceGroups>> {
        let known = self.by_contents.lock().unwrap_or_else(|e| e.into_inner());
        known.get(&id).and_then(std::sync::Weak::upgrade)
    }

    /// Notes that `set`'s contents are named `id`, for [`Slices::with_contents`]; the names of
    /// sets no longer held are forgotten as they pile up.
    fn remember_contents(&self, id: ContentId, set: Arc<SliceGroups>) -> Arc<SliceGroups> {
        let mut known = self.by_contents.lock().unwrap_or_else(|e| e.into_inner());
        if known.len() >= MAX_CONTENT_NAMES {
            known.retain(|_, set| set.strong_count() > 0);
        }
        known.insert(id, Arc::downgrade(&set));
        set
    }

    /// The region of a loop use from the pre-tokenizer and added-token components of `at` (see
    /// [`Region`]: the normal form is left out); `None` for a counted use, inside a character
    /// (a region starts between two), or past [`MAX_REGION_STATES`].
    pub(crate) fn region(&self, slice: &SliceUse, at: TextKey) -> Option<Arc<Region>> {
        if slice.counts_chars() || at.partial_char() != 0 {
            return None;
        }
        let s = &*slice.slice;
        let key = (s.id, false, at.with_regex_state(s.dfa.start()).with_normal_state(NormalForm::START));
        if let Some(known) = self.regions.get(&key) {
            return known;
        }
        // Found, ~0.5 ms (every state stepped by all 256 bytes); read from disk, 18-32 µs.
        long_work::notify();
        let stored = self.store.as_ref().and_then(|store| store.load_region(s.id, key.2, |r| Region::read(r, s)));
        let made = match stored {
            Some(region) => {
                self.regions_loaded.fetch_add(1, Ordering::Relaxed);
                region
            }
            None => {
                let region = Region::find(s, key.2);
                self.regions_found.fetch_add(1, Ordering::Relaxed);
                if let Some(store) = &self.store {
                    store.save_region(s.id, key.2, |w| Region::write(region.as_ref(), w));
                }
                region
            }
        };
        #[cfg(test)]
        self.regions_made.lock().unwrap().push((slice.slice.clone(), key.2));
        let made = made.map(|mut region| {
            region.serial = self.next_region.fetch_add(1, Ordering::Relaxed);
            Arc::new(region)
        });
        let bytes = 64 + made.as_ref().map_or(0, |region| region.heap_bytes());
        self.regions.insert(key, made, bytes)
    }

    /// The successor of a node of `slice`'s text space on its way to a root (see
    /// [`chain_roots`]).
    #[cfg(test)]
    pub(crate) fn chain_step(&self, slice: &SliceUse, node: Hub, parts: SliceInputs) -> Option<Hub> {
        chain_successor(node, &slice.slice, slice.counts_chars(), parts)
    }

    /// The subtrees of the tokenizer's trie (ascending, for [`TokenTrie::for_each_walk_below`])
    /// of the tokens whose walk through the slice from its start dies, leaving at a byte some
    /// regex state the use pairs with the leaving slice state takes: the others die in the
    /// guide's regex at that byte too (a JSON string's contents take `"` and `\`, not the
    /// newlines and tabs that half of Llama 3's ~4,800 exit tokens leave by).
    ///
    /// A counted use pairs the leaving slice state with one regex state per count (~60). Most
    /// exits leave by a byte no regex state takes (a control character), so that is asked
    /// first, once per guide ([`TextSpace::may_take`]): trying every count of every exit was
    /// half of a first visit inside a `{0,255}` string on Llama 3. On a regex determinized on
    /// demand, only the first paired state is stepped, and the others are over-approximated by
    /// that answer: stepping them built states decoding may never reach. Walking subtrees whose
    /// tokens then die at that byte costs their walk, never a different set.
    pub(crate) fn exits(&self, slice: &SliceUse, space: &TextSpace) -> Vec<u32> {
        let s = &*slice.slice;
        let n = s.dfa.num_states();
        let dfa = space.dfa();
        let taken = s.exits.iter().filter(|exit| {
            let (at, b) = (exit.at, exit.byte);
            let mut paired = slice.map.iter().skip(at as usize).step_by(n);
            let takes = |q: &u32| *q != DEAD && dfa.next(*q, b) != DEAD;
            match (slice.counts_chars(), dfa.as_dfa()) {
                (false, _) => paired.next().is_some_and(takes),
                (true, Some(_)) => space.may_take(b) && paired.any(takes),
                (true, None) => paired.next().is_some_and(takes) || space.may_take(b),
            }
        });
        let mut nodes: Vec<u32> = taken.flat_map(|exit| exit.nodes.iter().copied()).collect();
        nodes.sort_unstable();
        nodes
    }
}

/// `q`'s use of `slice` as a loop, if it loops on it.
fn use_as_loop(slice: &Arc<Slice>, dfa: &TextRegex, q: u32) -> Option<SliceUse> {
    let map = simulate(&slice.dfa, dfa, q)?;
    Some(SliceUse {
        slice: slice.clone(),
        counting: Counting::Loop,
        states: slice.dfa.num_states() as u32,
        map: map.into(),
    })
}

/// `q`'s use of `slice` counting its characters, if it counts them.
fn use_as_count(slice: &Arc<Slice>, dfa: &TextRegex, q: u32) -> Option<SliceUse> {
    let mut map = simulate_counted(&slice.dfa, slice.max_chars, dfa, q)?;
    let n = slice.dfa.num_states();
    let counting = match saturation(&map, n) {
        Some(c) => {
            map.truncate(n * (c as usize + 1));
            Counting::Saturating(c)
        }
        None => Counting::UpTo,
    };
    Some(SliceUse { slice: slice.clone(), counting, states: n as u32, map: map.into() })
}

/// Slices a tokenizer derives from regex states at most (see the module docs): each holds a
/// table of a byte per token and its exit subtrees' nodes (~0.14 MB on Llama 3).
pub(crate) const MAX_DERIVED_SLICES: usize = 32;

/// Classes a tokenizer derives at most, slices or not: a class whose star no state turns out to
/// loop on or count keeps only its DFA (a few states), but is not checked again.
const MAX_DERIVED_CLASSES: usize = 1024;

/// ASCII characters a regex state must take to one same state for a derived slice: fewer, and
/// the tokens made of them are few enough to walk (hex digits: ~2,500 of Llama 3's tokens).
const MIN_DERIVED_ASCII: u32 = 32;

/// Characters a counted use of a derived slice must still be alive after: `(.)` in an address
/// pattern (one character, then digits) counts the class once and dies, and a slice set, which
/// walks every token of the class, would cost ~100 times the plain walk that stops at the
/// second character.
const MIN_DERIVED_COUNT: usize = 6;

/// Whether `q` counts the characters of a derived slice (its DFA `slice`) consistently over
/// [`MIN_DERIVED_COUNT`] of them, and is still alive after that many.
fn counts_long(slice: &ByteDfa, dfa: &TextRegex, q: u32) -> bool {
    let n = slice.num_states();
    // Over two characters first: most states that fail, fail there, before a longer check
    // steps (and, on a DFA determinized on demand, builds) the regex's states further ahead.
    [2, MIN_DERIVED_COUNT].into_iter().all(|count| {
        simulate_counted(slice, count, dfa, q).is_some_and(|map| map[n * count..].iter().any(|&r| r != DEAD))
    })
}

/// The characters regex state `q` takes to one same state, if at least [`MIN_DERIVED_ASCII`]
/// ASCII ones: the ASCII bytes that lead to the state most of them lead to, and all non-ASCII
/// characters if `q` takes every UTF-8 lead byte (the slice's simulation then checks that they
/// too lead there). `.*?\.txt`'s first state takes every character but `.` and the newline to
/// itself; `[A-Za-z0-9 ]{1,32}`'s states each take their class to the next.
fn derived_class(dfa: &TextRegex, q: u32) -> Option<CharClass> {
    // Most states are narrow (a key's next byte, a digit): two of a few common characters to
    // one state first, before a step per ASCII byte class (`find` runs at every regex state).
    let mut sample = SAMPLE.iter().map(|&b| dfa.next(q, b)).filter(|&r| r != DEAD);
    let first = sample.next()?;
    sample.find(|&r| r == first)?;
    let mut of_class = [u32::MAX; 256];
    let mut to = [DEAD; 128];
    for b in 0..128u8 {
        let c = dfa.byte_class(b) as usize;
        if of_class[c] == u32::MAX {
            of_class[c] = dfa.next(q, b);
        }
        to[b as usize] = of_class[c];
    }
    // The state most ASCII bytes lead to: few distinct ones, counted in place.
    let mut counts = [(DEAD, 0u32); 128];
    let mut distinct = 0;
    for &r in to.iter().filter(|&&r| r != DEAD) {
        match counts[..distinct].iter_mut().find(|(s, _)| *s == r) {
            Some((_, n)) => *n += 1,
            None => {
                counts[distinct] = (r, 1);
                distinct += 1;
            }
        }
    }
    let &(most, n) = counts[..distinct].iter().max_by_key(|&&(r, n)| (n, std::cmp::Reverse(r)))?;
    if n < MIN_DERIVED_ASCII {
        return None;
    }
    let ascii = (0..128).filter(|&b| to[b] == most).fold(0u128, |acc, b| acc | 1 << b);
    let takes = |leads: &[u8]| leads.iter().all(|&b| dfa.next(q, b) != DEAD);
    let non_ascii = if takes(&ALL_LEAD_BYTES) {
        NonAscii::All
    } else if takes(word_lead_bytes()) {
        NonAscii::Word
    } else {
        NonAscii::None
    };
    Some(CharClass { ascii, non_ascii })
}

/// The Unicode word characters past ASCII, in our regex syntax ([`NonAscii::Word`]).
const WORD_PAST_ASCII: &str = "[\\w&&[^\\x00-\\x7F]]";

/// The most states of [`NonAscii::Word`]'s class's DFA (316 with regex-syntax's Unicode
/// tables; the other classes' take a few).
const MAX_WORD_DFA_STATES: usize = 1024;

/// The star of [`WORD_PAST_ASCII`], made once per process ([`word_star_from`]): a class of
/// [`NonAscii::Word`] adds its ASCII characters to it ([`ByteDfa::with_start_loops`]). `None`
/// only past [`MAX_WORD_DFA_STATES`], which the fixed class is not.
fn word_star(store: Option<&SliceStore>) -> Option<&'static ByteDfa> {
    static STAR: std::sync::OnceLock<Option<ByteDfa>> = std::sync::OnceLock::new();
    STAR.get_or_init(|| word_star_from(store)).as_ref()
}

/// The star of [`WORD_PAST_ASCII`], read from `store` if an earlier process kept it there for
/// these Unicode tables (the file's key is the class's ranges), else determinized and kept.
/// Why: determinizing its 316 states costs ~8.5 M instructions (2-3 ms) inside the first mask
/// fill of a process that meets a word class (an e-mail's `[\w.-]+`); reading its 130 KB file,
/// under 1 M.
fn word_star_from(store: Option<&SliceStore>) -> Option<ByteDfa> {
    let key = word_star_key();
    if let Some(star) = store.and_then(|s| s.load_word_star(&key, ByteDfa::read)) {
        return Some(star);
    }
    let star = ByteDfa::from_regex(&format!("{WORD_PAST_ASCII}*"), MAX_WORD_DFA_STATES).ok()?;
    if let Some(store) = store {
        store.save_word_star(&key, |w| star.write(w));
    }
    Some(star)
}

/// The key of the word star's file: its class's ranges, as little-endian `u32` pairs.
fn word_star_key() -> Vec<u8> {
    word_ranges().iter().flat_map(|&(a, b)| [a as u32, b as u32]).flat_map(u32::to_le_bytes).collect()
}

/// The ranges of [`WORD_PAST_ASCII`]'s characters, from regex-syntax's Unicode tables.
fn word_ranges() -> &'static [(char, char)] {
    static RANGES: std::sync::OnceLock<Vec<(char, char)>> = std::sync::OnceLock::new();
    RANGES.get_or_init(|| {
        let hir = regex_syntax::ParserBuilder::new().build().parse(WORD_PAST_ASCII);
        match hir.as_ref().map(|h| h.kind()) {
            Ok(regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class))) => {
                class.ranges().iter().map(|r| (r.start(), r.end())).collect()
            }
            // Never (the class is fixed).
            _ => Vec::new(),
        }
    })
}

/// The lead bytes of [`WORD_PAST_ASCII`]'s characters: a state that takes them all (but not
/// every lead byte) tries [`NonAscii::Word`]. Read off the class's ranges (each range's
/// characters start with every lead byte from its first character's to its last's), not its
/// DFA: [`derived_class`] asks at the first wide state of every process.
fn word_lead_bytes() -> &'static [u8] {
    static LEADS: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    LEADS.get_or_init(|| {
        let lead = |c: char| *c.encode_utf8(&mut [0; 4]).as_bytes().first().unwrap_or(&0);
        if word_ranges().is_empty() {
            // Never: with every lead byte, `NonAscii::All` comes first.
            return ALL_LEAD_BYTES.to_vec();
        }
        let mut leads: Vec<u8> = word_ranges().iter().flat_map(|&(a, b)| lead(a)..=lead(b)).collect();
        leads.sort_unstable();
        leads.dedup();
        leads
    })
}

/// The bytes that start a multi-byte UTF-8 character.
const ALL_LEAD_BYTES: [u8; 51] = {
    let mut leads = [0u8; 51];
    let mut i = 0;
    while i < 51 {
        leads[i] = 0xC2 + i as u8;
        i += 1;
    }
    leads
};

/// Characters most classes of [`MIN_DERIVED_ASCII`] or more hold two of (see
/// [`derived_class`]): a class without two of them to one state derives no slice.
const SAMPLE: &[u8] = b"ea0 E-._";

/// The tokenizer tables a slice walk reads.
#[derive(Clone, Copy)]
pub(crate) struct SliceInputs<'a> {
    pub(crate) trie: &'a TokenTrie,
    pub(crate) vocab: &'a Vocabulary,
    pub(crate) tok: &'a TokenizerDfa,
    /// The words of a token bitset.
    pub(crate) words: usize,
    /// The tokens that start a lone token's split, sorted: from a piece start they lead into
    /// the split, not to a plain class node.
    pub(crate) root_conts: &'a [(u32, u32)],
    /// The lone tokens' splits (which split nodes spell a whole lone token).
    pub(crate) splits: &'a LoneSplits,
}

/// Text keys as four little-endian words each.
fn keys_to_words(keys: impl Iterator<Item = TextKey>) -> Vec<u32> {
    keys.flat_map(|k| {
        let b = k.to_bits();
        [b as u32, (b >> 32) as u32, (b >> 64) as u32, (b >> 96) as u32]
    })
    .collect()
}

/// The keys of [`keys_to_words`]; `None` unless whole keys.
fn words_to_keys(words: &[u32]) -> Option<Vec<TextKey>> {
    words.len().is_multiple_of(4).then(|| {
        (words.chunks_exact(4))
            .map(|w| TextKey::from_bits(w.iter().rev().fold(0u128, |acc, &x| acc << 32 | x as u128)))
            .collect()
    })
}

/// How many witness tokens a certificate tries: enough that nearly every class allows one
/// (a class forbids the tokens that would merge with its own, a few letters at most).
const WITNESSES: usize = 24;

/// The witness tokens of a slice (see [`Certificates`]): tokens of one byte that complete a
/// character of the slice (`chars` 1), with a class, common letters first, then digits, space,
/// capitals and punctuation; then the UTF-8 continuation bytes, which are what a target inside a
/// character can take.
fn witness_tokens(trie: &TokenTrie, vocab: &Vocabulary, tok: &TokenizerDfa, chars: &[u8]) -> Box<[u32]> {
    const PREFERRED: &[u8] = b"etaoinsrhldcumfpgwybvkxjqz0123456789 ETAOINSRHLDCUMFPGWYBVKXJQZ.,-_:;!?/()";
    let mut of_byte = [None; 256];
    trie.for_each_token(|t| {
        if let [b] = vocab.token_bytes(t) {
            of_byte[*b as usize].get_or_insert(t);
        }
    });
    let single = |b: u8| of_byte[b as usize].filter(|&t| tok.class_of(t) != NO_CLASS);
    let complete = PREFERRED.iter().filter_map(|&b| single(b)).filter(|&t| chars.get(t as usize) == Some(&1));
    let mut witnesses: Vec<u32> = complete.take(WITNESSES).collect();
    witnesses.extend((0x80..=0xBFu8).filter_map(single));
    witnesses.into()
}

/// Nodes a chain of hubs may visit per slice group set (the chains of a JSON string's contents
/// meet within a few dozen).
const MAX_CHAIN_NODES: usize = 4096;

/// Roots for the hubs of a slice group set (see the module docs, "Certificates"): each node
/// gets one successor inside the slice's text space ([`chain_successor`]); following
/// successors from a hub ends in a node without one or in a cycle, whose first node met is the
/// root of every node on the way. Each step is a successor in every guide that takes the slice
/// (the map `φ` carries it, as it carries the groups), so a root live in a guide proves its hubs
/// live there: a guide proves the few roots, where it proved each of the 37-85 hubs. A dead
/// root proves nothing; its hubs are then judged on their own.
///
/// A counted use's nodes carry their number of characters (`s + |S|·k`, as its hubs do): a
/// witness completing a character moves on to `k + 1`, never past `max_chars`, so its chains
/// close no cycle. Hubs of one count meet where a loop's do (most often at a piece start that
/// no witness continues); hubs of different counts seldom meet: on Llama 3 the counted sets
/// along a JSON string keep 30-162 roots for their 76-266 hubs. A root past the guide's count
/// has no target there, and its hubs are then judged on their own.
fn chain_roots(hubs: &[Hub], slice: &Slice, counted: bool, parts: SliceInputs) -> (Vec<Hub>, Vec<u32>) {
    let mut index: rustc_hash::FxHashMap<Hub, u32> = hubs.iter().enumerate().map(|(i, &h)| (h, i as u32)).collect();
    let mut nodes: Vec<Hub> = hubs.to_vec();
    let mut next: Vec<u32> = Vec::with_capacity(nodes.len());
    while next.len() < nodes.len() {
        let found = match nodes.len() < MAX_CHAIN_NODES {
            true => chain_successor(nodes[next.len()], slice, counted, parts),
            false => None,
        };
        next.push(found.map_or(NO_HUB, |n| {
            *index.entry(n).or_insert_with(|| {
                nodes.push(n);
                nodes.len() as u32 - 1
            })
        }));
    }
    // Each node's root: follow successors to a node whose root is known, a node without a
    // successor (its own root) or a node already on the way (a cycle, rooted there).
    const UNKNOWN: u32 = u32::MAX;
    let mut root = vec![UNKNOWN; nodes.len()];
    let mut on_way = vec![false; nodes.len()];
    let mut way = Vec::new();
    for start in 0..nodes.len() {
        let mut at = start as u32;
        let found = loop {
            if root[at as usize] != UNKNOWN {
                break root[at as usize];
            }
            if on_way[at as usize] {
                break at;
            }
            on_way[at as usize] = true;
            way.push(at);
            match next[at as usize] {
                NO_HUB => break at,
                n => at = n,
            }
        };
        for n in way.drain(..) {
            root[n as usize] = found;
            on_way[n as usize] = false;
        }
    }
    let mut roots = Vec::new();
    let mut root_index: rustc_hash::FxHashMap<u32, u32> = Default::default();
    let root_of = (0..hubs.len())
        .map(|h| {
            *root_index.entry(root[h]).or_insert_with(|| {
                roots.push(nodes[root[h] as usize]);
                roots.len() as u32 - 1
            })
        })
        .collect();
    (roots, root_of)
}

/// One successor of node `(key, side, split)` of a slice's text space, the way a guide's search
/// would take it: the piece start after a boundary where the node may end its piece (a class
/// node outside a split, as `Engine::boundary` allows), else the node after the first witness
/// token it allows (any but a split's first token at a piece start; one its pair condition
/// allows after a class).
///
/// For a counted use (`counted`), `key`'s regex state is `s + |S|·k`: a boundary keeps `k`, a
/// witness adds the character it completes, and none goes past `max_chars`.
fn chain_successor((key, side, split): Hub, slice: &Slice, counted: bool, parts: SliceInputs) -> Option<Hub> {
    let (space, tok) = (&slice.space, parts.tok);
    let (at, chars) = if counted { slice.uncounted(key) } else { (key, 0) };
    let piece_start = side == START && split == ROOT;
    let class_node = side != START && side != LONE && split == NONE;
    if let Some((start, side, split)) = class_node.then(|| boundary_start(space, at, side)).flatten() {
        return Some((slice.counted(start, chars), side, split));
    }
    slice.witnesses.iter().find_map(|&w| {
        let allowed = match piece_start {
            true => parts.root_conts.binary_search_by_key(&w, |e| e.0).is_err(),
            false => class_node && !tok.forbids(side, w),
        };
        let to = allowed.then(|| space.walk(at, parts.vocab.token_bytes(w))).flatten()?;
        Some((slice.after_witness(to, chars, counted)?, tok.class_of(w), NONE))
    })
}

/// The piece start after a boundary at `key` of a slice's text space, after a node of side
/// `side` (a class, or [`LONE`]), placed as `Engine::boundary` places one: a boundary of the
/// first stage may not follow a class inside an added token's content ([`mark_allowed`]).
fn boundary_start(space: &TextSpace, key: TextKey, side: u32) -> Option<Hub> {
    (0..space.num_stages())
        .filter(|&kind| mark_allowed(kind, space.spells_content(key), side))
        .find_map(|kind| space.mark(key, kind))
        .map(|to| (to, START, ROOT))
}

/// `φ` when regex state `q` of `dfa` loops on `slice` from its start (see the module docs):
/// `phi[s]` is the regex state paired with slice state `s` ([`DEAD`] for states not reachable).
pub(crate) fn simulate(slice: &ByteDfa, dfa: &TextRegex, q: u32) -> Option<Vec<u32>> {
    let mut phi = vec![DEAD; slice.num_states()];
    phi[slice.start() as usize] = q;
    let mut todo = vec![slice.start()];
    // On a grammar's automaton, bytes of one class of both DFAs step alike: one of each, where
    // every byte was a lookup of the state's row (a free object's key mask in a fresh guide,
    // `Github_medium/o43029` on Llama 3: 18.5 → 17.1 M instructions; issue 18's 40 documents,
    // two passes: 773.1 → 761.4 M). A DFA's table step costs less than finding the pairs, and
    // most calls fail at their first bytes: with the pairs there too, issue 17's Github_*
    // documents took 1.5 % more instructions; but not on a slice of many states.
    let pairs = (dfa.as_dfa().is_none() || slice.num_states() > FEW_SLICE_STATES).then(|| class_pair_bytes(slice, dfa));
    let bytes: &[u8] = pairs.as_deref().unwrap_or(&ALL_BYTES);
    while let Some(s) = todo.pop() {
        let r = phi[s as usize];
        for &b in bytes {
            let s2 = slice.next(s, b);
            if s2 == DEAD {
                continue;
            }
            let r2 = dfa.next(r, b);
            if r2 == DEAD {
                return None;
            }
            match phi[s2 as usize] {
                DEAD => {
                    phi[s2 as usize] = r2;
                    todo.push(s2);
                }
                known if known != r2 && !equivalent(dfa, known, r2) => return None,
                _ => {}
            }
        }
    }
    Some(phi)
}

/// Slice states past which [`simulate`] steps one byte per class pair on a minimal DFA too:
/// [`NonAscii::Word`]'s ~300 states took ~80,000 steps with every byte.
const FEW_SLICE_STATES: usize = 16;

/// Every byte, ascending.
const ALL_BYTES: [u8; 256] = {
    let mut all = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        all[b] = b as u8;
        b += 1;
    }
    all
};

/// One byte of each pair of byte classes, the slice's and the regex's, that some byte has:
/// bytes of one pair step both DFAs alike from any states.
fn class_pair_bytes(slice: &ByteDfa, dfa: &TextRegex) -> Vec<u8> {
    // A bitset over the 2^16 pairs, on the stack.
    let mut seen_pairs = [0u64; 1024];
    (0..=255u8)
        .filter(|&b| {
            let pair = (slice.byte_class(b) as usize) << 8 | dfa.byte_class(b) as usize;
            let new = seen_pairs[pair / 64] & (1 << (pair % 64)) == 0;
            seen_pairs[pair / 64] |= 1 << (pair % 64);
            new
        })
        .collect()
}

/// Pairs of regex states [`equivalent`] may visit before it gives up. Small: a slice is found
/// on the way to a first mask, and states that differ only inside one character converge within
/// a few bytes; with 4,096, `Github_easy/o58906`'s counted strings spent 79 ms proving pairs
/// that never converge (Mistral-7B).
const MAX_EQUIVALENCE_PAIRS: usize = 64;

/// Bytes past `a` and `b` [`equivalent`] looks at most: a pair that has not met by then is taken
/// as distinct. Two positions of a counted string (`{3,255}`) differ only at its end, and each
/// byte further builds the next position of both on a DFA determinized on demand: with the pair
/// bound alone, 64 positions ahead at every step inside `Github_easy/o58906`'s strings, in every
/// guide (~7.6 M instructions for two steps on Llama 3).
const MAX_EQUIVALENCE_DEPTH: usize = 8;

/// Whether regex states `a` and `b` take exactly the same byte strings to acceptance, so that a
/// slice may pair either with one slice state: a search over the pairs of states the same bytes
/// lead them to (one byte per class), failing on a pair where one accepts and the other does
/// not, where only one is dead, or past [`MAX_EQUIVALENCE_PAIRS`] pairs or
/// [`MAX_EQUIVALENCE_DEPTH`] bytes (taking equivalent states as distinct costs a slice, never a
/// mask). A minimal DFA has no
/// distinct equivalent states; a DFA determinized on demand does (a character's UTF-8 lead
/// bytes reach the same position by different NFA states), and without this check
/// `Github_easy/o58906`'s counted strings took no slice: 23 ms for one mask on Mistral-7B.
fn equivalent(dfa: &TextRegex, a: u32, b: u32) -> bool {
    if dfa.as_dfa().is_some() {
        return false; // minimal: distinct states differ
    }
    let mut seen_classes = [false; 256];
    let bytes: Vec<u8> =
        (0..=255u8).filter(|&c| !std::mem::replace(&mut seen_classes[dfa.byte_class(c) as usize], true)).collect();
    let mut seen = rustc_hash::FxHashSet::default();
    let mut todo = vec![(a, b, 0)];
    while let Some((x, y, depth)) = todo.pop() {
        if x == y || !seen.insert((x.min(y), x.max(y))) {
            continue;
        }
        if x == DEAD
            || y == DEAD
            || dfa.is_accepting(x) != dfa.is_accepting(y)
            || seen.len() > MAX_EQUIVALENCE_PAIRS
            || depth == MAX_EQUIVALENCE_DEPTH
        {
            return false;
        }
        todo.extend(bytes.iter().map(|&c| (dfa.next(x, c), dfa.next(y, c), depth + 1)));
    }
    true
}

/// The map of a counted use of `slice` by regex state `q` of `dfa` (see [`SliceUse`]): for every
/// slice state `s` and number of completed characters `k ≤ max_chars` reachable from the
/// slice's start, the one regex state every byte string reaching `(s, k)` leads `q` to ([`DEAD`]
/// included: once dead, a path stays dead). `None` when two such strings disagree, or when not
/// even the first character is allowed (the state is narrow: a plain walk is cheap).
///
/// This is the loop check of [`simulate`] with the characters counted: `[^"]{0,255}`'s states
/// count characters, so no state loops, but from each of them a token's number of characters and
/// its end in the slice decide where it leads. Bytes are tried one per class of the two DFAs
/// together (tens, not 256).
pub(crate) fn simulate_counted(slice: &ByteDfa, max_chars: usize, dfa: &TextRegex, q: u32) -> Option<Vec<u32>> {
    let mut map = vec![UNSEEN; slice.num_states() * (max_chars + 1)];
    map[slice.start() as usize] = q;
    count_on(slice, dfa, map, 0, vec![slice.start()], true)
}

/// A counted map's entry no string reaches (yet).
const UNSEEN: u32 = DEAD - 1;

/// [`simulate_counted`]'s walk from the slice states `todo` at count `from`, whose entries of
/// `map` are set (the others [`UNSEEN`], or set and checked against), up to `map`'s last count;
/// with `refuse_first`, `None` where the first character dies.
///
/// The walk goes count by count, and stops where a count pairs every slice state as the one
/// before did: each count's pairs are a function of the previous count's alone (the same
/// moves, checked alike), so every later count repeats it, and is copied. Why: a state that
/// takes a class once and then loops on it (a `{1,}` string, a host name's first character)
/// tabled the same count again up to a token's most characters, at every such state of every
/// guide: see `docs/design.md` §8 for what stopping saved.
fn count_on(
    slice: &ByteDfa,
    dfa: &TextRegex,
    mut map: Vec<u32>,
    from: usize,
    mut todo: Vec<u32>,
    refuse_first: bool,
) -> Option<Vec<u32>> {
    let n = slice.num_states();
    let max_chars = map.len() / n - 1;
    let bytes = class_pair_bytes(slice, dfa);
    // Per slice state, the bytes it takes, where to and whether they complete a character,
    // listed once: a state inside a character takes a few continuation bytes of the tens of
    // class pairs tried at each count.
    let moves: Vec<Vec<(u8, u32, bool)>> = (0..n as u32)
        .map(|s| {
            let step =
                |&b: &u8| Some(slice.next(s, b)).filter(|&s2| s2 != DEAD).map(|s2| (b, s2, slice.is_accepting(s2)));
            bytes.iter().filter_map(step).collect()
        })
        .collect();
    let mut next_count = Vec::new();
    let mut k = from;
    loop {
        while let Some(s) = todo.pop() {
            let r = map[s as usize + n * k];
            for &(b, s2, completes) in &moves[s as usize] {
                let k2 = k + completes as usize;
                if k2 > max_chars {
                    continue;
                }
                let r2 = if r == DEAD { DEAD } else { dfa.next(r, b) };
                if refuse_first && k == 0 && r2 == DEAD {
                    return None;
                }
                match &mut map[s2 as usize + n * k2] {
                    seen @ &mut UNSEEN => {
                        *seen = r2;
                        match completes {
                            true => next_count.push(s2),
                            false => todo.push(s2),
                        }
                    }
                    known if *known != r2 && !equivalent(dfa, *known, r2) => return None,
                    _ => {}
                }
            }
        }
        // Count `k` is complete; so is `k - 1` (walked, or the seeds' count, set in full).
        if k > from && map[n * (k - 1)..n * k] == map[n * k..n * (k + 1)] {
            for later in k + 1..=max_chars {
                map.copy_within(n * k..n * (k + 1), n * later);
            }
            break;
        }
        if next_count.is_empty() {
            break;
        }
        std::mem::swap(&mut todo, &mut next_count);
        k += 1;
    }
    // Pairs no token reaches stay unseen; they are never looked up.
    for r in &mut map {
        if *r == UNSEEN {
            *r = DEAD;
        }
    }
    Some(map)
}

/// The count from which a counted use's `map` (`n` slice states per count) no longer changes,
/// if below its last: every later count pairs each slice state with the regex state count `c`
/// does. From count `c` one more character leads to count `c + 1`, paired as `c` is, so this
/// holds past the table too, and count `c`'s entry serves every later count
/// ([`Counting::Saturating`]).
fn saturation(map: &[u32], n: usize) -> Option<u32> {
    let counts = map.len() / n;
    let block = |k: usize| &map[k * n..(k + 1) * n];
    let mut c = counts - 1;
    while c > 0 && block(c - 1) == block(c) {
        c -= 1;
    }
    (c < counts - 1).then_some(c as u32)
}

/// Whether regex state `q` of `dfa` takes every byte the slice takes from its start: a necessary
/// condition of both uses, and the one most regex states fail. [`Slices::find`] checks it first,
/// without allocating, because it runs on every regex state a guide walks, narrow ones included.
fn takes_first_byte(slice: &ByteDfa, dfa: &TextRegex, q: u32) -> bool {
    (0..=255u8).all(|b| slice.next(slice.start(), b) == DEAD || dfa.next(q, b) != DEAD)
}

#[cfg(test)]
mod word_tests {
    use super::*;

    /// The lead bytes read off the word class's ranges are those its DFA takes from its start.
    #[test]
    fn word_lead_bytes_are_the_word_stars_first_bytes() {
        let star = word_star(None).expect("the word class's star");
        let firsts: Vec<u8> = ALL_LEAD_BYTES.into_iter().filter(|&b| star.next(star.start(), b) != DEAD).collect();
        assert_eq!(word_lead_bytes(), &firsts[..]);
        // Not every lead byte: such a state tries `NonAscii::All` first.
        assert!(firsts.len() < ALL_LEAD_BYTES.len() && firsts.len() > 40, "{firsts:?}");
    }

    /// The word star is kept in a cache directory by the first process that makes it and read
    /// back by the next, the same DFA; a damaged file is made and written again.
    #[test]
    fn the_word_star_is_read_back_from_the_cache_directory() {
        let dir = std::env::temp_dir().join(format!("propertok-word-star-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = SliceStore::at(dir.clone(), 7);
        let bytes = |dfa: &ByteDfa| {
            let mut w = Vec::new();
            dfa.write(&mut w);
            w
        };
        let made = word_star_from(Some(&store)).expect("made");
        assert_eq!(bytes(&made), bytes(word_star(None).expect("the star")));
        let file = dir.join("word-star.dfa");
        let written = std::fs::read(&file).expect("kept in the cache directory");
        let read = store.load_word_star(&word_star_key(), ByteDfa::read).expect("read back");
        assert_eq!(bytes(&read), bytes(&made));
        assert!(store.load_word_star(&word_star_key()[4..], ByteDfa::read).is_none(), "other ranges");
        assert!(SliceStore::at(dir.clone(), 8).load_word_star(&word_star_key(), ByteDfa::read).is_none());
        let mut damaged = written.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 1;
        std::fs::write(&file, &damaged).unwrap();
        assert!(store.load_word_star(&word_star_key(), ByteDfa::read).is_none(), "damaged");
        assert_eq!(bytes(&word_star_from(Some(&store)).expect("made again")), bytes(&made));
        assert_eq!(std::fs::read(&file).unwrap(), written, "written again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod count_tests {
    use super::*;

    /// [`count_on`] as it was before it stopped at a repeated count: every pair, depth first,
    /// up to the last count.
    fn every_count(slice: &ByteDfa, max_chars: usize, dfa: &TextRegex, q: u32) -> Option<Vec<u32>> {
        let n = slice.num_states();
        let mut map = vec![UNSEEN; n * (max_chars + 1)];
        map[slice.start() as usize] = q;
        let mut todo = vec![(slice.start(), 0usize)];
        while let Some((s, k)) = todo.pop() {
            let r = map[s as usize + n * k];
            for b in 0..=255u8 {
                let s2 = slice.next(s, b);
                if s2 == DEAD {
                    continue;
                }
                let k2 = k + slice.is_accepting(s2) as usize;
                if k2 > max_chars {
                    continue;
                }
                let r2 = if r == DEAD { DEAD } else { dfa.next(r, b) };
                if k == 0 && r2 == DEAD {
                    return None;
                }
                match &mut map[s2 as usize + n * k2] {
                    seen @ &mut UNSEEN => {
                        *seen = r2;
                        todo.push((s2, k2));
                    }
                    known if *known != r2 && !equivalent(dfa, *known, r2) => return None,
                    _ => {}
                }
            }
        }
        Some(map.into_iter().map(|r| if r == UNSEEN { DEAD } else { r }).collect())
    }

    /// The counted tables are those of a walk of every count, whether the counts repeat from
    /// some count on (`{2,}`, a loop after its first character, `[\w|.]+` with the Unicode
    /// word class's ~300 slice states) or not (`{3,12}`, an alternation of lengths), and the
    /// refusals are the same.
    #[test]
    fn counts_stop_where_they_repeat_with_the_same_tables() {
        // The class of `[\w|.]` with Unicode's word characters: ~300 slice states.
        let word = ByteDfa::from_regex(r"([0-9A-Za-z_|.]|[\w&&[^\x00-\x7F]])*", 1024).unwrap();
        let letters = CharClass { ascii: 0x3FF_FFFF << b'a', non_ascii: NonAscii::None };
        let json = ByteDfa::from_regex(r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"#, 64).unwrap();
        let cases: [(&str, ByteDfa); 9] = [
            ("[a-z]{2,}x", ByteDfa::from_regex(&letters.star(), 64).unwrap()),
            ("[a-z]{3,12}x", ByteDfa::from_regex(&letters.star(), 64).unwrap()),
            ("([a-z]{4}|[a-z]{7})x", ByteDfa::from_regex(&letters.star(), 64).unwrap()),
            ("[a-z]", ByteDfa::from_regex(&letters.star(), 64).unwrap()),
            ("x", ByteDfa::from_regex(&letters.star(), 64).unwrap()),
            (r"[\w|.]+@", word.clone()),
            (r"\w{2,5}@", word),
            (r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){1,}""#, json.clone()),
            (r#"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){0,20}""#, json),
        ];
        assert!(cases[5].1.num_states() > 100, "the word class's DFA has {} states", cases[5].1.num_states());
        for (regex, slice) in &cases {
            let dfa = TextRegex::from(ByteDfa::from_regex(regex, 10_000).unwrap());
            for max_chars in [1, 2, 8, 30] {
                let got = simulate_counted(slice, max_chars, &dfa, dfa.start());
                assert_eq!(got, every_count(slice, max_chars, &dfa, dfa.start()), "{regex} up to {max_chars}");
            }
        }
    }
}

#[cfg(test)]
mod saturation_tests {
    use super::saturation;

    #[test]
    fn a_map_saturates_where_its_last_counts_stop_changing() {
        // Two slice states per count.
        assert_eq!(saturation(&[1, 2, 3, 4, 3, 4, 3, 4], 2), Some(1));
        assert_eq!(saturation(&[1, 2, 3, 4, 5, 6, 5, 6], 2), Some(2));
        assert_eq!(saturation(&[1, 2, 1, 2], 2), Some(0));
        // The last two counts differ (one slice state is enough): no saturation.
        assert_eq!(saturation(&[1, 2, 3, 4, 3, 5], 2), None);
        assert_eq!(saturation(&[7, 8], 2), None);
    }
}
