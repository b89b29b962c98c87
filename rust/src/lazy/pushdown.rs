//! A context-free grammar as a byte automaton with unboundedly many states, built on demand:
//! the regex component of a lazy guide's text states when the grammar nests
//! (`value` → `array` → `value`).
//!
//! # The concept
//! The grammar is a *recursive transition network*: one byte NFA per rule
//! ([`crate::grammar::lower::to_rule_regexes`], [`ByteNfa`]), in which a reference to a
//! self-embedding rule is a call marker ([`CALL_MARKER`] and two bytes naming the callee)
//! instead of its text. A *configuration* is a rule, a node of its NFA and a stack of return
//! points `(caller rule, node to resume at)`; stacks are hash-consed, so a configuration is
//! three integers. A state of this automaton is the set of configurations the text so far
//! reaches (more than one when the NFA or the grammar is ambiguous, or a call and a return
//! both fit), closed under
//! * **ε-edges** of the rule's NFA (alternation, repetition);
//! * **calls**: a node with a call marker to rule `R` also stands for `R`'s start, with the
//!   marker's target pushed as the return point;
//! * **returns**: a node where its rule may end also stands for the return point on top of its
//!   stack (popped); with an empty stack, the text may end there.
//!
//! Only configurations that read a byte next are kept, with a flag for "the text may end". A
//! byte step moves each of them along its NFA and closes the result; the state reached is
//! interned and the transition memoized, so a second walk over the same bytes costs a table
//! lookup per byte, as a regex DFA does. This is the lazy determinization of the pushdown
//! automaton over the configurations the decoder actually meets: a JSON document at nesting
//! depth `k` meets states whose stacks have `k` frames.
//!
//! Large rules are NFAs, not minimal DFAs, because determinizing is what a compile would
//! otherwise pay for: on 40 recursive JSONSchemaBench schemas (Llama 3), building and minimizing
//! every rule's DFA took a median 17 ms and up to 1.4 s (a 600 KB Kubernetes regex: 0.6 s subset
//! construction, 0.23 s minimization), where the parse and the NFA take 1.4 ms and 0.16 s, and
//! the decoder meets a few hundred states of the DFA. The states built from an NFA are those of
//! the subset construction, unminimized: equivalent ones stay apart, which costs a first visit
//! where a minimal DFA would have shared one, and slices (`crate::lazy::slice`) recognise fewer
//! loops; masks are the same. So small rules (at most [`RULE_DFA_NFA_STATES`] NFA states, a
//! grammar's usual rules) run as their minimal DFA, an NFA without ε-edges: with every rule an
//! NFA, llama.cpp's JSON grammar took a 362 µs mask median on Llama 3 instead of 127 µs.
//! [`RuleAutomata`] keeps the automata of one `Compiler`'s rules, so a rule met again (the
//! free-value rule of every schema, a grammar compiled per request) costs nothing.
//!
//! A regex is the one-rule case with no calls ([`PushdownDfa::of_regex`]): its DFA, determinized
//! on demand, which lazy guides use for regexes too large to determinize up front (see
//! `Compiler::compile_regex_lazy`). A regex whose large counted repetitions are outlined
//! (`crate::regex::outline`) is a few rules without recursion ([`PushdownDfa::of_outlined_regex`]).
//!
//! A state's language is the union of its configurations'. [`PushdownDfa::threads`] groups
//! them into *threads* (a loop with its exits; what no loop reaches), each interned as a state
//! of its own, so that the engine finds a union's first-token set as the union of its threads'
//! sets, each found once and met again at later steps
//! (`crate::lazy::engine::Engine::first_tokens_of_threads`).
//!
//! The lazy engine (`crate::lazy::engine`) treats these states like a regex DFA's, so its
//! masks are exactly canonical for the grammar's language: a node is live iff some canonical
//! continuation reaches acceptance, searched over the real configurations, stacks included.
//! Nothing is approximated, and no lookahead horizon is assumed.
//!
//! # Why not exit summaries
//! The design note (`../shared/design/cfg-canonical.md` §4.1) proposed to collapse stacks with
//! the same *exit summary* (which ways of ending a rule its callers can continue canonically), so that the
//! searches run over a provably finite space. Real stacks are what a decoder keeps anyway, and
//! with them the one engine serves regexes and grammars unchanged: pre-tokenizers, normal
//! forms, special tokens and slices apply as they are. The price is that a search proving a
//! node *dead* explores stacks; it ends when every continuation from the node has been ruled
//! out, which in practice is within a few bytes of the node (a token is dead because of the
//! junction with the next one, and what follows a junction is free again), and
//! `max_product_states` bounds it otherwise (`LimitExceeded`, never a wrong mask). One way a
//! dead region is infinite is closed off here: a text that needs a byte no token spells (a
//! grammar's `b` with a vocabulary of `a` and `c`, found by the `grammar_guide` fuzzer) would
//! let a search push `a`s forever, so configurations that can end only through such bytes are
//! dropped (see [`PushdownDfa::new`]'s `text_bytes`).
//!
//! # Invariants
//! * Rules are ε-free in their calls: a rule may not call itself, directly or through others,
//!   before reading a byte ([`PushdownDfa::new`] refuses left recursion, naming the cycle), so
//!   closing a set of configurations ends.
//! * A return point that only ends its rule is never pushed (a tail call), so right recursion
//!   (`items ::= item ("," items)?`) keeps the stack flat. With a nesting bound
//!   ([`PushdownDfa::new`]'s `max_depth`) every frame is pushed, because the bound counts them.
//! * Every configuration kept can end: one whose rule, or a frame below it, needs a call that
//!   the nesting bound forbids or that no finite string completes is dropped, so, as in a
//!   minimal DFA, no state is a dead end and distances to acceptance are exact (with a bound,
//!   they are computed per rule and instances open, memoized). Without this, the engine's
//!   searches would wander through text that can never end: a JSON object at the depth bound
//!   that may only be `{}` took a 42,000-node search and 14 s on Llama 3.
//! * States are a deterministic function of their byte path: threads that compute the same
//!   transition intern the same state and store the same id.
//!
//! # Costs and limits
//! Building costs each rule's NFA (linear in its regex) and a shortest-path pass over it per
//! round of the rules' length fixpoint. A memoized transition is an atomic load; a new one
//! closes a few configurations (ε-edges, calls, returns) and interns a state (a hash-map probe
//! under a lock). Byte classes that move a state's configurations alike close to the same
//! state, so the moved configurations are looked up first ([`CLOSED_STEP_CACHE_BYTES`]): a
//! counted string's first mask on a regex determinized on demand (`{3,255}` in two branches of
//! an alternation, Llama 3) closed ~12,700 sets for ~2,500 new states, 114 M of its 153 M
//! instructions; with the lookup the mask takes 51 M. A step also fills the row of every class
//! whose bytes move the state's configurations as its byte does (`PushdownDfa::step`), so such
//! classes are not moved and looked up one by one (`Github_easy/o58906`'s first mask inside its
//! `{3,255}` string, Llama 3: 43.5 → 22.4 M instructions).
//!
//! States are bounded by `max_states`, configurations per state by [`MAX_CONFIGURATIONS`]
//! ([`MAX_REGEX_CONFIGURATIONS`] for a regex, whose sets are bounded by its NFA) and in all
//! states together by [`MAX_TOTAL_CONFIGURATIONS`]; past any of them the automaton stops taking
//! new transitions and reports the limit ([`PushdownDfa::overflow`]), which the engine turns
//! into `LimitExceeded` before it stores anything computed since.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use regex_syntax::hir::Hir;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::{Error, Result};
use crate::limits::{CLOSED_STEP_CACHE_BYTES, RULE_CACHE_BYTES};
use crate::regex::byte_dfa::{translate, ByteDfa, CALL_MARKER, DEAD, TOKEN_MARKER};
use crate::regex::byte_nfa::ByteNfa;
use crate::util::bitset;
use crate::util::byte_set::ByteSet;
use crate::util::concurrent::{BoundedCache, Interner, ShardedMap, Slots};

/// Configurations one state of a grammar may hold (an ambiguous grammar's states grow with the
/// text).
pub const MAX_CONFIGURATIONS: usize = 1_024;

/// Configurations one state of a regex ([`PushdownDfa::of_regex`]) may hold: at most its NFA's
/// states, which a wide alternation puts in one set (`(a|b)*0x|…|(a|b)*2999x` has ~6,000 after
/// its first byte); this bounds what one state takes (768 KiB).
pub const MAX_REGEX_CONFIGURATIONS: usize = 65_536;

/// Configurations all states of one automaton may hold together (~200 MB).
pub const MAX_TOTAL_CONFIGURATIONS: usize = 1 << 24;

/// Rules whose NFA has at most this many states run as their minimal DFA (built in ~3 ms or
/// less): it merges equivalent states, so a document meets fewer of them and slices recognise
/// their loops (a grammar's rules are small: JSON's string, number, value). Larger rules, such
/// as a JSON schema's start rule, run as NFAs, which cost nothing to determinize up front.
pub const RULE_DFA_NFA_STATES: usize = 1_000;

/// The automata of rules' regexes, built once per regex and shared by the grammars and schemas
/// of one `Compiler` (every JSON schema with a free value calls the same `#any-json-value` rule;
/// a server compiles the same grammar again and again), within a byte budget
/// ([`crate::limits::RULE_CACHE_BYTES`]): emptied when full, since an automaton is a pure
/// function of its regex.
pub struct RuleAutomata {
    cache: BoundedCache<String, Arc<ByteNfa>>,
    /// Rules whose NFA has at most this many states run as their minimal DFA.
    dfa_up_to: usize,
}

impl Default for RuleAutomata {
    fn default() -> Self {
        RuleAutomata { cache: BoundedCache::new(RULE_CACHE_BYTES), dfa_up_to: RULE_DFA_NFA_STATES }
    }
}

impl RuleAutomata {
    /// Automata that run every rule as its NFA, however small (for tests of that path).
    #[cfg(test)]
    fn nfas_only() -> RuleAutomata {
        RuleAutomata { dfa_up_to: 0, ..RuleAutomata::default() }
    }

    /// Whether the automaton of `regex` is built already.
    pub fn holds(&self, regex: &str) -> bool {
        self.cache.contains_key(regex)
    }

