//! The compiler: one vocabulary, its lazily built tokenizer DFA and token tries, and the
//! entry point that turns a regex into a [`Guide`].
//!
//! The tokenizer DFA is the expensive, regex-independent part (built once, on the first
//! canonical compile, then shared by every guide through an `Arc`); a failed build is cached
//! too, so an unsupported tokenizer fails fast on every call.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::build::direct::merge::direct_merge;
use crate::build::pre_tokenized::{self, PreTokenizedTables};
use crate::build::word_piece;
use crate::build::{cartesian, direct};
use crate::error::{Error, Result};
use crate::grammar::lower::{to_regex_with_tokens, to_rule_regexes, GrammarRegex, LowerOptions, RuleRegexes};
use crate::grammar::resolve::resolve_tokens;
use crate::grammar::{Grammar, TokenName};
use crate::guide::lazy::LazyGuide;
use crate::guide::{Automaton, Guide, Method, ProductParts};
use crate::lazy::pushdown::{PushdownDfa, RuleAutomata};
use crate::lazy::text::{TextRegex, TextSpace};
use crate::lazy::TokenizerParts;
use crate::limits::{Deadline, Limits, MAX_PRE_TOKENIZER_STATES};
use crate::max_match::lazy::LazyMaxMatch;
use crate::max_match::{EntryTrie, Language};
use crate::pre_tokenizer::byte_mapped::PreTokenizerMachine;
use crate::pre_tokenizer::normal_form::Normalized;
use crate::pre_tokenizer::piece_machine::PieceMachineSpec;
use crate::pre_tokenizer::piece_table::PieceTable;
use crate::pre_tokenizer::text_automaton::ContentTrie;
use crate::regex::byte_dfa::{parse_regex, translate, Bound, ByteDfa};
use crate::regex::byte_nfa::ByteNfa;
use crate::regex::outline::{outline, outline_rules, OutlineOptions, OutlinedRules};
use crate::tokenizer::always_split::tokens_always_split;
use crate::tokenizer::bpe::MergeTable;
use crate::tokenizer::normalization::{allowed_chars, normal_form};
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::{TokenizerKind, Vocabulary};
use crate::tokenizer_dfa::lone_tokens::{lone_tokens, LoneSplits};
use crate::tokenizer_dfa::TokenizerDfa;
use crate::util::long_work;

/// See the module docs. `Send + Sync`: compile from as many threads as you like.
pub struct Compiler {
    vocab: Arc<Vocabulary>,
    limits: Limits,
    cache_dir: Option<PathBuf>,
    cache_status: OnceLock<&'static str>,
    tokenizer_dfa: OnceLock<Result<Arc<TokenizerDfa>>>,
    all_tokens: OnceLock<TokenTrie>,
    emittable_tokens: OnceLock<TokenTrie>,
    piece_machine: OnceLock<Result<PreTokenizerMachine>>,
    pre_tokenized: OnceLock<Result<PreTokenizedParts>>,
    lazy_parts: OnceLock<Result<Arc<TokenizerParts>>>,
    /// `tokens_always_split`, computed once (~0.2 s for Llama 3; `tokenizer_dfa_stats` asks).
    always_split: OnceLock<Result<Vec<u32>>>,
    /// The automata of grammar rules, shared by this compiler's grammars and schemas.
    rule_automata: RuleAutomata,
    /// A WordPiece vocabulary's entries (`crate::max_match`).
    word_piece_entries: OnceLock<Arc<EntryTrie>>,
}

/// What every guide of a pre-tokenized tokenizer shares: the lone tokens and the tables of
/// `build::pre_tokenized`.
struct PreTokenizedParts {
    lone_tokens: Vec<u32>,
    tables: PreTokenizedTables<Normalized<PreTokenizerMachine>>,
}

impl Compiler {
    pub fn new(vocab: Arc<Vocabulary>, limits: Limits) -> Compiler {
        Compiler {
            vocab,
            limits,
            cache_dir: None,
            cache_status: OnceLock::new(),
            tokenizer_dfa: OnceLock::new(),
            all_tokens: OnceLock::new(),
            emittable_tokens: OnceLock::new(),
            piece_machine: OnceLock::new(),
            pre_tokenized: OnceLock::new(),
            lazy_parts: OnceLock::new(),
            always_split: OnceLock::new(),
            rule_automata: RuleAutomata::default(),
            word_piece_entries: OnceLock::new(),
        }
    }

    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Keeps the tokenizer DFA in `dir` (`tokenizer-dfa-<fingerprint>.bin`): loaded when a
    /// valid file is there, built and written (atomically, by rename) otherwise. A corrupt,
    /// stale or unreadable file is rebuilt, never trusted; a failed write only loses the cache.
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Compiler {
        self.cache_dir = dir;
        self
    }

