//! The text side of a lazy guide: the same automaton as
//! [`crate::pre_tokenizer::text_automaton`] — regex state × pre-tokenizer state × added-token
//! prefix × normal-form state — but with pure transitions over immutable tables, so any thread
//! can walk it without a lock. A text state is identified by its packed components
//! ([`TextKey`]); the guide interns the ones it keeps as dense ids.
//!
//! The normal form ([`NormalForm`], with an NFC or NFKC normalizer) is its own component here,
//! where the eager construction folds it into the pre-tokenizer's automaton: explored in full,
//! that product is ~1,000 times larger (Qwen2: ~1 GB of tables, 4 s), while here it costs a
//! table lookup per character. Inside a multi-byte character the key holds the decoding prefix
//! (one per set of classes the character can still complete into, not one per byte value); the
//! normal form steps when the character is complete.
//!
//! Without a pre-tokenizer (SentencePiece BPE) the pre-tokenizer side is a single state that
//! never places a mark.
//!
//! A grammar's special tokens are marker bytes in the regex ([`TOKEN_MARKER`]), never text: a
//! byte step refuses the marker, and [`TextSpace::token`] takes a whole marker where the text
//! so far may end (as at acceptance) and restarts every other component, because the
//! tokenizer splits special tokens out first and tokenizes the text on each side on its own.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use super::pushdown::PushdownDfa;
use crate::error::{Error, Result};
use crate::pre_tokenizer::normal_form::NormalForm;
use crate::pre_tokenizer::piece_table::PieceTable;
use crate::pre_tokenizer::text_automaton::{ContentTrie, NOT_A_PREFIX};
use crate::regex::byte_dfa::{ByteDfa, DEAD, TOKEN_MARKER, TOKEN_MARKER_INDEX};
use crate::util::byte_set::ByteSet;
use crate::util::concurrent::Slots;

const Q_BITS: u32 = 21;
const M_BITS: u32 = 22;
const N_BITS: u32 = 21;
/// The normal form's state, then the character being read (1 + its decoding prefix, 0 between
/// characters; see `NormalForm::byte`).
const F_BITS: u32 = 13;
const PARTIAL_BITS: u32 = 17;
/// The packed value of [`NOT_A_PREFIX`].
const N_NONE: u128 = (1 << N_BITS) - 1;
const F_SHIFT: u32 = Q_BITS + M_BITS + N_BITS;
const PARTIAL_SHIFT: u32 = F_SHIFT + F_BITS;
const _: () = assert!(PARTIAL_SHIFT + PARTIAL_BITS <= 128);

/// In a byte closure's shape, where a state's edge count would be: the state is described by
/// the closure's caller instead ([`TextSpace::byte_closure_of`]).
pub(crate) const WIDE_STATE: u32 = u32::MAX;

/// What the caller of [`TextSpace::byte_closure_of`] makes of a wide state.
pub(crate) enum WideState {
    /// Its description (in the shape after [`WIDE_STATE`]) and the states the closure goes on
    /// from after it (their numbers follow).
    Described(Vec<u32>, Vec<TextKey>),
    /// Spelled out byte by byte like a narrow state, if it takes at most
    /// [`ClosureBounds::wide_bytes`] bytes (a class of more than [`WIDE_ASCII_BYTES`] ASCII
    /// characters that no slice takes: a UUID's `[a-z0-9]{4}`).
    SpelledOut,
}

/// How far [`TextSpace::byte_closure_of`] goes before it gives up.
#[derive(Clone, Copy)]
pub(crate) struct ClosureBounds {
    pub(crate) max_states: usize,
    pub(crate) max_edges: usize,
    /// A state taking more bytes, or more than [`WIDE_ASCII_BYTES`] ASCII ones, is *wide*:
    /// left to the caller (a free class's closure would soon pass any bound, and a class of
    /// more than 32 ASCII characters may loop on a slice).
    pub(crate) wide_bytes: usize,
    /// Give up at a byte outside ASCII.
    pub(crate) ascii_only: bool,
    /// Give up at a state whose stack has more frames than the first start's and this many
    /// (`u32::MAX`: any): a grammar's closure that nests (`[[[[` in one piece of punctuation)
    /// never ends.
    pub(crate) max_nesting: u32,
}

/// The ASCII bytes past which a state is wide in any byte closure ([`ClosureBounds`]): a
/// class of more may be a derived slice's (`crate::lazy::slice`), and spelled out, a counted
/// use of it (`[a-zA-Z0-9]{1,100}`) would build thousands of edges before giving up.
const WIDE_ASCII_BYTES: usize = 32;

/// See [`TextSpace::has_few_regex_states`]: a greeting's or a short tool call's regex, where
/// a JSON schema's has hundreds.
pub const FEW_REGEX_STATES: usize = 64;

/// The states up to which [`TextSpace::byte_closure_of`] numbers a state by a linear search.
const LINEAR_CLOSURE_STATES: usize = 32;

/// A text state's byte closure ([`TextSpace::byte_closure`]).
pub(crate) struct ByteClosure {
    /// The states, breadth first from the text state (number 0).
    pub(crate) states: Vec<TextKey>,
    /// The graph up to the numbering: equal shapes, equal walks.
    pub(crate) shape: Box<[u32]>,
}

impl ByteClosure {
    /// The number of `state`, which the closure holds.
    pub(crate) fn number(&self, state: TextKey) -> u32 {
        self.states.iter().position(|&k| k == state).expect("a walk stays in its byte closure") as u32
    }
}

/// A dense id of a text state kept by a guide's engine.
pub(crate) type TextId = u32;

/// A text state `(regex state, pre-tokenizer state, added-token prefix, normal form)`, packed
/// in 128 bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TextKey(u128);

impl std::fmt::Debug for TextKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.n();
        let n = if n == NOT_A_PREFIX { "-".to_string() } else { n.to_string() };
        write!(f, "TextKey(q {}, m {}, n {}, f {}, partial {})", self.q(), self.m(), n, self.f(), self.partial())
    }
}

impl TextKey {
    #[inline]
    fn pack(q: u32, m: u32, n: u32) -> TextKey {
        let n = if n == NOT_A_PREFIX { N_NONE } else { n as u128 };
        TextKey(q as u128 | (m as u128) << Q_BITS | n << (Q_BITS + M_BITS))
    }
    /// The same key with normal-form state `f` and partial character `partial`.
    #[inline]
    fn with_normal(self, f: u32, partial: u32) -> TextKey {
        TextKey(self.0 & ((1 << F_SHIFT) - 1) | (f as u128) << F_SHIFT | (partial as u128) << PARTIAL_SHIFT)
    }
    /// The same key with normal-form state `f`, between characters.
    pub(crate) fn with_normal_state(self, f: u32) -> TextKey {
        self.with_normal(f, 0)
    }
    /// The normal-form component, state and partial character, in one word.
    pub(crate) fn normal_part(self) -> u32 {
        self.partial() << F_BITS | self.f()
    }
    /// The partial character (see [`TextKey`]), 0 between characters.
    pub(crate) fn partial_char(self) -> u32 {
        self.partial()
    }
    /// The same key at the normal form's start, when it is elsewhere between characters.
    pub(crate) fn normal_start(self) -> Option<TextKey> {
        (self.partial() == 0 && self.f() != NormalForm::START).then(|| self.with_normal(NormalForm::START, 0))
    }
    #[inline]
    fn f(self) -> u32 {
        ((self.0 >> F_SHIFT) & ((1 << F_BITS) - 1)) as u32
    }
    #[inline]
    fn partial(self) -> u32 {
        (self.0 >> PARTIAL_SHIFT) as u32
    }
    #[inline]
    fn q(self) -> u32 {
        (self.0 & ((1 << Q_BITS) - 1)) as u32
    }
    /// The packed bits, for a file (see `crate::lazy::slice_store`).
    pub(crate) fn to_bits(self) -> u128 {
        self.0
    }
    /// The key of [`TextKey::to_bits`]' bits.
    pub(crate) fn from_bits(bits: u128) -> TextKey {
        TextKey(bits)
    }
    /// The regex state.
    #[inline]
    pub(crate) fn regex_state(self) -> u32 {
        self.q()
    }
    /// The same pre-tokenizer state and added-token prefix with regex state `q` (of this or
    /// another text space).
    #[inline]
    pub(crate) fn with_regex_state(self, q: u32) -> TextKey {
        TextKey(self.0 & !((1 << Q_BITS) - 1) | q as u128)
    }
    #[inline]
    fn m(self) -> u32 {
        ((self.0 >> Q_BITS) & ((1 << M_BITS) - 1)) as u32
    }
    #[inline]
    fn n(self) -> u32 {
        match (self.0 >> (Q_BITS + M_BITS)) & N_NONE {
            N_NONE => NOT_A_PREFIX,
            n => n as u32,
        }
    }
}