    /// The automaton of a rule's regex (markers allowed): its minimal DFA when its NFA has at
    /// most [`RULE_DFA_NFA_STATES`] states, else its NFA. `parsed`: the regex translated, when
    /// the caller has it.
    fn get(&self, regex: &str, parsed: Option<Hir>, max_dfa_states: usize) -> Result<Arc<ByteNfa>> {
        if let Some(known) = self.cache.get(regex) {
            return Ok(known);
        }
        let hir = match parsed {
            Some(hir) => hir,
            None => translate(regex, false)?,
        };
        let mut nfa = ByteNfa::from_hir(&hir, max_dfa_states)?;
        if nfa.num_states() <= self.dfa_up_to {
            nfa = match ByteDfa::from_byte_nfa(&nfa, max_dfa_states)? {
                dfa if dfa.is_empty() => nfa,
                dfa => ByteNfa::from_dfa(&dfa),
            };
        }
        let bytes = nfa.heap_bytes() + regex.len();
        Ok(self.cache.insert(regex.to_string(), Arc::new(nfa), bytes))
    }
}

/// Whether a text may hold byte `b`: one some token spells (`text_bytes`), or a UTF-8
/// continuation byte, never a marker. A rule's distances count these bytes and special tokens'
/// markers (`Rule::of`); a shortest text takes only these (`PushdownDfa::shortest_text`).
fn is_text_byte(text_bytes: &[bool; 256], b: u8) -> bool {
    b != CALL_MARKER && b != TOKEN_MARKER && (text_bytes[b as usize] || (0x80..0xC0).contains(&b))
}

/// A rule body with no string: a call to rule 4095, past any network's rules.
const NO_STRING: &str = r"(?-u:\xFE\xBF\xBF)";

/// A transition not computed yet.
const UNKNOWN: u32 = DEAD - 1;
/// The empty stack's id.
const EMPTY: u32 = 0;

/// One rule's NFA with its calls.
struct Rule {
    name: String,
    nfa: Arc<ByteNfa>,
    /// Per node: whether it reads a text byte (a call marker is not one).
    reads: Vec<bool>,
    /// The nodes that call, with their calls.
    calls: FxHashMap<u32, Box<[Call]>>,
    /// The edges into each node, for distances: `into[into_start[n]..into_start[n + 1]]`.
    into_start: Vec<u32>,
    into: Vec<(u32, Step)>,
    /// Per node: fewest bytes to the rule's end, a call costing its callee's shortest string
    /// (`u32::MAX`: none).
    distance: Vec<u32>,
}

/// A call marker read from a node: the callee, and the node to resume at on return.
#[derive(Clone, Copy, Debug)]
struct Call {
    callee: u32,
    resume: u32,
    /// Whether resuming at `resume` would only end the rule: a tail call pushes no frame.
    tail: bool,
}

/// An edge as distances count it.
#[derive(Clone, Copy, Debug)]
enum Step {
    Epsilon,
    /// A byte the text may contain (see [`PushdownDfa::new`]'s `text_bytes`).
    Byte,
    /// A call to the rule: its shortest string.
    Call(u32),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
struct Config {
    rule: u32,
    node: u32,
    stack: u32,
}

/// A stack frame: the caller's rule and where it resumes, over `parent`; `distance` is the
/// fewest bytes that end every frame from here down and `depth` the frames from here down
/// (functions of the rest, kept here so that neither needs a walk).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Frame {
    parent: u32,
    rule: u32,
    resume: u32,
    distance: u32,
    depth: u32,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct StateKey {
    /// Sorted, distinct; only configurations that read a byte next.
    configs: Box<[Config]>,
    accepting: bool,
    /// Fewest bytes to acceptance (a function of the rest).
    distance: u32,
}

/// [`PushdownDfa::bounded_distances`] by (rule, instances of each rule open).
type BoundedDistances = ShardedMap<(u32, Box<[u8]>), Arc<[u32]>>;

/// See the module docs.
pub struct PushdownDfa {
    rules: Vec<Rule>,
    /// The bytes a text may contain (see [`PushdownDfa::new`]).
    text_bytes: [bool; 256],
    max_depth: Option<u32>,
    classes: [u8; 256],
    num_classes: usize,
    stacks: Interner<Frame>,
    states: Interner<StateKey>,
    bounded: BoundedDistances,
    rows: Slots<Box<[AtomicU32]>>,
    start: u32,
    max_states: usize,
    overflow: OnceLock<(&'static str, String, String)>,
    /// See [`PushdownDfa::regex`].
    source: Option<String>,
    /// Whether some rule can call itself ([`CallGraph::recursive`]).
    recursive: bool,
    /// Configurations held by the states interned so far.
    configurations: AtomicUsize,
    /// The state each set of moved configurations (sorted, without repeats) closed to; see
    /// [`CLOSED_STEP_CACHE_BYTES`].
    closed: BoundedCache<Box<[Config]>, u32>,
}

/// A loop's byte ranges, member by member (sorted): equal for copies of one loop.
type LoopRanges = Vec<Vec<(u8, u8)>>;

/// The most configurations a state may have for [`PushdownDfa::threads`] to group them: it
/// closes their reach, `n³ / 32` word operations (a URL's union has a dozen configurations,
/// ten times as many where an alternation repeats it in each branch).
const MAX_THREAD_CONFIGURATIONS: usize = 256;

/// What an entry of [`PushdownDfa::closed`] costs beyond its configurations: the box, the id
/// and the hash table's slot.
const CLOSED_ENTRY_BYTES: usize = 32;

/// Capacity of the set of configurations met that a thread keeps between closures: a wide
/// regex state's (thousands of NFA states) is dropped rather than kept per thread.
const MAX_KEPT_SEEN: usize = 4_096;

thread_local! {
    /// The set of configurations one closure met, kept per thread so that a closure (a few
    /// dozen configurations) does not allocate and grow a hash set of its own.
    static CLOSE_SEEN: std::cell::Cell<FxHashSet<Config>> = std::cell::Cell::new(FxHashSet::default());
}

impl std::fmt::Debug for PushdownDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PushdownDfa({} rules, {} states)", self.rules.len(), self.states.len())
    }
}

impl PushdownDfa {
    /// The automaton of `rules` (rule 0 starts; `None`: the rule matches no string), each a
    /// regex with call and special-token markers. `text_bytes`: the bytes a text may contain
    /// (those some token spells): a configuration that can end only through other bytes is
    /// dropped like one that cannot end at all, which keeps the engine's searches from
    /// descending forever into stacks whose text no token sequence can write. `max_depth`:
    /// admit only derivations that nest each called rule at most that many times inside itself
    /// (as `crate::grammar::lower::LowerOptions::max_recursion_depth` does), `None` for no bound.
    ///
    /// Errors: a rule's regex does not compile within `max_dfa_states`; left recursion
    /// (`Unsupported`, naming the cycle); no string at all, or none within the bound and the
    /// text bytes (`EmptyLanguage`). A rule with no string of its own (`None`, or a regex that
    /// matches nothing) is fine where it is optional.
    pub fn new(
        rules: &[(String, Option<String>)],
        automata: &RuleAutomata,
        text_bytes: &[bool; 256],
        max_depth: Option<u32>,
        max_dfa_states: usize,
        max_states: usize,
    ) -> Result<PushdownDfa> {
        Self::new_parsed(rules, Vec::new(), automata, text_bytes, max_depth, max_dfa_states, max_states)
    }

