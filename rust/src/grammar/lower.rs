//! A [`Grammar`] written as one regex: every reference inlined, recursion refused or unrolled;
//! or as one regex per nesting rule, with calls between them ([`to_rule_regexes`], for the
//! pushdown automaton of `crate::lazy::pushdown`).
//!
//! ## The concept
//! A rule that is not recursive is regular: inlining the rules it names, bottom up, gives a regex
//! for exactly its language. Recursion (a rule reachable from itself: a strongly connected
//! component of the reference graph with a cycle) is not regular in general, so [`to_regex`]
//! refuses it, naming one cycle, unless [`LowerOptions::max_recursion_depth`] allows nesting.
//! With depth `d`, a reference to a recursive rule `R` is expanded while `R` occurs at most `d`
//! times on the stack of expansions already (so `d + 1` nested copies in all), and stands for no
//! string past that: alternatives that need deeper nesting drop out. The result is a subset of
//! the grammar's language — every admitted string is valid, deeper ones are not admitted — and
//! equals it when no derivation nests deeper.
//!
//! ## Invariants
//! * The regex matches a string iff the string has a derivation from the start rule whose
//!   nesting of each recursive rule inside itself is at most `d` (all derivations without
//!   recursion).
//! * An empty language (the start rule needs more nesting than allowed, or a rule with no
//!   string) is an [`Error::EmptyLanguage`], never a regex that matches nothing.
//!
//! ## Costs
//! A rule's regex is memoized by the occurrence counts of its own component on the stack (only
//! those can change its expansion: a component that could be re-entered from below would be the
//! same component), so a non-recursive rule is written once. The text still grows with every
//! copy inlined; [`LowerOptions::max_regex_bytes`] bounds it with [`Error::LimitExceeded`], and
//! group nesting is bounded by [`MAX_GROUP_NESTING`] (regex-syntax's own nest limit is 250).

use std::fmt::Write as _;

use rustc_hash::FxHashMap;

use super::{Expr, Grammar, TokenName};
use crate::error::{Error, Result};
use crate::regex::byte_dfa::{self, MAX_GRAMMAR_TOKENS, MAX_RULES_CALLED, TOKEN_MARKER, TOKEN_MARKER_INDEX};

/// Default of [`LowerOptions::max_regex_bytes`]: 1 MiB of regex text.
pub const DEFAULT_MAX_GRAMMAR_REGEX_BYTES: usize = 1 << 20;
/// Deepest group nesting written; regex-syntax refuses past 250.
pub const MAX_GROUP_NESTING: usize = 240;
/// Deepest chain of rule expansions and sub-expressions followed while lowering (a chain of
/// rules each naming the next), which bounds the recursion's stack.
pub const MAX_EXPANSION_DEPTH: usize = 1_000;

/// How [`to_regex`] treats recursion and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LowerOptions {
    /// `None`: refuse recursive grammars. `Some(d)`: admit derivations that nest each recursive
    /// rule at most `d` times inside itself.
    pub max_recursion_depth: Option<u32>,
    /// The most bytes of regex text to write.
    pub max_regex_bytes: usize,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions { max_recursion_depth: None, max_regex_bytes: DEFAULT_MAX_GRAMMAR_REGEX_BYTES }
    }
}

/// The start rule of `grammar` as one regex (matched as a whole). A grammar that names special
/// tokens has none ([`Error::Unsupported`]): see [`to_regex_with_tokens`].
pub fn to_regex(grammar: &Grammar, options: LowerOptions) -> Result<String> {
    let lowered = to_regex_with_tokens(grammar, options)?;
    match lowered.tokens.first() {
        None => Ok(lowered.regex),
        Some(name) => Err(Error::Unsupported(format!(
            "the grammar names the special token {name}, which is not text, so no regex can say it; \
             Compiler.compile_grammar compiles such grammars"
        ))),
    }
}

/// A grammar's start rule as a regex in which special token `j` of `tokens` is written as
/// the marker bytes [`TOKEN_MARKER`], [`TOKEN_MARKER_INDEX`]` + j` (never UTF-8 text; compile
/// it with [`crate::regex::byte_dfa::ByteDfa::from_regex_with_markers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarRegex {
    pub regex: String,
    pub tokens: Vec<TokenName>,
}