/// One step of a way through the text states (see [`TextSpace::shortest_way`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    Byte(u8),
    /// A boundary of this kind.
    Mark(usize),
    /// The grammar's special token with this index.
    Token(usize),
    /// The text may end here.
    Done,
    /// No text reaches acceptance from here: every node at this text state is dead.
    Stuck,
}

/// What [`TextSpace::shortest_way`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaySearch {
    /// The steps to take from each text state along the way.
    Found(Vec<(TextKey, Step)>),
    /// Every text state reachable was expanded and none accepts.
    NoWay,
    /// The search expanded its budget of text states first.
    GaveUp,
}

/// The regex component of a text space: a regex's DFA, or a grammar's pushdown automaton
/// (built as it is walked, see [`crate::lazy::pushdown`]), read through the same methods.
#[allow(clippy::large_enum_variant)] // one per guide; the regex DFA stays inline on the byte-step path
pub enum TextRegex {
    Dfa(ByteDfa),
    Grammar(Box<PushdownDfa>),
}

impl From<ByteDfa> for TextRegex {
    fn from(dfa: ByteDfa) -> TextRegex {
        TextRegex::Dfa(dfa)
    }
}

impl TextRegex {
    #[inline]
    pub fn next(&self, q: u32, b: u8) -> u32 {
        match self {
            TextRegex::Dfa(dfa) => dfa.next(q, b),
            TextRegex::Grammar(g) => g.next(q, b),
        }
    }
    pub fn start(&self) -> u32 {
        match self {
            TextRegex::Dfa(dfa) => dfa.start(),
            TextRegex::Grammar(g) => g.start(),
        }
    }
    #[inline]
    pub fn is_accepting(&self, q: u32) -> bool {
        match self {
            TextRegex::Dfa(dfa) => dfa.is_accepting(q),
            TextRegex::Grammar(g) => g.is_accepting(q),
        }
    }
    /// The most stack frames of `q`'s configurations (0 for a DFA).
    pub fn stack_depth(&self, q: u32) -> u32 {
        match self {
            TextRegex::Dfa(_) => 0,
            TextRegex::Grammar(g) => g.stack_depth(q),
        }
    }
    pub fn distance_to_accept(&self, q: u32) -> u32 {
        match self {
            TextRegex::Dfa(dfa) => dfa.distance_to_accept(q),
            TextRegex::Grammar(g) => g.distance_to_accept(q),
        }
    }
    /// Bytes of one class have the same transitions from every state.
    #[inline]
    pub fn byte_class(&self, b: u8) -> u8 {
        match self {
            TextRegex::Dfa(dfa) => dfa.byte_class(b),
            TextRegex::Grammar(g) => g.byte_class(b),
        }
    }
    /// The regex's DFA; `None` for a grammar's automaton, which has no eager form.
    pub fn as_dfa(&self) -> Option<&ByteDfa> {
        match self {
            TextRegex::Dfa(dfa) => Some(dfa),
            TextRegex::Grammar(_) => None,
        }
    }
    /// What the automaton is: `"minimal DFA"` (built up front), `"DFA on demand"` (a regex's
    /// DFA determinized as decoding reaches its states), `"outlined rules"` (a regex written as
    /// rules, `crate::regex::outline`, determinized on demand) or `"pushdown"` (a grammar's rules).
    pub fn kind(&self) -> &'static str {
        match self {
            TextRegex::Dfa(_) => "minimal DFA",
            TextRegex::Grammar(g) if g.regex().is_some() && g.num_rules() > 1 => "outlined rules",
            TextRegex::Grammar(g) if g.regex().is_some() => "DFA on demand",
            TextRegex::Grammar(_) => "pushdown",
        }
    }
    /// Whether this is a grammar's automaton with no bound on nesting (unboundedly many states).
    pub fn nests_without_bound(&self) -> bool {
        matches!(self, TextRegex::Grammar(g) if !g.is_bounded())
    }
    /// States whose languages' union is `q`'s, each a thread of `q` (see
    /// [`PushdownDfa::threads`]), for a regex determinized on demand. `None` for a DFA built up
    /// front, whose states are not sets, and for a grammar's automaton: over issue 18's 40
    /// recursive schemas (`benches/schema_compare.py`, Llama 3, two runs each) the mask p99 rose
    /// 186-202 → 220-226 µs with threads. Since a way's distances are read off the
    /// configurations (`PushdownDfa::distances_after`) they change nothing: the masks of two
    /// passes over those schemas' documents took 773.1 M instructions without them and 773.4 M
    /// with them.
    pub fn threads(&self, q: u32) -> Option<Vec<u32>> {
        match self {
            TextRegex::Grammar(g) if g.regex().is_some() => g.threads(q),
            _ => None,
        }
    }
    /// A nesting grammar's automaton (kind `"pushdown"`), not a regex's.
    pub fn nesting_grammar(&self) -> Option<&PushdownDfa> {
        match self {
            TextRegex::Grammar(g) if g.regex().is_none() => Some(g),
            _ => None,
        }
    }
    /// The limit a grammar's automaton ran into, if it did (see [`PushdownDfa::overflow`]).
    pub fn overflow(&self) -> Option<Error> {
        match self {
            TextRegex::Dfa(_) => None,
            TextRegex::Grammar(g) => g.overflow(),
        }
    }
}

/// See the module docs.
pub struct TextSpace {
    dfa: TextRegex,
    /// `None` without a pre-tokenizer.
    pieces: Option<Arc<PieceTable>>,
    contents: Arc<ContentTrie>,
    /// The tokenizer's normalizer: the text must be a string it leaves unchanged.
    normal: Option<&'static NormalForm>,
    start: TextKey,
    /// How many special tokens the regex's markers name.
    tokens: usize,
    /// The text bytes of each of the regex's byte classes (the token marker left out): a way
    /// search steps the regex once per class (a JSON string's body has a handful) rather than
    /// once per byte.
    class_bytes: Vec<Vec<u8>>,
    /// The same classes as byte sets, for [`TextSpace::bytes_taken`].
    class_sets: Vec<ByteSet>,
    /// For a DFA built up front, the index in `class_bytes` of each of its byte classes
    /// ([`NO_CLASS_INDEX`] for the token marker's class alone), so that its transitions are
    /// read row by row ([`TextSpace::any_class_step`]).
    class_index: Vec<u32>,
    /// See [`TextSpace::may_take`].
    taken_somewhere: OnceLock<[bool; 256]>,
    /// [`TextSpace::bytes_taken`] by regex state, filled on first use: it is asked at every
    /// node of a trie walk that meets a new regex state and by every liveness proof, and each
    /// answer steps the regex once per byte class (~250 instructions; 9 % of the instructions
    /// of a narrow state's first visit on Llama 3 before it was kept). 40 bytes a state, in
    /// segments made as states are asked: at most ~0.65 MB for the 10,000 states of the
    /// largest DFA a lazy guide builds up front. A grammar's automaton answers from its
    /// configurations (one pass over the byte classes): its states are kept here too, as they
    /// are asked, under 40 bytes beside each state's own configurations (at most 2,097,151
    /// states, `TextSpace::MAX_REGEX_STATES`: ~84 MB, where the configurations take far more).
    taken: Slots<ByteSet>,
    /// [`TextSpace::class_steps`] by regex state, filled on first use: 8 bytes per class a
    /// state takes.
    class_steps: Slots<Box<[ClassStep]>>,
}

