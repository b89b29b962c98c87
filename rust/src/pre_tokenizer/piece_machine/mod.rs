//! The language of correctly marked strings of a regex `Split` pre-tokenizer, as a lazy DFA.
//!
//! A byte-level BPE tokenizer first cuts the text into *pieces* with one or more
//! `Split(regex, Isolated)` stages, and BPE never merges across a piece boundary. A
//! [`PieceMachine`] is a deterministic automaton over UTF-8 bytes plus *marks* whose language is
//! exactly the texts with a mark at each piece boundary, and nowhere else: the boundary at
//! position `e` is marked `⟨j⟩`, where its *kind* `j` is the first stage that cuts there.
//!
//! # One stage over one subject
//! HF runs a stage with Oniguruma's `find_iter` on each piece of the previous stage (the
//! *subject*): from the search position `p`, the match is the leftmost-first match at the least
//! start `s ≥ p` where one exists; `[p, s)` (if non-empty) is a *gap* piece, `[s, e)` a match
//! piece, and the search goes on at `e`; the text after the last match is a final gap. The
//! pattern never matches the empty string ([`SplitNfa`] rejects such patterns), so pieces are
//! non-empty and gaps are never adjacent.
//!
//! The leftmost-first match at `s` is what a Pike VM over the priority NFA gives: an ordered,
//! deduplicated list of threads (the epsilon closure follows `Split` nodes in priority order,
//! the first occurrence of an NFA state wins); at each position a `Match` entry records a match
//! there and cuts every entry after it (they have lower priority), assertion entries are
//! resolved with the next character, and consuming entries step. The result is the *last*
//! recorded match. For our NFAs this equals Oniguruma's backtracking result: backtracking
//! explores paths in the same priority order, a thread dropped by deduplication reaches exactly
//! what the earlier owner of its NFA state reaches, and there are no empty loops (where
//! Oniguruma's empty-loop checks would differ). Assertions look only at the next character,
//! which is the same for every thread at a position, so keeping them *pending* in the list and
//! expanding each in place once the next character is known yields the same order as a closure
//! that evaluates them eagerly.
//!
//! **Guess and verify.** Reading the text left to right, the machine guesses the segmentation
//! and verifies it. A mark at `e` ending a match segment started at `s` claims "the match at
//! `s` ends at `e`". That holds iff (a) the thread list started at `s` and stepped to `e`
//! (with cuts) records a `Match` at `e`, and (b) no entry *before* that first `Match` (the
//! higher-priority *killers*) ever records a match later in the subject: later records can
//! only come from those entries. (b) is a safety condition on the future, so the killers go
//! into an unordered set `K` of NFA states that travels with the following segments; any path
//! of `K` reaching `Match` before the end of the subject refutes the guess. A gap segment
//! `[e, s)` claims that no match starts in `[e, s)`: the start closure at each of its positions
//! joins `K` as well. The claims are exactly the definition of `find_iter`'s output
//! (induction over segments: if the previous segment ends at the search position `p`, a match
//! segment `[p, e)` is the next match iff a match starts at `p` and it ends at `e`; a gap
//! `[p, s)` followed by a match segment at `s` is right iff no match starts in `[p, s)` and one
//! does at `s`; a final gap is right iff no match starts in it). After a match segment the
//! next one may be a match or a gap, so each stage keeps a *set* of hypotheses (a subset
//! construction); after a gap it must be a match.
//!
//! **Covered patterns:** priority regexes (alternation, concatenation, greedy and lazy
//! repetition, counted repetition, case-insensitive groups) without empty loops and without
//! empty matches, extended with zero-width assertions on the *next character only*
//! (`(?!C)`, `(?=C)`, `$`, `\z` with `C` one class). Every pre-tokenizer regex of GPT-2,
//! Llama 3, cl100k, o200k, Qwen2, DeepSeek (LLM, Coder, V3), StarCoder2 and Falcon is one.
//!
//! # Several stages
//! Stage `j` sees a mark of kind `i < j` as the end of its subject and the start of a fresh
//! one (its segment must end there: `accepts_end` of that stage, then reset), a mark of kind
//! `j` as a segment boundary, and does not see marks of kind `i > j` (stage `j` does not cut
//! there, which the continuing segment verifies). The start of the text starts every stage;
//! the end of the text ends every stage. Marks are never at position 0, never at the end of
//! the text, never two at one position, never inside a UTF-8 sequence.
//!
//! # Added tokens: a final stage 0
//! Hugging Face cuts the matches of its added tokens out of the raw text *before* the
//! pre-tokenizer (leftmost-longest over their contents) and never pre-tokenizes them; each gap
//! between two matches is pre-tokenized as a text of its own. With [`PieceMachineSpec::added`],
//! stage 0 is the alternation of the contents ([`added_tokens_pattern`], longest first, so
//! leftmost-first is leftmost-longest) and is *final*:
//! * a stage-0 segment is a match exactly when its text spells a content (a gap never contains
//!   one: a match would start there), which the machine reads from a trie of the contents over
//!   character classes (`seg`, reset at every stage-0 mark);
//! * the later stages run over every stage-0 segment as if it were a gap. When one of them
//!   refutes it, they are suspended (all [`DEAD`]) and the segment can only be a match (the
//!   machine dies at the first character that leaves every content); a mark of
//!   a later kind inside a segment declares it a gap (stage 0 keeps only its gap hypotheses);
//! * at a stage-0 mark (or the end of the text) closing a match, the later stages' states are
//!   dropped, not ended: they restart fresh after it. Closing a gap, they must accept the end of
//!   their subject there, as at the end of a text (so a look-ahead such as `\s+(?!\S)` sees the
//!   gap end before an added token, not the token's first character).
//!
//! Stage 0's own hypotheses still verify that the matches are the leftmost-longest ones. The
//! text automaton of a guide (`crate::pre_tokenizer::text_automaton`) then requires a stage-0
//! piece that spells a content to be that added token alone. Cost: a state carries a trie
//! node only while its segment, started at a stage-0 mark, is a prefix of a content; along such
//! a prefix the stages' states are determined by it, so the machine grows by at most the trie's
//! size per reachable stage-0 start state. Explored in full: DeepSeek V3 3,389 → 7,521 states
//! with its 53 added tokens (70 → 3,310 at character boundaries), DeepSeek Coder 1,790 → 2,325,
//! Command-R 1,249 → 3,146; at most ~1.2 s on 2 loaded cores
//! (`added_tokens_full_exploration_sizes`).
//!
//! # The automaton
//! The stages work on character classes ([`CharClasses`]: code points no pattern
//! distinguishes share a class). At a character boundary a state is two flags (at the text
//! start, just after a mark) and one interned *stage state* per stage: a set of hypotheses
//! `(gap?, L, P, K)` with `L` the ordered pending thread list of the current match segment,
//! `P` the previous segment's list still to be resolved with the first character after a mark
//! (it must record a match; its killers join `K`), and `K` the sorted killer set. Inside a
//! character a state is only "continuation bytes to come, and which boundary state each code
//! point still reachable leads to", as runs over that code point range (the code points
//! sharing a UTF-8 prefix are contiguous): prefixes that can only lead to the same states are
//! merged, which keeps the byte-level machine 8-30 times smaller than pairing a UTF-8 decoder
//! state with the stage states. Everything is interned lazily and transitions are memoized in
//! hash maps.
//!
//! # Invariants
//! * `byte`/`mark` return [`DEAD`] iff every hypothesis of some stage is refuted; a live state
//!   may still be doomed (refutation can need look-ahead), but [`PieceMachine::accepts_end`]
//!   is exact, so the language is exactly the correctly marked strings.
//! * States are finite: lists and sets are over NFA states, deduplicated.
//! * With added tokens, the later stages are either all live or all [`DEAD`] (suspended inside a
//!   segment that can only be an added token's match), and never dead while `seg` is not a
//!   prefix of a content.
//!
//! # Costs
//! Each new (stage state, character class) transition costs `O(h · n)` for `h` hypotheses and
//! `n` NFA nodes. The number of states is bounded by `max_states`
//! ([`Error::LimitExceeded`] with limit `max_pre_tokenizer_states`). Explored in full (every
//! byte and mark from every reachable state), real pre-tokenizers give 700 (DeepSeek LLM) to
//! 3,400 (DeepSeek V3) states, 33-140 of them at character boundaries, built in under 50 ms.

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::pre_tokenizer::char_classes::{restrict_utf8_runs, CharClasses, Runs, INVALID_CLASS};
use crate::pre_tokenizer::split_nfa::{Node, NodeId, SplitNfa};

