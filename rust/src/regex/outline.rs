//! Outlining: a regex whose automaton would be too large because a counted repetition copies a
//! large sub-expression, rewritten as rules of a pushdown automaton (`crate::lazy::pushdown`)
//! in which that sub-expression is a rule of its own and the repetition repeats a call to it.
//!
//! ## The concept
//! A Thompson NFA spells `X{0,n}` as `n` copies of `X`, so its size is the product of the
//! counts on every path from the root: a JSON Schema array of up to 1,000 objects, each with
//! a few arrays of up to 1,000 objects and strings of up to 1,024 characters
//! (JSONSchemaBench's `Github_medium/o9942`, 9 KB of regex), is ~10⁸ NFA states, past any
//! budget. Yet the language is what a decoder walks through a few hundred states of. Writing `X`
//! once as a rule and the repetition as `(call X){0,n}` keeps the language and makes the sizes
//! add instead of multiply: the pushdown automaton pushes a return point on the call and pops
//! it where `X` ends. The rules are not recursive, so stacks are at most as deep as the
//! outlining nests (two frames for `o9942`).
//!
//! A grammar's rules (or a JSON Schema's, with `$ref` recursion as calls) are outlined the
//! same way, rule by rule ([`outline_rules`]), except under a nesting bound
//! (`max_recursion_depth`), which counts every frame and would count outlined calls too.
//!
//! ## What is outlined
//! [`outline`] works bottom up on the translated regex and estimates each sub-expression's
//! Thompson states ([`estimated_nfa_states`]). It outlines the operand of a counted repetition
//! when the copies would cost at least [`OutlineOptions::copies_states`] and the operand is itself
//! large ([`OutlineOptions::min_states`]), free of look-around (an anchor or `\b` in a rule
//! would look at the rule's edges, not the text's) and longer than one character: a string's
//! character class (`[^"\\]{0,1024}`) stays inline, where the lazy engine's counted slices
//! (`crate::lazy::slice`) take it at the price of one table lookup per byte, where a call per
//! character would cost a push and a pop. Equal operands (the same printed regex) share one rule.
//!
//! A regex below [`OutlineOptions::copies_states`] in all (every Glaiveai2K regex; all but 219 of
//! JSONSchemaBench's 4,167) has nothing to outline and stays one automaton.
//!
//! ## Invariants
//! * The rules' language, rule 0 started with every call expanded, is the regex's language: an
//!   outlined operand is replaced by a call whose rule is exactly that operand.
//! * Outlining adds no recursion: an outlined rule calls only rules of its own sub-expressions.
//!
//! ## Costs
//! Linear in the regex's HIR, plus printing each rule's regex (the rule regexes together are
//! at most a little longer than the pattern, calls being 3 bytes).

use regex_syntax::hir::{Class, Hir, HirKind, Repetition};
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::regex::byte_dfa::{call_marker, MAX_RULES_CALLED};
use crate::regex::syntax::translate;

/// Which repetitions [`outline`] outlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlineOptions {
    /// A repetition whose copies of its operand estimate at least this many NFA states has the
    /// operand outlined (when it qualifies: see the module docs). Default 32,768 (~350 KB of
    /// NFA, ~10 ms to build).
    pub copies_states: u64,
    /// Operands estimated below this many states stay inline. Default 64.
    pub min_states: u64,
}

impl OutlineOptions {
    /// Every repeated operand longer than one character, however small: what tests use to run
    /// corpus regexes through calls.
    pub const EVERY: OutlineOptions = OutlineOptions { copies_states: 0, min_states: 0 };
    /// Nothing outlined: the regex is one automaton, however large.
    pub const NONE: OutlineOptions = OutlineOptions { copies_states: u64::MAX, min_states: u64::MAX };
}

impl Default for OutlineOptions {
    fn default() -> Self {
        OutlineOptions { copies_states: 1 << 15, min_states: 64 }
    }
}

/// An upper estimate of the states of the Thompson NFA regex-automata builds for `hir`: the
/// bytes of a class's UTF-8 sequences, a state per literal byte, a copy of the operand per
/// count of a repetition. regex-automata shares the sequences' suffixes, so a JSON string's
/// character estimates ~3 times its states and Unicode `\d` ~10 times (the thresholds were
/// set with this count: ~11 bytes of NFA per estimated state over the JSONSchemaBench
/// regexes). Saturates instead of overflowing.
pub fn estimated_nfa_states(hir: &Hir) -> u64 {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 1,
        HirKind::Literal(literal) => literal.0.len() as u64,
        HirKind::Class(class) => class_states(class),
        HirKind::Capture(capture) => estimated_nfa_states(&capture.sub),
        HirKind::Repetition(repetition) => copies(repetition).saturating_mul(estimated_nfa_states(&repetition.sub)) + 1,
        HirKind::Concat(subs) => subs.iter().map(estimated_nfa_states).fold(0, u64::saturating_add),
        HirKind::Alternation(subs) => {
            subs.iter().map(estimated_nfa_states).fold(subs.len() as u64, u64::saturating_add)
        }
    }
}