/// The tables of a way search ([`TextSpace::shortest_way`]), kept per thread between searches.
///
/// Why: most searches expand one or two states (a piece start next to a known way, or one
/// that no byte may follow), and making the maps, the heap and the list anew cost them five
/// allocations and the maps' growth: 52,000 searches along the 300 documents of issue 17 on
/// Llama 3, all in narrow first visits.
#[derive(Default)]
struct WayTables {
    /// Per state reached: the fewest bytes to it, and the state and step it came by.
    best: FxHashMap<TextKey, (u32, TextKey, Step)>,
    /// The cost at which a state was opened and the bound up to which its successors are in
    /// the open list.
    opened: FxHashMap<TextKey, (u32, u32)>,
    open: BinaryHeap<Reverse<(u32, u32, TextKey)>>,
}

/// The most entries a [`WayTables`] map keeps room for between searches: a longer search's
/// tables are dropped, not kept by the thread. Small, because most searches take a few
/// entries and a kept table is scattered over the room it has: with room for 4,096, each small
/// search met its few entries in cold cache lines (Llama 3, 300 documents, back to back with
/// 64 and the one-byte ways of [`TextSpace::nearest_byte`] four times: way steps 5-22 % faster).
const KEPT_WAY_ENTRIES: usize = 64;

impl WayTables {
    /// Empties the tables (cheaply when they are: before each search as well as after, so
    /// that a search that panicked leaves nothing behind for the next).
    fn clear(&mut self) {
        if self.best.capacity() > KEPT_WAY_ENTRIES || self.open.capacity() > KEPT_WAY_ENTRIES {
            *self = WayTables::default();
            return;
        }
        if !self.best.is_empty() {
            self.best.clear();
        }
        if !self.opened.is_empty() {
            self.opened.clear();
        }
        self.open.clear();
    }
}

thread_local! {
    static WAY_TABLES: std::cell::RefCell<WayTables> = std::cell::RefCell::default();
}

/// [`TextSpace::class_index`] of a DFA class that holds only the token marker.
const NO_CLASS_INDEX: u32 = u32::MAX;

/// A regex step of a way search: `(the successor's distance to acceptance, class index)`.
type ClassStep = (u32, u32);