/// No correctly marked string continues this way.
pub const DEAD: u32 = u32::MAX;

/// The pre-tokenizer: its `Split` patterns in order, and optionally the only characters the
/// text may contain.
#[derive(Clone, Debug, Default)]
pub struct PieceMachineSpec {
    pub stages: Vec<String>,
    pub allowed_chars: Option<Vec<(char, char)>>,
    /// Hugging Face's added tokens (their contents). When non-empty, `stages[0]` must be
    /// [`added_tokens_pattern`] of them, and stage 0 is *final*: its match pieces are never seen
    /// by the later stages, which pre-tokenize each gap between matches as a text of its own
    /// (see the module docs, "Added tokens").
    pub added: Vec<String>,
}

/// The stage-0 pattern that splits added tokens out of the text: the alternation of their
/// contents, longest first (leftmost-first on it is then Hugging Face's leftmost-longest),
/// empty contents left out.
pub fn added_tokens_pattern<S: AsRef<str>>(contents: &[S]) -> String {
    let mut sorted: Vec<&str> = contents.iter().map(AsRef::as_ref).filter(|c| !c.is_empty()).collect();
    sorted.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    sorted.dedup();
    sorted.iter().map(|c| regex_syntax::escape(c)).collect::<Vec<_>>().join("|")
}

