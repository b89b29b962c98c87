//! Tests of the piece machine against an independent backtracking `find_iter`.
//!
//! The reference ([`Re`], [`find_iter`]) parses the pattern's structure itself (alternation,
//! groups, quantifiers, look-ahead, `$`, `\z`) and matches by plain backtracking, the way
//! Oniguruma does; only single atoms (`\p{L}`, `[^\s]`, `é` under `(?i)`) are turned into
//! character sets by `regex-syntax`, for its Unicode tables.

use super::*;
use crate::util::random::SplitMix64;

// ---------------------------------------------------------------- reference implementation

#[derive(Debug)]
enum Re {
    Alt(Vec<Re>),
    Cat(Vec<Re>),
    Rep {
        sub: Box<Re>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    Set(Vec<(char, char)>),
    /// Look-ahead with an arbitrary body; `true` = negative.
    Look(bool, Box<Re>),
    /// Oniguruma `$`: end of subject or before `\n`.
    Eol,
    /// `\z`.
    EndZ,
}

struct Parser {
    c: Vec<char>,
    i: usize,
    ci: bool,
}

impl Parser {
    fn parse(pattern: &str) -> Re {
        let mut p = Parser { c: pattern.chars().collect(), i: 0, ci: false };
        let re = p.alt();
        assert_eq!(p.i, p.c.len(), "trailing input in {pattern:?}");
        re
    }

    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn eat(&mut self, s: &str) -> bool {
        let s: Vec<char> = s.chars().collect();
        if self.c[self.i..].starts_with(&s) {
            self.i += s.len();
            true
        } else {
            false
        }
    }

    fn alt(&mut self) -> Re {
        let mut alts = vec![self.cat()];
        while self.eat("|") {
            alts.push(self.cat());
        }
        if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Re::Alt(alts)
        }
    }

    fn cat(&mut self) -> Re {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom();
            items.push(self.quantified(atom));
        }
        Re::Cat(items)
    }

    fn group(&mut self) -> Re {
        let r = self.alt();
        assert!(self.eat(")"));
        r
    }

    fn atom(&mut self) -> Re {
        if self.eat("(?:") {
            return self.group();
        }
        if self.eat("(?i:") {
            let outer = std::mem::replace(&mut self.ci, true);
            let r = self.group();
            self.ci = outer;
            return r;
        }
        if self.eat("(?!") {
            return Re::Look(true, Box::new(self.group()));
        }
        if self.eat("(?=") {
            return Re::Look(false, Box::new(self.group()));
        }
        if self.eat("(") {
            return self.group();
        }
        if self.eat("$") {
            return Re::Eol;
        }
        if self.eat("\\z") {
            return Re::EndZ;
        }
        let start = self.i;
        match self.c[self.i] {
            '[' => {
                let mut depth = 0;
                loop {
                    match self.c[self.i] {
                        '\\' => self.i += 1,
                        '[' => depth += 1,
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
                self.i += 1;
            }
            '\\' if matches!(self.c[self.i + 1], 'p' | 'P') && self.c[self.i + 2] == '{' => {
                while self.c[self.i] != '}' {
                    self.i += 1;
                }
                self.i += 1;
            }
            '\\' => self.i += 2,
            _ => self.i += 1,
        }
        let text: String = self.c[start..self.i].iter().collect();
        Re::Set(atom_set(&text, self.ci))
    }

    fn number(&mut self) -> u32 {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.c[start..self.i].iter().collect::<String>().parse().unwrap()
    }

    fn quantified(&mut self, atom: Re) -> Re {
        let (min, max) = if self.eat("*") {
            (0, None)
        } else if self.eat("+") {
            (1, None)
        } else if self.eat("?") {
            (0, Some(1))
        } else if self.eat("{") {
            let min = self.number();
            let max = if self.eat(",") {
                if self.peek() == Some('}') {
                    None
                } else {
                    Some(self.number())
                }
            } else {
                Some(min)
            };
            assert!(self.eat("}"));
            (min, max)
        } else {
            return atom;
        };
        let greedy = !self.eat("?");
        Re::Rep { sub: Box::new(atom), min, max, greedy }
    }
}

/// The character set of one atom, via regex-syntax's Unicode tables.
fn atom_set(atom: &str, ci: bool) -> Vec<(char, char)> {
    let text = if ci { format!("(?i:{atom})") } else { atom.to_string() };
    let hir = regex_syntax::Parser::new().parse(&text).unwrap();
    match hir.kind() {
        regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => {
            c.ranges().iter().map(|r| (r.start(), r.end())).collect()
        }
        regex_syntax::hir::HirKind::Literal(l) => {
            let c = std::str::from_utf8(&l.0).unwrap().chars().next().unwrap();
            vec![(c, c)]
        }
        k => panic!("atom {atom:?}: {k:?}"),
    }
}

/// Backtracking: calls `k` with each end of a match of `re` at `i`, in priority order, until
/// `k` accepts.
fn bt(re: &Re, s: &[char], i: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    match re {
        Re::Set(set) => i < s.len() && set.iter().any(|&(a, b)| a <= s[i] && s[i] <= b) && k(i + 1),
        Re::Alt(alts) => alts.iter().any(|a| bt(a, s, i, k)),
        Re::Cat(items) => cat(items, s, i, k),
        Re::Rep { sub, min, max, greedy } => rep(sub, *min, *max, *greedy, 0, s, i, k),
        Re::Look(negated, body) => (bt(body, s, i, &mut |_| true) != *negated) && k(i),
        Re::Eol => (i == s.len() || s[i] == '\n') && k(i),
        Re::EndZ => i == s.len() && k(i),
    }
}

fn cat(items: &[Re], s: &[char], i: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
    match items.split_first() {
        None => k(i),
        Some((first, rest)) => bt(first, s, i, &mut |j| cat(rest, s, j, k)),
    }
}

#[allow(clippy::too_many_arguments)]
fn rep(
    sub: &Re,
    min: u32,
    max: Option<u32>,
    greedy: bool,
    n: u32,
    s: &[char],
    i: usize,
    k: &mut dyn FnMut(usize) -> bool,
) -> bool {
    if n < min {
        return bt(sub, s, i, &mut |j| rep(sub, min, max, greedy, n + 1, s, j, k));
    }
    if max == Some(n) {
        return k(i);
    }
    let more =
        |k: &mut dyn FnMut(usize) -> bool| bt(sub, s, i, &mut |j| j != i && rep(sub, min, max, greedy, n + 1, s, j, k));
    // The order of the two alternatives is the point: `||` short-circuits.
    #[allow(clippy::if_same_then_else)]
    if greedy {
        more(k) || k(i)
    } else {
        k(i) || more(k)
    }
}

/// Oniguruma `find_iter` + HF `Isolated`: the pieces (char ranges) of one subject.
fn find_iter(re: &Re, s: &[char]) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut pos = 0;
    while pos < s.len() {
        let found = (pos..s.len()).find_map(|start| {
            let mut end = None;
            let matched = bt(re, s, start, &mut |j| {
                end = Some(j);
                true
            });
            matched.then(|| (start, end.unwrap()))
        });
        let Some((start, end)) = found else {
            pieces.push((pos, s.len()));
            break;
        };
        assert!(end > start, "empty match");
        if start > pos {
            pieces.push((pos, start));
        }
        pieces.push((start, end));
        pos = end;
    }
    pieces
}