fn class_states(class: &Class) -> u64 {
    match class {
        Class::Bytes(bytes) => bytes.ranges().len() as u64 + 1,
        Class::Unicode(unicode) => {
            let sequences = unicode.ranges().iter().flat_map(|r| Utf8Sequences::new(r.start(), r.end()));
            sequences.map(|s| s.len() as u64).sum::<u64>() + 1
        }
    }
}

/// How many copies of its operand a repetition's NFA holds: its maximum, or for `{m,}` its
/// minimum and the loop.
fn copies(repetition: &Repetition) -> u64 {
    match repetition.max {
        Some(max) => u64::from(max.max(1)),
        None => u64::from(repetition.min) + 1,
    }
}

/// Whether every string of `hir` is one character (a class, or an alternation of them): such an
/// operand is never outlined (see the module docs).
fn is_one_character(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Class(_) => true,
        HirKind::Literal(literal) => std::str::from_utf8(&literal.0).is_ok_and(|s| s.chars().count() == 1),
        HirKind::Capture(capture) => is_one_character(&capture.sub),
        HirKind::Alternation(subs) => subs.iter().all(is_one_character),
        _ => false,
    }
}

/// Each rule's name and regex, as `crate::grammar::lower::RuleRegexes::rules` (`None`: no string).
pub type RuleRegexes = Vec<(String, Option<String>)>;

/// `hir` as rules of a pushdown automaton (rule 0 the whole regex; regexes with call markers,
/// compiled with markers allowed), large repeated operands outlined (see the module docs);
/// `None` when nothing qualifies. More than [`MAX_RULES_CALLED`] rules is a `LimitExceeded`.
pub fn outline(hir: &Hir, options: OutlineOptions) -> Result<Option<RuleRegexes>> {
    if estimated_nfa_states(hir) < options.copies_states {
        return Ok(None);
    }
    let mut outliner = Outliner::new(options, vec![("regex".into(), None)]);
    let (root, _) = outliner.rewrite(hir)?;
    if outliner.calls == 0 {
        return Ok(None);
    }
    outliner.rules[0].1 = Some(root.to_string());
    Ok(Some(outliner.rules))
}

/// What [`outline_rules`] made of a pushdown automaton's rules.
#[derive(Debug, Default)]
pub struct OutlinedRules {
    /// The rules with operands outlined; `None` when nothing qualified.
    pub rules: Option<RuleRegexes>,
    /// Per given rule, its translated regex when it was parsed and left as it was: building its
    /// automaton from this spares a second parse (a third of a JSON schema's compile).
    pub parsed: Vec<Option<Hir>>,
}

/// A pushdown automaton's `rules` (a grammar's, or a JSON Schema's with `$ref` recursion as
/// calls) with each rule's large repeated operands outlined as [`outline`] does for a regex,
/// the new rules numbered after the given ones. Rules for which `built` holds (their automaton
/// exists already: the same rules compiled before) are left as they are, unparsed.
pub fn outline_rules(
    rules: &[(String, Option<String>)],
    options: OutlineOptions,
    built: impl Fn(&str) -> bool,
) -> Result<OutlinedRules> {
    // Made (the rules copied) only for a rule large enough to outline: most grammars have none.
    let mut outliner: Option<Outliner> = None;
    let mut parsed: Vec<Option<Hir>> = Vec::with_capacity(rules.len());
    for (i, (_, regex)) in rules.iter().enumerate() {
        parsed.push(None);
        let Some(regex) = regex.as_deref().filter(|r| !built(r)) else { continue };
        let hir = translate(regex, false)?;
        if estimated_nfa_states(&hir) < options.copies_states {
            parsed[i] = Some(hir);
            continue;
        }
        let outliner = outliner.get_or_insert_with(|| Outliner::new(options, rules.to_vec()));
        let calls = outliner.calls;
        let (root, _) = outliner.rewrite(&hir)?;
        if outliner.calls > calls {
            outliner.rules[i].1 = Some(root.to_string());
        } else {
            parsed[i] = Some(hir);
        }
    }
    Ok(OutlinedRules { rules: outliner.filter(|o| o.calls > 0).map(|o| o.rules), parsed })
}