/// The added tokens' contents as a trie over character classes (each character of a content is
/// a class of its own: stage 0 names it alone). Node 0 is the root.
#[derive(Clone, Debug)]
struct AddedTrie {
    children: Vec<Vec<(u32, u32)>>,
    terminal: Vec<bool>,
}

/// The current stage-0 segment is not a prefix of any added token's content (or there are no
/// added tokens).
const NOT_ADDED: u32 = u32::MAX;

impl AddedTrie {
    fn new(contents: &[String], classes: &CharClasses) -> AddedTrie {
        let mut trie = AddedTrie { children: vec![Vec::new()], terminal: vec![false] };
        for content in contents.iter().filter(|c| !c.is_empty()) {
            let mut node = 0usize;
            for ch in content.chars() {
                let c = classes.class_of(ch as u32);
                node = match trie.children[node].binary_search_by_key(&c, |e| e.0) {
                    Ok(i) => trie.children[node][i].1 as usize,
                    Err(i) => {
                        let id = trie.children.len();
                        trie.children[node].insert(i, (c, id as u32));
                        trie.children.push(Vec::new());
                        trie.terminal.push(false);
                        id
                    }
                };
            }
            trie.terminal[node] = true;
        }
        trie
    }
    fn step(&self, node: u32, c: u32) -> u32 {
        if node == NOT_ADDED {
            return NOT_ADDED;
        }
        let ch = &self.children[node as usize];
        ch.binary_search_by_key(&c, |e| e.0).map_or(NOT_ADDED, |i| ch[i].1)
    }
    fn is_terminal(&self, node: u32) -> bool {
        node != NOT_ADDED && self.terminal[node as usize]
    }
}

/// Partial-state value of a complete character boundary.
const NO_PARTIAL: u32 = 0;
const AT_START: u8 = 1;
const AFTER_MARK: u8 = 2;

/// A node of a stage NFA over class ids.
#[derive(Clone, Copy, Debug)]
enum Op {
    Class { next: NodeId },
    Split { preferred: NodeId, other: NodeId },
    Epsilon { next: NodeId },
    Match,
    Assert { negated: bool, at_end_holds: bool, next: NodeId },
}

/// What an epsilon closure knows about the next character.
#[derive(Clone, Copy)]
enum Next {
    /// Not known yet: assertions stay in the list.
    Pending,
    Char(u32),
    End,
}

/// One guess about the current stage's segmentation. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Hyp {
    gap: bool,
    /// The current match segment's pending thread list (empty for a gap).
    list: Box<[NodeId]>,
    /// The previous match segment's list, to record a match at the mark just read (empty if
    /// none).
    pend: Box<[NodeId]>,
    /// Sorted killer set: reaching `Match` from it refutes this hypothesis.
    killers: Box<[NodeId]>,
}

/// One stage: its NFA over class ids and its interned hypothesis sets.
#[derive(Clone, Debug)]
struct Stage {
    ops: Vec<Op>,
    /// `member[node * num_classes + class]` for `Class` and `Assert` nodes.
    member: Vec<bool>,
    num_classes: usize,
    start_closure: Box<[NodeId]>,
    states: Vec<Box<[Hyp]>>,
    ids: FxHashMap<Box<[Hyp]>, u32>,
    char_memo: FxHashMap<(u32, u32), u32>,
    mark_memo: FxHashMap<u32, u32>,
    end_memo: FxHashMap<u32, bool>,
    gap_memo: FxHashMap<u32, u32>,
    initial: u32,
}