/// All stages in sequence: the reference pieces of `text`.
fn reference_split(res: &[Re], text: &str) -> Vec<String> {
    let mut pieces: Vec<Vec<char>> = if text.is_empty() { vec![] } else { vec![text.chars().collect()] };
    for re in res {
        pieces = pieces
            .iter()
            .flat_map(|p| find_iter(re, p).into_iter().map(|(a, b)| p[a..b].to_vec()).collect::<Vec<_>>())
            .collect();
    }
    pieces.into_iter().map(|p| p.into_iter().collect()).collect()
}

// ---------------------------------------------------------------- patterns

const GPT2: &[&str] = &[r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"];
const LLAMA3: &[&str] = &[
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
const QWEN2: &[&str] = &[
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
const O200K: &[&str] = &[
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
const DEEPSEEK_V3: &[&str] = &[
    "\\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\u{d}\u{a}\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\u{d}\u{a}]*|\\s*[\u{d}\u{a}]+|\\s+(?!\\S)|\\s+",
];
const DEEPSEEK_LLM: &[&str] = &[
    "[\u{d}\u{a}]",
    "\\s?[A-Za-z\u{b5}\u{c0}-\u{d6}\u{d8}-\u{f6}\u{f8}-\u{1ba}\u{1bc}-\u{1bf}\u{1c4}-\u{293}\u{295}-\u{2af}\u{370}-\u{373}\u{376}\u{377}\u{37b}-\u{37d}\u{37f}\u{386}\u{388}-\u{38a}\u{38c}\u{38e}-\u{3a1}\u{3a3}-\u{3f5}\u{3f7}-\u{481}\u{48a}-\u{52f}\u{531}-\u{556}\u{10a0}-\u{10c5}\u{13a0}-\u{13f5}\u{13f8}-\u{13fd}\u{1c90}-\u{1cba}\u{1cbd}-\u{1cbf}\u{1d00}-\u{1d2b}\u{1d6b}-\u{1d77}\u{1d79}-\u{1d9a}\u{1e00}-\u{1f15}\u{1f18}-\u{1f1d}\u{1f20}-\u{1f45}\u{1f48}-\u{1f4d}\u{1f50}-\u{1f57}\u{1f59}\u{1f5b}\u{1f5d}\u{1f5f}-\u{1f7d}\u{1f80}-\u{1fb4}\u{1fb6}-\u{1fbc}\u{1fbe}\u{1fc2}-\u{1fc4}\u{1fc6}-\u{1fcc}\u{1fd0}-\u{1fd3}\u{1fd6}-\u{1fdb}\u{1fe0}-\u{1fec}\u{1ff2}-\u{1ff4}\u{1ff6}-\u{1ffc}\u{2102}\u{2107}\u{210a}-\u{2113}\u{2115}\u{2119}-\u{211d}\u{2124}\u{2126}\u{2128}\u{212a}-\u{212d}\u{212f}-\u{2134}\u{2139}\u{213c}-\u{213f}\u{2145}-\u{2149}\u{214e}\u{2183}\u{2184}\u{2c00}-\u{2c7b}\u{2c7e}-\u{2ce4}\u{2ceb}-\u{2cee}\u{2cf2}\u{2cf3}\u{a640}-\u{a66d}\u{a680}-\u{a69b}\u{a722}-\u{a76f}\u{a771}-\u{a787}\u{a78b}-\u{a78e}\u{ab70}-\u{abbf}\u{fb00}-\u{fb06}\u{fb13}-\u{fb17}\u{ff21}-\u{ff3a}\u{ff41}-\u{ff5a}\u{10400}-\u{1044f}\u{104b0}-\u{104d3}\u{104d8}-\u{104fb}\u{10c80}-\u{10cb2}\u{10cc0}-\u{10cf2}\u{118a0}-\u{118df}\u{1e900}-\u{1e943}]+",
    "\\s?[!-/:-~\u{ff01}-\u{ff0f}\u{ff1a}-\u{ff5e}\u{2018}-\u{201f}\u{3000}-\u{3002}]+",
    "\\s+$",
    "[\u{4e00}-\u{9fa5}\u{800}-\u{4e00}\u{ac00}-\u{d7ff}]+",
    "\\p{N}+",
];
const DEEPSEEK_CODER: &[&str] =
    &["[\u{d}\u{a}]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u{4e00}-\u{9fa5}\u{800}-\u{4e00}\u{ac00}-\u{d7ff}]+", "\\p{N}"];
/// ByteLevel(use_regex) after Digits(individual_digits=true) (StarCoder2, Refact, Command-R).
const STARCODER2: &[&str] = &[r"\p{N}", GPT2[0]];
/// Falcon without its Punctuation stage.
const FALCON: &[&str] = &[GPT2[0], r"\p{N}+", r"[0-9][0-9][0-9]"];
/// Small patterns exercising lazy repetition, `$`, `\z`, positive look-ahead, gaps.
const SMALL: &[&[&str]] = &[
    &[r"a+?b|a"],
    &[r"\s+$"],
    &[r"x\z|x"],
    &[r"a(?=b)|b+"],
    &[r"(?:ab|a)(?:bc|b)?"],
    &[r"\p{N}{1,3}?x|\p{N}"],
    &[r"[\r\n]", r"\s?[a-z]+", r"\s+$"],
    &[r"(?i:'s|'ll)|\S+"],
];

fn all_specs() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut v: Vec<(&str, Vec<&str>)> = vec![
        ("gpt2", GPT2.to_vec()),
        ("llama3", LLAMA3.to_vec()),
        ("qwen2", QWEN2.to_vec()),
        ("o200k", O200K.to_vec()),
        ("deepseek-v3", DEEPSEEK_V3.to_vec()),
        ("deepseek-llm", DEEPSEEK_LLM.to_vec()),
        ("deepseek-coder", DEEPSEEK_CODER.to_vec()),
        ("starcoder2", STARCODER2.to_vec()),
        ("falcon", FALCON.to_vec()),
    ];
    v.extend(SMALL.iter().map(|s| ("small", s.to_vec())));
    v
}

fn machine(stages: &[&str]) -> PieceMachine {
    let spec = PieceMachineSpec {
        stages: stages.iter().map(|s| s.to_string()).collect(),
        allowed_chars: None,
        added: Vec::new(),
    };
    PieceMachine::new(&spec, 1_000_000).unwrap()
}

const ALPHABET: &[&str] = &[
    " ", " ", " ", "\n", "\r", "\t", "a", "b", "B", "x", "é", "ß", "中", "ア", "가", "1", "2", "٣", "'", "'s", "'ll",
    "'T", "s", "S", "d", "e", ".", "/", "!", "😀", "\u{301}", "ab", "0", "ſ",
    // Ideographic space (white space, and punctuation for DeepSeek LLM), fullwidth and curly
    // punctuation, µ (DeepSeek LLM's letter list), no-break space, title case, modifier letter.
    "\u{3000}", "！", "‘", "µ", "\u{a0}", "ǅ", "ʰ",
];

fn random_text(rng: &mut SplitMix64, max_atoms: usize) -> String {
    let n = rng.below(max_atoms + 1);
    (0..n).map(|_| ALPHABET[rng.below(ALPHABET.len())]).collect()
}

// ---------------------------------------------------------------- tests

#[test]
fn piece_machine_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<PieceMachine>();
}

#[test]
fn piece_machine_hand_checked() {
    let mut gpt2 = machine(GPT2);
    assert_eq!(gpt2.split("Hello  world").unwrap(), ["Hello", " ", " world"]);
    assert_eq!(gpt2.split("don't").unwrap(), ["don", "'t"]);
    assert_eq!(gpt2.split("x   ").unwrap(), ["x", "   "]);
    assert_eq!(gpt2.split("   x").unwrap(), ["  ", " x"]);
    assert_eq!(gpt2.split("").unwrap(), Vec::<String>::new());
    let mut llama = machine(LLAMA3);
    assert_eq!(llama.split("1234567").unwrap(), ["123", "456", "7"]);
    assert_eq!(llama.split("a\n\n b").unwrap(), ["a", "\n\n", " b"]);
    assert_eq!(llama.split("don't").unwrap(), ["don", "'t"]);
    assert_eq!(llama.split("DON'T").unwrap(), ["DON", "'T"]);
    assert_eq!(llama.split("x   ").unwrap(), ["x", "   "]);
    assert_eq!(llama.split("x  \ny").unwrap(), ["x", "  \n", "y"]);
    let mut v3 = machine(DEEPSEEK_V3);
    // Digits are cut by stage 0 in threes, CJK by stage 1; the gap between them stays whole.
    assert_eq!(v3.split("12345中文ab").unwrap(), ["123", "45", "中文", "ab"]);
    let marks = v3.split_marks("12345中文ab").unwrap();
    assert_eq!(marks, [(3, 0), (5, 0), (11, 1)]);
}

/// Brute force: the machine's unique accepted marking is the reference split, for every
/// pattern list; every perturbed marking is rejected.
#[test]
fn piece_machine_matches_reference_find_iter() {
    let mut rng = SplitMix64::new(7);
    for (name, stages) in all_specs() {
        let res: Vec<Re> = stages.iter().map(|p| Parser::parse(p)).collect();
        let mut m = machine(&stages);
        for _ in 0..4000 {
            let text = random_text(&mut rng, 12);
            let want = reference_split(&res, &text);
            let got = m.split(&text).unwrap_or_else(|e| panic!("{name} {text:?}: {e}"));
            assert_eq!(got, want, "{name}: {text:?}");
            check_perturbations(&mut m, &res, &text, &mut rng, name);
        }
        eprintln!("{name}: {} states, {} classes", m.num_states(), m.num_char_classes());
    }
}

/// Every non-empty text of at most `len` characters over `alphabet`.
fn texts_up_to(alphabet: &[char], len: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut texts = vec![String::new()];
    for _ in 0..len {
        texts = texts.iter().flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}"))).collect();
        all.extend(texts.iter().cloned());
    }
    all
}

/// Every marking of `text`'s character boundaries with one of `k - 1` stages (or none) is
/// tried: exactly `right` is accepted.
fn assert_only_marking_accepted(
    m: &mut PieceMachine,
    k: usize,
    text: &str,
    right: &[(usize, usize)],
    what: &dyn std::fmt::Debug,
) {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
    let mut accepted = 0;
    for code in 0..k.pow(bounds.len() as u32) {
        let mut marks = Vec::new();
        let mut c = code;
        for &b in &bounds {
            if c % k > 0 {
                marks.push((b, c % k - 1));
            }
            c /= k;
        }
        let ok = m.accepts_marked(text, &marks).unwrap();
        assert_eq!(ok, marks == right, "{what:?} {text:?} {marks:?}, right: {right:?}");
        accepted += ok as usize;
    }
    assert_eq!(accepted, 1);
}

/// The correct marks of `text` with their kinds, from the reference.
fn reference_marks(res: &[Re], text: &str) -> Vec<(usize, usize)> {
    let mut marks: Vec<(usize, usize)> = Vec::new();
    for j in 0..res.len() {
        let mut pos = 0;
        for p in reference_split(&res[..=j], text) {
            if pos > 0 && !marks.iter().any(|m| m.0 == pos) {
                marks.push((pos, j));
            }
            pos += p.len();
        }
    }
    marks.sort_unstable();
    marks
}

fn check_perturbations(m: &mut PieceMachine, res: &[Re], text: &str, rng: &mut SplitMix64, name: &str) {
    let marks = reference_marks(res, text);
    assert!(m.accepts_marked(text, &marks).unwrap(), "{name} {text:?} {marks:?}");
    assert_eq!(m.split_marks(text).unwrap(), marks, "{name} {text:?}");
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect();
    let stages = m.num_stages();
    let mut wrong: Vec<Vec<(usize, usize)>> = Vec::new();
    for i in 0..marks.len() {
        let mut w = marks.clone();
        w.remove(i);
        wrong.push(w.clone());
        // Moved by one character either way.
        let k = bounds.iter().position(|&b| b == marks[i].0).unwrap();
        for nb in [k.wrapping_sub(1), k + 1] {
            if let Some(&b) = bounds.get(nb) {
                if !marks.iter().any(|x| x.0 == b) {
                    let mut w2 = w.clone();
                    w2.push((b, marks[i].1));
                    w2.sort_unstable();
                    wrong.push(w2);
                }
            }
        }
        if stages > 1 {
            let mut w3 = marks.clone();
            w3[i].1 = (marks[i].1 + 1 + rng.below(stages - 1)) % stages;
            wrong.push(w3);
        }
    }
    for &b in &bounds {
        if !marks.iter().any(|x| x.0 == b) && rng.one_in(2) {
            let mut w = marks.clone();
            w.push((b, rng.below(stages)));
            w.sort_unstable();
            wrong.push(w);
        }
    }
    for w in wrong {
        assert!(!m.accepts_marked(text, &w).unwrap(), "{name} {text:?}: wrong marks {w:?} accepted (right: {marks:?})");
    }
}

#[test]
fn piece_machine_rejects_bad_bytes_and_disallowed_chars() {
    let spec = PieceMachineSpec {
        stages: vec![GPT2[0].to_string()],
        allowed_chars: Some(vec![('a', 'z'), (' ', ' '), ('é', 'é')]),
        added: Vec::new(),
    };
    let mut m = PieceMachine::new(&spec, 10_000).unwrap();
    assert_eq!(m.split("ab é").unwrap(), ["ab", " é"]);
    assert!(m.split("aB").is_err());
    let s = m.start();
    // Overlong, surrogate, lone continuation, truncated sequence.
    for bad in [&[0xC0u8, 0x80][..], &[0xED, 0xA0, 0x80], &[0x80], &[0xF4, 0x90, 0x80, 0x80]] {
        let mut t = s;
        for &b in bad {
            t = m.byte(t, b).unwrap();
        }
        assert_eq!(t, DEAD, "{bad:?}");
    }
    let t = m.byte(s, 0xC3).unwrap();
    assert_ne!(t, DEAD);
    assert!(!m.accepts_end(t).unwrap());
    assert_eq!(m.mark(t, 0).unwrap(), DEAD);
    assert!(m.mark(s, 1).is_err());
}

#[test]
fn piece_machine_marks_are_positioned_strictly() {
    let mut m = machine(GPT2);
    let s = m.start();
    assert!(m.accepts_end(s).unwrap());
    assert_eq!(m.mark(s, 0).unwrap(), DEAD, "no mark at position 0");
    let a = m.byte(s, b'a').unwrap();
    let am = m.mark(a, 0).unwrap();
    assert_ne!(am, DEAD);
    assert_eq!(m.mark(am, 0).unwrap(), DEAD, "no two marks at one position");
    assert!(!m.accepts_end(am).unwrap(), "no mark at the end");
    assert!(m.accepts_marked("a b", &[(1, 0)]).unwrap());
    assert!(!m.accepts_marked("a b", &[(2, 0)]).unwrap());
}

#[test]
fn piece_machine_state_limit() {
    let spec = PieceMachineSpec { stages: vec![LLAMA3[0].to_string()], allowed_chars: None, added: Vec::new() };
    let mut m = PieceMachine::new(&spec, 5).unwrap();
    match m.split("Hello, world! 123 don't") {
        Err(Error::LimitExceeded { limit, .. }) => assert_eq!(limit, "max_pre_tokenizer_states"),
        other => panic!("{other:?}"),
    }
}

/// Exhaustive over short texts: of all markings (every boundary unmarked or of any kind), the
/// machine accepts exactly the reference one.
#[test]
fn piece_machine_exhaustive_markings() {
    let cases: &[(&[&str], &[char])] = &[
        (GPT2, &[' ', 'a', 's', '\'', '\n']),
        (LLAMA3, &[' ', 'a', '1', '\'', '\n']),
        (O200K, &['a', 'B', '\'', 's', ' ']),
        (DEEPSEEK_V3, &['1', '中', 'a', ' ', '.']),
        (DEEPSEEK_LLM, &['1', '中', 'a', ' ', '\n']),
        (SMALL[0], &['a', 'b', 'c']),
        (SMALL[3], &['a', 'b', 'c']),
        (SMALL[6], &['a', ' ', '\n', '.']),
    ];
    for &(stages, alphabet) in cases {
        let res: Vec<Re> = stages.iter().map(|p| Parser::parse(p)).collect();
        let mut m = machine(stages);
        let k = m.num_stages() + 1;
        for text in &texts_up_to(alphabet, 5) {
            assert_only_marking_accepted(&mut m, k, text, &reference_marks(&res, text), &stages);
        }
    }
}

#[test]
fn piece_machine_without_stages_keeps_the_text_whole() {
    let mut m = machine(&[]);
    assert_eq!(m.split("a b\n").unwrap(), ["a b\n"]);
    assert!(m.accepts_end(m.start()).unwrap());
}

/// How big the whole reachable machine is (all bytes, all marks) for the real pre-tokenizers.
/// Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn piece_machine_full_exploration_sizes() {
    for (name, stages) in all_specs().into_iter().filter(|s| s.0 != "small") {
        let t0 = std::time::Instant::now();
        let mut m = machine(&stages);
        let mut todo = vec![m.start()];
        let mut seen = rustc_hash::FxHashSet::default();
        seen.insert(m.start());
        let mut transitions = 0usize;
        while let Some(s) = todo.pop() {
            let mut next = Vec::new();
            for b in 0..=255u8 {
                next.push(m.byte(s, b).unwrap());
            }
            for k in 0..m.num_stages() {
                next.push(m.mark(s, k).unwrap());
            }
            for t in next.into_iter().filter(|&t| t != DEAD) {
                transitions += 1;
                if seen.insert(t) {
                    todo.push(t);
                }
            }
        }
        let stage_states: Vec<usize> = m.stages.iter().map(|s| s.states.len()).collect();
        eprintln!(
            "{name}: {} states ({} at character boundaries), {transitions} live transitions, stage states {stage_states:?}, {} classes, {:?}",
            m.num_states(),
            m.states.iter().filter(|s| s.partial == NO_PARTIAL).count(),
            m.num_char_classes(),
            t0.elapsed()
        );
    }
}