/// [`to_regex`], with special tokens written as markers.
pub fn to_regex_with_tokens(grammar: &Grammar, options: LowerOptions) -> Result<GrammarRegex> {
    let components = Components::of(grammar);
    if options.max_recursion_depth.is_none() {
        if let Some(cycle) = components.reachable_cycle(grammar) {
            return Err(Error::Unsupported(format!(
                "grammar rule `{}` is recursive ({}), and no regex says nesting: lazy guides \
                 (Compiler.compile_grammar) take it without a bound; for a regex or an eager \
                 guide, pass max_recursion_depth=N to admit derivations that nest it up to N times \
                 inside itself",
                cycle[0],
                cycle.join(" → ")
            )));
        }
    }
    let mut lowering = Lowering {
        grammar,
        components: &components,
        options,
        on_stack: vec![0; grammar.rules.len()],
        depth: 0,
        memo: FxHashMap::default(),
        solved: FxHashMap::default(),
        tokens: Vec::new(),
        calls: None,
    };
    match lowering.rule(grammar.start)? {
        Some(piece) => Ok(GrammarRegex { regex: piece.text, tokens: lowering.tokens }),
        None => Err(Error::EmptyLanguage(match options.max_recursion_depth {
            Some(d) => format!(
                "no string of the grammar's start rule `{}` nests its recursive rules at most \
                 {d} times (max_recursion_depth)",
                grammar.rules[grammar.start].name
            ),
            None => format!("the grammar's start rule `{}` matches no string", grammar.rules[grammar.start].name),
        })),
    }
}

/// A grammar as a recursive transition network's rules (see `crate::lazy::pushdown`): rule 0
/// is the start rule; every reference to a *self-embedding* rule (one in a recursive component
/// that is not solved as a regex, `value` → `array` → `value`) is written as a call marker
/// ([`byte_dfa::CALL_MARKER`] then two bytes naming the rule), and everything else is inlined as in
/// [`to_regex`]. A grammar without such rules is one rule, its regex exactly `to_regex`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRegexes {
    /// Each rule's name and regex (`None`: the rule matches no string at all).
    pub rules: Vec<(String, Option<String>)>,
    /// The special tokens named, in marker order (as [`GrammarRegex::tokens`]).
    pub tokens: Vec<TokenName>,
}

/// [`RuleRegexes`] of `grammar`; `options.max_recursion_depth` is not used (the pushdown
/// automaton bounds nesting itself, if asked to).
pub fn to_rule_regexes(grammar: &Grammar, options: LowerOptions) -> Result<RuleRegexes> {
    let components = Components::of(grammar);
    let mut lowering = Lowering {
        grammar,
        components: &components,
        options: LowerOptions { max_recursion_depth: None, ..options },
        on_stack: vec![0; grammar.rules.len()],
        depth: 0,
        memo: FxHashMap::default(),
        solved: FxHashMap::default(),
        tokens: Vec::new(),
        calls: Some(Vec::new()),
    };
    let root = lowering.expr(&Expr::Rule(grammar.start))?;
    let mut rules = vec![(grammar.rules[grammar.start].name.clone(), root.map(|p| p.text))];
    // Rules called so far are lowered in turn; lowering one may call new ones.
    while let Some(&rule) = lowering.calls.as_ref().expect("calls mode").get(rules.len() - 1) {
        let body = lowering.expr(&grammar.rules[rule].body)?;
        rules.push((grammar.rules[rule].name.clone(), body.map(|p| p.text)));
    }
    Ok(RuleRegexes { rules, tokens: lowering.tokens })
}

/// The marker of a call to rule `id` of a [`RuleRegexes`].
fn call_marker(id: usize) -> String {
    let [a, b, c] = byte_dfa::call_marker(id);
    format!("(?-u:\\x{a:02X}\\x{b:02X}\\x{c:02X})")
}

/// The strongly connected components of the rule reference graph.
struct Components {
    /// Component id of each rule.
    of_rule: Vec<usize>,
    /// Rules of each component.
    members: Vec<Vec<usize>>,
    /// Whether each component has a cycle (several rules, or one that names itself).
    recursive: Vec<bool>,
    /// Rules each rule names directly.
    edges: Vec<Vec<usize>>,
    /// For a recursive component, the side its rules name each other from, when they all do
    /// so from one side only (then the component is regular and solved exactly).
    linear: Vec<Option<Side>>,
}