impl Stage {
    fn new(nfa: &SplitNfa, classes: &CharClasses, max_states: usize) -> Result<Stage> {
        let num_classes = classes.num_classes();
        let mut member = vec![false; nfa.nodes.len() * num_classes];
        let ops = nfa
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut set = |ranges: &[(char, char)]| {
                    member[i * num_classes..(i + 1) * num_classes].copy_from_slice(&classes.member_classes(ranges));
                };
                match n {
                    Node::Class { ranges, next } => {
                        set(ranges);
                        Op::Class { next: *next }
                    }
                    Node::Assert { class, negated, at_end_holds, next } => {
                        set(class);
                        Op::Assert { negated: *negated, at_end_holds: *at_end_holds, next: *next }
                    }
                    Node::Split { preferred, other } => Op::Split { preferred: *preferred, other: *other },
                    Node::Epsilon { next } => Op::Epsilon { next: *next },
                    Node::Match => Op::Match,
                }
            })
            .collect();
        let mut stage = Stage {
            ops,
            member,
            num_classes,
            start_closure: Box::new([]),
            states: Vec::new(),
            ids: FxHashMap::default(),
            char_memo: FxHashMap::default(),
            mark_memo: FxHashMap::default(),
            end_memo: FxHashMap::default(),
            gap_memo: FxHashMap::default(),
            initial: 0,
        };
        let mut seen = vec![false; stage.ops.len()];
        let mut start = Vec::new();
        stage.closure(nfa.start, Next::Pending, &mut seen, &mut start);
        stage.start_closure = start.into_boxed_slice();
        stage.initial = stage.intern(stage.fresh_subject(), max_states)?;
        Ok(stage)
    }

    /// Hypotheses at the start of a subject: its first segment is a match or a gap.
    fn fresh_subject(&self) -> Vec<Hyp> {
        let empty: Box<[NodeId]> = Box::new([]);
        vec![
            Hyp { gap: false, list: self.start_closure.clone(), pend: empty.clone(), killers: empty.clone() },
            Hyp { gap: true, list: empty.clone(), pend: empty.clone(), killers: empty },
        ]
    }

    fn intern(&mut self, mut hyps: Vec<Hyp>, max_states: usize) -> Result<u32> {
        if hyps.is_empty() {
            return Ok(DEAD);
        }
        hyps.sort_unstable();
        hyps.dedup();
        let hyps = hyps.into_boxed_slice();
        if let Some(&id) = self.ids.get(&hyps) {
            return Ok(id);
        }
        if self.states.len() >= max_states {
            return Err(limit(max_states));
        }
        let id = self.states.len() as u32;
        self.states.push(hyps.clone());
        self.ids.insert(hyps, id);
        Ok(id)
    }

    fn holds(&self, node: NodeId, negated: bool, at_end_holds: bool, next: Next) -> bool {
        match next {
            Next::Pending => unreachable!("pending assertions are not resolved"),
            Next::End => at_end_holds,
            Next::Char(c) => self.member[node as usize * self.num_classes + c as usize] != negated,
        }
    }

    /// Appends to `out`, in priority order, the leaves (consuming nodes, `Match`, and under
    /// `Next::Pending` assertions) reachable from `from`; stops after a `Match` (everything
    /// later is cut) and returns whether one was appended.
    fn closure(&self, from: NodeId, next: Next, seen: &mut [bool], out: &mut Vec<NodeId>) -> bool {
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n as usize], true) {
                continue;
            }
            match self.ops[n as usize] {
                Op::Class { .. } => out.push(n),
                Op::Match => {
                    out.push(n);
                    return true;
                }
                Op::Assert { negated, at_end_holds, next: to } => match next {
                    Next::Pending => out.push(n),
                    _ if self.holds(n, negated, at_end_holds, next) => stack.push(to),
                    _ => {}
                },
                Op::Split { preferred, other } => stack.extend([other, preferred]),
                Op::Epsilon { next: to } => stack.push(to),
            }
        }
        false
    }

    /// Resolves the pending assertions of `list` against `next`, in place and in order.
    /// Returns the consuming entries and `Match`, cut after the first `Match`, and that
    /// `Match`'s index.
    fn resolve(&self, list: &[NodeId], next: Next) -> (Vec<NodeId>, Option<usize>) {
        let mut seen = vec![false; self.ops.len()];
        let mut out = Vec::with_capacity(list.len());
        for &e in list {
            let matched = match self.ops[e as usize] {
                // An assertion expands in place into what it leads to (same order as an
                // eager closure; deduplication against everything before it).
                Op::Assert { .. } => self.closure(e, next, &mut seen, &mut out),
                _ if std::mem::replace(&mut seen[e as usize], true) => false,
                op => {
                    out.push(e);
                    matches!(op, Op::Match)
                }
            };
            if matched {
                let m = out.len() - 1;
                return (out, Some(m));
            }
        }
        (out, None)
    }

    /// Steps the consuming entries of a resolved list on class `c`: the next pending list,
    /// cut after an unconditional `Match`.
    fn step(&self, resolved: &[NodeId], c: u32) -> Vec<NodeId> {
        let mut seen = vec![false; self.ops.len()];
        let mut out = Vec::new();
        for &e in resolved {
            if let Op::Class { next } = self.ops[e as usize] {
                if self.member[e as usize * self.num_classes + c as usize]
                    && self.closure(next, Next::Pending, &mut seen, &mut out)
                {
                    break;
                }
            }
        }
        out
    }

    fn has_match(&self, list: &[NodeId]) -> bool {
        list.iter().any(|&n| matches!(self.ops[n as usize], Op::Match))
    }

    /// The hypothesis after one more character of class `c`, or `None` if refuted.
    fn hyp_char(&self, h: &Hyp, c: u32) -> Option<Hyp> {
        let (mut k, m) = self.resolve(&h.killers, Next::Char(c));
        if m.is_some() {
            return None;
        }
        if !h.pend.is_empty() {
            // The mark just read must end the previous match here.
            let (r, m) = self.resolve(&h.pend, Next::Char(c));
            k.extend_from_slice(&r[..m?]);
        }
        if h.gap {
            // No match may start at this gap position.
            let (r, m) = self.resolve(&self.start_closure, Next::Char(c));
            if m.is_some() {
                return None;
            }
            k.extend(r);
        }
        let mut killers = self.step(&k, c);
        if self.has_match(&killers) {
            return None;
        }
        killers.sort_unstable();
        killers.dedup();
        let list = if h.gap {
            Box::new([]) as Box<[NodeId]>
        } else {
            let (r, m) = self.resolve(&h.list, Next::Char(c));
            let l = self.step(&r[..m.unwrap_or(r.len())], c);
            if l.is_empty() {
                return None;
            }
            l.into_boxed_slice()
        };
        Some(Hyp { gap: h.gap, list, pend: Box::new([]), killers: killers.into_boxed_slice() })
    }

    /// Whether the subject may end with hypothesis `h`.
    fn hyp_end_ok(&self, h: &Hyp) -> bool {
        debug_assert!(h.pend.is_empty(), "a mark is never followed by the end of a subject");
        if self.resolve(&h.killers, Next::End).1.is_some() {
            return false;
        }
        h.gap || self.resolve(&h.list, Next::End).1.is_some()
    }

    fn char_step(&mut self, s: u32, c: u32, max_states: usize) -> Result<u32> {
        if let Some(&t) = self.char_memo.get(&(s, c)) {
            return Ok(t);
        }
        let hyps: Vec<Hyp> = self.states[s as usize].iter().filter_map(|h| self.hyp_char(h, c)).collect();
        let t = self.intern(hyps, max_states)?;
        self.char_memo.insert((s, c), t);
        Ok(t)
    }

    /// A mark of this stage's own kind: the current segment ends here.
    fn mark_step(&mut self, s: u32, max_states: usize) -> Result<u32> {
        if let Some(&t) = self.mark_memo.get(&s) {
            return Ok(t);
        }
        let mut hyps = Vec::new();
        for h in self.states[s as usize].iter() {
            let next_match = Hyp {
                gap: false,
                list: self.start_closure.clone(),
                pend: if h.gap { Box::new([]) } else { h.list.clone() },
                killers: h.killers.clone(),
            };
            if !h.gap {
                // After a match segment, a gap may come instead.
                hyps.push(Hyp { gap: true, list: Box::new([]), ..next_match.clone() });
            }
            hyps.push(next_match);
        }
        let t = self.intern(hyps, max_states)?;
        self.mark_memo.insert(s, t);
        Ok(t)
    }

    /// Only the hypotheses that the current segment is a gap (a later stage cut inside it).
    fn gap_only(&mut self, s: u32, max_states: usize) -> Result<u32> {
        if let Some(&t) = self.gap_memo.get(&s) {
            return Ok(t);
        }
        let hyps: Vec<Hyp> = self.states[s as usize].iter().filter(|h| h.gap).cloned().collect();
        let t = self.intern(hyps, max_states)?;
        self.gap_memo.insert(s, t);
        Ok(t)
    }

    fn end_ok(&mut self, s: u32) -> bool {
        if let Some(&ok) = self.end_memo.get(&s) {
            return ok;
        }
        let ok = self.states[s as usize].iter().any(|h| self.hyp_end_ok(h));
        self.end_memo.insert(s, ok);
        ok
    }
}