// ---------------------------------------------------------------- added tokens (final stage 0)

/// A machine whose stage 0 splits out `added` (final) before `later`.
fn added_machine(added: &[&str], later: &[&str]) -> PieceMachine {
    let added: Vec<String> = added.iter().map(|s| s.to_string()).collect();
    let mut stages = vec![added_tokens_pattern(&added)];
    stages.extend(later.iter().map(|s| s.to_string()));
    PieceMachine::new(&PieceMachineSpec { stages, allowed_chars: None, added }, 1_000_000).unwrap()
}

/// Hugging Face's way, by brute force: cut the leftmost-longest matches of `added` out of the
/// text, then mark each gap between them with the later stages as a text of its own. Marks at
/// the matches' ends are of kind 0, the gaps' own marks of their stage's index + 1.
fn reference_added_marks(added: &[&str], later: &[Re], text: &str) -> Vec<(usize, usize)> {
    let mut cuts = Vec::new(); // (start, end) of the matches, in bytes
    let mut p = 0;
    while p < text.len() {
        let found = text[p..].char_indices().find_map(|(i, _)| {
            let longest =
                added.iter().filter(|c| !c.is_empty() && text[p + i..].starts_with(**c)).map(|c| c.len()).max();
            longest.map(|n| (p + i, p + i + n))
        });
        match found {
            Some((s, e)) => {
                cuts.push((s, e));
                p = e;
            }
            None => break,
        }
    }
    let mut marks = Vec::new();
    let mut gap_start = 0;
    let gap = |a: usize, b: usize, marks: &mut Vec<(usize, usize)>| {
        if a < b {
            marks.extend(reference_marks(later, &text[a..b]).into_iter().map(|(at, k)| (a + at, k + 1)));
        }
    };
    for &(s, e) in &cuts {
        gap(gap_start, s, &mut marks);
        marks.extend([(s, 0), (e, 0)]);
        gap_start = e;
    }
    gap(gap_start, text.len(), &mut marks);
    marks.retain(|&(at, _)| at > 0 && at < text.len());
    marks.sort_unstable();
    marks.dedup();
    marks
}