/// Where a linear component's rules name each other: `Right` = last (`list ::= item "," list`),
/// `Left` = first (`sum ::= sum "+" term`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Right,
    Left,
}

impl Components {
    fn of(grammar: &Grammar) -> Components {
        let edges: Vec<Vec<usize>> = grammar
            .rules
            .iter()
            .map(|r| {
                let mut out = Vec::new();
                references(&r.body, &mut out);
                out.sort_unstable();
                out.dedup();
                out
            })
            .collect();
        let of_rule = tarjan(&edges);
        let count = of_rule.iter().copied().max().map_or(0, |m| m + 1);
        let mut members = vec![Vec::new(); count];
        for (rule, &c) in of_rule.iter().enumerate() {
            members[c].push(rule);
        }
        let recursive: Vec<bool> = members.iter().map(|m| m.len() > 1 || edges[m[0]].contains(&m[0])).collect();
        let linear = (0..members.len())
            .map(|c| {
                let in_component = |r: usize| of_rule[r] == c;
                let all = |side| members[c].iter().all(|&r| is_linear(&grammar.rules[r].body, side, &in_component));
                if !recursive[c] {
                    None
                } else if all(Side::Right) {
                    Some(Side::Right)
                } else if all(Side::Left) {
                    Some(Side::Left)
                } else {
                    None
                }
            })
            .collect();
        Components { of_rule, members, recursive, edges, linear }
    }

    /// Whether `rule` is in a component that needs unrolling (recursive, not linear).
    fn is_self_embedding(&self, rule: usize) -> bool {
        let c = self.of_rule[rule];
        self.recursive[c] && self.linear[c].is_none()
    }

    /// One cycle through a self-embedding rule reachable from the start, as rule names (first =
    /// last), found by breadth-first search inside the rule's component.
    fn reachable_cycle(&self, grammar: &Grammar) -> Option<Vec<String>> {
        let mut seen = vec![false; grammar.rules.len()];
        let mut order = vec![grammar.start];
        seen[grammar.start] = true;
        let mut i = 0;
        while i < order.len() {
            let r = order[i];
            i += 1;
            if self.is_self_embedding(r) {
                return Some(self.cycle_through(r).into_iter().map(|x| grammar.rules[x].name.clone()).collect());
            }
            for &n in &self.edges[r] {
                if !seen[n] {
                    seen[n] = true;
                    order.push(n);
                }
            }
        }
        None
    }