struct Outliner {
    options: OutlineOptions,
    /// Rules by id: the given ones (or the root, written last), then the outlined operands.
    rules: RuleRegexes,
    /// Rule ids of outlined operands by regex, so equal operands share a rule.
    ids: FxHashMap<String, usize>,
    /// Operands replaced by calls so far.
    calls: usize,
}

impl Outliner {
    fn new(options: OutlineOptions, rules: RuleRegexes) -> Outliner {
        Outliner { options, rules, ids: FxHashMap::default(), calls: 0 }
    }

    /// `hir` with its large repeated operands replaced by calls, and its estimated states (as
    /// [`estimated_nfa_states`], from the operands' estimates).
    fn rewrite(&mut self, hir: &Hir) -> Result<(Hir, u64)> {
        let (rewritten, states) = self.rewrite_changed(hir)?;
        Ok((rewritten.unwrap_or_else(|| hir.clone()), states))
    }

    /// [`Outliner::rewrite`], with `None` for a sub-expression left as it is: only the path
    /// from the root to each outlined operand (and each capture group, which rewriting drops)
    /// is rebuilt. Rebuilding and dropping every node was four fifths of the compile time of
    /// 40 recursive JSONSchemaBench schemas together (mostly the large ones), most of it deep
    /// clones of repetition operands.
    fn rewrite_changed(&mut self, hir: &Hir) -> Result<(Option<Hir>, u64)> {
        Ok(match hir.kind() {
            HirKind::Empty | HirKind::Look(_) | HirKind::Literal(_) | HirKind::Class(_) => {
                (None, estimated_nfa_states(hir))
            }
            HirKind::Capture(capture) => {
                let (sub, states) = self.rewrite_changed(&capture.sub)?;
                (Some(sub.unwrap_or_else(|| (*capture.sub).clone())), states)
            }
            HirKind::Concat(subs) => {
                let (subs, states) = self.rewrite_all(subs)?;
                (subs.map(Hir::concat), states)
            }
            HirKind::Alternation(subs) => {
                let branches = subs.len() as u64;
                let (subs, states) = self.rewrite_all(subs)?;
                (subs.map(Hir::alternation), states.saturating_add(branches))
            }
            HirKind::Repetition(repetition) => {
                let (mut sub, mut states) = self.rewrite_changed(&repetition.sub)?;
                let operand = sub.as_ref().unwrap_or(&repetition.sub);
                // An anchor or word boundary looks at the text around it, which a rule of its
                // own would not see: such operands stay inline.
                let outlined = states >= self.options.min_states
                    && copies(repetition).saturating_mul(states) >= self.options.copies_states
                    && !is_one_character(operand)
                    && operand.properties().look_set().is_empty();
                if outlined {
                    let marker = call_marker(self.rule(operand.to_string())?);
                    self.calls += 1;
                    states = marker.len() as u64;
                    sub = Some(Hir::literal(marker));
                }
                let states = copies(repetition).saturating_mul(states) + 1;
                let rebuilt = sub.map(|sub| {
                    let Repetition { min, max, greedy, .. } = *repetition;
                    Hir::repetition(Repetition { min, max, greedy, sub: Box::new(sub) })
                });
                (rebuilt, states)
            }
        })
    }

    /// Each of `subs` rewritten (`None` when none changed), and their estimates' sum.
    fn rewrite_all(&mut self, subs: &[Hir]) -> Result<(Option<Vec<Hir>>, u64)> {
        let mut states = 0u64;
        let mut changed: Vec<Option<Hir>> = Vec::with_capacity(subs.len());
        for sub in subs {
            let (sub, n) = self.rewrite_changed(sub)?;
            states = states.saturating_add(n);
            changed.push(sub);
        }
        if changed.iter().all(Option::is_none) {
            return Ok((None, states));
        }
        let rewritten = changed.into_iter().zip(subs).map(|(new, old)| new.unwrap_or_else(|| old.clone())).collect();
        Ok((Some(rewritten), states))
    }