#[test]
fn added_tokens_are_final_pieces() {
    let mut m = added_machine(&["<think>", "<｜fim▁hole｜>", "<thin"], GPT2);
    // The later stage never cuts an added token's match.
    assert_eq!(m.split("<｜fim▁hole｜>").unwrap(), ["<｜fim▁hole｜>"]);
    assert_eq!(
        m.split("def f(x):<｜fim▁hole｜>\n    return x").unwrap(),
        ["def", " f", "(", "x", "):", "<｜fim▁hole｜>", "\n   ", " return", " x"]
    );
    // The gap before a match ends there: `\s+(?!\S)` sees the end of its text, not "<".
    assert_eq!(m.split("a  <think>").unwrap(), ["a", "  ", "<think>"]);
    assert_eq!(m.split("<think> b<think><think>").unwrap(), ["<think>", " b", "<think>", "<think>"]);
    // Leftmost-longest: "<think>" over "<thin"; a prefix alone is a match of "<thin" here.
    assert_eq!(m.split("x<thin").unwrap(), ["x", "<thin"]);
    assert_eq!(m.split("x<thinx").unwrap(), ["x", "<thin", "x"]);
    let mut m = added_machine(&["<think>"], GPT2);
    assert_eq!(m.split("x<thin").unwrap(), ["x", "<", "thin"]);
    assert_eq!(m.split("<｜fim").unwrap(), ["<｜", "fim"]);
    assert_eq!(m.split("").unwrap(), Vec::<String>::new());
    // A later mark inside a match, or a match not cut out, is refused.
    assert!(!m.accepts_marked("<think>", &[(1, 1)]).unwrap());
    assert!(!m.accepts_marked("<think>", &[(1, 0)]).unwrap());
    assert!(!m.accepts_marked("a<think>", &[]).unwrap());
    assert!(m.accepts_marked("a<think>", &[(1, 0)]).unwrap());
    assert!(!m.accepts_marked("a<think>", &[(1, 1)]).unwrap());
}