    /// A shortest path `rule → … → rule` inside its component.
    fn cycle_through(&self, rule: usize) -> Vec<usize> {
        let component = self.of_rule[rule];
        let mut parent: FxHashMap<usize, usize> = FxHashMap::default();
        let mut queue = std::collections::VecDeque::from([rule]);
        while let Some(r) = queue.pop_front() {
            for &n in &self.edges[r] {
                if self.of_rule[n] != component {
                    continue;
                }
                if n == rule {
                    // Walk back from `r` to `rule`, then read the cycle forwards.
                    let mut back = Vec::new();
                    let mut at = r;
                    while at != rule {
                        back.push(at);
                        at = parent[&at];
                    }
                    back.reverse();
                    let mut path = vec![rule];
                    path.extend(back);
                    path.push(rule);
                    return path;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(n) {
                    e.insert(r);
                    queue.push_back(n);
                }
            }
        }
        vec![rule, rule]
    }
}

/// Rules named in `expr`, in order, with repeats.
fn references(expr: &Expr, out: &mut Vec<usize>) {
    match expr {
        Expr::Rule(r) => out.push(*r),
        Expr::Seq(items) | Expr::Alt(items) => items.iter().for_each(|e| references(e, out)),
        Expr::Repeat { expr, .. } => references(expr, out),
        Expr::Literal(_)
        | Expr::CaseInsensitiveLiteral(_)
        | Expr::Class { .. }
        | Expr::Regex { .. }
        | Expr::Token(_) => {}
    }
}

/// Whether `expr` names a rule for which `inside` holds.
fn mentions(expr: &Expr, inside: &dyn Fn(usize) -> bool) -> bool {
    match expr {
        Expr::Rule(r) => inside(*r),
        Expr::Seq(items) | Expr::Alt(items) => items.iter().any(|e| mentions(e, inside)),
        Expr::Repeat { expr, .. } => mentions(expr, inside),
        Expr::Literal(_)
        | Expr::CaseInsensitiveLiteral(_)
        | Expr::Class { .. }
        | Expr::Regex { .. }
        | Expr::Token(_) => false,
    }
}

/// Whether `expr` names the rules for which `inside` holds only on `side` (last item of every
/// concatenation for `Right`, first for `Left`), never under a repetition other than `?`.
fn is_linear(expr: &Expr, side: Side, inside: &dyn Fn(usize) -> bool) -> bool {
    match expr {
        Expr::Rule(_)
        | Expr::Literal(_)
        | Expr::CaseInsensitiveLiteral(_)
        | Expr::Class { .. }
        | Expr::Regex { .. }
        | Expr::Token(_) => true,
        Expr::Alt(items) => items.iter().all(|e| is_linear(e, side, inside)),
        Expr::Seq(items) => match split_edge(items, side) {
            Some((edge, rest)) => !rest.iter().any(|e| mentions(e, inside)) && is_linear(edge, side, inside),
            None => true,
        },
        Expr::Repeat { expr, max, .. } => !mentions(expr, inside) || (*max == Some(1) && is_linear(expr, side, inside)),
    }
}

/// The item of a concatenation on `side`, and the others.
fn split_edge(items: &[Expr], side: Side) -> Option<(&Expr, &[Expr])> {
    match side {
        Side::Right => items.split_last(),
        Side::Left => items.split_first(),
    }
}

/// Tarjan's strongly connected components, iterative (a grammar may chain thousands of rules).
/// Returns each node's component id.
fn tarjan(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let n = edges.len();
    let (mut index, mut low, mut component) = (vec![UNSEEN; n], vec![0; n], vec![UNSEEN; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let (mut next_index, mut next_component) = (0, 0);
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        // Frames: (node, next edge to look at).
        let mut frames = vec![(root, 0usize)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut edge)) = frames.last_mut() {
            if let Some(&w) = edges[v].get(*edge) {
                *edge += 1;
                if index[w] == UNSEEN {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component[w] = next_component;
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

/// How tightly a piece of regex binds, to know where it needs a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Binding {
    /// A union `a|b`: grouped inside a concatenation or before a repetition.
    Union,
    /// A concatenation `ab` (or a multi-character literal): grouped before a repetition.
    Concatenation,
    /// One atom (`a`, `[a-z]`, `(?:...)`): never grouped.
    Atom,
}

/// A regex for a non-empty language.
#[derive(Debug, Clone)]
struct Piece {
    text: String,
    binding: Binding,
    /// Group nesting inside `text`.
    depth: usize,
}

impl Piece {
    fn atom(text: String) -> Piece {
        Piece { text, binding: Binding::Atom, depth: 0 }
    }

    fn empty() -> Piece {
        Piece { text: String::new(), binding: Binding::Atom, depth: 0 }
    }

    /// `self` where at least `binding` is needed, grouped if it binds more loosely.
    fn at_least(self, binding: Binding) -> Piece {
        if self.binding >= binding {
            self
        } else {
            Piece { text: format!("(?:{})", self.text), binding: Binding::Atom, depth: self.depth + 1 }
        }
    }
}

/// `None` is the empty language (no string at all).
type Lowered = Option<Piece>;

struct Lowering<'g> {
    grammar: &'g Grammar,
    components: &'g Components,
    options: LowerOptions,
    /// How many expansions of each rule are open.
    on_stack: Vec<u32>,
    /// Rule expansions and sub-expressions open, against [`MAX_EXPANSION_DEPTH`].
    depth: usize,
    /// A rule's regex by the stack counts of its component's rules.
    memo: FxHashMap<(usize, Vec<u32>), Lowered>,
    /// The regexes of the rules of linear components, solved once per component.
    solved: FxHashMap<usize, Lowered>,
    /// The special tokens named so far, in marker order.
    tokens: Vec<TokenName>,
    /// In [`to_rule_regexes`]: the self-embedding rules called so far (rule `i + 1` of the
    /// result is `calls[i]`); references to them are written as calls, never expanded.
    calls: Option<Vec<usize>>,
}

/// A rule body of a linear component as `Σ coefficient·X_target + base` (`Side::Right`) or
/// `Σ X_target·coefficient + base` (`Side::Left`), `X` the component's rules.
struct Linear {
    terms: Vec<(Lowered, usize)>,
    base: Lowered,
}

impl Lowering<'_> {
    fn rule(&mut self, rule: usize) -> Result<Lowered> {
        let component = self.components.of_rule[rule];
        if let Some(side) = self.components.linear[component] {
            if !self.solved.contains_key(&rule) {
                self.solve(component, side)?;
            }
            return Ok(self.solved[&rule].clone());
        }
        if let (Some(calls), true) = (&mut self.calls, self.components.is_self_embedding(rule)) {
            let id = match calls.iter().position(|&r| r == rule) {
                Some(i) => i + 1,
                None if calls.len() + 1 < MAX_RULES_CALLED => {
                    calls.push(rule);
                    calls.len()
                }
                None => {
                    return Err(Error::LimitExceeded {
                        limit: "recursive rules of a grammar",
                        value: MAX_RULES_CALLED.to_string(),
                        what: format!("`{}` is one more", self.grammar.rules[rule].name),
                    })
                }
            };
            return Ok(Some(Piece::atom(call_marker(id))));
        }
        if self.components.recursive[component] {
            if let Some(d) = self.options.max_recursion_depth {
                if self.on_stack[rule] > d {
                    return Ok(None);
                }
            }
        }
        let key = (rule, self.components.members[component].iter().map(|&m| self.on_stack[m]).collect::<Vec<_>>());
        if let Some(done) = self.memo.get(&key) {
            return Ok(done.clone());
        }
        self.on_stack[rule] += 1;
        let body = &self.grammar.rules[rule].body;
        let lowered = self.expr(body);
        self.on_stack[rule] -= 1;
        let lowered = lowered?;
        self.memo.insert(key, lowered.clone());
        Ok(lowered)
    }

    /// The marker of a special token (numbered in order of first use).
    fn token_marker(&mut self, name: &TokenName) -> Result<String> {
        let j = match self.tokens.iter().position(|t| t == name) {
            Some(j) => j,
            None if self.tokens.len() < MAX_GRAMMAR_TOKENS => {
                self.tokens.push(name.clone());
                self.tokens.len() - 1
            }
            None => {
                return Err(Error::LimitExceeded {
                    limit: "special tokens of a grammar",
                    value: MAX_GRAMMAR_TOKENS.to_string(),
                    what: format!("{name} is one more"),
                })
            }
        };
        Ok(format!("(?-u:\\x{:02X}\\x{:02X})", TOKEN_MARKER, TOKEN_MARKER_INDEX + j as u8))
    }

    fn expr(&mut self, expr: &Expr) -> Result<Lowered> {
        if self.depth >= MAX_EXPANSION_DEPTH {
            return Err(Error::Unsupported(format!(
                "grammar rules and expressions nest more than {MAX_EXPANSION_DEPTH} deep"
            )));
        }
        self.depth += 1;
        let piece = self.expr_inner(expr);
        self.depth -= 1;
        piece
    }

    fn expr_inner(&mut self, expr: &Expr) -> Result<Lowered> {
        let piece = match expr {
            Expr::Literal(text) => Some(literal(text)),
            Expr::CaseInsensitiveLiteral(text) => Some(Piece::atom(format!("(?i:{})", regex_syntax::escape(text)))),
            Expr::Class { negated, ranges } => class(*negated, ranges),
            Expr::Regex { pattern, .. } => {
                Some(Piece { text: format!("(?:{pattern})"), binding: Binding::Atom, depth: 1 })
            }
            Expr::Token(name) => Some(Piece::atom(self.token_marker(name)?)),
            Expr::Rule(r) => self.rule(*r)?,
            Expr::Seq(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    match self.expr(item)? {
                        Some(p) => parts.push(p.at_least(Binding::Concatenation)),
                        None => return Ok(None),
                    }
                }
                concatenation(parts)
            }
            Expr::Alt(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(p) = self.expr(item)? {
                        parts.push(p);
                    }
                }
                union(parts)
            }
            Expr::Repeat { expr, min, max } => match self.expr(expr)? {
                Some(p) if p.text.is_empty() => Some(p),
                Some(p) => Some(repeat(p, *min, *max)),
                None if *min == 0 => Some(Piece::empty()),
                None => None,
            },
        };
        if let Some(p) = &piece {
            self.check_size(p)?;
        }
        Ok(piece)
    }

    /// Solves a linear component's equations `X_i = Σ A_ij X_j + B_i` (right-linear; mirrored
    /// for left) by elimination: Arden's lemma turns `X_i = A_ii X_i + R` into `X_i = A_ii* R`,
    /// which is substituted into the later equations; back substitution then gives every rule
    /// its regex, exactly.
    fn solve(&mut self, component: usize, side: Side) -> Result<()> {
        let grammar = self.grammar;
        let members = self.components.members[component].clone();
        let n = members.len();
        let mut coefficient: Vec<Vec<Lowered>> = vec![vec![None; n]; n];
        let mut base: Vec<Lowered> = vec![None; n];
        for (i, &rule) in members.iter().enumerate() {
            let linear = self.linear_form(&grammar.rules[rule].body, side, component)?;
            for (c, target) in linear.terms {
                let j = members.iter().position(|&m| m == target).expect("a term names its own component");
                coefficient[i][j] = either(coefficient[i][j].take(), c);
            }
            base[i] = linear.base;
        }
        for i in 0..n {
            let loop_star = star(coefficient[i][i].take());
            for j in (0..n).filter(|&j| j != i) {
                coefficient[i][j] = self.checked(compose(&loop_star, coefficient[i][j].take(), side))?;
            }
            base[i] = self.checked(compose(&loop_star, base[i].take(), side))?;
            for k in i + 1..n {
                let Some(via) = coefficient[k][i].take() else { continue };
                let via = Some(via);
                for j in (0..n).filter(|&j| j != i) {
                    let through = compose(&via, coefficient[i][j].clone(), side);
                    coefficient[k][j] = self.checked(either(coefficient[k][j].take(), through))?;
                }
                let through = compose(&via, base[i].clone(), side);
                base[k] = self.checked(either(base[k].take(), through))?;
            }
        }
        let mut solution: Vec<Lowered> = vec![None; n];
        for i in (0..n).rev() {
            let mut x = base[i].take();
            for j in i + 1..n {
                x = either(x, compose(&coefficient[i][j], solution[j].clone(), side));
            }
            solution[i] = self.checked(x)?;
        }
        for (i, x) in solution.into_iter().enumerate() {
            self.solved.insert(members[i], x);
        }
        Ok(())
    }

    /// `expr`, a rule body (or part of one) of a linear component, in linear form.
    fn linear_form(&mut self, expr: &Expr, side: Side, component: usize) -> Result<Linear> {
        let components = self.components;
        let in_component = |r: usize| components.of_rule[r] == component;
        if !mentions(expr, &in_component) {
            return Ok(Linear { terms: Vec::new(), base: self.expr(expr)? });
        }
        match expr {
            Expr::Rule(r) => Ok(Linear { terms: vec![(Some(Piece::empty()), *r)], base: None }),
            Expr::Alt(items) => {
                let mut out = Linear { terms: Vec::new(), base: None };
                for item in items {
                    let part = self.linear_form(item, side, component)?;
                    out.terms.extend(part.terms);
                    out.base = either(out.base, part.base);
                }
                Ok(out)
            }
            Expr::Seq(items) => {
                let (edge, rest) = split_edge(items, side).expect("a concatenation that names a rule is not empty");
                let rest = self.expr(&Expr::Seq(rest.to_vec()))?;
                let edge = self.linear_form(edge, side, component)?;
                Ok(Linear {
                    terms: edge.terms.into_iter().map(|(c, t)| (compose(&rest, c, side), t)).collect(),
                    base: compose(&rest, edge.base, side),
                })
            }
            Expr::Repeat { expr, min, .. } => {
                // `is_linear` admitted only `{0,1}` and `{1,1}` here.
                let mut inner = self.linear_form(expr, side, component)?;
                if *min == 0 {
                    inner.base = either(inner.base, Some(Piece::empty()));
                }
                Ok(inner)
            }
            Expr::Literal(_)
            | Expr::CaseInsensitiveLiteral(_)
            | Expr::Class { .. }
            | Expr::Regex { .. }
            | Expr::Token(_) => {
                unreachable!("a leaf names no rule")
            }
        }
    }

    fn checked(&self, lowered: Lowered) -> Result<Lowered> {
        if let Some(p) = &lowered {
            self.check_size(p)?;
        }
        Ok(lowered)
    }

    fn check_size(&self, piece: &Piece) -> Result<()> {
        if piece.text.len() > self.options.max_regex_bytes {
            return Err(Error::LimitExceeded {
                limit: "max_regex_bytes",
                value: self.options.max_regex_bytes.to_string(),
                what: "the grammar written as one regex; a lower max_recursion_depth makes it smaller".into(),
            });
        }
        if piece.depth > MAX_GROUP_NESTING {
            return Err(Error::Unsupported(format!(
                "the grammar written as one regex nests groups more than {MAX_GROUP_NESTING} deep; \
                 a lower max_recursion_depth makes it shallower"
            )));
        }
        Ok(())
    }
}

/// `a·b`.
fn cat(a: Lowered, b: Lowered) -> Lowered {
    match (a, b) {
        (Some(a), Some(b)) => {
            concatenation(vec![a.at_least(Binding::Concatenation), b.at_least(Binding::Concatenation)])
        }
        _ => None,
    }
}

/// `a|b`.
fn either(a: Lowered, b: Lowered) -> Lowered {
    union(a.into_iter().chain(b).collect())
}

/// `a*` (the empty string for the empty language).
fn star(a: Lowered) -> Lowered {
    match a {
        Some(p) if !p.text.is_empty() => Some(repeat(p, 0, None)),
        _ => Some(Piece::empty()),
    }
}

/// `outer` applied around `inner` on the component's side: `outer·inner` for right-linear
/// equations, `inner·outer` for left-linear ones.
fn compose(outer: &Lowered, inner: Lowered, side: Side) -> Lowered {
    match side {
        Side::Right => cat(outer.clone(), inner),
        Side::Left => cat(inner, outer.clone()),
    }
}

fn literal(text: &str) -> Piece {
    let binding = if text.chars().count() == 1 { Binding::Atom } else { Binding::Concatenation };
    Piece { text: regex_syntax::escape(text), binding, depth: 0 }
}

fn class(negated: bool, ranges: &[(char, char)]) -> Lowered {
    if ranges.is_empty() {
        // `[^]`: any character; `[]`: none.
        return negated.then(|| Piece::atom(r"[\x{0}-\x{10FFFF}]".to_string()));
    }
    let mut text = String::from(if negated { "[^" } else { "[" });
    for &(lo, hi) in ranges {
        let _ = write!(text, r"\x{{{:X}}}", lo as u32);
        if hi != lo {
            let _ = write!(text, r"-\x{{{:X}}}", hi as u32);
        }
    }
    text.push(']');
    Some(Piece::atom(text))
}

fn concatenation(parts: Vec<Piece>) -> Lowered {
    let parts: Vec<Piece> = parts.into_iter().filter(|p| !p.text.is_empty()).collect();
    match parts.len() {
        0 => Some(Piece::empty()),
        1 => parts.into_iter().next(),
        _ => Some(Piece {
            depth: parts.iter().map(|p| p.depth).max().unwrap_or(0),
            text: parts.into_iter().map(|p| p.text).collect(),
            binding: Binding::Concatenation,
        }),
    }
}

fn union(parts: Vec<Piece>) -> Lowered {
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => Some(Piece {
            depth: parts.iter().map(|p| p.depth).max().unwrap_or(0),
            text: parts.into_iter().map(|p| p.text).collect::<Vec<_>>().join("|"),
            binding: Binding::Union,
        }),
    }
}

fn repeat(piece: Piece, min: u32, max: Option<u32>) -> Piece {
    let suffix = match (min, max) {
        (0, None) => "*".to_string(),
        (1, None) => "+".to_string(),
        (0, Some(1)) => "?".to_string(),
        (1, Some(1)) => return piece,
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) if m == n => format!("{{{m}}}"),
        (m, Some(n)) => format!("{{{m},{n}}}"),
    };
    if max == Some(0) {
        return Piece::empty();
    }
    let inner = piece.at_least(Binding::Atom);
    Piece { text: inner.text + &suffix, binding: Binding::Concatenation, depth: inner.depth }
}

#[cfg(test)]
mod tests;