    /// The id of the rule whose regex is `regex`, added if new.
    fn rule(&mut self, regex: String) -> Result<usize> {
        if let Some(&id) = self.ids.get(&regex) {
            return Ok(id);
        }
        let id = self.rules.len();
        if id >= MAX_RULES_CALLED {
            return Err(Error::LimitExceeded {
                limit: "outlined sub-expressions of a regex",
                value: MAX_RULES_CALLED.to_string(),
                what: "the regex repeats more distinct large sub-expressions than calls can name".into(),
            });
        }
        self.ids.insert(regex.clone(), id);
        self.rules.push((format!("outlined_{id}"), Some(regex)));
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex::syntax::{parse_regex, thompson_nfa};

    #[test]
    fn the_estimate_tracks_the_thompson_nfa() {
        for pattern in [
            r#"\{"a": "([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt]){0,100}"\}"#,
            r#"\[(\{"id": [0-9]{1,3}, "ok": (true|false)\}(, \{"id": [0-9]{1,3}, "ok": (true|false)\}){0,40})?\]"#,
            r"(ab|cd){3,7}[a-zé中]{2,}x?",
            r"\d{4}-\d{2}-\d{2}",
        ] {
            let hir = parse_regex(pattern).unwrap();
            let (estimate, states) =
                (estimated_nfa_states(&hir), thompson_nfa(&hir, 1 << 20).unwrap().states().len() as u64);
            assert!(states <= estimate && estimate <= 12 * states, "{pattern}: estimate {estimate}, NFA {states}");
        }
    }

    #[test]
    fn equal_operands_share_a_rule_and_characters_stay_inline() {
        let item = r#"\{"a": "[^"]{0,50}"\}, "#;
        let hir = parse_regex(&format!("({item}){{0,999}}x({item}){{0,999}}")).unwrap();
        let rules = outline(&hir, OutlineOptions::default()).unwrap().expect("the items are outlined");
        assert_eq!(rules.len(), 2, "{rules:?}");
        let (root, item_rule) = (rules[0].1.as_deref().unwrap(), rules[1].1.as_deref().unwrap());
        assert_eq!(root.matches(r"(?-u:\xFE)(?-u:\x80)(?-u:\x81)").count(), 2, "{root}");
        assert!(item_rule.contains("{0,50}") && !item_rule.contains(r"\xFE"), "{item_rule}");
        // One character repeated, however often, is the slices' business.
        let string = parse_regex(r#""([^"\\]|\\["\\/bfnrt]){0,100000}""#).unwrap();
        assert!(estimated_nfa_states(&string) > 1_000_000);
        assert_eq!(outline(&string, OutlineOptions::default()).unwrap(), None);
        // Look-around stays where it can see the text around it.
        let bounded = parse_regex(r"(a?\bb){2}").unwrap();
        assert_eq!(outline(&bounded, OutlineOptions::EVERY).unwrap(), None);
        // Small copies stay inline unless asked.
        let small = parse_regex(r"(ab){2}").unwrap();
        assert_eq!(outline(&small, OutlineOptions::default()).unwrap(), None);
        assert_eq!(outline(&small, OutlineOptions::EVERY).unwrap().map(|r| r.len()), Some(2));
    }

    #[test]
    fn rules_are_outlined_after_the_given_ones_sharing_operands() {
        let item = r#"(\{"a": "[^"]{0,50}"\}, ){0,999}"#;
        let rules: RuleRegexes = vec![
            ("root".into(), Some(format!(r"{item}(?-u:\xFE\x80\x81)"))),
            ("value".into(), Some(format!("x{item}"))),
            ("none".into(), None),
        ];
        let outlined = outline_rules(&rules, OutlineOptions::default(), |_| false).unwrap();
        let out = outlined.rules.expect("outlined");
        // Both given regexes were rewritten: no parse of theirs may stand for their new text.
        assert!(outlined.parsed.iter().all(Option::is_none), "{:?}", outlined.parsed);
        assert_eq!(out.len(), 4, "{out:?}");
        assert_eq!(out[2], rules[2]);
        let call = r"(?-u:\xFE)(?-u:\x80)(?-u:\x83)";
        assert!(out[0].1.as_deref().unwrap().contains(call) && out[1].1.as_deref().unwrap().contains(call), "{out:?}");
        assert!(out[0].1.as_deref().unwrap().contains(r"(?-u:\x81)"), "the given call stays");
        let small = [("small".to_string(), Some("ab*".to_string())), rules[2].clone()];
        let kept = outline_rules(&small, OutlineOptions::default(), |_| false).unwrap();
        assert_eq!(kept.rules, None);
        assert_eq!(kept.parsed, vec![Some(translate("ab*", false).unwrap()), None]);
        let built = outline_rules(&small, OutlineOptions::default(), |_| true).unwrap();
        assert_eq!(built.parsed, vec![None, None], "a rule built before is not parsed");
    }

    #[test]
    fn too_many_distinct_operands_are_refused_by_name() {
        let pattern: String = (0..MAX_RULES_CALLED).map(|i| format!("(k{i}x)*")).collect();
        match outline(&parse_regex(&pattern).unwrap(), OutlineOptions::EVERY) {
            Err(Error::LimitExceeded { limit, .. }) => assert_eq!(limit, "outlined sub-expressions of a regex"),
            other => panic!("{:?}", other.map(|r| r.map(|r| r.len()))),
        }
    }
}