#[test]
fn added_tokens_need_their_own_stage_0() {
    let spec =
        PieceMachineSpec { stages: vec![GPT2[0].to_string()], allowed_chars: None, added: vec!["<think>".to_string()] };
    assert!(matches!(PieceMachine::new(&spec, 1000), Err(Error::InvalidArgument(m)) if m.contains("stage 0")));
    assert_eq!(added_tokens_pattern(&["a", "", "abc", "a", "b|"]), r"abc|b\||a");
}

/// Random texts made of added-token contents, their prefixes and ordinary characters: the
/// machine's one accepted marking is the reference's, and perturbed markings are refused.
#[test]
fn added_tokens_match_reference() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["<think>", "</think>", "<｜fim▁hole｜>"], GPT2),
        (&["<think>", "  "], LLAMA3),
        (&["õ", "ö", "<｜fim▁begin｜>", "<｜fim▁end｜>"], DEEPSEEK_CODER),
        (&["<|START|>", "<|END|>", "12"], STARCODER2),
        (&["<｜User｜>", "中文"], DEEPSEEK_V3),
    ];
    let atoms: &[&str] =
        &[" ", "  ", "\n", "a", "x", "1", "2", "中", "<", ">", "｜", "think", "<thin", "</", "<|", "|>", "õ", "ö", "("];
    let mut rng = SplitMix64::new(19);
    for &(added, later) in cases {
        let res: Vec<Re> = later.iter().map(|p| Parser::parse(p)).collect();
        let mut m = added_machine(added, later);
        for _ in 0..3000 {
            let n = rng.below(9);
            let text: String = (0..n)
                .map(|_| if rng.one_in(3) { added[rng.below(added.len())] } else { atoms[rng.below(atoms.len())] })
                .collect();
            let want = reference_added_marks(added, &res, &text);
            let got = m.split_marks(&text).unwrap_or_else(|e| panic!("{added:?} {text:?}: {e}"));
            assert_eq!(got, want, "{added:?}: {text:?}");
            assert!(m.accepts_marked(&text, &want).unwrap());
            // Perturbations: a mark dropped, of another kind, or added.
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).filter(|&i| i > 0).collect();
            for i in 0..want.len() {
                let mut w = want.clone();
                w.remove(i);
                assert!(!m.accepts_marked(&text, &w).unwrap(), "{text:?}: {w:?} (right {want:?})");
                let mut w = want.clone();
                w[i].1 = (w[i].1 + 1 + rng.below(m.num_stages() - 1)) % m.num_stages();
                assert!(!m.accepts_marked(&text, &w).unwrap(), "{text:?}: {w:?} (right {want:?})");
            }
            if let Some(&b) = bounds.get(rng.below(bounds.len() + 1)) {
                if !want.iter().any(|x| x.0 == b) {
                    let mut w = want.clone();
                    w.push((b, rng.below(m.num_stages())));
                    w.sort_unstable();
                    assert!(!m.accepts_marked(&text, &w).unwrap(), "{text:?}: {w:?} (right {want:?})");
                }
            }
        }
        eprintln!("{added:?}: {} states", m.num_states());
    }
}