fn limit(max_states: usize) -> Error {
    Error::LimitExceeded {
        limit: "max_pre_tokenizer_states",
        value: max_states.to_string(),
        what: "states of the pre-tokenizer piece machine".to_string(),
    }
}

/// A machine state: at a character boundary, flags, one stage state per stage and (with added
/// tokens) the trie node of the current stage-0 segment; inside a character, `partial` (index
/// + 1 in `PieceMachine::partials`) and nothing else.
///
/// With added tokens, the later stages' states are all [`DEAD`] when they refute the current
/// stage-0 segment as a gap: it can then only be an added token's match (`seg` a prefix).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MState {
    partial: u32,
    flags: u8,
    stages: Box<[u32]>,
    seg: u32,
}

/// The lazy DFA of correctly marked strings. See the module docs.
#[derive(Clone, Debug)]
pub struct PieceMachine {
    classes: CharClasses,
    /// Per class: may the text contain it.
    allowed: Vec<bool>,
    /// See [`CharClasses::utf8_lead_runs`].
    lead: Vec<Option<(u32, Runs)>>,
    /// Partial characters: continuation bytes still to come, and runs of the machine states
    /// reached when the character completes (prefixes with equal keys are equivalent).
    partials: Vec<(u32, Runs)>,
    partial_ids: FxHashMap<(u32, Runs), u32>,
    /// Machine state at a character boundary × class → next state.
    char_memo: FxHashMap<(u32, u32), u32>,
    stages: Vec<Stage>,
    /// With added tokens: stage 0 is final (see [`PieceMachineSpec::added`]).
    added: Option<AddedTrie>,
    states: Vec<MState>,
    ids: FxHashMap<MState, u32>,
    byte_memo: FxHashMap<(u32, u8), u32>,
    mark_memo: FxHashMap<(u32, u32), u32>,
    max_states: usize,
    start: u32,
}