impl TextSpace {
    /// `Err(LimitExceeded)` when a side has more states than a key can hold (2M regex states,
    /// 4M pre-tokenizer states, 2M added-token prefixes; a grammar's automaton is bounded by
    /// the guide's `max_product_states`, below that).
    pub fn new(
        dfa: impl Into<TextRegex>,
        pieces: Option<Arc<PieceTable>>,
        contents: Arc<ContentTrie>,
        normal: Option<&'static NormalForm>,
    ) -> Result<TextSpace> {
        let too_many = |what: &str, limit: &'static str, n: usize, max: u64| -> Result<()> {
            if n as u64 >= max {
                return Err(Error::LimitExceeded {
                    limit,
                    value: max.to_string(),
                    what: format!("{n} {what}: more than a lazy guide's text state can hold"),
                });
            }
            Ok(())
        };
        let dfa = dfa.into();
        if let Some(regex) = dfa.as_dfa() {
            too_many("regex DFA states", "max_byte_dfa_states", regex.num_states(), 1 << Q_BITS)?;
        }
        too_many(
            "pre-tokenizer states",
            "max_pre_tokenizer_states",
            pieces.as_ref().map_or(0, |p| p.num_states()),
            1 << M_BITS,
        )?;
        too_many("added-token prefixes", "max_pre_tokenizer_states", contents.num_nodes(), N_NONE as u64)?;
        let n0 = if contents.is_active() { 0 } else { NOT_A_PREFIX };
        if normal.is_some_and(|nf| nf.num_states() >= 1 << F_BITS || nf.num_prefixes() >= (1 << PARTIAL_BITS) - 1) {
            return Err(Error::Unsupported(
                "the normalizer's automaton has more states than a text state can hold".into(),
            ));
        }
        let start = TextKey::pack(dfa.start(), 0, n0).with_normal(NormalForm::START, 0);
        let mut class_bytes: Vec<Vec<u8>> = Vec::new();
        for b in (0..=255u8).filter(|&b| b != TOKEN_MARKER) {
            let class = dfa.byte_class(b) as usize;
            if class >= class_bytes.len() {
                class_bytes.resize_with(class + 1, Vec::new);
            }
            class_bytes[class].push(b);
        }
        let mut kept = 0;
        let mut class_index: Vec<u32> = (class_bytes.iter())
            .map(|bytes| match bytes.is_empty() {
                true => NO_CLASS_INDEX,
                false => {
                    kept += 1;
                    kept - 1
                }
            })
            .collect();
        if let Some(regex) = dfa.as_dfa() {
            class_index.resize(regex.num_classes(), NO_CLASS_INDEX);
        }
        class_bytes.retain(|bytes| !bytes.is_empty());
        let class_sets = class_bytes.iter().map(|bytes| bytes.iter().copied().collect()).collect();
        let taken_somewhere = OnceLock::new();
        Ok(TextSpace {
            dfa,
            pieces,
            contents,
            normal,
            start,
            tokens: 0,
            class_bytes,
            class_sets,
            class_index,
            taken_somewhere,
            taken: Slots::default(),
            class_steps: Slots::default(),
        })
    }

    /// The same space, reading the markers of `tokens` special tokens in its regex.
    pub fn with_tokens(mut self, tokens: usize) -> TextSpace {
        self.tokens = tokens;
        self
    }

    /// How many special tokens the regex names.
    pub fn num_tokens(&self) -> usize {
        self.tokens
    }

    pub fn start(&self) -> TextKey {
        self.start
    }

    pub fn dfa(&self) -> &TextRegex {
        &self.dfa
    }

    /// Whether some regex state may take byte `b` (`false`: none does). Exact for a DFA built
    /// up front (one pass over its table per class, once per guide); for an automaton
    /// determinized on demand, whether some rule reads `b` at all, so that answering builds no
    /// state ([`PushdownDfa::bytes_read`]).
    pub fn may_take(&self, b: u8) -> bool {
        self.taken_somewhere.get_or_init(|| {
            let mut taken = [false; 256];
            match &self.dfa {
                TextRegex::Dfa(dfa) => {
                    let mut by_class: FxHashMap<u8, bool> = FxHashMap::default();
                    for (b, t) in taken.iter_mut().enumerate() {
                        let b = b as u8;
                        *t = *by_class
                            .entry(dfa.byte_class(b))
                            .or_insert_with(|| (0..dfa.num_states() as u32).any(|q| dfa.next(q, b) != DEAD));
                    }
                }
                TextRegex::Grammar(g) => taken = g.bytes_read(),
            }
            taken
        })[b as usize]
    }

    /// The largest number of regex states a key holds (a bound for a grammar's automaton).
    pub const MAX_REGEX_STATES: usize = (1 << Q_BITS) - 1;

    /// Number of boundary kinds (pre-tokenizer stages; 0 without a pre-tokenizer).
    pub fn num_stages(&self) -> usize {
        self.pieces.as_ref().map_or(0, |p| p.num_stages())
    }

    /// The state after `b`, `None` when the regex or the pre-tokenizer rules it out.
    ///
    /// Always inlined: every trie walk steps it per edge, and out of line (the compiler's
    /// choice with a plain `#[inline]`) its entry and exit were 45 % of its instructions.
    #[inline(always)]
    pub fn byte(&self, z: TextKey, b: u8) -> Option<TextKey> {
        match self.dfa.next(z.q(), b) {
            DEAD => None,
            q => self.byte_beside_regex(z.with_regex_state(q), b),
        }
    }

    /// Every byte [`TextSpace::byte`] may take from a state with regex state `q` (the regex's
    /// bytes: the pre-tokenizer may refuse some). A grammar's automaton, built on demand,
    /// answers from its rules' NFAs without stepping (`PushdownDfa::bytes_read_at`: a few
    /// bytes more, never fewer). Until stop 67 it answered every byte, so that each of its
    /// states looked wide and none had a byte closure, hence no shared first-token set.
    #[inline]
    pub fn bytes_taken(&self, q: u32) -> ByteSet {
        if let Some(&taken) = self.taken.get(q as usize) {
            return taken;
        }
        let taken = match &self.dfa {
            TextRegex::Dfa(dfa) => {
                let mut taken = ByteSet::default();
                self.any_class_step(dfa, q, |class, _| {
                    taken.union(&self.class_sets[class]);
                    false
                });
                taken
            }
            TextRegex::Grammar(g) => g.bytes_read_at(q),
        };
        *self.taken.set(q as usize, taken)
    }

    /// Whether the regex is a DFA of at most [`FEW_REGEX_STATES`] states: then, without a
    /// pre-tokenizer, a state's byte closure (the whole rest of the text) is small enough to
    /// key a first-token set by (`crate::lazy::engine::Engine::shared_first_key`). A grammar's
    /// automaton, built on demand and perhaps nesting, never is.
    pub fn has_few_regex_states(&self) -> bool {
        matches!(&self.dfa, TextRegex::Dfa(dfa) if dfa.num_states() <= FEW_REGEX_STATES)
    }

    /// Calls `f(class, successor)`, in class order, for each of the regex's byte classes
    /// (indices in `class_bytes`) that DFA state `q` does not take to [`DEAD`], until `f`
    /// returns `true`; whether it did.
    ///
    /// Why: asked once per new regex state by [`TextSpace::bytes_taken`], the way searches'
    /// class steps and [`TextSpace::takes_a_byte`], each stepped the DFA by a byte of each
    /// class (a heap list per class, then the byte's class): 30-40 % of a way search from a
    /// new piece start on Llama 3. Reading the state's row is one pass over contiguous words.
    #[inline]
    fn any_class_step(&self, dfa: &ByteDfa, q: u32, mut f: impl FnMut(usize, u32) -> bool) -> bool {
        (dfa.row(q).iter().zip(&self.class_index))
            .any(|(&to, &class)| to != DEAD && class != NO_CLASS_INDEX && f(class as usize, to))
    }

    /// The byte closure of `z`: every text state [`TextSpace::byte`] steps reach from it,
    /// numbered breadth first with bytes ascending, and the graph's *shape* (per state, its
    /// number of edges, then `byte << 16 | successor number` for each). Two text states with
    /// equal shapes, in any guides of one tokenizer, have the same trie walk up to the
    /// numbering: a walk steps bytes only, so it never leaves the closure, and it asks nothing
    /// else of a state. `None` when `z`'s regex state takes fewer than `min_bytes` bytes, past
    /// `max_states` or `max_edges`, at a state whose regex state
    /// takes more than a quarter of `max_edges` bytes or that takes a byte outside ASCII (a free
    /// class, or a string's first characters: punctuation and multi-byte characters stay in one
    /// piece, and the closure would soon pass the bounds), or without a pre-tokenizer (tokens
    /// then cross every piece: the closure is the rest of the regex). Over a grammar's
    /// automaton, built on demand, the closure builds the states it steps to: those of one
    /// piece, which a trie walk from `z` steps to as well, and at most `max_states`.
    pub(crate) fn byte_closure(
        &self,
        z: TextKey,
        min_bytes: usize,
        max_states: usize,
        max_edges: usize,
    ) -> Option<ByteClosure> {
        self.pieces.as_ref()?;
        let first = self.bytes_taken(z.q());
        if first.len() < min_bytes {
            return None;
        }
        self.byte_closure_of(
            &[z],
            ClosureBounds { max_states, max_edges, wide_bytes: max_edges / 4, ascii_only: true, max_nesting: u32::MAX },
            |_| None,
        )
    }

    /// The byte closure of several states together ([`TextSpace::byte_closure`]'s, without
    /// its `min_bytes`, within `bounds`), numbered breadth first from `starts` in their order
    /// (a state met twice numbered once); without a pre-tokenizer, the rest of the text. A
    /// state taking more than `bounds.wide_bytes` bytes, or more than [`WIDE_ASCII_BYTES`]
    /// ASCII ones, is left to `wide`: described (a sliced state's region:
    /// `crate::lazy::engine::Engine::shared_first_key`), spelled out after all, or `None` to
    /// give up.
    pub(crate) fn byte_closure_of(
        &self,
        starts: &[TextKey],
        bounds: ClosureBounds,
        mut wide: impl FnMut(TextKey) -> Option<WideState>,
    ) -> Option<ByteClosure> {
        let ClosureBounds { max_states, max_edges, wide_bytes, ascii_only, max_nesting } = bounds;
        let max_depth = match (max_nesting, starts.first()) {
            (u32::MAX, _) | (_, None) => u32::MAX,
            (n, Some(z)) => self.dfa.stack_depth(z.q()).saturating_add(n),
        };
        let mut states: Vec<TextKey> = Vec::with_capacity(LINEAR_CLOSURE_STATES);
        // Past `LINEAR_CLOSURE_STATES`, the states' numbers by state.
        let mut index: FxHashMap<TextKey, u32> = FxHashMap::default();
        // The number of `to`, numbered now if new: a linear search while the closure is a few
        // states (a key's, a number's), a map beyond (a date's Unicode digits: 157 states and
        // 1,800 edges, where the linear search was most of the key's 150 µs).
        let mut number = |states: &mut Vec<TextKey>, to: TextKey| {
            let found = if states.len() <= LINEAR_CLOSURE_STATES {
                states.iter().position(|&k| k == to)
            } else {
                if index.is_empty() {
                    index.extend(states.iter().enumerate().map(|(j, &k)| (k, j as u32)));
                }
                index.get(&to).map(|&j| j as usize)
            };
            if let Some(j) = found {
                return Some(j as u32);
            }
            // A state past the nesting bound fails the closure when it is found, not when its
            // turn comes: the states queued before it would be stepped (and a grammar's built)
            // for nothing.
            if states.len() == max_states || (max_depth != u32::MAX && self.dfa.stack_depth(to.q()) > max_depth) {
                return None;
            }
            let j = states.len() as u32;
            states.push(to);
            if !index.is_empty() {
                index.insert(to, j);
            }
            Some(j)
        };
        for &z in starts {
            number(&mut states, z)?;
        }
        let mut shape = Vec::with_capacity(4 * LINEAR_CLOSURE_STATES);
        let mut edges = 0;
        let mut at = 0;
        while at < states.len() {
            let k = states[at];
            at += 1;
            let taken = self.bytes_taken(k.q());
            if taken.len() > wide_bytes || taken.ascii_len() > WIDE_ASCII_BYTES {
                match wide(k)? {
                    WideState::Described(description, next) => {
                        shape.push(WIDE_STATE);
                        shape.extend(description);
                        shape.push(next.len() as u32);
                        for to in next {
                            shape.push(number(&mut states, to)?);
                        }
                        continue;
                    }
                    WideState::SpelledOut if taken.len() <= wide_bytes => {}
                    WideState::SpelledOut => return None,
                }
            }
            let count_at = shape.len();
            shape.push(0);
            for b in taken.iter() {
                let Some(to) = self.byte(k, b) else { continue };
                if ascii_only && !b.is_ascii() {
                    return None;
                }
                edges += 1;
                if edges > max_edges {
                    return None;
                }
                let j = number(&mut states, to)?;
                shape[count_at] += 1;
                shape.push((b as u32) << 16 | j);
            }
        }
        Some(ByteClosure { states, shape: shape.into() })
    }

    /// [`TextSpace::byte`] of every component but the regex's, which stays `z`'s: where a
    /// byte the slice does not take leaves a slice's text space for a guide's regex state
    /// ([`crate::lazy::slice::Region`]). The components step alike in every space of the
    /// tokenizer.
    #[inline(always)]
    pub(crate) fn byte_beside_regex(&self, z: TextKey, b: u8) -> Option<TextKey> {
        let next = self.byte_of_pieces(z, b)?;
        match self.normal {
            None => Some(next),
            Some(nf) => {
                let (f, partial) = nf.byte(z.f(), z.partial(), b)?;
                Some(next.with_normal(f, partial))
            }
        }
    }

    /// [`TextSpace::byte`] with the normal form's compositions left out: it decodes the
    /// characters (a partial character stays in the key) and refuses those no normalized text
    /// has, but its state stays the start, which takes every character another state takes
    /// (`NormalForm::inert_only`). So every step [`TextSpace::byte`] takes from `z` with any
    /// normal-form state, this takes too. A [`crate::lazy::slice::Region`] is explored this way
    /// and keyed with the normal-form state it is entered at.
    pub(crate) fn byte_ignoring_composition(&self, z: TextKey, b: u8) -> Option<TextKey> {
        let next = match self.dfa.next(z.q(), b) {
            DEAD => return None,
            q => self.byte_of_pieces(z.with_regex_state(q), b)?,
        };
        match self.normal {
            None => Some(next),
            Some(nf) => {
                let (_, partial) = nf.byte(NormalForm::START, z.partial(), b)?;
                Some(next.with_normal(NormalForm::START, partial))
            }
        }
    }

    /// The pre-tokenizer's and the added-token prefix's step on `b`, with `z`'s regex state and
    /// the normal form at its start (the caller sets it).
    #[inline(always)]
    fn byte_of_pieces(&self, z: TextKey, b: u8) -> Option<TextKey> {
        if b == TOKEN_MARKER {
            return None;
        }
        let m = match &self.pieces {
            Some(p) => match p.byte(z.m(), b) {
                DEAD => return None,
                m => m,
            },
            None => 0,
        };
        Some(TextKey::pack(z.q(), m, self.contents.step(z.n(), b)))
    }

    /// The tokenizer's normalizer, if it has one.
    pub(crate) fn normal_form(&self) -> Option<&'static NormalForm> {
        self.normal
    }

    /// Whether some byte may follow `z` ([`TextSpace::byte`] takes it): stops at the first.
    pub fn takes_a_byte(&self, z: TextKey) -> bool {
        let TextRegex::Dfa(dfa) = &self.dfa else {
            return self.bytes_taken(z.q()).iter().any(|b| self.byte(z, b).is_some());
        };
        self.any_class_step(dfa, z.q(), |class, _| self.class_bytes[class].iter().any(|&b| self.byte(z, b).is_some()))
    }

    /// The state after `bytes`.
    pub fn walk(&self, mut z: TextKey, bytes: &[u8]) -> Option<TextKey> {
        for &b in bytes {
            z = self.byte(z, b)?;
        }
        Some(z)
    }

    /// The state after a boundary of `kind`; a stage-0 boundary restarts the added-token prefix.
    #[inline]
    pub fn mark(&self, z: TextKey, kind: usize) -> Option<TextKey> {
        let m = match self.pieces.as_ref()?.mark(z.m(), kind) {
            DEAD => return None,
            m => m,
        };
        let n = if kind == 0 && self.contents.is_active() { 0 } else { z.n() };
        Some(TextKey::pack(z.q(), m, n).with_normal(z.f(), z.partial()))
    }

    /// Whether the text may end here (regex accepts, every pre-tokenizer decision resolves).
    pub fn accepting(&self, z: TextKey) -> bool {
        self.dfa.is_accepting(z.q()) && self.pieces.as_ref().is_none_or(|p| p.accepts_end(z.m()))
    }

    /// Whether the text before a special token may end here: every pre-tokenizer decision
    /// resolves, between characters.
    fn ends_segment(&self, z: TextKey) -> bool {
        z.partial() == 0 && self.pieces.as_ref().is_none_or(|p| p.accepts_end(z.m()))
    }

    /// The state after special token `j`, where the text so far may end and the regex takes
    /// its marker: the start state of every other component.
    pub fn token(&self, z: TextKey, j: usize) -> Option<TextKey> {
        if j >= self.tokens || !self.ends_segment(z) {
            return None;
        }
        let q = self.dfa.next(z.q(), TOKEN_MARKER);
        let q = if q == DEAD { DEAD } else { self.dfa.next(q, TOKEN_MARKER_INDEX + j as u8) };
        (q != DEAD).then(|| self.start.with_regex_state(q))
    }

    /// Whether the stage-0 piece so far spells an added token's content.
    pub fn spells_content(&self, z: TextKey) -> bool {
        self.contents.is_terminal(z.n())
    }

    /// The regex's steps from `q` by byte class to a state that can still accept, nearest to
    /// acceptance first (class order among equals), kept per state: a grammar's automaton's
    /// too (8 bytes per class a state takes, at most twice the 4 bytes per class of the
    /// automaton's own row of that state), whose distances after a byte are read off the
    /// state's configurations ([`PushdownDfa::distances_after`]) rather than stepped to.
    ///
    /// Why: a way search looked at every class at every state it expanded, for the few within
    /// its bound (a JSON regex has dozens of classes): ~700 instructions an expansion, a third
    /// of the way searches' time on Llama 3. In this order it stops at the first class past the
    /// bound. A grammar's lists were made afresh at each expansion, stepping its automaton once
    /// per class: 12 % of the time of issue 18's masks on Llama 3. Kept, they still stepped it
    /// by every class, each step closing and interning a state no way took: on a JSON object's
    /// first key with 369 names (`JsonSchemaStore/pantsbuild-2.16.0`), with
    /// [`TextSpace::nearest_byte`]'s steps, 62 % of a fresh guide's 65 M instructions.
    fn class_steps(&self, q: u32) -> &[ClassStep] {
        if let Some(steps) = self.class_steps.get(q as usize) {
            return steps;
        }
        let mut steps = Vec::new();
        match &self.dfa {
            TextRegex::Dfa(dfa) => {
                self.any_class_step(dfa, q, |class, to| {
                    steps.push((dfa.distance_to_accept(to), class as u32));
                    false
                });
            }
            // Distances read off the automaton's configurations: stepping it by a byte of each
            // class would build states no way takes.
            TextRegex::Grammar(g) => {
                let after = g.distances_after(q);
                steps.extend(
                    (self.class_bytes.iter().enumerate())
                        .map(|(class, bytes)| (after[bytes[0] as usize], class as u32)),
                );
            }
        }
        steps.retain(|&(d, _)| d != u32::MAX);
        steps.sort_unstable();
        self.class_steps.try_set(q as usize, steps.into_boxed_slice()).0
    }

    /// A way from `z` to an accepting text state with the fewest bytes, as the steps to take
    /// from each text state along it; [`WaySearch::NoWay`] when there is none (a proof that no
    /// token sequence from `z` can be completed), [`WaySearch::GaveUp`] past `max_expanded`
    /// text states. A* search: a boundary costs nothing, a byte one, and the
    /// regex's distance to acceptance is the (consistent) estimate, so the search expands few
    /// states beyond the way itself unless the pre-tokenizer forces a detour (a punctuation
    /// piece may end before a letter, not before the `"` that closes the string).
    ///
    /// The search also stops at a text state other than `z` for which `known` holds (one whose
    /// way a caller already has); the way then ends there, with [`Step::Done`] as its last step.
    pub fn shortest_way(&self, z: TextKey, max_expanded: usize, known: impl Fn(TextKey) -> bool) -> WaySearch {
        WAY_TABLES.with_borrow_mut(|tables| {
            tables.clear();
            let found = self.search_way(z, max_expanded, known, tables);
            tables.clear();
            found
        })
    }

    /// [`TextSpace::shortest_way`] in `tables`, empty on entry.
    fn search_way(
        &self,
        z: TextKey,
        max_expanded: usize,
        known: impl Fn(TextKey) -> bool,
        tables: &mut WayTables,
    ) -> WaySearch {
        let WayTables { best, opened, open } = tables;
        // Partial expansion: a state's successors enter the open list only once the search's
        // bound `f` reaches their estimate, and the state itself goes back into the list at its
        // next successor's estimate. A string body's state has ~200 successors, of which the
        // way takes one (the closing quote): pushing them all cost most of a way search.
        best.insert(z, (0, z, Step::Done));
        open.push(Reverse((self.distance(z), u32::MAX, z)));
        let mut expanded = 0;
        while let Some(Reverse((f, deeper, k))) = open.pop() {
            // Ties go to the deeper state: the way is found sooner.
            let g = u32::MAX - deeper;
            if best[&k].0 < g {
                continue;
            }
            // The bound up to which `k`'s successors were relaxed before (`None`: none were).
            let before = match opened.get(&k) {
                Some(&(at, bound)) if at == g && bound >= f => continue,
                Some(&(at, bound)) if at == g => Some(bound),
                _ => {
                    if self.accepting(k) || (k != z && known(k)) {
                        let mut way = vec![(k, Step::Done)];
                        let mut at = k;
                        while at != z {
                            let (_, from, step) = best[&at];
                            way.push((from, step));
                            at = from;
                        }
                        way.reverse();
                        return WaySearch::Found(way);
                    }
                    expanded += 1;
                    if expanded > max_expanded {
                        return WaySearch::GaveUp;
                    }
                    None
                }
            };
            opened.insert(k, (g, f));
            // The smallest estimate above `f` among the successors, where `k` is opened next.
            let mut next = u32::MAX;
            let mut relax = |to: TextKey, cost: u32, step: Step| {
                let d = self.distance(to);
                if d == u32::MAX || best.get(&to).is_some_and(|e| e.0 <= g + cost) {
                    return;
                }
                best.insert(to, (g + cost, k, step));
                open.push(Reverse((g + cost + d, u32::MAX - (g + cost), to)));
            };
            // The estimate of a successor by its regex distance `d` alone, so that only those
            // within the bound pay for the pre-tokenizer's and the normalizer's steps.
            let within = |d: u32, cost: u32, next: &mut u32| match d {
                u32::MAX => false,
                d if before.is_some_and(|b| g + cost + d <= b) => false,
                d if g + cost + d <= f => true,
                d => {
                    *next = (*next).min(g + cost + d);
                    false
                }
            };
            if within(self.distance(k), 0, &mut next) {
                for kind in 0..self.num_stages() {
                    if let Some(to) = self.mark(k, kind) {
                        relax(to, 0, Step::Mark(kind));
                    }
                }
            }
            for &(d, class) in self.class_steps(k.q()) {
                if g + 1 + d > f {
                    next = next.min(g + 1 + d); // and so are the rest, nearest first
                    break;
                }
                if within(d, 1, &mut next) {
                    for &b in &self.class_bytes[class as usize] {
                        if let Some(to) = self.byte(k, b) {
                            relax(to, 1, Step::Byte(b));
                        }
                    }
                }
            }
            for j in 0..self.tokens {
                if let Some(to) = self.token(k, j) {
                    // The marker's two bytes: the estimate stays consistent.
                    if within(self.distance(to), 2, &mut next) {
                        relax(to, 2, Step::Token(j));
                    }
                }
            }
            if next != u32::MAX {
                open.push(Reverse((next, deeper, k)));
            }
        }
        WaySearch::NoWay
    }

    /// Whether the grammar's shortest text from `z` ([`PushdownDfa::shortest_text`], at most
    /// `max_len` bytes) makes a clean way (`crate::lazy::engine::Engine::clean_way`): every
    /// other component takes it, with a boundary only before a byte the piece cannot take and
    /// never before the first; no state on it, `z` and the last included, spells an added
    /// token's content; and the pre-tokenizer may end after it. The regex accepts it by
    /// construction. `false` proves nothing (and is all a regex DFA answers: its ways cost a
    /// table lookup a byte).
    pub(crate) fn shortest_text_is_clean(&self, z: TextKey, max_len: usize) -> bool {
        let TextRegex::Grammar(g) = &self.dfa else { return false };
        let Some(text) = g.shortest_text(z.q(), max_len) else { return false };
        let mut at = z;
        if self.spells_content(at) {
            return false;
        }
        for (i, &b) in text.iter().enumerate() {
            let next = match self.byte_beside_regex(at, b) {
                Some(next) => Some(next),
                None if i == 0 => None,
                None => (0..self.num_stages()).find_map(|kind| {
                    let start = self.mark(at, kind).filter(|&start| !self.spells_content(start))?;
                    self.byte_beside_regex(start, b)
                }),
            };
            match next {
                Some(next) if !self.spells_content(next) => at = next,
                _ => return false,
            }
        }
        self.pieces.as_ref().is_none_or(|p| p.accepts_end(at.m()))
    }

    /// A byte that brings the regex one byte closer to acceptance from `z` and that the
    /// pre-tokenizer takes, with its successor: the first such byte of the first such class
    /// (class order). `None` where there is none, and where the regex accepts already.
    pub fn nearest_byte(&self, z: TextKey) -> Option<(u8, TextKey)> {
        let d = self.distance(z);
        if d == 0 || d == u32::MAX {
            return None;
        }
        let first_taken = |bytes: &[u8]| bytes.iter().find_map(|&b| Some((b, self.byte(z, b)?)));
        match &self.dfa {
            TextRegex::Dfa(_) => (self.class_steps(z.q()).iter())
                .take_while(|&&(nearest, _)| nearest + 1 == d)
                .find_map(|&(_, class)| first_taken(&self.class_bytes[class as usize])),
            // The same classes in the same order, found without stepping the automaton by each.
            TextRegex::Grammar(g) => {
                let nearer = g.bytes_nearer(z.q());
                self.class_bytes.iter().filter(|bytes| nearer.contains(bytes[0])).find_map(|bytes| first_taken(bytes))
            }
        }
    }

    /// A byte the pre-tokenizer allows from `z` that brings the regex one byte closer to
    /// acceptance ([`TextSpace::nearest_byte`]), else such a special token ([`Step::Done`] when
    /// there is neither): a way one step at a time, for when [`TextSpace::shortest_way`] gives
    /// up. It may lead where the pre-tokenizer needs a detour; the caller only loses a shortcut
    /// then.
    pub fn greedy_step(&self, z: TextKey) -> Step {
        let d = self.distance(z);
        if d == 0 || d == u32::MAX {
            return Step::Done;
        }
        let token = || (0..self.tokens).find(|&j| self.token(z, j).is_some_and(|to| self.distance(to) + 2 == d));
        match (self.nearest_byte(z), token()) {
            (Some((b, _)), _) => Step::Byte(b),
            (None, Some(j)) => Step::Token(j),
            (None, None) => Step::Done,
        }
    }

    /// Fewest bytes from `z`'s regex state to acceptance (`u32::MAX`: none).
    pub fn distance(&self, z: TextKey) -> u32 {
        self.dfa.distance_to_accept(z.q())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pre_tokenizer::piece_machine::{PieceMachine, PieceMachineSpec};

    /// A DFA's transitions read by row (`TextSpace::any_class_step`) give each state's bytes,
    /// whether it takes one, and its way search's class steps as stepping a byte of each class
    /// does, on a DFA whose token marker has a class of its own and on a JSON-like one.
    #[test]
    fn class_steps_read_by_row_are_the_byte_steps() {
        let marker = format!("(?-u:\\x{:02X}\\x{:02X})", TOKEN_MARKER, TOKEN_MARKER_INDEX);
        let with_marker = ByteDfa::from_regex_with_markers(&format!("{marker}[a-c]x{{0,3}}|d[e-f]+é?{marker}"), 1000);
        let plain = ByteDfa::from_regex(r#"\{"a":[0-9]{1,3}(,"bc?":"[^"]{0,4}")?\}"#, 1000);
        for (dfa, marker_alone) in [(with_marker.unwrap(), true), (plain.unwrap(), false)] {
            let n = dfa.num_states() as u32;
            let space = TextSpace::new(dfa.clone(), None, Arc::new(ContentTrie::default()), None).unwrap();
            let marker_class = dfa.byte_class(TOKEN_MARKER) as usize;
            let alone = (0..=255u8).all(|b| b == TOKEN_MARKER || dfa.byte_class(b) as usize != marker_class);
            assert_eq!((alone, space.class_index[marker_class] == NO_CLASS_INDEX), (marker_alone, marker_alone));
            for q in 0..n {
                let bytes: Vec<u8> = (0..=255u8).filter(|&b| b != TOKEN_MARKER && dfa.next(q, b) != DEAD).collect();
                assert_eq!(space.bytes_taken(q), bytes.iter().copied().collect(), "state {q}");
                let z = space.start.with_regex_state(q);
                assert_eq!(space.takes_a_byte(z), bytes.iter().any(|&b| space.byte(z, b).is_some()), "state {q}");
                // Each class once, by its first byte, with the successor's distance.
                let mut steps: Vec<ClassStep> = (space.class_bytes.iter().enumerate())
                    .filter(|(_, class)| bytes.contains(&class[0]))
                    .map(|(i, class)| (dfa.distance_to_accept(dfa.next(q, class[0])), i as u32))
                    .filter(|&(d, _)| d != u32::MAX)
                    .collect();
                steps.sort_unstable();
                assert_eq!(space.class_steps(q), &steps[..], "state {q}");
            }
        }
    }

    /// On a DFA built up front, `may_take` says exactly which bytes some state takes, and
    /// `bytes_taken` which bytes each state takes, the first time it is asked (computed by
    /// byte class) and after (kept), in states asked in no particular order.
    #[test]
    fn bytes_some_state_takes() {
        let dfa = ByteDfa::from_regex(r#""[a-c]{0,40}"(, [0-9]+)?|#[e-z]{0,30}"#, 1000).unwrap();
        let n = dfa.num_states() as u32;
        let taken: Vec<bool> = (0..=255u8).map(|b| (0..n).any(|q| dfa.next(q, b) != DEAD)).collect();
        let by_state: Vec<ByteSet> =
            (0..n).map(|q| (0..=255u8).filter(|&b| b != TOKEN_MARKER && dfa.next(q, b) != DEAD).collect()).collect();
        let space = TextSpace::new(dfa, None, Arc::new(ContentTrie::default()), None).unwrap();
        for b in 0..=255u8 {
            assert_eq!(space.may_take(b), taken[b as usize], "byte {b}");
        }
        assert!(space.may_take(b'"') && space.may_take(b'7') && !space.may_take(b'd'));
        assert!(n > 60, "states past the first segment of kept answers");
        for round in 0..2 {
            for q in (0..n).rev().step_by(3).chain(0..n) {
                assert_eq!(space.bytes_taken(q), by_state[q as usize], "state {q}, round {round}");
            }
        }
    }

    /// Without a pre-tokenizer a shortest way has the regex's distance in bytes, ends accepting,
    /// and each step is a transition from the state it is listed at.
    #[test]
    fn shortest_way_follows_the_regex_distance() {
        let dfa = ByteDfa::from_regex(r#"\{"a": "[^"]{2,4}"(, "bc": [0-9]+)?\}"#, 1000).unwrap();
        let space = TextSpace::new(dfa, None, Arc::new(ContentTrie::default()), None).unwrap();
        let mut z = space.start();
        for b in br#"{"a": "xy"#.iter().copied() {
            let WaySearch::Found(way) = space.shortest_way(z, 1000, |_| false) else { panic!("a way to acceptance") };
            assert_eq!(way[0].0, z);
            let bytes = way.iter().filter(|(_, s)| matches!(s, Step::Byte(_))).count() as u32;
            assert_eq!(bytes, space.distance(z));
            for w in way.windows(2) {
                let Step::Byte(b) = w[0].1 else { panic!("no boundaries without a pre-tokenizer") };
                assert_eq!(space.byte(w[0].0, b), Some(w[1].0));
            }
            let (end, step) = *way.last().unwrap();
            assert!(space.accepting(end) && step == Step::Done);
            z = space.byte(z, b).unwrap();
        }
        assert_eq!(space.shortest_way(space.start(), 2, |_| false), WaySearch::GaveUp);
        let mut k = space.start();
        for _ in 0..space.distance(space.start()) {
            let Step::Byte(b) = space.greedy_step(k) else { panic!("a greedy byte before acceptance") };
            k = space.byte(k, b).unwrap();
        }
        assert!(space.accepting(k) && space.greedy_step(k) == Step::Done);
        let start = space.start();
        let after_brace = space.byte(start, b'{').unwrap();
        let way = space.shortest_way(start, 1000, |k| k == after_brace);
        let want = vec![(start, Step::Byte(b'{')), (after_brace, Step::Done)];
        assert_eq!(way, WaySearch::Found(want), "stops at a known state");
        // With a pre-tokenizer: after `a` a letter piece may end (before a non-letter), but the
        // regex then needs the letter `b`, so nothing reaches acceptance past that boundary.
        let spec = PieceMachineSpec { stages: vec![r"\p{L}+|[^\p{L}]+".into()], ..Default::default() };
        let mut machine = PieceMachine::new(&spec, 1000).unwrap();
        let pieces = Arc::new(PieceTable::explore(&mut machine, 1000).unwrap());
        let dfa = ByteDfa::from_regex("ab|a!", 100).unwrap();
        let space = TextSpace::new(dfa, Some(pieces), Arc::new(ContentTrie::default()), None).unwrap();
        let a = space.byte(space.start(), b'a').unwrap();
        let marked = space.mark(a, 0).expect("a letter piece may end after `a`");
        assert!(matches!(space.shortest_way(a, 100, |_| false), WaySearch::Found(_)));
        assert!(
            matches!(space.shortest_way(marked, 100, |_| false), WaySearch::Found(w) if w[0].1 == Step::Byte(b'!'))
        );
        let dfa = ByteDfa::from_regex("ab", 100).unwrap();
        let pieces = space.pieces.clone();
        let space = TextSpace::new(dfa, pieces, Arc::new(ContentTrie::default()), None).unwrap();
        let a = space.byte(space.start(), b'a').unwrap();
        assert_eq!(space.shortest_way(space.mark(a, 0).unwrap(), 100, |_| false), WaySearch::NoWay);
    }

    /// The fewest bytes from every text state to acceptance, by a plain 0-1 breadth-first search
    /// backwards over the whole space (boundaries cost nothing): what a way search must find,
    /// detours around the pre-tokenizer included, with `NoWay` exactly where there is none. On
    /// the way, every byte with a successor is among the regex's `bytes_taken` (trie walks skip
    /// the others), `takes_a_byte` says whether any byte has one, and `nearest_byte` finds a
    /// byte one nearer by the regex's distance wherever the pre-tokenizer takes one.
    #[test]
    fn shortest_way_has_the_fewest_bytes_on_a_pre_tokenized_space() {
        use std::collections::{HashMap, VecDeque};
        // One stage as GPT-2-like byte-level tokenizers have, and two (digits split first).
        let specs = [
            vec![r"\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+|\p{N}{1,3}".to_string()],
            vec![r"\p{N}{1,2}|[^\p{N}]+".to_string(), r" ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+|\p{N}+".to_string()],
        ];
        let regexes = [
            r#"\{"a": "[^"\\]{0,3}"(, "b": [0-9]{1,4})?\}"#,
            r#"(ab|a!)+\.?"#,
            r"x[ ]*y|[.]{2,}z",
            "ab",
            r"[0-9]{3} ?",
        ];
        // Text states from which nothing finishes, and ways longer than the regex's distance.
        let (mut stuck, mut detours, mut ends, mut nearest) = (0, 0, 0, 0);
        for (stages, regex) in specs.iter().flat_map(|stages| regexes.iter().map(move |r| (stages, r))) {
            let spec = PieceMachineSpec { stages: stages.clone(), ..Default::default() };
            let mut machine = PieceMachine::new(&spec, 10_000).unwrap();
            let pieces = Arc::new(PieceTable::explore(&mut machine, 10_000).unwrap());
            let dfa = ByteDfa::from_regex(regex, 1000).unwrap();
            let space = TextSpace::new(dfa, Some(pieces.clone()), Arc::new(ContentTrie::default()), None).unwrap();
            // Every text state reachable from the start, with its successors.
            let mut edges: HashMap<TextKey, Vec<(TextKey, u32)>> = HashMap::new();
            let mut todo = vec![space.start()];
            while let Some(k) = todo.pop() {
                if edges.contains_key(&k) {
                    continue;
                }
                let mut out: Vec<(TextKey, u32)> =
                    (0..space.num_stages()).filter_map(|kind| space.mark(k, kind)).map(|to| (to, 0)).collect();
                out.extend((0..=255u8).filter_map(|b| space.byte(k, b)).map(|to| (to, 1)));
                // Trie walks skip the bytes outside `bytes_taken`: none may have a successor.
                let taken = space.bytes_taken(k.q());
                assert!((0..=255u8).all(|b| space.byte(k, b).is_none() || taken.contains(b)));
                let takes_a_byte = (0..=255u8).any(|b| space.byte(k, b).is_some());
                assert_eq!(space.takes_a_byte(k), takes_a_byte, "{regex}: {k:?}");
                ends += usize::from(!takes_a_byte);
                todo.extend(out.iter().map(|&(to, _)| to));
                edges.insert(k, out);
            }
            let mut back: HashMap<TextKey, Vec<(TextKey, u32)>> = HashMap::new();
            for (&from, out) in &edges {
                for &(to, cost) in out {
                    back.entry(to).or_default().push((from, cost));
                }
            }
            let mut fewest: HashMap<TextKey, u32> = HashMap::new();
            let mut queue: VecDeque<(TextKey, u32)> =
                edges.keys().filter(|&&k| space.accepting(k)).map(|&k| (k, 0)).collect();
            while let Some((k, d)) = queue.pop_front() {
                if fewest.get(&k).is_some_and(|&e| e <= d) {
                    continue;
                }
                fewest.insert(k, d);
                for &(from, cost) in back.get(&k).into_iter().flatten() {
                    match cost {
                        0 => queue.push_front((from, d)),
                        _ => queue.push_back((from, d + 1)),
                    }
                }
            }
            stuck += edges.len() - fewest.len();
            for &k in edges.keys() {
                // A one-byte step nearer by the regex's distance, exactly where there is one.
                let d = space.distance(k);
                let nearer = |b: u8| space.byte(k, b).filter(|&to| d != 0 && space.distance(to).wrapping_add(1) == d);
                match space.nearest_byte(k) {
                    Some((b, to)) => {
                        assert_eq!(nearer(b), Some(to), "{regex}: {k:?}");
                        nearest += 1;
                    }
                    None => assert!((0..=255u8).all(|b| nearer(b).is_none()), "{regex}: {k:?}"),
                }
                match (space.shortest_way(k, 100_000, |_| false), fewest.get(&k)) {
                    (WaySearch::Found(way), Some(&d)) => {
                        let bytes = way.iter().filter(|(_, s)| matches!(s, Step::Byte(_))).count() as u32;
                        assert_eq!(bytes, d, "{regex}: the way from {k:?}");
                        detours += usize::from(d > space.distance(k));
                        for w in way.windows(2) {
                            let to = match w[0].1 {
                                Step::Byte(b) => space.byte(w[0].0, b),
                                Step::Mark(kind) => space.mark(w[0].0, kind),
                                other => panic!("{other:?} inside a way"),
                            };
                            assert_eq!(to, Some(w[1].0));
                        }
                        assert!(space.accepting(way.last().unwrap().0));
                    }
                    (WaySearch::NoWay, None) => {}
                    (found, d) => panic!("{regex}: from {k:?} the search found {found:?}, the fewest bytes are {d:?}"),
                }
            }
        }
        assert!(stuck > 0 && detours > 0, "the spaces need detours ({detours}) and have dead ends ({stuck})");
        assert!(ends > 0, "some text states take no byte");
        assert!(nearest > 0, "some text states have a nearer byte");
    }

    #[test]
    fn keys_round_trip() {
        for (q, m, n) in [(0, 0, 0), (123, 4567, NOT_A_PREFIX), ((1 << Q_BITS) - 1, (1 << M_BITS) - 1, 7)] {
            for (f, partial) in [(0, 0), ((1 << F_BITS) - 1, (1 << PARTIAL_BITS) - 1), (17, 5)] {
                let k = TextKey::pack(q, m, n).with_normal(f, partial);
                assert_eq!((k.q(), k.m(), k.n(), k.f(), k.partial()), (q, m, n, f, partial));
                assert_eq!(k.with_regex_state(9).q(), 9);
                assert_eq!(k.with_regex_state(9).with_regex_state(q), k);
            }
        }
    }

    /// A byte closure gives up at a state whose stack has more frames than its start's and
    /// `max_nesting`, and not before: brackets nested in one piece of punctuation, under a
    /// nesting bound of three so that the closure ends without the bound too.
    #[test]
    fn a_closure_gives_up_past_its_nesting() {
        use crate::grammar::lower::{to_rule_regexes, LowerOptions};
        use crate::grammar::{parse, Syntax};
        use crate::lazy::pushdown::{PushdownDfa, RuleAutomata};
        let grammar = parse("root ::= \"(\" inner \")\"\ninner ::= \"[\" inner \"]\" | \"x\"\n", Syntax::Gbnf, None);
        let rules = to_rule_regexes(&grammar.unwrap(), LowerOptions::default()).unwrap();
        let automata = RuleAutomata::default();
        let dfa = PushdownDfa::new(&rules.rules, &automata, &[true; 256], Some(3), 10_000, 100_000).unwrap();
        let spec = PieceMachineSpec { stages: vec![r"\p{L}+|[^\p{L}]+".into()], ..Default::default() };
        let mut machine = PieceMachine::new(&spec, 1000).unwrap();
        let pieces = Arc::new(PieceTable::explore(&mut machine, 1000).unwrap());
        let space = TextSpace::new(TextRegex::Grammar(Box::new(dfa)), Some(pieces), Arc::default(), None).unwrap();
        let open = space.byte(space.start(), b'(').unwrap();
        let bounds = |max_nesting| ClosureBounds {
            max_states: 64,
            max_edges: 256,
            wide_bytes: 64,
            ascii_only: true,
            max_nesting,
        };
        let closure = |max_nesting| space.byte_closure_of(&[open], bounds(max_nesting), |_| None);
        let unbounded = closure(u32::MAX).expect("three brackets at most");
        // `(`, `[`, `[[`, `[[[`: the stack grows by a frame a bracket.
        let depths: Vec<u32> = unbounded.states.iter().map(|k| space.dfa.stack_depth(k.q())).collect();
        let deepest = *depths.iter().max().unwrap();
        assert!(deepest >= depths[0] + 2, "frames {depths:?}");
        for n in 0..deepest - depths[0] {
            assert!(closure(n).is_none(), "gave up past {n} frames");
        }
        let within = closure(deepest - depths[0]).expect("within its frames");
        assert_eq!((within.states, within.shape), (unbounded.states, unbounded.shape));
    }
}