/// Exhaustive over short texts: of all markings, the machine accepts exactly the reference.
#[test]
fn added_tokens_exhaustive_markings() {
    let cases: &[(&[&str], &[&str], &[char])] = &[
        (&["<t>", " <"], GPT2, &['<', 't', '>', ' ', 'a']),
        (&["ab", "b"], SMALL[6], &['a', 'b', ' ', '\n']),
        (&["aa"], SMALL[0], &['a', 'b', 'c']),
    ];
    for &(added, later, alphabet) in cases {
        let res: Vec<Re> = later.iter().map(|p| Parser::parse(p)).collect();
        let mut m = added_machine(added, later);
        let k = m.num_stages() + 1;
        for text in &texts_up_to(alphabet, 5) {
            assert_only_marking_accepted(&mut m, k, text, &reference_added_marks(added, &res, text), &added);
        }
    }
}

/// How big the whole reachable machine is with the added tokens of the shared tokenizers that
/// have them (`$PROPERTOK_SHARED`). Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn added_tokens_full_exploration_sizes() {
    let Ok(shared) = std::env::var("PROPERTOK_SHARED") else { return };
    for (name, later) in [("deepseek-v3", DEEPSEEK_V3), ("deepseek-coder", DEEPSEEK_CODER), ("command-r", STARCODER2)] {
        let path = format!("{shared}/tokenizers/{name}/tokenizer.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let added: Vec<&str> = doc["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["special"] == false)
            .map(|t| t["content"].as_str().unwrap())
            .collect();
        for (what, m) in [("without", machine(later)), ("with", added_machine(&added, later))] {
            let t0 = std::time::Instant::now();
            let mut m = m;
            let table = crate::pre_tokenizer::piece_table::PieceTable::explore(&mut m, 1_000_000).unwrap();
            let _ = table;
            eprintln!(
                "{name} {what} its {} added tokens: {} states ({} at character boundaries), {:?}",
                added.len(),
                m.num_states(),
                m.states.iter().filter(|s| s.partial == NO_PARTIAL).count(),
                t0.elapsed()
            );
        }
    }
}