impl PieceMachine {
    /// Parses the stages and sets up the (lazily built) machine; `max_states` bounds the
    /// machine states and each stage's hypothesis sets.
    pub fn new(spec: &PieceMachineSpec, max_states: usize) -> Result<PieceMachine> {
        if !spec.added.is_empty() && spec.stages.first() != Some(&added_tokens_pattern(&spec.added)) {
            return Err(Error::InvalidArgument(
                "piece machine: with added tokens, stage 0 must be the alternation of their contents \
                 (added_tokens_pattern)"
                    .into(),
            ));
        }
        let nfas = spec.stages.iter().map(|p| SplitNfa::new(p)).collect::<Result<Vec<_>>>()?;
        let allowed_set = spec.allowed_chars.clone().map(normalize_ranges);
        let sets = nfas.iter().flat_map(|n| n.char_sets()).chain(allowed_set.as_deref());
        let classes = CharClasses::new(sets);
        let allowed = match &allowed_set {
            Some(set) => classes.member_classes(set),
            None => vec![true; classes.num_classes()],
        };
        let stages = nfas.iter().map(|n| Stage::new(n, &classes, max_states)).collect::<Result<Vec<_>>>()?;
        let added = (!spec.added.is_empty()).then(|| AddedTrie::new(&spec.added, &classes));
        let seg = if added.is_some() { 0 } else { NOT_ADDED };
        let mut m = PieceMachine {
            lead: classes.utf8_lead_runs(),
            classes,
            allowed,
            partials: Vec::new(),
            partial_ids: FxHashMap::default(),
            char_memo: FxHashMap::default(),
            stages,
            added,
            states: Vec::new(),
            ids: FxHashMap::default(),
            byte_memo: FxHashMap::default(),
            mark_memo: FxHashMap::default(),
            max_states,
            start: 0,
        };
        let initial = m.stages.iter().map(|s| s.initial).collect();
        m.start = m.intern(MState { partial: NO_PARTIAL, flags: AT_START, stages: initial, seg })?;
        Ok(m)
    }

    pub fn num_stages(&self) -> usize {
        self.stages.len()
    }

    pub fn start(&self) -> u32 {
        self.start
    }

    /// Machine states interned so far.
    pub fn num_states(&self) -> usize {
        self.states.len()
    }

    /// Whether `state` is between characters (not inside a UTF-8 sequence).
    pub fn at_char_boundary(&self, state: u32) -> bool {
        state != DEAD && self.states[state as usize].partial == NO_PARTIAL
    }

    /// Character classes the machine distinguishes.
    pub fn num_char_classes(&self) -> usize {
        self.classes.num_classes()
    }

    fn intern(&mut self, st: MState) -> Result<u32> {
        if let Some(&id) = self.ids.get(&st) {
            return Ok(id);
        }
        if self.states.len() >= self.max_states {
            return Err(limit(self.max_states));
        }
        let id = self.states.len() as u32;
        self.states.push(st.clone());
        self.ids.insert(st, id);
        Ok(id)
    }

    /// The state after byte `b`; [`DEAD`] when no correctly marked string continues so.
    pub fn byte(&mut self, state: u32, b: u8) -> Result<u32> {
        if state == DEAD {
            return Ok(DEAD);
        }
        if let Some(&t) = self.byte_memo.get(&(state, b)) {
            return Ok(t);
        }
        let partial = self.states[state as usize].partial;
        let t = if partial == NO_PARTIAL && b < 0x80 {
            self.char_step(state, self.classes.class_of(b as u32))?
        } else if partial == NO_PARTIAL {
            match self.lead[b as usize].clone() {
                None => DEAD,
                Some((k, runs)) => {
                    // Resolve every class this lead byte can start into its successor, so
                    // that prefixes leading to the same states share one partial state.
                    let mut next: Vec<(u32, u32)> = Vec::with_capacity(runs.len());
                    for &(offset, class) in runs.iter() {
                        let t = match class {
                            INVALID_CLASS => DEAD,
                            _ => self.char_step(state, class)?,
                        };
                        if next.last().map(|r| r.1) != Some(t) {
                            next.push((offset, t));
                        }
                    }
                    self.intern_partial(k, next)?
                }
            }
        } else if !(0x80..=0xBF).contains(&b) {
            DEAD
        } else {
            let (k, runs) = &self.partials[partial as usize - 1];
            let sub = restrict_utf8_runs(runs, k - 1, b);
            if *k == 1 {
                sub[0].1
            } else {
                self.intern_partial(k - 1, sub)?
            }
        };
        self.byte_memo.insert((state, b), t);
        Ok(t)
    }