    /// [`PushdownDfa::new`] with some rules' regexes translated already (`parsed[i]` for rule
    /// `i`, as [`crate::regex::outline::outline_rules`] leaves them).
    pub fn new_parsed(
        rules: &[(String, Option<String>)],
        mut parsed: Vec<Option<Hir>>,
        automata: &RuleAutomata,
        text_bytes: &[bool; 256],
        max_depth: Option<u32>,
        max_dfa_states: usize,
        max_states: usize,
    ) -> Result<PushdownDfa> {
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, (name, regex)) in rules.iter().enumerate() {
            // A rule with no string is a call to a rule that does not exist, which the call
            // table leaves out: no way through it, so its calls are dropped as dead ends.
            let regex = regex.as_deref().unwrap_or(NO_STRING);
            let nfa = automata.get(regex, parsed.get_mut(i).and_then(Option::take), max_dfa_states)?;
            compiled.push(Rule::of(name.clone(), nfa, rules.len(), text_bytes));
        }
        Self::of_rules(compiled, text_bytes, max_depth, max_states, no_string)
    }

    /// The one-rule automaton of a user's regex, `nfa` its [`ByteNfa`] (UTF-8 only, no
    /// markers): the regex's DFA determinized on demand, the same language as its `ByteDfa`,
    /// without stacks. `EmptyLanguage` when no string matches.
    pub fn of_regex(pattern: &str, nfa: ByteNfa, max_states: usize) -> Result<PushdownDfa> {
        let rule = Rule::of("regex".into(), Arc::new(nfa), 1, &[true; 256]);
        let empty = |_: &str| Error::EmptyLanguage(format!("no string matches the regex {pattern:?}"));
        let mut dfa = Self::of_rules(vec![rule], &[true; 256], None, max_states, empty)?;
        dfa.source = Some(pattern.into());
        Ok(dfa)
    }

    /// The automaton of a user's regex written as rules by [`crate::regex::outline::outline`]
    /// (`rules`, rule 0 the regex): the same language as the regex's `ByteDfa`, which
    /// [`PushdownDfa::regex`] names for an eager guide.
    pub fn of_outlined_regex(
        pattern: &str,
        rules: &[(String, Option<String>)],
        automata: &RuleAutomata,
        max_dfa_states: usize,
        max_states: usize,
    ) -> Result<PushdownDfa> {
        let mut dfa =
            Self::new(rules, automata, &[true; 256], None, max_dfa_states, max_states).map_err(|e| match e {
                Error::EmptyLanguage(_) => Error::EmptyLanguage(format!("no string matches the regex {pattern:?}")),
                e => e,
            })?;
        dfa.source = Some(pattern.into());
        Ok(dfa)
    }

    fn of_rules(
        mut compiled: Vec<Rule>,
        text_bytes: &[bool; 256],
        max_depth: Option<u32>,
        max_states: usize,
        no_string: impl Fn(&str) -> Error,
    ) -> Result<PushdownDfa> {
        let calls = CallGraph::of(&compiled);
        shortest_distances(&mut compiled, &calls);
        if compiled[0].shortest() == u32::MAX {
            return Err(no_string(&compiled[0].name));
        }
        refuse_left_recursion(&compiled)?;
        let mut signatures: FxHashMap<Vec<u8>, u8> = FxHashMap::default();
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            let signature: Vec<u8> = compiled.iter().map(|r| r.nfa.byte_class(b)).collect();
            let n = signatures.len() as u8;
            classes[b as usize] = *signatures.entry(signature).or_insert(n);
        }
        let mut dfa = PushdownDfa {
            rules: compiled,
            text_bytes: *text_bytes,
            max_depth,
            classes,
            num_classes: signatures.len(),
            stacks: Interner::default(),
            states: Interner::default(),
            bounded: ShardedMap::default(),
            rows: Slots::default(),
            start: 0,
            max_states: max_states.max(1),
            overflow: OnceLock::new(),
            source: None,
            recursive: calls.recursive,
            configurations: AtomicUsize::new(0),
            closed: BoundedCache::new(CLOSED_STEP_CACHE_BYTES),
        };
        dfa.stacks.intern_unbounded(&Frame { parent: EMPTY, rule: u32::MAX, resume: u32::MAX, distance: 0, depth: 0 });
        let start = Config { rule: 0, node: dfa.rules[0].nfa.start(), stack: EMPTY };
        dfa.start = dfa.close(&[start]);
        if let Some(e) = dfa.overflow() {
            return Err(e);
        }
        if dfa.start == DEAD {
            return Err(no_string(&dfa.rules[0].name));
        }
        Ok(dfa)
    }

    /// [`MAX_CONFIGURATIONS`] for a grammar, [`MAX_REGEX_CONFIGURATIONS`] for a regex.
    fn max_configurations(&self) -> usize {
        match self.source.is_some() {
            true => MAX_REGEX_CONFIGURATIONS,
            false => MAX_CONFIGURATIONS,
        }
    }

    /// The limit the automaton ran into, if it did: from then on it takes no new transition.
    pub fn overflow(&self) -> Option<Error> {
        self.overflow.get().map(|(limit, value, what)| Error::LimitExceeded {
            limit,
            value: value.clone(),
            what: what.clone(),
        })
    }

    fn overflowed(&self, limit: &'static str, value: usize, what: String) -> u32 {
        let _ = self.overflow.set((limit, value.to_string(), what));
        DEAD
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    /// States built so far.
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    /// Whether the states are finitely many: nesting is bounded (`max_depth`), or no rule can
    /// call itself (an outlined regex, `crate::regex::outline`).
    pub fn is_bounded(&self) -> bool {
        self.max_depth.is_some() || !self.recursive
    }

    /// The regex this automaton runs, when it is one ([`PushdownDfa::of_regex`]): what an
    /// eager guide of the same language compiles.
    pub fn regex(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// Rules of the network, the start rule included.
    pub fn num_rules(&self) -> usize {
        self.rules.len()
    }

    /// Stack frames interned so far (the empty stack not counted).
    pub fn num_stack_frames(&self) -> usize {
        self.stacks.len().saturating_sub(1)
    }

    /// Per rule name, in rule order: the distinct stacks its configurations have in the states
    /// built so far. These are the contexts a rule's text has been decided in, what the design
    /// note's exit summaries would have merged (see the module docs): a rule called from `k`
    /// places at `d` depths meets up to `k·d` of them. A start rule that nests is two rules of
    /// one name (the start and the callee), counted as one.
    pub fn stacks_per_rule(&self) -> Vec<(&str, usize)> {
        let mut names: Vec<&str> = Vec::new();
        let mut name_of = Vec::with_capacity(self.rules.len());
        for r in &self.rules {
            let at = names.iter().position(|n| *n == r.name).unwrap_or_else(|| {
                names.push(&r.name);
                names.len() - 1
            });
            name_of.push(at);
        }
        let mut seen: FxHashSet<(usize, u32)> = FxHashSet::default();
        for q in 0..self.states.len() {
            seen.extend(self.states.key(q as u32).configs.iter().map(|c| (name_of[c.rule as usize], c.stack)));
        }
        let mut counts = vec![0; names.len()];
        for (name, _) in seen {
            counts[name] += 1;
        }
        names.into_iter().zip(counts).collect()
    }

    /// Bytes with the same transitions from every state share a class.
    #[inline]
    pub fn byte_class(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Per byte, whether some rule has an edge on it: when not, no state takes it, and nothing
    /// has to be determinized to know. One pass over the rules' edges (~0.1 ms for a
    /// 100,000-state NFA); `crate::lazy::text::TextSpace::may_take` keeps the answer.
    pub fn bytes_read(&self) -> [bool; 256] {
        // Edge ranges as a difference array over the bytes, summed once.
        let mut starts = [0i64; 257];
        for rule in &self.rules {
            for s in 0..rule.nfa.num_states() as u32 {
                for e in rule.nfa.edges(s) {
                    starts[e.lo as usize] += 1;
                    starts[e.hi as usize + 1] -= 1;
                }
            }
        }
        let mut read = [false; 256];
        let mut open = 0i64;
        for (b, r) in read.iter_mut().enumerate() {
            open += starts[b];
            *r = open > 0;
        }
        read
    }

    pub fn is_accepting(&self, q: u32) -> bool {
        self.states.key(q).accepting
    }

    /// The most frames on the stack of any configuration of `q`.
    pub fn stack_depth(&self, q: u32) -> u32 {
        self.states.key(q).configs.iter().map(|c| self.stacks.key(c.stack).depth).max().unwrap_or(0)
    }

    /// The bytes some configuration of `q` reads next: every byte [`PushdownDfa::next`] may
    /// take from `q`, and maybe a few it does not (a step whose configurations all drop out
    /// when closed is dead). Read off the rules' NFAs' edges, so that nothing is stepped and no
    /// state is built: what a trie walk skips and a byte closure spells out
    /// (`crate::lazy::text::TextSpace::bytes_taken`).
    pub fn bytes_read_at(&self, q: u32) -> ByteSet {
        let mut out = ByteSet::default();
        for c in self.states.key(q).configs.iter() {
            for e in self.rules[c.rule as usize].nfa.edges(c.node) {
                out.insert_range(e.lo, e.hi);
            }
        }
        out
    }

    /// The bytes that take `q` one byte nearer to acceptance: those after which
    /// [`PushdownDfa::next`] reaches a state whose [`PushdownDfa::distance_to_accept`] is one
    /// less. Read off the rules' NFAs' edges, as [`PushdownDfa::bytes_read_at`] is: nothing is
    /// stepped or closed.
    ///
    /// Exact: a state's distance is the least of its configurations' (0 where it accepts), and
    /// closing a set of moved configurations keeps the least of theirs, since ε-edges, calls and
    /// returns cost no byte and a rule's distance already counts the cheapest of them. A byte
    /// moves a configuration at most one nearer, so only those at `q`'s own distance can bring
    /// it one nearer.
    ///
    /// Why: a way to acceptance, one byte nearest at a time (the engine's `nearest_chain`, from
    /// each of a key's piece starts), stepped a new state by a byte of every class to find the
    /// nearer ones, each step closing and interning a state that no way took: on Llama 3, a
    /// JSON object's first key (`JsonSchemaStore/pantsbuild-2.16.0`, 369 keys), 65 M
    /// instructions a fresh guide, 62 % of them there.
    pub fn bytes_nearer(&self, q: u32) -> ByteSet {
        let key = self.states.key(q);
        let mut out = ByteSet::default();
        if key.distance == 0 || key.distance == u32::MAX {
            return out;
        }
        for c in key.configs.iter().filter(|c| self.distance_of(c) == key.distance) {
            for e in self.rules[c.rule as usize].nfa.edges(c.node) {
                if self.distance_of(&Config { node: e.to, ..*c }).wrapping_add(1) == key.distance {
                    out.insert_range(e.lo, e.hi);
                }
            }
        }
        out
    }

    /// A shortest text from `q` to acceptance, read off the rules' NFAs and distances without
    /// stepping the automaton: from a configuration at `q`'s distance, a byte edge, a call (its
    /// callee's shortest text, then on from the return point) or an ε-edge that keeps the
    /// distance to its least, at each node; at a rule's end, on at the caller's return point, a
    /// call of this text's first, then the configuration's stack's frames. `None` under a
    /// nesting bound (distances then depend on the rules open), where the text would need a
    /// special token's marker, past `max_len` bytes, or where ε-edges of one distance would
    /// make it go round.
    ///
    /// Why: a key's piece starts are proved live along a way to acceptance
    /// (`crate::lazy::engine::Engine::clean_way`), and a way stepped the automaton a byte at a
    /// time, closing and interning each state in every fresh guide: where a key's closure runs
    /// into the next item of an array, to the end of a document of 13 required properties
    /// (`Github_medium/o45185`, Llama 3), 1.5 M instructions for a 202-byte way.
    pub fn shortest_text(&self, q: u32, max_len: usize) -> Option<Vec<u8>> {
        if self.max_depth.is_some() {
            return None;
        }
        let key = self.states.key(q);
        if key.distance as usize > max_len {
            return None;
        }
        let mut text = Vec::with_capacity(key.distance as usize);
        if key.accepting {
            return Some(text);
        }
        let c = key.configs.iter().find(|c| self.distance_of(c) == key.distance)?;
        let (mut rule, mut node, mut stack) = (c.rule, c.node, c.stack);
        // The return points of the calls this text made, innermost last.
        let mut returns: Vec<(u32, u32)> = Vec::new();
        // Every move brings the text a byte nearer, enters a call or takes an ε-edge of one
        // distance; a walk past this many moves goes round ε-edges.
        let mut moves = 4 * max_len + 64;
        loop {
            moves = moves.checked_sub(1)?;
            let r = &self.rules[rule as usize];
            let d = r.distance[node as usize];
            if d == 0 && r.nfa.is_match(node) {
                (rule, node) = match returns.pop() {
                    Some(back) => back,
                    None if stack == EMPTY => return Some(text),
                    None => {
                        let f = *self.stacks.key(stack);
                        stack = f.parent;
                        (f.rule, f.resume)
                    }
                };
                continue;
            }
            let byte = r
                .nfa
                .edges(node)
                .iter()
                .filter(|e| d > 0 && r.distance[e.to as usize] == d - 1)
                .find_map(|e| (e.lo..=e.hi).find(|&b| is_text_byte(&self.text_bytes, b)).map(|b| (b, e.to)));
            if let Some((b, to)) = byte {
                text.push(b);
                if text.len() > max_len {
                    return None;
                }
                node = to;
                continue;
            }
            let calls = r.calls.get(&node).map_or(&[][..], |calls| calls);
            let call = calls
                .iter()
                .find(|c| self.rules[c.callee as usize].shortest().saturating_add(r.distance[c.resume as usize]) == d);
            if let Some(call) = call {
                returns.push((rule, call.resume));
                (rule, node) = (call.callee, self.rules[call.callee as usize].nfa.start());
                continue;
            }
            node = *r.nfa.epsilons(node).iter().find(|&&t| r.distance[t as usize] == d)?;
        }
    }

    /// [`PushdownDfa::distance_to_accept`] of [`PushdownDfa::next`]`(q, b)` for every byte `b`
    /// (`u32::MAX` where that is [`DEAD`]), read off the rules' NFAs without stepping: the least
    /// distance of `q`'s configurations moved by `b`, which closing them keeps (see
    /// [`PushdownDfa::bytes_nearer`]). A step past a limit is dead whatever this says.
    ///
    /// Why: a way search orders a state's classes by this distance, and found it by stepping
    /// the automaton by a byte of every class, closing and interning states no way took. Read
    /// per class, it moved every configuration once per class (a regex's keys make dozens):
    /// per edge, each configuration's moves are read once.
    pub fn distances_after(&self, q: u32) -> Box<[u32; 256]> {
        let mut out = Box::new([u32::MAX; 256]);
        for c in self.states.key(q).configs.iter() {
            for e in self.rules[c.rule as usize].nfa.edges(c.node) {
                let d = self.distance_of(&Config { node: e.to, ..*c });
                out[e.lo as usize..=e.hi as usize].iter_mut().for_each(|x| *x = (*x).min(d));
            }
        }
        out
    }

    /// Fewest bytes from `q` to acceptance (a special token's marker counts two).
    pub fn distance_to_accept(&self, q: u32) -> u32 {
        self.states.key(q).distance
    }

    /// Whether the whole of `text` is in the language (`Err` when the automaton ran into a
    /// limit, so that a refusal is never a limit in disguise).
    pub fn matches(&self, text: &[u8]) -> Result<bool> {
        let mut q = self.start;
        for &b in text {
            q = self.next(q, b);
            if q == DEAD {
                break;
            }
        }
        match self.overflow() {
            Some(e) => Err(e),
            None => Ok(q != DEAD && self.is_accepting(q)),
        }
    }

    /// The state after byte `b`, [`DEAD`] when no configuration reads it (or past a limit).
    #[inline]
    pub fn next(&self, q: u32, b: u8) -> u32 {
        let class = self.classes[b as usize] as usize;
        let row = self.row(q);
        match row[class].load(Ordering::Acquire) {
            UNKNOWN => {
                let (to, alike) = self.step(q, b);
                // The classes of the bytes that move `q` as `b` does step to `to` too.
                alike.for_each(|x| row[self.classes[x as usize] as usize].store(to, Ordering::Release));
                to
            }
            known => known,
        }
    }

    fn row(&self, q: u32) -> &[AtomicU32] {
        let made = self.rows.get_or_compute(q as usize, || {
            Ok::<_, std::convert::Infallible>((0..self.num_classes).map(|_| AtomicU32::new(UNKNOWN)).collect())
        });
        made.unwrap_or_else(|never| match never {})
    }

    /// The state after byte `b` ([`PushdownDfa::next`] not memoized), with the bytes around `b`
    /// that move every configuration of `q` as `b` does (by the same edge, or by none), and so
    /// step to the same state.
    ///
    /// Why the range: a state's configurations seldom part bytes that the whole automaton parts
    /// (a key's letters each make a class of their own, and a JSON string's contents read them
    /// all alike). Each class was stepped on its own, its configurations moved, sorted and
    /// looked up in [`PushdownDfa::closed`] to find the same state: on Llama 3, the counted
    /// string of `Github_easy/o58906` (`{3,255}`, on a regex determinized on demand) stepped
    /// ~12,000 times in its first mask of every guide, for ~1,300 new states.
    fn step(&self, q: u32, b: u8) -> (u32, std::ops::RangeInclusive<u8>) {
        if self.overflow.get().is_some() {
            return (DEAD, b..=b);
        }
        let (mut lo, mut hi) = (0u8, 255u8);
        let configs = &self.states.key(q).configs;
        let mut seeds: Vec<Config> = Vec::with_capacity(configs.len());
        for c in configs.iter() {
            // Edges are sorted and disjoint: `b` is on one, or in the gap between two.
            let edges = self.rules[c.rule as usize].nfa.edges(c.node);
            let after = edges.partition_point(|e| e.hi < b);
            if let Some(before) = after.checked_sub(1) {
                lo = lo.max(edges[before].hi + 1);
            }
            match edges.get(after) {
                Some(e) if e.lo <= b => {
                    (lo, hi) = (lo.max(e.lo), hi.min(e.hi));
                    seeds.push(Config { node: e.to, ..*c });
                }
                Some(e) => hi = hi.min(e.lo - 1),
                None => {}
            }
        }
        if seeds.is_empty() {
            return (DEAD, lo..=hi);
        }
        seeds.sort_unstable();
        seeds.dedup();
        if let Some(to) = self.closed.get(&seeds[..]) {
            return (to, lo..=hi);
        }
        let to = self.close(&seeds);
        if self.overflow.get().is_none() {
            let bytes = seeds.len() * std::mem::size_of::<Config>() + CLOSED_ENTRY_BYTES;
            self.closed.insert(seeds.into_boxed_slice(), to, bytes);
            return (to, lo..=hi);
        }
        // Past a limit the step is dead, and the other classes are left to find that out.
        (to, b..=b)
    }

    /// The state of `seeds` closed under calls and returns, interned. Configurations that
    /// cannot end (their rule or a frame below needs a call the nesting bound forbids, or one
    /// to a rule with no finite string) are dropped, as a minimal DFA has no states that cannot
    /// reach acceptance: a state is [`DEAD`] exactly when no configuration of it can end.
    fn close(&self, seeds: &[Config]) -> u32 {
        let mut seen = CLOSE_SEEN.take();
        let to = self.close_into(seeds, &mut seen);
        if seen.capacity() <= MAX_KEPT_SEEN {
            seen.clear();
            CLOSE_SEEN.set(seen);
        }
        to
    }

    /// [`PushdownDfa::close`] with `seen` (empty) as the set of configurations met.
    fn close_into(&self, seeds: &[Config], seen: &mut FxHashSet<Config>) -> u32 {
        let mut todo = seeds.to_vec();
        let mut configs = Vec::new();
        let mut accepting = false;
        let mut distance = u32::MAX;
        while let Some(c) = todo.pop() {
            if !seen.insert(c) {
                continue;
            }
            let open = self.open_rules(c.stack, c.rule);
            let to_end = self.distance_to_end(c.rule, c.node, open.as_deref());
            let total = to_end.saturating_add(self.stacks.key(c.stack).distance);
            if total == u32::MAX {
                continue;
            }
            let rule = &self.rules[c.rule as usize];
            if rule.reads[c.node as usize] {
                configs.push(c);
                distance = distance.min(total);
                if configs.len() > self.max_configurations() {
                    return match self.source.is_some() {
                        true => self.overflowed(
                            "regex configurations per state",
                            MAX_REGEX_CONFIGURATIONS,
                            "NFA states in one state of a regex's DFA built on demand".into(),
                        ),
                        false => self.overflowed(
                            "grammar configurations per state",
                            MAX_CONFIGURATIONS,
                            "configurations of one state of a grammar's automaton (an ambiguous grammar)".into(),
                        ),
                    };
                }
            }
            if rule.nfa.is_match(c.node) {
                match c.stack {
                    EMPTY => accepting = true,
                    s => {
                        let f = *self.stacks.key(s);
                        todo.push(Config { rule: f.rule, node: f.resume, stack: f.parent });
                    }
                }
            }
            todo.extend(rule.nfa.epsilons(c.node).iter().map(|&node| Config { node, ..c }));
            let calls = rule.calls.get(&c.node).map_or(&[][..], |calls| calls);
            for &Call { callee, resume, tail } in calls {
                if open.as_ref().is_some_and(|open| !self.may_nest(open, callee)) {
                    continue;
                }
                let stack = match self.max_depth.is_none() && tail {
                    true => c.stack,
                    false => {
                        let below = *self.stacks.key(c.stack);
                        let distance =
                            self.distance_to_end(c.rule, resume, open.as_deref()).saturating_add(below.distance);
                        let frame = Frame { parent: c.stack, rule: c.rule, resume, distance, depth: below.depth + 1 };
                        match self.stacks.intern(&frame, self.max_states) {
                            Ok((id, _)) => id,
                            Err(n) => {
                                return self.overflowed(
                                    "max_product_states",
                                    self.max_states,
                                    format!("{n} stack frames of a grammar's automaton"),
                                )
                            }
                        }
                    }
                };
                todo.push(Config { rule: callee, node: self.rules[callee as usize].nfa.start(), stack });
            }
        }
        if configs.is_empty() && !accepting {
            return DEAD;
        }
        configs.sort_unstable();
        let distance = if accepting { 0 } else { distance };
        let size = configs.len();
        let key = StateKey { configs: configs.into_boxed_slice(), accepting, distance };
        match self.states.intern(&key, self.max_states) {
            Ok((id, false)) => id,
            Ok((id, true)) => {
                let total = self.configurations.fetch_add(size, Ordering::Relaxed) + size;
                match total > MAX_TOTAL_CONFIGURATIONS {
                    true => self.overflowed(
                        "max_product_states",
                        self.max_states,
                        format!("{total} configurations in the states of a lazily determinized automaton"),
                    ),
                    false => id,
                }
            }
            Err(n) => {
                self.overflowed("max_product_states", self.max_states, format!("{n} states of a grammar's automaton"))
            }
        }
    }

    /// States whose languages' union is `q`'s: its configurations grouped into *threads*, each
    /// interned as a state of its own. `None` where `q` makes fewer than two threads, has more
    /// than 256 configurations (`MAX_THREAD_CONFIGURATIONS`), or the automaton is past a limit.
    ///
    /// Exact whatever the grouping: a state's language is the union of its configurations'
    /// (plus the empty text where it accepts), so any groups that cover its configurations,
    /// each with `q`'s acceptance, have `q`'s language as their union.
    ///
    /// The grouping is chosen so that a thread is a state the text meets on its own, whose
    /// first-token set is sliced, keyed, and found again at the next step: configurations that
    /// come back to each other within `q` by byte steps and ε-edges (a class's star, a string's
    /// characters) make a thread with every configuration of `q` they reach in one step (their
    /// loop's exits: the closing quote, an escape's backslash); what no loop reaches (a
    /// literal's next byte, a class's first, counted copy) makes one thread. A thread inside
    /// another is dropped.
    ///
    /// Why: a state of a regex determinized on demand is often a union that no slice fits (a
    /// URL's user name `[^\s:@]+` beside its host `[a-zA-Z\d.-]+`, an object's free keys
    /// beside the keys it names), new at every step of a document, where its threads come back
    /// at every step (see `crate::lazy::engine::Engine::first_tokens_of_threads`).
    pub fn threads(&self, q: u32) -> Option<Vec<u32>> {
        if self.overflow.get().is_some() {
            return None;
        }
        let key = self.states.key(q);
        let configs = &key.configs;
        let n = configs.len();
        if !(2..=MAX_THREAD_CONFIGURATIONS).contains(&n) {
            return None;
        }
        // step[i]: the configurations of `q` that `i` reaches in one byte step and ε-edges of
        // its rule; reach[i]: in one or more such steps, staying inside `q`. Bitsets over `q`'s
        // configurations.
        let words = bitset::words_for(n);
        let step: Vec<Box<[u32]>> = configs
            .iter()
            .map(|c| {
                let nfa = &self.rules[c.rule as usize].nfa;
                let mut bits = vec![0u32; words].into_boxed_slice();
                let targets = nfa.edges(c.node).iter().map(|e| e.to).collect();
                for node in nfa.epsilon_closure(targets) {
                    if let Ok(j) = configs.binary_search(&Config { node, ..*c }) {
                        bitset::set(&mut bits, j);
                    }
                }
                bits
            })
            .collect();
        let mut reach = step.clone();
        for k in 0..n {
            let via = reach[k].clone();
            for row in reach.iter_mut().filter(|row| bitset::contains(row, k)) {
                row.iter_mut().zip(via.iter()).for_each(|(w, v)| *w |= v);
            }
        }
        // A loop's thread: its configurations (those that reach each other) and their exits,
        // one step on. Not further: a user name's `@` leads to the host, a thread of its own.
        // Copies of one loop (the same byte ranges: a URL repeated in each branch of an
        // alternation) are one thread, as the text meets them together.
        let mut loops: Vec<(LoopRanges, Box<[u32]>)> = Vec::new();
        // Each loop once, from its first member.
        let mut in_a_loop = vec![0u32; words];
        for i in (0..n).filter(|&i| bitset::contains(&reach[i], i)) {
            if bitset::contains(&in_a_loop, i) {
                continue;
            }
            let members: Vec<usize> =
                (0..n).filter(|&j| bitset::contains(&reach[i], j) && bitset::contains(&reach[j], i)).collect();
            members.iter().for_each(|&j| bitset::set(&mut in_a_loop, j));
            let mut ranges: LoopRanges = (members.iter())
                .map(|&j| {
                    self.rules[configs[j].rule as usize]
                        .nfa
                        .edges(configs[j].node)
                        .iter()
                        .map(|e| (e.lo, e.hi))
                        .collect()
                })
                .collect();
            ranges.sort_unstable();
            let at = match loops.iter().position(|(r, _)| *r == ranges) {
                Some(at) => at,
                None => {
                    loops.push((ranges, vec![0u32; words].into_boxed_slice()));
                    loops.len() - 1
                }
            };
            let group = &mut loops[at].1;
            for &j in &members {
                bitset::set(group, j);
                group.iter_mut().zip(step[j].iter()).for_each(|(w, v)| *w |= v);
            }
        }
        let mut groups: Vec<Box<[u32]>> = Vec::new();
        for (_, group) in loops {
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        // What no loop reaches, together.
        let mut rest = vec![0u32; words].into_boxed_slice();
        for i in (0..n).filter(|&i| groups.iter().all(|g| !bitset::contains(g, i))) {
            bitset::set(&mut rest, i);
        }
        if bitset::count(&rest) > 0 {
            groups.push(rest);
        }
        // The groups are distinct: one inside another adds nothing to the union.
        let inside = |g: &[u32], h: &[u32]| g.iter().zip(h).all(|(a, b)| a & b == *a);
        let kept: Vec<&[u32]> =
            groups.iter().map(|g| &g[..]).filter(|&g| !groups.iter().any(|h| &h[..] != g && inside(g, h))).collect();
        if kept.len() < 2 {
            return None;
        }
        let mut threads = Vec::with_capacity(kept.len());
        for g in kept {
            let configs: Box<[Config]> = bitset::iter_ones(g).map(|i| configs[i]).collect();
            let distance = match key.accepting {
                true => 0,
                false => configs.iter().map(|c| self.distance_of(c)).min().unwrap_or(u32::MAX),
            };
            let size = configs.len();
            let thread = StateKey { configs, accepting: key.accepting, distance };
            match self.states.intern(&thread, self.max_states) {
                Ok((id, new)) => {
                    if new {
                        self.configurations.fetch_add(size, Ordering::Relaxed);
                    }
                    threads.push(id);
                }
                Err(_) => return None,
            }
        }
        Some(threads)
    }

    /// Fewest bytes from configuration `c` to acceptance: to its rule's end, then every frame.
    fn distance_of(&self, c: &Config) -> u32 {
        let open = self.open_rules(c.stack, c.rule);
        let to_end = self.distance_to_end(c.rule, c.node, open.as_deref());
        to_end.saturating_add(self.stacks.key(c.stack).distance)
    }

    /// Under a nesting bound: how many instances of each rule are open in `rule` over `stack`
    /// (its frames' rules and itself). `None` without a bound, where nothing depends on it.
    fn open_rules(&self, stack: u32, rule: u32) -> Option<Box<[u8]>> {
        self.max_depth?;
        let mut open = vec![0u8; self.rules.len()].into_boxed_slice();
        open[rule as usize] += 1;
        let mut s = stack;
        while s != EMPTY {
            let f = self.stacks.key(s);
            open[f.rule as usize] = open[f.rule as usize].saturating_add(1);
            s = f.parent;
        }
        Some(open)
    }

    /// Fewest bytes from `node` to the end of `rule`, with `open` instances of each rule open
    /// (the nesting bound then forbids some calls; `None`: no bound).
    fn distance_to_end(&self, rule: u32, node: u32, open: Option<&[u8]>) -> u32 {
        match open {
            None => self.rules[rule as usize].distance[node as usize],
            Some(open) => self.bounded_distances(rule, open)[node as usize],
        }
    }

    /// [`Rule::distance`] under the nesting bound, for `rule` with `open` instances open: a
    /// call to `callee` is allowed while `callee` has at most `max_depth` instances open, and
    /// costs `callee`'s shortest string with one more instance of it open. Memoized; the
    /// recursion ends because every call adds an instance and the bound caps them.
    fn bounded_distances(&self, rule: u32, open: &[u8]) -> Arc<[u32]> {
        let key = (rule, Box::<[u8]>::from(open));
        if let Some(known) = self.bounded.get(&key) {
            return known;
        }
        let r = &self.rules[rule as usize];
        let mut lengths: FxHashMap<u32, u32> = FxHashMap::default();
        for &Call { callee, .. } in r.calls.values().flat_map(|calls| calls.iter()) {
            if lengths.contains_key(&callee) {
                continue;
            }
            let length = match self.may_nest(open, callee) {
                true => {
                    let mut inner = open.to_vec();
                    inner[callee as usize] = inner[callee as usize].saturating_add(1);
                    let start = self.rules[callee as usize].nfa.start();
                    self.bounded_distances(callee, &inner)[start as usize]
                }
                false => u32::MAX,
            };
            lengths.insert(callee, length);
        }
        let distances: Arc<[u32]> = r.distances_with(|callee| lengths[&callee]).into();
        self.bounded.insert_if_absent(key, distances)
    }

    /// Whether a rule with `open` instances open may call `callee` under the nesting bound:
    /// `callee` has at most `max_depth` instances open.
    fn may_nest(&self, open: &[u8], callee: u32) -> bool {
        self.max_depth.is_none_or(|d| open[callee as usize] as u32 <= d)
    }
}

impl Rule {
    fn of(name: String, nfa: Arc<ByteNfa>, num_rules: usize, text_bytes: &[bool; 256]) -> Rule {
        let n = nfa.num_states();
        // Marker bytes are never text, but special tokens write them: always steps.
        let step = |b: u8| b == TOKEN_MARKER || is_text_byte(text_bytes, b);
        let steps = |lo: u8, hi: u8| (lo..=hi).any(step);
        let reads: Vec<bool> =
            (0..n as u32).map(|s| nfa.edges(s).iter().any(|e| e.lo != CALL_MARKER || e.hi != CALL_MARKER)).collect();
        let mut calls = FxHashMap::default();
        for s in 0..n as u32 {
            let Some(marked) = nfa.next(s, CALL_MARKER) else { continue };
            let mut out = Vec::new();
            for half in nfa.epsilon_closure(vec![marked]) {
                for hi in nfa.edges(half).iter().flat_map(|e| e.lo.max(0x80)..=e.hi.min(0xBF)) {
                    let Some(after_hi) = nfa.next(half, hi) else { continue };
                    for named in nfa.epsilon_closure(vec![after_hi]) {
                        for lo in nfa.edges(named).iter().flat_map(|e| e.lo.max(0x80)..=e.hi.min(0xBF)) {
                            let callee = ((hi - 0x80) as usize) << 6 | (lo - 0x80) as usize;
                            let Some(resume) = nfa.next(named, lo) else { continue };
                            if callee < num_rules {
                                let tail = only_ends(&nfa, &reads, resume);
                                out.push(Call { callee: callee as u32, resume, tail });
                            }
                        }
                    }
                }
            }
            if !out.is_empty() {
                calls.insert(s, out.into_boxed_slice());
            }
        }
        // Edges into each node: a counting sort of (target, source, step).
        let mut edges: Vec<(u32, u32, Step)> = Vec::new();
        for s in 0..n as u32 {
            edges.extend(nfa.edges(s).iter().filter(|e| steps(e.lo, e.hi)).map(|e| (e.to, s, Step::Byte)));
            edges.extend(nfa.epsilons(s).iter().map(|&t| (t, s, Step::Epsilon)));
        }
        for (&s, out) in &calls {
            edges.extend(out.iter().map(|c| (c.resume, s, Step::Call(c.callee))));
        }
        let mut into_start = vec![0u32; n + 1];
        for &(t, _, _) in &edges {
            into_start[t as usize + 1] += 1;
        }
        for i in 0..n {
            into_start[i + 1] += into_start[i];
        }
        let mut fill = into_start.clone();
        let mut into = vec![(0u32, Step::Epsilon); edges.len()];
        for (t, s, step) in edges {
            into[fill[t as usize] as usize] = (s, step);
            fill[t as usize] += 1;
        }
        Rule { name, nfa, reads, calls, into_start, into, distance: vec![u32::MAX; n] }
    }

    /// The rule's shortest string (`u32::MAX`: none), as [`Rule::distance`] counts it.
    fn shortest(&self) -> u32 {
        self.distance[self.nfa.start() as usize]
    }

    /// Fewest bytes from each node to the rule's end, a call to `callee` costing
    /// `length(callee)` (`u32::MAX`: not allowed): Dijkstra's algorithm backwards from the
    /// match nodes over [`Rule::into`], with [`DistanceQueue`] as its priority queue.
    fn distances_with(&self, length: impl Fn(u32) -> u32) -> Vec<u32> {
        let n = self.nfa.num_states();
        let mut distance = vec![u32::MAX; n];
        let mut queue = DistanceQueue::default();
        for s in (0..n as u32).filter(|&s| self.nfa.is_match(s)) {
            distance[s as usize] = 0;
            queue.push(0, s);
        }
        while let Some((d, s)) = queue.pop() {
            if d > distance[s as usize] {
                continue;
            }
            let into = &self.into[self.into_start[s as usize] as usize..self.into_start[s as usize + 1] as usize];
            for &(from, step) in into {
                let cost = match step {
                    Step::Epsilon => 0,
                    Step::Byte => 1,
                    Step::Call(callee) => length(callee),
                };
                let via = d.saturating_add(cost);
                if via < distance[from as usize] {
                    distance[from as usize] = via;
                    queue.push(via, from);
                }
            }
        }
        distance
    }
}

/// The priority queue of [`Rule::distances_with`]: nodes by distance, popped in nondecreasing
/// order, for a search whose edges almost all cost 0 (ε) or 1 (a byte).
///
/// Why not a binary heap: it was 20 % of compiling `Github_medium/o9769` outlined (72 % of its
/// `shortest_distances`), paying `log n` per push and pop where two plain stacks do: the nodes
/// at the current distance and those one further. Only calls cost more; their nodes wait in a
/// heap until the current distance reaches theirs.
#[derive(Default)]
struct DistanceQueue {
    /// The distance being popped.
    at: u32,
    /// Nodes at `at`, then at `at + 1`.
    now: Vec<u32>,
    next: Vec<u32>,
    /// Nodes further than `at + 1`.
    later: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
}

impl DistanceQueue {
    /// Queues `s` at distance `d`, which is at least the distance last popped.
    fn push(&mut self, d: u32, s: u32) {
        debug_assert!(d >= self.at);
        match d - self.at {
            0 => self.now.push(s),
            1 => self.next.push(s),
            _ => self.later.push(std::cmp::Reverse((d, s))),
        }
    }

    /// A node at the least distance queued, with that distance.
    fn pop(&mut self) -> Option<(u32, u32)> {
        loop {
            if let Some(s) = self.now.pop() {
                return Some((self.at, s));
            }
            // Move on to the next distance that holds a node.
            let at = match (self.next.is_empty(), self.later.peek()) {
                (false, _) => self.at + 1,
                (true, Some(std::cmp::Reverse((d, _)))) => *d,
                (true, None) => return None,
            };
            if at == self.at + 1 {
                std::mem::swap(&mut self.now, &mut self.next);
            }
            self.at = at;
            while let Some(&std::cmp::Reverse((d, s))) = self.later.peek() {
                if d != at {
                    break;
                }
                self.later.pop();
                self.now.push(s);
            }
        }
    }
}

/// Whether resuming at `s` can only end the rule: a match is reachable by ε-edges, and
/// nothing there reads or calls.
fn only_ends(nfa: &ByteNfa, reads: &[bool], s: u32) -> bool {
    let closure = nfa.epsilon_closure(vec![s]);
    closure.iter().any(|&s| nfa.is_match(s))
        && closure.iter().all(|&s| !reads[s as usize] && nfa.next(s, CALL_MARKER).is_none())
}

/// Every rule's [`Rule::distance`] without a nesting bound, a least fixpoint: a call costs the
/// callee's distance from its start, which depends on the calls it makes in turn. Rules are
/// recomputed from a worklist, callees first (a depth-first post-order of the calls), and a rule
/// again only when a callee's shortest string got shorter: a grammar without recursion costs one
/// shortest-path pass per rule. (Rounds over all rules cost one pass per rule per level of
/// calls: 38 % of a 4 s compile of a regex outlined into nested rules, `crate::regex::outline`.)
fn shortest_distances(rules: &mut [Rule], calls: &CallGraph) {
    let n = rules.len();
    let mut callers = vec![Vec::new(); n];
    for (r, callees) in calls.callees.iter().enumerate() {
        for &c in callees {
            callers[c].push(r);
        }
    }
    let mut queue: std::collections::VecDeque<usize> = calls.callees_first.iter().copied().collect();
    let mut queued = vec![true; n];
    let mut lengths = vec![u32::MAX; n];
    while let Some(r) = queue.pop_front() {
        queued[r] = false;
        rules[r].distance = rules[r].distances_with(|callee| lengths[callee as usize]);
        let shortest = rules[r].shortest();
        if shortest != lengths[r] {
            lengths[r] = shortest;
            for &caller in &callers[r] {
                if !std::mem::replace(&mut queued[caller], true) {
                    queue.push_back(caller);
                }
            }
        }
    }
}

/// Which rules call which.
struct CallGraph {
    /// The rules each rule calls, sorted.
    callees: Vec<Vec<usize>>,
    /// Every rule, callees before their callers (a depth-first post-order; along a cycle some
    /// caller comes first).
    callees_first: Vec<usize>,
    /// Whether some rule can call itself, directly or through others.
    recursive: bool,
}

impl CallGraph {
    fn of(rules: &[Rule]) -> CallGraph {
        let n = rules.len();
        let callees: Vec<Vec<usize>> = (rules.iter())
            .map(|rule| {
                let mut callees: Vec<usize> = rule.calls.values().flatten().map(|c| c.callee as usize).collect();
                callees.sort_unstable();
                callees.dedup();
                callees
            })
            .collect();
        let mut callees_first = Vec::with_capacity(n);
        let mut recursive = false;
        // 0: not visited, 1: on the depth-first path, 2: done.
        let mut colour = vec![0u8; n];
        for root in 0..n {
            if colour[root] != 0 {
                continue;
            }
            colour[root] = 1;
            let mut path = vec![(root, 0)];
            while let Some((r, i)) = path.last_mut() {
                match callees[*r].get(*i) {
                    Some(&c) => {
                        *i += 1;
                        recursive |= colour[c] == 1;
                        if colour[c] == 0 {
                            colour[c] = 1;
                            path.push((c, 0));
                        }
                    }
                    None => {
                        colour[*r] = 2;
                        callees_first.push(*r);
                        path.pop();
                    }
                }
            }
        }
        CallGraph { callees, callees_first, recursive }
    }
}

/// The error for a start rule none of whose strings can be written.
fn no_string(start: &str) -> Error {
    Error::EmptyLanguage(format!(
        "no string of the grammar's start rule `{start}` can be written: every derivation calls a rule \
         forever, nests deeper than max_recursion_depth, or needs a byte no token spells"
    ))
}

/// Refuses a rule that can call itself before reading a byte (through rules that may match
/// the empty string on the way), naming the cycle: closing a state would push forever.
fn refuse_left_recursion(rules: &[Rule]) -> Result<()> {
    // Rules each rule may call before its first byte.
    let first_calls: Vec<Vec<usize>> = (rules.iter())
        .map(|rule| {
            let mut nodes = vec![rule.nfa.start()];
            let mut seen: FxHashSet<u32> = nodes.iter().copied().collect();
            let mut out = Vec::new();
            while let Some(q) = nodes.pop() {
                nodes.extend(rule.nfa.epsilons(q).iter().filter(|&&s| seen.insert(s)));
                for &Call { callee, resume, .. } in rule.calls.get(&q).map_or(&[][..], |calls| calls) {
                    out.push(callee as usize);
                    let nullable = rules[callee as usize].shortest() == 0;
                    if nullable && seen.insert(resume) {
                        nodes.push(resume);
                    }
                }
            }
            out
        })
        .collect();
    // A cycle in `first_calls`: depth-first search with colours.
    let mut colour = vec![0u8; rules.len()];
    for root in 0..rules.len() {
        if colour[root] != 0 {
            continue;
        }
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        colour[root] = 1;
        while let Some(&mut (r, ref mut i)) = path.last_mut() {
            let Some(&next) = first_calls[r].get(*i) else {
                colour[r] = 2;
                path.pop();
                continue;
            };
            *i += 1;
            match colour[next] {
                0 => {
                    colour[next] = 1;
                    path.push((next, 0));
                }
                1 => {
                    let from = path.iter().position(|&(p, _)| p == next).expect("on the path");
                    let mut cycle: Vec<&str> = path[from..].iter().map(|&(p, _)| rules[p].name.as_str()).collect();
                    cycle.push(&rules[next].name);
                    return Err(Error::Unsupported(format!(
                        "grammar rule `{}` is left-recursive ({}): it can name itself before any text, which \
                         the context-free engine does not take; write the repetition with `*` or `+` \
                         (`sum: term (\"+\" term)*`)",
                        rules[next].name,
                        cycle.join(" → ")
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::lower::{to_rule_regexes, LowerOptions};
    use crate::grammar::{parse, Syntax};
    use crate::regex::byte_dfa::ByteDfa;

    fn automaton(text: &str, max_depth: Option<u32>) -> Result<PushdownDfa> {
        let grammar = parse(text, Syntax::Gbnf, None)?;
        let rules = to_rule_regexes(&grammar, LowerOptions::default())?;
        PushdownDfa::new(&rules.rules, &RuleAutomata::nfas_only(), &[true; 256], max_depth, 10_000, 100_000)
    }

    /// Dijkstra with [`DistanceQueue`] gives Bellman-Ford's distances on random graphs whose
    /// edges cost 0 and 1, and now and then more (a call).
    #[test]
    fn distance_queue_gives_shortest_distances() {
        let mut rng = crate::util::random::SplitMix64::new(11);
        for _ in 0..500 {
            let n = 1 + rng.below(30);
            let edges: Vec<(usize, usize, u32)> = (0..rng.below(4 * n + 1))
                .map(|_| {
                    let cost = match rng.below(10) {
                        0..=3 => 0,
                        4..=7 => 1,
                        _ => 2 + rng.below(6) as u32,
                    };
                    (rng.below(n), rng.below(n), cost)
                })
                .collect();
            let sources: Vec<usize> = (0..n).filter(|_| rng.one_in(4)).collect();
            let mut expected = vec![u32::MAX; n];
            sources.iter().for_each(|&s| expected[s] = 0);
            for _ in 0..n {
                for &(a, b, c) in &edges {
                    if expected[a] != u32::MAX {
                        expected[b] = expected[b].min(expected[a] + c);
                    }
                }
            }
            let mut distance = vec![u32::MAX; n];
            let mut queue = DistanceQueue::default();
            for &s in &sources {
                distance[s] = 0;
                queue.push(0, s as u32);
            }
            let mut last = 0;
            while let Some((d, s)) = queue.pop() {
                assert!(d >= last, "popped out of order");
                last = d;
                if d > distance[s as usize] {
                    continue;
                }
                for &(_, b, c) in edges.iter().filter(|e| e.0 == s as usize) {
                    if d + c < distance[b] {
                        distance[b] = d + c;
                        queue.push(d + c, b as u32);
                    }
                }
            }
            assert_eq!(distance, expected, "edges {edges:?} from {sources:?}");
        }
    }

    /// Rules run as minimal DFAs (small ones, by default) or as NFAs: the same language, and
    /// the same distances to acceptance, along random texts of a JSON-like grammar.
    #[test]
    fn dfa_rules_and_nfa_rules_agree() {
        let text = r#"root ::= value
value ::= "{" (pair ("," pair)*)? "}" | "[" (value ("," value)*)? "]" | "\"" [a-z]* "\"" | [0-9]+
pair ::= "\"" [a-z]+ "\":" value"#;
        let grammar = parse(text, Syntax::Gbnf, None).unwrap();
        let rules = to_rule_regexes(&grammar, LowerOptions::default()).unwrap().rules;
        let [with_dfas, with_nfas] = [RuleAutomata::default(), RuleAutomata::nfas_only()]
            .map(|a| PushdownDfa::new(&rules, &a, &[true; 256], None, 10_000, 100_000).unwrap());
        let mut rng = crate::util::random::SplitMix64::new(7);
        let alphabet = b"{}[],:\"ab01";
        for _ in 0..2_000 {
            let len = rng.below(12);
            let text: Vec<u8> = (0..len).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            let walk = |dfa: &PushdownDfa| {
                let mut q = dfa.start();
                for &b in &text {
                    q = if q == DEAD { DEAD } else { dfa.next(q, b) };
                }
                (q != DEAD).then(|| (dfa.is_accepting(q), dfa.distance_to_accept(q)))
            };
            assert_eq!(walk(&with_dfas), walk(&with_nfas), "{}", String::from_utf8_lossy(&text));
        }
        assert!(with_dfas.matches(br#"{"a":[1,{"b":"x"}]}"#).unwrap());
    }

    /// `bytes_read` over-approximates what states take and rules out only bytes no state
    /// takes: every state reachable from the start (all of them, found by a search) takes
    /// only bytes it admits, and a byte some state takes is admitted. Per state,
    /// `bytes_read_at` holds every byte the state takes, and here no other: this grammar's
    /// configurations never all drop out on a byte they read.
    #[test]
    fn bytes_read_cover_every_state() {
        let dfa = automaton(
            r#"root ::= "{" item ("," item)* "}"
item ::= "\"" [a-c]* "\"" | [0-9]+ | root"#,
            Some(2),
        )
        .unwrap();
        let read = dfa.bytes_read();
        let mut taken = [false; 256];
        let mut seen = FxHashSet::default();
        let mut todo = vec![dfa.start()];
        while let Some(q) = todo.pop() {
            let mut taken_here = ByteSet::default();
            for b in 0..=255u8 {
                let to = dfa.next(q, b);
                if to != DEAD {
                    taken[b as usize] = true;
                    taken_here.insert(b);
                    if seen.insert(to) {
                        todo.push(to);
                    }
                }
            }
            assert_eq!(dfa.bytes_read_at(q), taken_here, "state {q}");
        }
        assert!(seen.len() > 10, "the search reached {} states", seen.len());
        for b in 0..=255u8 {
            assert!(!taken[b as usize] || read[b as usize], "byte {b} is taken but not read");
        }
        for b in [b'{', b'}', b',', b'"', b'a', b'c', b'0', b'9'] {
            assert!(read[b as usize], "{}", b as char);
        }
        for b in [b'd', b'x', b'\n', b' ', b'[', 0xC3] {
            assert!(!read[b as usize], "{}", b as char);
        }
    }

    /// What `distances_after`, `bytes_nearer` and `bytes_read_at` read off a state's
    /// configurations is what stepping the automaton gives: per byte, the distance of the state
    /// it steps to (none where dead), the bytes one nearer to acceptance, and every byte taken.
    /// Over every state a search reaches (up to 3,000) of grammars that nest, without a bound
    /// and with one, with tail calls, an ambiguous alternation, and a rule that calls itself
    /// between two bytes.
    #[test]
    fn distances_after_a_byte_are_the_stepped_states() {
        let grammars = [
            (
                r#"root ::= "{" item ("," item)* "}"
item ::= "\"" [a-c]* "\"" | [0-9]+ | root"#,
                Some(4),
            ),
            (
                r#"root ::= value
value ::= "[" (value ("," value)*)? "]" | "\"" [a-z]* "\"" | "tru" "e"? | [0-9]+ ("." [0-9]+)?"#,
                None,
            ),
            (
                r#"root ::= "x" ab "y" | "x" "a"* "b" "y" | "x" "(" root ")" "y"
ab ::= "a" ab? "b" | "c""#,
                None,
            ),
        ];
        for (text, bound) in grammars {
            let dfa = automaton(text, bound).unwrap();
            let mut seen = FxHashSet::default();
            let mut todo = std::collections::VecDeque::from([dfa.start()]);
            let mut nearer_steps = 0;
            while let Some(q) = todo.pop_front() {
                let d = dfa.distance_to_accept(q);
                let (mut taken, mut nearer) = (ByteSet::default(), ByteSet::default());
                let distances = dfa.distances_after(q);
                for b in 0..=255u8 {
                    let to = dfa.next(q, b);
                    let after = if to == DEAD { u32::MAX } else { dfa.distance_to_accept(to) };
                    assert_eq!(distances[b as usize], after, "{text}: state {q}, byte {b}");
                    if to == DEAD {
                        continue;
                    }
                    taken.insert(b);
                    if d != 0 && after + 1 == d {
                        nearer.insert(b);
                    }
                    if seen.len() < 3_000 && seen.insert(to) {
                        todo.push_back(to);
                    }
                }
                assert_eq!(dfa.bytes_nearer(q), nearer, "{text}: state {q}");
                assert_eq!(dfa.bytes_read_at(q), taken, "{text}: state {q}");
                nearer_steps += nearer.len();
            }
            assert!(seen.len() > 20 && nearer_steps > 20, "{text}: {} states, {nearer_steps}", seen.len());
        }
    }

    /// A state's shortest text ([`PushdownDfa::shortest_text`]), stepped through the automaton
    /// byte by byte, ends where it accepts, in exactly the state's distance: over every state a
    /// breadth-first walk reaches (up to 3,000) of grammars with recursion, calls inside calls
    /// and a rule ending on a call, with rules run as DFAs and as NFAs (ε-edges), and a text
    /// that must leave out a byte no token spells. Under a nesting bound there is none.
    #[test]
    fn a_shortest_text_is_accepted_at_the_distance() {
        let grammars = [
            r#"root ::= value
value ::= "{" (pair ("," pair)*)? "}" | "[" (value ("," value)*)? "]" | "\"" [a-z]* "\"" | [0-9]+
pair ::= "\"" [a-z]+ "\":" value"#,
            r#"root ::= "x" ab "y" | "x" "(" root ")" "y"
ab ::= "a" ab? "b" | "cc" ab"#,
            r#"root ::= "<" inner ">" | "q"{3,5} root
inner ::= ("z" | "y")* "." | root"#,
        ];
        let mut text_bytes = [true; 256];
        text_bytes[b'a' as usize] = false;
        for text in grammars {
            let grammar = parse(text, Syntax::Gbnf, None).unwrap();
            let rules = to_rule_regexes(&grammar, LowerOptions::default()).unwrap().rules;
            for (automata, bytes) in [
                (RuleAutomata::default(), [true; 256]),
                (RuleAutomata::nfas_only(), [true; 256]),
                (RuleAutomata::nfas_only(), text_bytes),
            ] {
                let Ok(dfa) = PushdownDfa::new(&rules, &automata, &bytes, None, 10_000, 100_000) else {
                    assert!(!bytes[b'a' as usize] && text.contains("ab ::="), "{text}: builds");
                    continue;
                };
                let mut seen = FxHashSet::default();
                let mut todo = std::collections::VecDeque::from([dfa.start()]);
                let (mut longest, mut farthest) = (0, dfa.start());
                while let Some(q) = todo.pop_front() {
                    let shortest = dfa.shortest_text(q, 1_000).expect("a text");
                    assert_eq!(shortest.len() as u32, dfa.distance_to_accept(q), "{text}: state {q}");
                    assert!(shortest.iter().all(|&b| bytes[b as usize]), "{text}: {shortest:?}");
                    let end = shortest.iter().fold(q, |at, &b| if at == DEAD { DEAD } else { dfa.next(at, b) });
                    assert!(end != DEAD && dfa.is_accepting(end), "{text}: state {q}, {shortest:?}");
                    if shortest.len() > longest {
                        (longest, farthest) = (shortest.len(), q);
                    }
                    for b in 0..=255u8 {
                        let to = dfa.next(q, b);
                        if to != DEAD && seen.len() < 3_000 && seen.insert(to) {
                            todo.push_back(to);
                        }
                    }
                }
                assert!(seen.len() > 20 && longest >= 4, "{text}: {} states, longest {longest}", seen.len());
                assert_eq!(dfa.shortest_text(farthest, longest - 1), None, "{text}: past max_len");
            }
        }
        let bounded = automaton(grammars[0], Some(3)).unwrap();
        assert_eq!(bounded.shortest_text(bounded.start(), 1_000), None);
    }

    /// A step fills every class of the bytes that move the state alike ([`PushdownDfa::step`]):
    /// over every state a search reaches (up to 2,000) of a grammar and of a regex determinized
    /// on demand whose letters make classes of their own (keys beside a counted string), each
    /// byte's memoized step, filled by whichever byte of its range came first, is the state its
    /// own step finds, and every byte of a step's range steps there too.
    #[test]
    fn a_step_fills_the_classes_that_move_alike() {
        let string = r#""(?:[^"\\\x00-\x1F]|\\["\\nt]){3,40}""#;
        let pattern = format!(r#"\{{(?:"name":{string}(?:,"mail":"[a-z]+@[a-z]+\.(?:com|org)")?|"zip":[0-9]{{5}})\}}"#);
        let nfa = ByteNfa::from_hir(&crate::regex::byte_dfa::parse_regex(&pattern).unwrap(), 250_000).unwrap();
        let regex = PushdownDfa::of_regex(&pattern, nfa, 100_000).unwrap();
        let grammar = automaton(
            r#"root ::= "{" item ("," item)* "}"
item ::= "\"" [a-c]* "\"" | [0-9]+ | "key" | root"#,
            None,
        )
        .unwrap();
        for dfa in [regex, grammar] {
            assert!(dfa.num_classes > 12, "{} classes", dfa.num_classes);
            let mut seen = FxHashSet::default();
            let mut todo = std::collections::VecDeque::from([dfa.start()]);
            let mut wide_ranges = 0;
            while let Some(q) = todo.pop_front() {
                // Bytes in an order that meets ranges from both ends.
                for b in (0..=255u8).map(|i| i.wrapping_mul(167)) {
                    let to = dfa.next(q, b);
                    let (stepped, alike) = dfa.step(q, b);
                    assert_eq!(to, stepped, "state {q}, byte {b}");
                    assert!(alike.contains(&b), "state {q}, byte {b}: {alike:?}");
                    wide_ranges +=
                        (alike.clone().map(|x| dfa.classes[x as usize]).collect::<FxHashSet<_>>().len() > 1) as usize;
                    for x in alike {
                        assert_eq!(dfa.step(q, x).0, to, "state {q}, bytes {b} and {x}");
                    }
                    if to != DEAD && seen.len() < 2_000 && seen.insert(to) {
                        todo.push_back(to);
                    }
                }
            }
            assert!(seen.len() > 50 && wide_ranges > 100, "{} states, {wide_ranges} ranges over classes", seen.len());
        }
    }

    fn accepts(dfa: &PushdownDfa, text: &str) -> bool {
        dfa.matches(text.as_bytes()).unwrap()
    }

    #[test]
    fn nesting_is_unbounded_and_exact() {
        let dfa = automaton(r#"root ::= "(" root ")" root | """#, None).unwrap();
        assert_eq!(dfa.num_rules(), 2);
        for (text, want) in [("", true), ("()", true), ("(())()", true), ("(()", false), ("())", false)] {
            assert_eq!(accepts(&dfa, text), want, "{text:?}");
        }
        let deep = "(".repeat(500) + &")".repeat(500);
        assert!(accepts(&dfa, &deep));
        assert!(!accepts(&dfa, &deep[1..]));
        // A tail call pushes nothing: a long flat sequence stays in a few states.
        let before = dfa.num_states();
        assert!(accepts(&dfa, &"()".repeat(300)));
        assert!(dfa.num_states() - before < 4, "{} new states", dfa.num_states() - before);
    }

    #[test]
    fn distances_count_the_stack() {
        let dfa = automaton(r#"root ::= "[" (root ("," root)*)? "]""#, None).unwrap();
        let mut q = dfa.start();
        assert_eq!(dfa.distance_to_accept(q), 2);
        for &b in b"[[[" {
            q = dfa.next(q, b);
        }
        assert_eq!(dfa.distance_to_accept(q), 3);
    }

    /// Each `[` opens the list one frame deeper: after `[[[` the rule has been read under the
    /// empty stack and three frames, and flat lists (tail calls) add none.
    #[test]
    fn stacks_are_counted_per_rule() {
        let dfa = automaton(r#"root ::= "[" (root ("," root)*)? "]""#, None).unwrap();
        assert_eq!((dfa.num_stack_frames(), dfa.stacks_per_rule()), (0, vec![("root", 1)]));
        let mut q = dfa.start();
        for &b in b"[[[" {
            q = dfa.next(q, b);
        }
        assert_eq!((dfa.num_stack_frames(), dfa.stacks_per_rule()), (3, vec![("root", 4)]));
        for &b in b"],[],[]]]" {
            q = dfa.next(q, b);
        }
        assert!(dfa.is_accepting(q));
        assert_eq!((dfa.num_stack_frames(), dfa.stacks_per_rule()), (3, vec![("root", 4)]));
    }

    #[test]
    fn a_bound_keeps_the_lowered_language() {
        let text = r#"root ::= "[" (root ("," root)*)? "]" | "1""#;
        let dfa = automaton(text, Some(2)).unwrap();
        let regex = crate::grammar::grammar_to_regex(
            text,
            Syntax::Gbnf,
            None,
            LowerOptions { max_recursion_depth: Some(2), ..Default::default() },
        )
        .unwrap();
        let reference = ByteDfa::from_regex(&regex, 10_000).unwrap();
        for s in ["1", "[]", "[1,[1]]", "[[[]]]", "[[[[]]]]", "[1,[[1]]]", "[[[1]]]"] {
            assert_eq!(accepts(&dfa, s), reference.matches(s.as_bytes()), "{s:?}");
        }
        // No state that cannot end, as in a minimal DFA: at the bound only `]` closes `[[[`.
        let walk = |text: &[u8]| text.iter().fold(dfa.start(), |q, &b| if q == DEAD { DEAD } else { dfa.next(q, b) });
        assert_eq!(dfa.distance_to_accept(walk(b"[[[")), 3);
        assert_eq!(walk(b"[[[1"), DEAD);
        assert_eq!(walk(b"[[[["), DEAD);
    }

    #[test]
    fn refusals_name_the_rule() {
        let e = automaton("root ::= root \"+\" root | \"(\" root \")\" | \"1\"", None).unwrap_err().to_string();
        assert!(e.contains("left-recursive") && e.contains("`root`"), "{e}");
        let e = automaton("root ::= \"(\" x \")\"\nx ::= y\ny ::= \"[\" x \"]\" | x | \"a\"", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("left-recursive"), "{e}");
        let e = automaton("root ::= \"(\" root \")\"", None).unwrap_err().to_string();
        assert!(e.contains("calls a rule forever"), "{e}");
        // Every string needs an `x`, which no token spells.
        let grammar = parse("root ::= \"(\" root \")\" | \"x\"", Syntax::Gbnf, None).unwrap();
        let rules = to_rule_regexes(&grammar, LowerOptions::default()).unwrap().rules;
        let mut text_bytes = [true; 256];
        text_bytes[b'x' as usize] = false;
        let e =
            PushdownDfa::new(&rules, &RuleAutomata::default(), &text_bytes, None, 100, 100).unwrap_err().to_string();
        assert!(e.contains("no string of the grammar's start rule `root` can be written"), "{e}");
    }

    /// A regex's states may hold as many NFA states as a wide alternation puts in one set: past
    /// a grammar's 1,024 configurations, within [`MAX_REGEX_CONFIGURATIONS`].
    #[test]
    fn a_wide_regex_state_is_not_an_ambiguous_grammar() {
        let words: Vec<String> = (0..3000).map(|i| format!("(?:a|b)*{i}[a-z]{{2}}")).collect();
        let pattern = format!("\"(?:{})\"", words.join("|"));
        let nfa = ByteNfa::from_hir(&crate::regex::byte_dfa::parse_regex(&pattern).unwrap(), 250_000).unwrap();
        let dfa = PushdownDfa::of_regex(&pattern, nfa, 100_000).unwrap();
        let reference = ByteDfa::from_regex(&pattern, 250_000).unwrap();
        for text in ["\"ab2999ax\"", "\"2999ax\"", "\"ba17zz\"", "\"ab3000ax\"", "\"ab29ax\"", "\"a\""] {
            assert_eq!(dfa.matches(text.as_bytes()).unwrap(), reference.matches(text.as_bytes()), "{text}");
        }
        assert!(dfa.matches(b"\"ab2999ax\"").unwrap());
    }

    /// A regex determinized on demand takes the same texts to acceptance, at the same
    /// distances, as its minimal DFA, where byte classes that move a state alike (a counted
    /// string's ASCII characters, at every count) close to states found in
    /// [`PushdownDfa::closed`]: a counted string and an alternation whose branches share it.
    #[test]
    fn steps_closed_once_keep_the_language() {
        let string = r#""(?:[^"\\\x00-\x1F]|\\["\\nt]){2,24}""#;
        let pattern = format!(r#"\{{(?:"a":{string}|"a":{string},"b":[0-9]{{1,3}})\}}"#);
        let nfa = ByteNfa::from_hir(&crate::regex::byte_dfa::parse_regex(&pattern).unwrap(), 250_000).unwrap();
        let dfa = PushdownDfa::of_regex(&pattern, nfa, 100_000).unwrap();
        let reference = ByteDfa::from_regex(&pattern, 250_000).unwrap();
        let mut rng = crate::util::random::SplitMix64::new(5);
        let alphabet: Vec<&[u8]> =
            vec![b"x", b"Q", b"7", b" ", b"\"", b"\\", b"n", b",", b"}", b"\xc3\xa9", b"\xe2\x82\xac", b"\x01"];
        let mut steps = 0;
        for _ in 0..3_000 {
            let mut text = br#"{"a":""#.to_vec();
            (0..rng.below(30)).for_each(|_| text.extend_from_slice(alphabet[rng.below(alphabet.len())]));
            if rng.one_in(2) {
                text.extend_from_slice(br#"","b":12}"#);
            }
            let (mut q, mut r) = (dfa.start(), reference.start());
            for &b in &text {
                if q == DEAD {
                    break;
                }
                (q, r) = (dfa.next(q, b), reference.next(r, b));
                steps += 1;
                assert_eq!(q == DEAD, r == DEAD, "{}", String::from_utf8_lossy(&text));
                if q != DEAD {
                    assert_eq!(dfa.is_accepting(q), reference.is_accepting(r));
                    assert_eq!(dfa.distance_to_accept(q), reference.distance_to_accept(r));
                }
            }
        }
        // Transitions to a state, each of which closed its configurations or found them closed.
        let taken = (0..dfa.states.len() as u32)
            .filter_map(|q| dfa.rows.get(q as usize))
            .flat_map(|row| row.iter().map(|t| t.load(Ordering::Relaxed)))
            .filter(|&t| t != UNKNOWN && t != DEAD)
            .count();
        let closed = dfa.closed.len();
        assert!(steps > 20_000 && 2 * closed < taken, "{closed} closures for {taken} transitions, {steps} steps");
    }

    /// A state's threads have its language as their union, and copies of one loop in the
    /// branches of an alternation are one thread: after `kq`, the two `[a-z]+` copies (with
    /// their exits `1` and `2`) make one thread and `[a-z0-9]+` another. Every text up to four
    /// bytes over the regex's bytes is taken from the state iff some thread takes it.
    #[test]
    fn threads_are_a_union_with_copies_together() {
        let pattern = "(k[a-z]+1|k[a-z]+2|k[a-z0-9]+3|kq!)";
        let nfa = ByteNfa::from_hir(&crate::regex::byte_dfa::parse_regex(pattern).unwrap(), 10_000).unwrap();
        let dfa = PushdownDfa::of_regex(pattern, nfa, 10_000).unwrap();
        let q = b"kq".iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
        let threads = dfa.threads(q).expect("threads");
        assert_eq!(threads.len(), 3, "a thread per loop, and the literal's `!`");
        let takes = |q: u32, text: &[u8]| {
            let end = text.iter().try_fold(q, |q, &b| Some(dfa.next(q, b)).filter(|&q| q != DEAD));
            end.is_some_and(|q| dfa.is_accepting(q))
        };
        let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> =
                (texts.iter()).flat_map(|t| b"qz5123!".iter().map(move |&b| [&t[..], &[b]].concat())).collect();
            texts.extend(longer);
        }
        texts.sort();
        texts.dedup();
        let mut taken = 0;
        for text in &texts {
            let by_threads = threads.iter().any(|&t| takes(t, text));
            assert_eq!(takes(q, text), by_threads, "{:?}", String::from_utf8_lossy(text));
            taken += by_threads as usize;
        }
        assert!(taken > 20, "{taken} texts taken");
        // A loop alone is no union.
        let one = b"kqq".iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
        let single = b"kq5".iter().fold(dfa.start(), |q, &b| dfa.next(q, b));
        assert!(dfa.threads(single).is_none(), "`[a-z0-9]+` alone");
        assert!(dfa.threads(one).is_some(), "the copies beside `[a-z0-9]+`");
    }
}