/// With added tokens, a segment the later stages refuted as a gap can only be a match: the
/// machine dies at the first character that leaves every content (it used to live on as a sink
/// that took every byte; on Command-R a lazy guide searched 20,000 nodes in it before giving up).
#[test]
fn added_tokens_refuted_gap_dies_off_the_contents() {
    let mut m = added_machine(&["<|YES_TOKEN|>", "<|NO_TOKEN|>"], STARCODER2);
    let mut s = m.start();
    for &b in b"<|YES_TOKEN|" {
        s = m.byte(s, b).unwrap();
        assert_ne!(s, DEAD);
    }
    assert_eq!(m.byte(s, b' ').unwrap(), DEAD);
    assert_ne!(m.byte(s, b'>').unwrap(), DEAD);
    let mut s = m.start();
    for &b in b"<|N" {
        s = m.byte(s, b).unwrap();
    }
    assert_eq!(m.byte(s, b'x').unwrap(), DEAD, "unmarked, `<|Nx` is neither a gap nor a match");
    let mut s = m.start();
    for &b in b"<|" {
        s = m.byte(s, b).unwrap();
    }
    s = m.mark(s, 2).unwrap();
    for &b in b"Nx" {
        s = m.byte(s, b).unwrap();
        assert_ne!(s, DEAD, "marked, `<|` `Nx` is a gap");
    }
}