    /// The state after a whole character of class `c` from a state at a character boundary.
    fn char_step(&mut self, state: u32, c: u32) -> Result<u32> {
        if let Some(&t) = self.char_memo.get(&(state, c)) {
            return Ok(t);
        }
        let t = if self.allowed[c as usize] {
            let st = &self.states[state as usize];
            let mut stages = st.stages.clone();
            let seg = self.added.as_ref().map_or(NOT_ADDED, |a| a.step(st.seg, c));
            let mut dead = false;
            for j in 0..stages.len() {
                if stages[j] == DEAD {
                    continue; // later stages suspended inside an added token's match
                }
                stages[j] = self.stages[j].char_step(stages[j], c, self.max_states)?;
                if stages[j] == DEAD {
                    if self.added.is_some() && j > 0 {
                        // Not a gap: the segment can only be an added token's match.
                        stages[1..].fill(DEAD);
                    } else {
                        dead = true;
                    }
                    break;
                }
            }
            // Suspended (at this character or before), the segment can only be a match: once its
            // text leaves every content, nothing is accepted. (Checked only at suspension, a
            // segment suspended earlier lived on as a sink that took every byte, and a lazy
            // guide on Command-R searched 20,000 nodes in it before giving up.)
            let suspended = self.added.is_some() && stages.len() > 1 && stages[1..].iter().all(|&s| s == DEAD);
            dead |= suspended && seg == NOT_ADDED;
            if dead {
                DEAD
            } else {
                self.intern(MState { partial: NO_PARTIAL, flags: 0, stages, seg })?
            }
        } else {
            DEAD
        };
        self.char_memo.insert((state, c), t);
        Ok(t)
    }

    /// The state inside a character with `k` continuation bytes to come and successor runs
    /// `runs`; [`DEAD`] if every completion is.
    fn intern_partial(&mut self, k: u32, runs: Vec<(u32, u32)>) -> Result<u32> {
        if runs.len() == 1 && runs[0].1 == DEAD {
            return Ok(DEAD);
        }
        let key = (k, runs.into_boxed_slice());
        let id = match self.partial_ids.get(&key) {
            Some(&id) => id,
            None => {
                self.partials.push(key.clone());
                let id = self.partials.len() as u32;
                self.partial_ids.insert(key, id);
                id
            }
        };
        self.intern(MState { partial: id, flags: 0, stages: Box::new([]), seg: NOT_ADDED })
    }

    /// The state after a boundary of kind `kind` (the first stage cutting here);
    /// [`DEAD`] when such a boundary is impossible here.
    pub fn mark(&mut self, state: u32, kind: usize) -> Result<u32> {
        if kind >= self.stages.len() {
            return Err(Error::InvalidArgument(format!(
                "boundary kind {kind} out of range: the pre-tokenizer has {} stage(s)",
                self.stages.len()
            )));
        }
        if state == DEAD {
            return Ok(DEAD);
        }
        if let Some(&t) = self.mark_memo.get(&(state, kind as u32)) {
            return Ok(t);
        }
        let st = self.states[state as usize].clone();
        let t = if st.partial != NO_PARTIAL || st.flags != 0 {
            DEAD
        } else {
            let mut stages = st.stages;
            // With added tokens: a stage-0 segment that spells a content is that token's match
            // (a gap never contains one), a final piece the later stages never see.
            let (seg, added_match) = match &self.added {
                None => (NOT_ADDED, false),
                Some(a) if kind == 0 => (0, a.is_terminal(st.seg)),
                Some(_) => (NOT_ADDED, false), // a later mark: the segment is a gap
            };
            // Later stages refuted the segment as a gap: no later mark inside it.
            let mut dead = stages[kind] == DEAD;
            if self.added.is_some() && kind > 0 && !dead {
                // A later stage cuts here: stage 0's current segment is a gap.
                stages[0] = self.stages[0].gap_only(stages[0], self.max_states)?;
                dead = stages[0] == DEAD;
            }
            for (j, s) in stages.iter_mut().enumerate().skip(kind) {
                if dead {
                    break;
                }
                let stage = &mut self.stages[j];
                *s = if j == kind {
                    stage.mark_step(*s, self.max_states)?
                } else if added_match || (*s != DEAD && stage.end_ok(*s)) {
                    stage.initial
                } else {
                    DEAD
                };
                dead = *s == DEAD;
            }
            if dead {
                DEAD
            } else {
                self.intern(MState { partial: NO_PARTIAL, flags: AFTER_MARK, stages, seg })?
            }
        };
        self.mark_memo.insert((state, kind as u32), t);
        Ok(t)
    }

    /// Whether the text may end here (exact). The empty text is accepted.
    pub fn accepts_end(&mut self, state: u32) -> Result<bool> {
        if state == DEAD {
            return Ok(false);
        }
        let st = &self.states[state as usize];
        if st.flags & AT_START != 0 {
            return Ok(true);
        }
        if st.partial != NO_PARTIAL || st.flags & AFTER_MARK != 0 {
            return Ok(false);
        }
        let (stages, seg) = (st.stages.clone(), st.seg);
        if let Some(a) = &self.added {
            if a.is_terminal(seg) {
                // The text ends with an added token's match: only stage 0 decides.
                return Ok(self.stages[0].end_ok(stages[0]));
            }
        }
        Ok(stages.iter().enumerate().all(|(j, &s)| s != DEAD && self.stages[j].end_ok(s)))
    }