    /// `"hit"`, `"miss"` (built and written), `"write-failed"`, `"disabled"`, or `"not-built"`.
    pub fn cache_status(&self) -> &'static str {
        self.cache_status.get().copied().unwrap_or("not-built")
    }

    /// The tokenizer DFA, built (or loaded from the cache) on first use.
    pub fn tokenizer_dfa(&self) -> Result<&Arc<TokenizerDfa>> {
        self.tokenizer_dfa.get_or_init(|| self.load_or_build().map(Arc::new)).as_ref().map_err(Clone::clone)
    }

    /// The pre-tokenizer's automaton over the characters guides may use (a template: each
    /// compile clones it). The normalizer's automaton is paired with it where it is used: eager
    /// guides fold it in ([`Normalized`]), lazy guides keep it as a component of their text
    /// states (`crate::lazy::text`), so the machine explored in full stays the pre-tokenizer's
    /// size.
    fn piece_machine(&self) -> Result<&PreTokenizerMachine> {
        self.piece_machine
            .get_or_init(|| {
                let pre = self.vocab.pre_tokenizer().expect("a pre-tokenized vocabulary");
                let spec = PieceMachineSpec {
                    stages: pre.stages.clone(),
                    allowed_chars: allowed_chars(pre),
                    added: pre.added_contents(),
                };
                PreTokenizerMachine::new(&spec, &pre.byte_mapped_stages, MAX_PRE_TOKENIZER_STATES)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn load_or_build(&self) -> Result<TokenizerDfa> {
        if let Some(reason) = self.vocab.canonical_unsupported_reason() {
            return Err(Error::Unsupported(reason.to_string()));
        }
        if self.vocab.kind() == TokenizerKind::WordPiece {
            return Err(Error::Unsupported(
                "WordPiece tokenizers have no tokenizer DFA: whether a token may follow depends on the tokens \
                 before it in its word, not on the last one alone (see crate::max_match)"
                    .into(),
            ));
        }
        let Some(dir) = &self.cache_dir else {
            let _ = self.cache_status.set("disabled");
            return TokenizerDfa::build(&self.vocab);
        };
        let path = dir.join(format!("tokenizer-dfa-{:016x}.bin", self.vocab.fingerprint()));
        let started = std::time::Instant::now();
        if let Some(mut dfa) = load_cached(&path, &self.vocab) {
            dfa.set_build_seconds(started.elapsed().as_secs_f64());
            let _ = self.cache_status.set("hit");
            return Ok(dfa);
        }
        let dfa = TokenizerDfa::build(&self.vocab)?;
        let written = crate::util::serialize::replace_file(&path, |tmp| dfa.write_file(&self.vocab, tmp));
        let _ = self.cache_status.set(if written.is_ok() { "miss" } else { "write-failed" });
        Ok(dfa)
    }

    fn all_tokens(&self) -> &TokenTrie {
        self.all_tokens.get_or_init(|| {
            let v = &self.vocab;
            TokenTrie::new(
                (0..v.num_tokens() as u32).filter(|&t| !v.is_never_allowed(t)).map(|t| (t, v.token_bytes(t))),
            )
        })
    }

    fn emittable_tokens(&self, dfa: &TokenizerDfa) -> &TokenTrie {
        self.emittable_tokens.get_or_init(|| {
            let v = &self.vocab;
            TokenTrie::new(
                (0..v.num_tokens() as u32)
                    .filter(|&t| dfa.class_of(t) != crate::tokenizer_dfa::NO_CLASS)
                    .map(|t| (t, v.token_bytes(t))),
            )
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The lone tokens (emitted only as a whole piece, `ignore_merges`) of a pre-tokenized
    /// tokenizer; empty for others.
    pub fn lone_tokens(&self) -> Result<&[u32]> {
        if self.vocab.pre_tokenizer().is_none() {
            return Ok(&[]);
        }
        Ok(&self.pre_tokenized_parts()?.lone_tokens)
    }

    /// Tokens of a pre-tokenized tokenizer whose text the pre-tokenizer always splits (never
    /// whole inside one piece), among those the merges can emit; empty for others.
    pub fn tokens_always_split(&self) -> Result<Vec<u32>> {
        self.always_split.get_or_init(|| self.find_tokens_always_split()).clone()
    }

    fn find_tokens_always_split(&self) -> Result<Vec<u32>> {
        if self.vocab.pre_tokenizer().is_none() {
            return Ok(Vec::new());
        }
        let parts = self.pre_tokenized_parts()?;
        let tok = self.tokenizer_dfa()?;
        let v = &self.vocab;
        let emittable = TokenTrie::new(
            (0..v.num_tokens() as u32)
                .filter(|&t| {
                    tok.class_of(t) != crate::tokenizer_dfa::NO_CLASS || parts.lone_tokens.binary_search(&t).is_ok()
                })
                .map(|t| (t, v.token_bytes(t))),
        );
        // The tokenizer's own behaviour: without the guides' restriction to normalized text.
        let pre = self.vocab.pre_tokenizer().expect("a pre-tokenized vocabulary");
        let spec = PieceMachineSpec { stages: pre.stages.clone(), allowed_chars: None, added: pre.added_contents() };
        let machine = PreTokenizerMachine::new(&spec, &pre.byte_mapped_stages, MAX_PRE_TOKENIZER_STATES)?;
        tokens_always_split(&machine, &emittable, MAX_PRE_TOKENIZER_STATES)
    }

    fn pre_tokenized_parts(&self) -> Result<&PreTokenizedParts> {
        self.pre_tokenized
            .get_or_init(|| {
                let tok = self.tokenizer_dfa()?;
                let pre = self.vocab.pre_tokenizer().expect("a pre-tokenized vocabulary");
                let machine =
                    Normalized::new(self.piece_machine()?.clone(), normal_form(pre, self.cache_dir.as_deref()));
                let lone_tokens = if pre.ignore_merges { lone_tokens(&self.vocab, tok) } else { Vec::new() };
                let v = &self.vocab;
                let added: Vec<u32> = pre.added.iter().map(|a| a.0).collect();
                let trie = TokenTrie::new(
                    (0..v.num_tokens() as u32)
                        .filter(|&t| {
                            tok.class_of(t) != crate::tokenizer_dfa::NO_CLASS
                                || lone_tokens.binary_search(&t).is_ok()
                                || added.contains(&t)
                        })
                        .map(|t| (t, v.token_bytes(t))),
                );
                let splits = LoneSplits::new(&self.vocab, &lone_tokens);
                let contents = ContentTrie::new(pre.added.iter().map(|a| a.1.as_bytes()));
                Ok(PreTokenizedParts { lone_tokens, tables: PreTokenizedTables { machine, contents, splits, trie } })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// What every lazy guide of this tokenizer shares: the tokens a guide may use (as a trie and
    /// as a bitset), the lone tokens and their splits, the pre-tokenizer explored in full.
    pub(crate) fn lazy_parts(&self) -> Result<&Arc<TokenizerParts>> {
        if self.lazy_parts.get().is_none() {
            // The tokenizer DFA and tries: built or read here (0.1-10 s), or waited for while
            // another thread does.
            long_work::notify();
        }
        self.lazy_parts
            .get_or_init(|| {
                let tok = self.tokenizer_dfa()?.clone();
                let v = &self.vocab;
                let (trie, splits, pieces, contents, normal, lone_tokens) = match v.pre_tokenizer() {
                    Some(pre) => {
                        let parts = self.pre_tokenized_parts()?;
                        let mut machine = self.piece_machine()?.clone();
                        let pieces = PieceTable::explore(&mut machine, MAX_PRE_TOKENIZER_STATES)?;
                        (
                            parts.tables.trie.clone(),
                            parts.tables.splits.clone(),
                            Some(Arc::new(pieces)),
                            parts.tables.contents.clone(),
                            normal_form(pre, self.cache_dir.as_deref()),
                            parts.lone_tokens.clone(),
                        )
                    }
                    None => {
                        let trie = self.emittable_tokens(&tok).clone();
                        (trie, LoneSplits::default(), None, ContentTrie::default(), None, Vec::new())
                    }
                };
                let cache_dir = self.cache_dir.as_deref();
                let parts = TokenizerParts::new(
                    v.clone(),
                    tok,
                    trie,
                    splits,
                    pieces,
                    contents,
                    normal,
                    &lone_tokens,
                    cache_dir,
                )?;
                Ok(Arc::new(parts))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The slice group sets (see `crate::lazy::slice`) this compiler walked and read from
    /// `cache_dir`, in that order; `None` before its first lazy guide.
    pub fn slice_sets_made(&self) -> Option<(usize, usize)> {
        Some(self.lazy_parts.get()?.as_ref().ok()?.slices.sets_made())
    }

    /// Of the slice group sets read from `cache_dir` ([`Compiler::slice_sets_made`]), how many
    /// had their contents read; the others were the same as a set in memory (another key's)
    /// and shared it. `None` before its first lazy guide.
    pub fn slice_set_contents_read(&self) -> Option<usize> {
        Some(self.lazy_parts.get()?.as_ref().ok()?.slices.contents_read())
    }

    /// The regions of lazy guides' string contents (what keys of shared first-token sets
    /// describe) this compiler found, and read from the cache directory, in that order; `None`
    /// before its lazy tables are made.
    pub fn slice_regions_made(&self) -> Option<(usize, usize)> {
        Some(self.lazy_parts.get()?.as_ref().ok()?.slices.regions_made())
    }

    /// A lazy compile of a pattern (or rules, or a grammar's text) longer than this tells its
    /// caller the work is long ([`long_work`]) before parsing it: its NFA alone takes a
    /// millisecond or more.
    pub const LONG_PATTERN_BYTES: usize = 16 * 1024;

    /// Whether [`Compiler::compile_regex_lazy`] and [`Compiler::compile_rule_regexes`] tell
    /// [`long_work`] when their work turns out long (the lazy parts' first build, a long
    /// pattern or rule set, outlined rules, a large subset construction, regex-automata's
    /// determinizer, and deadline checks): a binding may then keep its interpreter lock for the
    /// usual sub-millisecond compile. A WordPiece guide's compile does not.
    pub fn lazy_compiles_report_long_work(&self) -> bool {
        self.vocab.kind() != TokenizerKind::WordPiece
    }

    /// Compiles a regex (full match) into a lazy canonical guide: its states are built the
    /// first time a decoder reaches them (see `crate::lazy`); the same language as
    /// `compile_regex(pattern, Method::Cartesian)`.
    ///
    /// The regex's automaton is its minimal DFA when the subset construction stays within
    /// [`Compiler::LAZY_DFA_BOUND`], and otherwise the DFA determinized as the decoder walks it
    /// ([`PushdownDfa::of_regex`]). A minimal DFA steps by an array lookup and merges equivalent
    /// states; states determinized on demand are not merged, so a document meets more of them
    /// and slices recognise fewer loops: along 50 Github_* documents on Llama 3, mask fills took
    /// 35 % longer at the median (41 µs against 30 µs) when every regex over 1,000 NFA states
    /// was determinized on demand. So the DFA is tried first, and given up where it would cost
    /// more than a compile may (the bound: ~10 ms).
    ///
    /// A regex whose counted repetitions copy large sub-expressions (`(,OBJECT){0,999}`) is
    /// first written as rules that repeat calls instead of copies (`crate::regex::outline`),
    /// determinized on demand: its NFA would take hundreds of MB, or is past the limit.
    pub fn compile_regex_lazy(&self, pattern: &str) -> Result<Guide> {
        self.compile_regex_lazy_with(pattern, Self::LAZY_DFA_BOUND)
    }

    /// [`Compiler::compile_regex_lazy`] with another bound on the subset construction of a
    /// regex whose minimal DFA is built up front ([`Bound::ON_DEMAND`]: determinize every regex
    /// on demand, as the tests do).
    pub fn compile_regex_lazy_with(&self, pattern: &str, dfa_bound: Bound) -> Result<Guide> {
        self.lazy_regex(pattern, dfa_bound, OutlineOptions::default())
    }

    /// [`Compiler::compile_regex_lazy`] outlining the repetitions `options` select
    /// ([`OutlineOptions::EVERY`]: every one whose operand is longer than a character, as the
    /// tests do to hold the rules to the eager guide on every corpus regex).
    pub fn compile_regex_lazy_outlined(&self, pattern: &str, options: OutlineOptions) -> Result<Guide> {
        self.lazy_regex(pattern, Self::LAZY_DFA_BOUND, options)
    }

    fn lazy_regex(&self, pattern: &str, dfa_bound: Bound, outline_options: OutlineOptions) -> Result<Guide> {
        if self.vocab.kind() == TokenizerKind::WordPiece {
            return self.finish(self.compile_word_piece_lazy(pattern)?);
        }
        let parts = self.lazy_parts()?.clone();
        let deadline = self.deadline();
        if pattern.len() > Self::LONG_PATTERN_BYTES {
            long_work::notify();
        }
        let hir = parse_regex(pattern)?;
        let (max_dfa_states, max_states) =
            (self.limits.max_byte_dfa_states, self.limits.max_product_states.min(TextSpace::MAX_REGEX_STATES));
        let regex: TextRegex = match outline(&hir, outline_options)? {
            Some(rules) => {
                long_work::notify(); // large counted repetitions: rules of many automata
                let automata = &self.rule_automata;
                TextRegex::Grammar(Box::new(PushdownDfa::of_outlined_regex(
                    pattern,
                    &rules,
                    automata,
                    max_dfa_states,
                    max_states,
                )?))
            }
            None => {
                let nfa = ByteNfa::from_hir(&hir, max_dfa_states)?;
                match ByteDfa::from_byte_nfa_within(&nfa, max_dfa_states, dfa_bound)? {
                    Some(dfa) => dfa.non_empty(pattern)?.into(),
                    None => TextRegex::Grammar(Box::new(PushdownDfa::of_regex(pattern, nfa, max_states)?)),
                }
            }
        };
        deadline.check("the regex's automaton")?;
        self.finish(LazyGuide::compile(parts, regex, Vec::new(), self.limits)?)
    }

    /// See [`Compiler::compile_regex_lazy`]: the subset construction of a lazy guide's regex
    /// stops at 10,000 states before minimisation or 250,000 units of work (~40 ns each: ~10 ms
    /// of determinizing). The state bound also bounds trimming and minimizing, which cost more
    /// with many byte classes: the slowest DFA kept among 100 Github_* regexes
    /// (`Github_hard/o16058`) took 99 ms in all; those given up take 86 ms to 6 s as DFAs.
    pub const LAZY_DFA_BOUND: Bound = Bound { max_states: 10_000, max_work: 250_000 };

    /// Compiles a parsed grammar (see `crate::grammar`). Lazy (`lazy` and `method` cartesian):
    /// the grammar's rules as a pushdown automaton ([`crate::lazy::pushdown`]), nesting
    /// unbounded unless `options.max_recursion_depth` bounds it, or, for a grammar whose rules
    /// do not nest, its one regex DFA: the same engine either way. Otherwise its start rule
    /// written as one regex (nesting needs `max_recursion_depth`), compiled with `method`
    /// (`None`: auto). Special tokens are resolved against this vocabulary
    /// ([`crate::grammar::resolve`]); a grammar that keeps one needs a lazy guide.
    pub fn compile_grammar(
        &self,
        grammar: &Grammar,
        options: LowerOptions,
        method: Option<Method>,
        lazy: bool,
    ) -> Result<Guide> {
        let grammar = resolve_tokens(grammar, &self.vocab)?;
        if lazy && method == Some(Method::Cartesian) && self.vocab.kind() == TokenizerKind::WordPiece {
            // WordPiece has no pushdown guides: a grammar that nests needs max_recursion_depth.
            let GrammarRegex { regex, tokens } = to_regex_with_tokens(&grammar, options)?;
            if let Some(&id) = token_ids(&tokens).first() {
                return Err(Error::Unsupported(format!(
                    "the grammar names the special token {} (id {id}): WordPiece guides do not model special tokens",
                    String::from_utf8_lossy(self.vocab.token_bytes(id)),
                )));
            }
            return self.compile_regex_lazy(&regex);
        }
        if lazy && method == Some(Method::Cartesian) {
            let deadline = self.deadline();
            let RuleRegexes { rules, tokens } = to_rule_regexes(&grammar, options)?;
            if let [(name, None)] = &rules[..] {
                return Err(Error::EmptyLanguage(format!("the grammar's start rule `{name}` matches no string")));
            }
            return self.compile_rules_lazy(&rules, token_ids(&tokens), options.max_recursion_depth, deadline);
        }
        let GrammarRegex { regex, tokens } = to_regex_with_tokens(&grammar, options)?;
        match tokens.first() {
            None => match method {
                Some(m) => self.compile_regex(&regex, m),
                None => self.compile_regex_auto(&regex),
            },
            Some(_) => {
                let id = token_ids(&tokens)[0];
                Err(Error::Unsupported(format!(
                    "the grammar names the special token {} (id {id}): guides with special tokens are lazy \
                     canonical guides (method \"cartesian\", lazy)",
                    String::from_utf8_lossy(self.vocab.token_bytes(id)),
                )))
            }
        }
    }

    /// A lazy guide of the rules of a pushdown automaton (`crate::lazy::pushdown`: rule 0
    /// starts, calls written as markers), nesting bounded by `max_depth` if given: what
    /// [`Compiler::compile_grammar`] builds for a grammar, here from rules written elsewhere
    /// (the JSON Schema converter's, with `$ref` recursion as calls). One rule without calls is
    /// compiled as its regex's DFA, on the same engine.
    pub fn compile_rule_regexes(&self, rules: &[(String, Option<String>)], max_depth: Option<u32>) -> Result<Guide> {
        if rules.is_empty() {
            return Err(Error::InvalidArgument("no rules: the first rule is the start".into()));
        }
        self.compile_rules_lazy(rules, Vec::new(), max_depth, self.deadline())
    }

    fn compile_rules_lazy(
        &self,
        rules: &[(String, Option<String>)],
        tokens: Vec<u32>,
        max_depth: Option<u32>,
        deadline: Deadline,
    ) -> Result<Guide> {
        let parts = self.lazy_parts()?.clone();
        if rules.iter().map(|(name, regex)| name.len() + regex.as_ref().map_or(0, String::len)).sum::<usize>()
            > Self::LONG_PATTERN_BYTES
        {
            long_work::notify();
        }
        // Large repeated operands as rules of their own (`crate::regex::outline`); not under a
        // nesting bound, which counts every frame, outlined calls included.
        let outlined = match max_depth {
            None => outline_rules(rules, OutlineOptions::default(), |regex| self.rule_automata.holds(regex))?,
            Some(_) => OutlinedRules::default(),
        };
        let OutlinedRules { rules: outlined, mut parsed } = outlined;
        let rules = outlined.as_deref().unwrap_or(rules);
        let regex: TextRegex = match rules {
            [(_, Some(regex))] => {
                let hir = match parsed.pop().flatten() {
                    Some(hir) => Ok(hir),
                    None => translate(regex, false),
                };
                ByteDfa::from_parsed(regex, hir, self.limits.max_byte_dfa_states)?.into()
            }
            _ => TextRegex::Grammar(Box::new(PushdownDfa::new_parsed(
                rules,
                parsed,
                &self.rule_automata,
                &parts.text_bytes,
                max_depth,
                self.limits.max_byte_dfa_states,
                self.limits.max_product_states.min(TextSpace::MAX_REGEX_STATES),
            )?)),
        };
        deadline.check("the grammar's automata")?;
        self.finish(LazyGuide::compile(parts, regex, tokens, self.limits)?)
    }

    /// Compiles a regex (full match) with the given method.
    pub fn compile_regex(&self, pattern: &str, method: Method) -> Result<Guide> {
        if self.vocab.kind() == TokenizerKind::WordPiece {
            return self.finish(self.compile_word_piece(pattern, method)?);
        }
        let guide = match method {
            Method::Agnostic => {
                let trie = self.all_tokens();
                let deadline = self.deadline();
                let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
                cartesian::build_agnostic(&self.vocab, trie, dfa, &self.limits.search(deadline))?
            }
            Method::Cartesian => self.compile_cartesian(pattern)?,
            Method::Direct => {
                let product = self.compile_cartesian(pattern)?;
                self.direct_from(&product)?
            }
        };
        self.finish(guide)
    }

    /// Applies the mask-cache limit and computes the initial state's mask, the first one every
    /// decoder asks for (its cost then lands in the compile: with a large vocabulary the first
    /// allocation after a compile's temporaries are freed can take ~0.2 ms).
    fn finish(&self, guide: Guide) -> Result<Guide> {
        let guide = guide.with_mask_cache_limit(self.limits.max_mask_cache_bytes);
        guide.copy_mask(guide.initial_state(), &mut vec![0; guide.mask_words()])?;
        Ok(guide)
    }

    /// `method="auto"`: the explicit DFA when it fits the `max_direct_*` limits, else the
    /// CartesianMerge guide (its `method()` says which).
    pub fn compile_regex_auto(&self, pattern: &str) -> Result<Guide> {
        if self.vocab.kind() == TokenizerKind::WordPiece {
            return self.compile_regex(pattern, Method::Direct);
        }
        let product = self.compile_cartesian(pattern)?;
        let guide = match self.direct_from(&product) {
            Ok(direct) => direct,
            Err(Error::LimitExceeded { limit: "max_direct_states" | "max_direct_transitions", .. }) => product,
            Err(e) => return Err(e),
        };
        self.finish(guide)
    }

    /// Starts the clock of one compile. The tokenizer DFA is built (or loaded) before this, so
    /// its one-time cost is never charged to a compile.
    fn deadline(&self) -> Deadline {
        Deadline::after_seconds(self.limits.max_compile_seconds)
    }

    /// The explicit DFA: DirectMerge where it is exact (a well-ordered merge table with one
    /// producer per token, on which sequential passes equal Hugging Face's priority BPE), else
    /// the materialised CartesianMerge product; minimised either way.
    fn direct_from(&self, product: &Guide) -> Result<Guide> {
        let limits = self.limits.token_dfa();
        let tok = self.tokenizer_dfa()?;
        // DirectMerge rewrites one merge table over the whole text; it knows no pre-tokenizer.
        let sequential_exact = MergeTable::sequential_passes_are_exact(self.vocab.merges());
        let dfa = if sequential_exact && self.vocab.pre_tokenizer().is_none() {
            let ProductParts { byte_dfa } = product.parts();
            let base = direct::base_symbol_dfa(byte_dfa, &self.vocab, tok, limits)?;
            direct_merge(&base, self.vocab.merges(), &limits)?
        } else {
            direct::materialize(product, limits)?
        };
        direct::token_dfa_guide(&self.vocab, direct::minimize(&dfa), Method::Direct)
    }

    fn compile_cartesian(&self, pattern: &str) -> Result<Guide> {
        // Check the tokenizer first: an unsupported one fails before any regex work.
        let tok = self.tokenizer_dfa()?.clone();
        if self.vocab.pre_tokenizer().is_some() {
            return self.compile_pre_tokenized(pattern, &tok);
        }
        let trie = self.emittable_tokens(&tok);
        let deadline = self.deadline();
        let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
        deadline.check("the regex's byte DFA")?;
        cartesian::build(&self.vocab, &tok, trie, dfa, &self.limits.search(deadline))
    }
}

impl Compiler {
    /// A WordPiece tokenizer's eager guide, an explicit token DFA whatever the method: canonical
    /// for `cartesian` and `direct` (it reports `direct`), every sequence that decodes to a match
    /// for `agnostic` (`build::word_piece`).
    fn compile_word_piece(&self, pattern: &str, method: Method) -> Result<Guide> {
        let language = if method == Method::Agnostic { Language::Agnostic } else { Language::Canonical };
        let (entries, max_word_chars, dfa, deadline) = self.word_piece_parts(pattern, language)?;
        let tokens = word_piece::build(&entries, max_word_chars, &dfa, language, self.limits.token_dfa(), deadline)?;
        let method = if language == Language::Agnostic { Method::Agnostic } else { Method::Direct };
        direct::token_dfa_guide(&self.vocab, tokens, method)
    }

    /// A WordPiece tokenizer's lazy canonical guide (`crate::max_match::lazy`).
    fn compile_word_piece_lazy(&self, pattern: &str) -> Result<Guide> {
        let (entries, max_word_chars, dfa, _) = self.word_piece_parts(pattern, Language::Canonical)?;
        let automaton = LazyMaxMatch::new(entries, dfa, max_word_chars, self.limits)?;
        Ok(Guide::new(Method::Cartesian, self.vocab.clone(), Automaton::MaxMatch(automaton), 0))
    }

    /// What a WordPiece guide is built from: the entries, the word limit, the regex's DFA and
    /// the compile's clock.
    fn word_piece_parts(
        &self,
        pattern: &str,
        language: Language,
    ) -> Result<(Arc<EntryTrie>, usize, ByteDfa, Deadline)> {
        if language == Language::Canonical {
            if let Some(reason) = self.vocab.canonical_unsupported_reason() {
                return Err(Error::Unsupported(reason.to_string()));
            }
        }
        let model = self.vocab.word_piece().expect("a WordPiece vocabulary has its model");
        let entries = self.word_piece_entries.get_or_init(|| Arc::new(EntryTrie::new(&self.vocab, model))).clone();
        let deadline = self.deadline();
        let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
        deadline.check("the regex's byte DFA")?;
        Ok((entries, model.max_word_chars, dfa, deadline))
    }

    fn compile_pre_tokenized(&self, pattern: &str, tok: &Arc<TokenizerDfa>) -> Result<Guide> {
        let parts = self.pre_tokenized_parts()?;
        let deadline = self.deadline();
        let dfa = ByteDfa::from_regex(pattern, self.limits.max_byte_dfa_states)?;
        deadline.check("the regex's byte DFA")?;
        pre_tokenized::build(&self.vocab, tok, &parts.tables, dfa, &self.limits.search(deadline))
    }
}

/// The tokenizer DFA cached at `path`, `None` when it is missing, unreadable, stale or corrupt
/// (the caller rebuilds it). The file is memory-mapped and its forbidden sets used in place;
/// where mapping fails it is read instead.
fn load_cached(path: &std::path::Path, vocab: &Vocabulary) -> Option<TokenizerDfa> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: cache files are only ever replaced by renaming a complete file over them, never
    // written in place, so the mapped bytes do not change while mapped (see `crate::util::u32_storage`).
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) => TokenizerDfa::from_mapped_file(Arc::new(map), vocab).ok(),
        Err(_) => TokenizerDfa::from_bytes(&std::fs::read(path).ok()?, vocab).ok(),
    }
}

/// The ids of special tokens resolved by [`resolve_tokens`].
fn token_ids(tokens: &[TokenName]) -> Vec<u32> {
    (tokens.iter())
        .map(|t| match t {
            TokenName::Id(id) => *id,
            TokenName::Text(_) => unreachable!("resolve_tokens names every special token by id"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiler(tokens: &[&str], merges: &[(&str, &str)]) -> Compiler {
        Compiler::new(Arc::new(Vocabulary::char_bpe_for_tests(tokens, merges).unwrap()), Limits::default())
    }

    /// direct (DirectMerge on well-ordered tables, the materialised product otherwise) and
    /// cartesian accept the same token sequences, checked on the product of both guides.
    fn same_language(c: &Compiler, patterns: &[&str]) {
        for p in patterns {
            let cartesian = c.compile_regex(p, Method::Cartesian).unwrap();
            let direct = c.compile_regex(p, Method::Direct).unwrap();
            assert_eq!(direct.method(), Method::Direct);
            assert_eq!(cartesian.first_difference(&direct), Ok(None), "{p}");
            assert_eq!(direct.first_difference(&cartesian), Ok(None), "{p}");
            let lazy = c.compile_regex_lazy(p).unwrap();
            assert_eq!(lazy.first_difference(&cartesian), Ok(None), "{p}: lazy");
            let on_demand = c.compile_regex_lazy_with(p, Bound::ON_DEMAND).unwrap();
            assert_eq!(on_demand.first_difference(&cartesian), Ok(None), "{p}: determinized on demand");
        }
    }

    /// A regex whose subset construction passes the bound runs on demand, the others get their
    /// minimal DFA; the same language either way.
    #[test]
    fn a_regex_past_the_dfa_bound_is_determinized_on_demand() {
        let c = compiler(&["a", "b", "c", "ab"], &[("a", "b")]);
        let tight = Bound { max_states: 4, max_work: 1_000 };
        for (pattern, kind) in [("a(b|c)", "minimal DFA"), ("(a|b)*a(a|b){3}", "DFA on demand")] {
            let guide = c.compile_regex_lazy_with(pattern, tight).unwrap();
            assert_eq!(guide.lazy_text_automaton(), Some(kind), "{pattern}");
            let eager = c.compile_regex(pattern, Method::Cartesian).unwrap();
            assert_eq!(guide.first_difference(&eager), Ok(None), "{pattern}");
        }
        let worked = Bound { max_states: 1_000, max_work: 5 };
        let guide = c.compile_regex_lazy_with("(a|b)*a(a|b){3}", worked).unwrap();
        assert_eq!(guide.lazy_text_automaton(), Some("DFA on demand"), "past the work bound");
        assert_eq!(c.compile_regex_lazy("(a|b)*a(a|b){3}").unwrap().lazy_text_automaton(), Some("minimal DFA"));
    }

    const PATTERNS: &[&str] = &["[abc]*", "a+b?c", "(ab|ba)*c?", "a{0,7}", "(aab|abc)+", "c(a|b){2,5}"];

    #[test]
    fn direct_merge_equals_cartesian_on_well_ordered_tables() {
        let c = compiler(
            &["a", "b", "c", "ab", "aa", "ac", "abc", "aab"],
            &[("a", "b"), ("a", "a"), ("a", "c"), ("ab", "c"), ("a", "ab")],
        );
        assert!(MergeTable::sequential_passes_are_exact(c.vocab.merges()));
        same_language(&c, PATTERNS);
    }

    #[test]
    fn materialised_product_equals_cartesian_on_other_tables() {
        // (b, cd) ranks before (c, d): not well-ordered.
        let c = compiler(&["a", "b", "c", "d", "cd", "bcd", "ab"], &[("b", "cd"), ("a", "b"), ("c", "d")]);
        assert!(!MergeTable::sequential_passes_are_exact(c.vocab.merges()));
        same_language(&c, &["[abcd]*", "a(bcd)+", "b?c?d?a"]);
    }

    #[test]
    fn auto_falls_back_past_the_limits() {
        let mut c = compiler(&["a", "b", "ab"], &[("a", "b")]);
        c.limits.max_direct_transitions = 1;
        let g = c.compile_regex_auto("[ab]*").unwrap();
        assert_eq!(g.method(), Method::Cartesian);
        assert!(matches!(c.compile_regex("[ab]*", Method::Direct), Err(Error::LimitExceeded { .. })));
        c.limits.max_direct_transitions = 1000;
        assert_eq!(c.compile_regex_auto("[ab]*").unwrap().method(), Method::Direct);
    }
}