/// The explored table keeps only states with a future: every transition that is not [`DEAD`]
/// leads to a state from which some correctly marked text ends (found here by iterating to a
/// fixpoint), and the texts the lazy machine splits are still accepted with their marks.
#[test]
fn piece_table_keeps_only_states_with_a_future() {
    let added: &[(&[&str], &[&str])] =
        &[(&["<|YES_TOKEN|>", "<|NO_TOKEN|>"], STARCODER2), (&["<｜User｜>", "中文"], DEEPSEEK_V3)];
    let machines = all_specs().into_iter().map(|(name, stages)| (name.to_string(), machine(&stages)));
    let machines = machines.chain(added.iter().map(|&(a, later)| (format!("{a:?}"), added_machine(a, later))));
    let mut rng = SplitMix64::new(7);
    for (name, mut lazy) in machines {
        let table = crate::pre_tokenizer::piece_table::PieceTable::explore(&mut lazy.clone(), 1_000_000).unwrap();
        let n = table.num_states() as u32;
        let table = &table;
        let next = |s: u32| {
            let marks = (0..table.num_stages()).map(move |k| table.mark(s, k));
            (0..=255u8).map(move |b| table.byte(s, b)).chain(marks).filter(|&t| t != DEAD)
        };
        let mut future: Vec<bool> = (0..n).map(|s| table.accepts_end(s)).collect();
        loop {
            let grown: Vec<u32> =
                (0..n).filter(|&s| !future[s as usize] && next(s).any(|t| future[t as usize])).collect();
            if grown.is_empty() {
                break;
            }
            grown.iter().for_each(|&s| future[s as usize] = true);
        }
        let bad = (0..n).flat_map(|s| next(s)).filter(|&t| !future[t as usize]).count();
        assert_eq!(bad, 0, "{name}: {bad} transitions lead to states that never end");
        for _ in 0..300 {
            let text = random_text(&mut rng, 12);
            let marks = lazy.split_marks(&text).unwrap();
            let (mut state, mut at) = (0u32, 0);
            for (pos, &b) in text.as_bytes().iter().enumerate() {
                while at < marks.len() && marks[at].0 == pos {
                    state = table.mark(state, marks[at].1);
                    at += 1;
                }
                state = if state == DEAD { DEAD } else { table.byte(state, b) };
            }
            assert!(state != DEAD && table.accepts_end(state), "{name}: {text:?} with its marks {marks:?}");
        }
    }
}