    /// Runs the machine over `text` with marks `(byte offset, kind)` (ascending offsets);
    /// whether the marked string is accepted.
    pub fn accepts_marked(&mut self, text: &str, marks: &[(usize, usize)]) -> Result<bool> {
        let mut s = self.start;
        let mut marks = marks.iter().peekable();
        for (i, &b) in text.as_bytes().iter().enumerate() {
            while let Some(&&(at, kind)) = marks.peek() {
                if at != i {
                    break;
                }
                s = self.mark(s, kind)?;
                marks.next();
            }
            s = self.byte(s, b)?;
            if s == DEAD {
                return Ok(false);
            }
        }
        if marks.next().is_some() {
            return Ok(false);
        }
        self.accepts_end(s)
    }

    /// The marks `(byte offset, kind)` of `text`, found by a breadth-first search over
    /// markings. Exactly one marking is accepted if the machine is right; anything else is an
    /// error.
    pub fn split_marks(&mut self, text: &str) -> Result<Vec<(usize, usize)>> {
        /// A search node: state, parent index in the previous layer, mark taken, and whether
        /// two markings met in this state (then the result would not be unique).
        #[derive(Clone, Copy)]
        struct Entry {
            state: u32,
            parent: u32,
            mark: u32,
            merged: bool,
        }
        const NONE: u32 = u32::MAX;
        fn add(layer: &mut Vec<Entry>, index: &mut FxHashMap<u32, usize>, e: Entry) {
            match index.get(&e.state) {
                Some(&i) => layer[i].merged = true,
                None => {
                    index.insert(e.state, layer.len());
                    layer.push(e);
                }
            }
        }
        let mut layers: Vec<(usize, Vec<Entry>)> =
            vec![(0, vec![Entry { state: self.start, parent: NONE, mark: NONE, merged: false }])];
        for (pos, ch) in text.char_indices() {
            if pos > 0 {
                let prev = &layers.last().unwrap().1.clone();
                let (mut layer, mut index) = (Vec::new(), FxHashMap::default());
                for (i, e) in prev.iter().enumerate() {
                    let base = Entry { state: e.state, parent: i as u32, mark: NONE, merged: e.merged };
                    add(&mut layer, &mut index, base);
                    for kind in 0..self.stages.len() {
                        let t = self.mark(e.state, kind)?;
                        if t != DEAD {
                            add(&mut layer, &mut index, Entry { state: t, mark: kind as u32, ..base });
                        }
                    }
                }
                layers.push((pos, layer));
            }
            let prev = &layers.last().unwrap().1.clone();
            let (mut layer, mut index) = (Vec::new(), FxHashMap::default());
            let mut buf = [0u8; 4];
            for (i, e) in prev.iter().enumerate() {
                let mut s = e.state;
                for &b in ch.encode_utf8(&mut buf).as_bytes() {
                    s = self.byte(s, b)?;
                }
                if s != DEAD {
                    add(&mut layer, &mut index, Entry { state: s, parent: i as u32, mark: NONE, merged: e.merged });
                }
            }
            layers.push((pos, layer));
        }
        let last = &layers.last().unwrap().1;
        let mut accepted = Vec::new();
        for (i, e) in last.iter().enumerate() {
            if self.accepts_end(e.state)? {
                accepted.push(i);
            }
        }
        if accepted.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "no marking of {text:?} is accepted (a character outside the allowed set?)"
            )));
        }
        if accepted.len() > 1 || last[accepted[0]].merged {
            return Err(Error::Unsupported(format!(
                "piece machine: several markings of {text:?} are accepted (internal error)"
            )));
        }
        let mut marks = Vec::new();
        let mut i = accepted[0];
        for (pos, layer) in layers.iter().rev() {
            let e = layer[i];
            if e.mark != NONE {
                marks.push((*pos, e.mark as usize));
            }
            i = e.parent as usize;
        }
        marks.reverse();
        Ok(marks)
    }

    /// Splits `text` into pieces with the machine (see [`PieceMachine::split_marks`]). For
    /// tests and debugging.
    pub fn split(&mut self, text: &str) -> Result<Vec<String>> {
        let marks = self.split_marks(text)?;
        let mut cuts: Vec<usize> = vec![0];
        cuts.extend(marks.iter().map(|m| m.0));
        cuts.push(text.len());
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(cuts.windows(2).map(|w| text[w[0]..w[1]].to_string()).collect())
    }
}

/// Sorted, merged ranges (the allowed set may come unsorted or overlapping).
fn normalize_ranges(mut r: Vec<(char, char)>) -> Vec<(char, char)> {
    r.retain(|&(a, b)| a <= b);
    r.sort_unstable();
    let mut out: Vec<(char, char)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        match out.last_mut() {
            Some(last) if a as u32 <= last.1 as u32 + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
