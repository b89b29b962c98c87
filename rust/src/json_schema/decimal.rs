//! Bounded numbers: `number_range` of `_json_regex.py`, with its limit on fraction digits (a
//! `multipleOf` of 10^-k), over decimals read as Python's `_decimal` reads bounds: the decimal a
//! float's `repr` shows (`0.1` is 0.1, not the binary float).

use std::cmp::Ordering;

use super::jregex::{alternation, group, repeat, uint_range, NUMBER};
use super::json::{float_digits, Json};
use super::{decline, R};

/// A decimal: sign, integer part, fraction digits without trailing zeros (zero is unsigned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dec {
    neg: bool,
    int: i128,
    frac: String,
}

impl Dec {
    pub fn of(v: &Json) -> R<Dec> {
        match v {
            Json::Int(i) if i.unsigned_abs() < 10u128.pow(30) => Ok(Dec::new(*i < 0, i.abs(), String::new())),
            Json::Float(f) => {
                let (neg, digits, point) = float_digits(*f);
                if point > 30 {
                    return decline("a bound too large");
                }
                let (int, frac) = if point <= 0 {
                    (0, format!("{}{digits}", "0".repeat((-point) as usize)))
                } else if point as usize >= digits.len() {
                    let text = format!("{digits}{}", "0".repeat(point as usize - digits.len()));
                    (text.parse().expect("digits"), String::new())
                } else {
                    (digits[..point as usize].parse().expect("digits"), digits[point as usize..].to_string())
                };
                Ok(Dec::new(neg, int, frac))
            }
            _ => decline("a bound too large"),
        }
    }

    fn new(neg: bool, int: i128, frac: String) -> Dec {
        let frac = frac.trim_end_matches('0').to_string();
        let neg = neg && (int != 0 || !frac.is_empty());
        Dec { neg, int, frac }
    }

    /// `_multiple_of.as_ratio` of a positive decimal: `(p, q)` with `m = p / 10^q`, `p` not
    /// divisible by 10 unless `q` is 0; `None` past `u128`.
    pub fn as_ratio(&self) -> Option<(u128, u32)> {
        let q = self.frac.len() as u32;
        let int = u128::try_from(self.int).ok()?;
        let frac: u128 = if self.frac.is_empty() { 0 } else { self.frac.parse().ok()? };
        Some((int.checked_mul(10u128.checked_pow(q)?)?.checked_add(frac)?, q))
    }

    pub fn is_positive(&self) -> bool {
        self.sign() == Ordering::Greater
    }

    fn zero() -> Dec {
        Dec::new(false, 0, String::new())
    }

    fn negated(&self) -> Dec {
        Dec::new(!self.neg, self.int, self.frac.clone())
    }

    fn cmp_magnitude(&self, other: &Dec) -> Ordering {
        self.int.cmp(&other.int).then_with(|| {
            let n = self.frac.len().max(other.frac.len());
            format!("{:0<n$}", self.frac).cmp(&format!("{:0<n$}", other.frac))
        })
    }

    fn sign(&self) -> Ordering {
        if self.neg {
            Ordering::Less
        } else if self.int == 0 && self.frac.is_empty() {
            Ordering::Equal
        } else {
            Ordering::Greater
        }
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, other: &Dec) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Dec {
    fn cmp(&self, other: &Dec) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

/// JSON numbers x with `lo <(=) x <(=) hi` (`None`: unbounded) and at most `budget` digits
/// after the point (`None`: any); `None` when there are none.
pub fn number_range(
    lo: Option<Dec>,
    lo_excl: bool,
    hi: Option<Dec>,
    hi_excl: bool,
    budget: Option<usize>,
) -> Option<String> {
    if lo.is_none() && hi.is_none() {
        return Some(match budget {
            None => NUMBER.to_string(),
            Some(0) => "-?(?:0|[1-9][0-9]*)".to_string(),
            Some(q) => format!("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{{1,{q}}})?"),
        });
    }
    let mut parts = Vec::new();
    let non_negative = match &hi {
        None => true,
        Some(h) => h.sign() == Ordering::Greater || (h.sign() == Ordering::Equal && !hi_excl),
    };
    if non_negative {
        let (a, a_excl) = match &lo {
            Some(l) if l.sign() != Ordering::Less => (l.clone(), lo_excl),
            _ => (Dec::zero(), false),
        };
        parts.push(magnitude(&a, a_excl, hi.as_ref(), hi_excl, budget));
    }
    if lo.as_ref().is_none_or(|l| l.sign() == Ordering::Less) {
        let (a, a_excl) = match &hi {
            Some(h) if h.sign() == Ordering::Less => (h.negated(), hi_excl),
            _ => (Dec::zero(), true),
        };
        let minus_lo = lo.as_ref().map(Dec::negated);
        if let Some(m) = magnitude(&a, a_excl, minus_lo.as_ref(), lo_excl, budget) {
            parts.push(Some(format!("-{}", group(&m))));
        }
    }
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    (!parts.is_empty()).then(|| alternation(parts))
}

/// Unsigned decimals m with a <(=) m <(=) b (0 <= a), at most `budget` fraction digits.
fn magnitude(a: &Dec, a_excl: bool, b: Option<&Dec>, b_excl: bool, budget: Option<usize>) -> Option<String> {
    if let Some(b) = b {
        if b < a || (b == a && (a_excl || b_excl)) {
            return None;
        }
    }
    let (ai, af) = (a.int, a.frac.as_str());
    if let Some(b) = b {
        if ai == b.int {
            return with_fraction(&ai.to_string(), fractions(af, !a_excl, Some(&b.frac), !b_excl, budget));
        }
    }
    let mut parts = vec![with_fraction(&ai.to_string(), fractions(af, !a_excl, None, false, budget))];
    let inner_hi = b.map(|b| b.int - 1);
    if inner_hi.is_none_or(|h| h > ai) {
        parts.push(with_fraction(&group(&uint_range(ai + 1, inner_hi)), fractions("", true, None, false, budget)));
    }
    if let Some(b) = b {
        parts.push(with_fraction(&b.int.to_string(), fractions("", true, Some(&b.frac), !b_excl, budget)));
    }
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    (!parts.is_empty()).then(|| alternation(parts))
}

fn with_fraction(integer: &str, fractions: (Option<String>, bool)) -> Option<String> {
    match fractions {
        (None, bare) => bare.then(|| integer.to_string()),
        (Some(digits), true) => Some(format!("{integer}(?:\\.{digits})?")),
        (Some(digits), false) => Some(format!("{integer}\\.{digits}")),
    }
}

/// `_fractions`: fraction digit strings D with lo <(=) 0.D <(=) hi, at most `budget` digits,
/// and whether no fraction at all qualifies.
fn fractions(
    lo: &str,
    lo_incl: bool,
    hi: Option<&str>,
    hi_incl: bool,
    budget: Option<usize>,
) -> (Option<String>, bool) {
    let bare = (lo.is_empty() && lo_incl) && (hi.is_none() || hi != Some("") || hi_incl);
    if budget == Some(0) {
        return (None, bare);
    }
    let count = |n: usize| n as i128;
    let anything = repeat("[0-9]", 0, budget.map(|b| count(b - 1)));
    if lo.is_empty() && hi.is_none() {
        if lo_incl {
            return (Some(repeat("[0-9]", 1, budget.map(count))), bare);
        }
        return match budget {
            None => (Some("[0-9]*[1-9][0-9]*".to_string()), bare),
            Some(b) => {
                let options =
                    (0..b).map(|z| format!("0{{{z}}}[1-9]{}", repeat("[0-9]", 0, Some(count(b - z - 1))))).collect();
                (Some(alternation(options)), bare)
            }
        };
    }
    if lo.is_empty() && hi == Some("") {
        return (if lo_incl && hi_incl { Some(repeat("0", 1, budget.map(count))) } else { None }, bare);
    }
    let sub = budget.map(|b| b - 1);
    let (l1, lrest) = if lo.is_empty() { (0, "") } else { ((lo.as_bytes()[0] - b'0') as i32, &lo[1..]) };
    let (h1, hrest) = match hi {
        None => (10, None),
        Some("") => (0, Some("")),
        Some(h) => ((h.as_bytes()[0] - b'0') as i32, Some(&h[1..])),
    };
    let mut options = Vec::new();
    if l1 == h1 {
        options.push(digit_then(&l1.to_string(), fractions(lrest, lo_incl, hrest, hi_incl, sub)));
    } else {
        options.push(digit_then(&l1.to_string(), fractions(lrest, lo_incl, None, false, sub)));
        if l1 + 1 < h1 {
            let digit = if l1 + 1 == h1 - 1 { (l1 + 1).to_string() } else { format!("[{}-{}]", l1 + 1, h1 - 1) };
            options.push(Some(format!("{digit}{anything}")));
        }
        if h1 <= 9 {
            options.push(digit_then(&h1.to_string(), fractions("", true, hrest, hi_incl, sub)));
        }
    }
    let options: Vec<String> = options.into_iter().flatten().collect();
    ((!options.is_empty()).then(|| alternation(options)), bare)
}

fn digit_then(digit: &str, rest: (Option<String>, bool)) -> Option<String> {
    match rest {
        (None, bare) => bare.then(|| digit.to_string()),
        (Some(digits), true) => Some(format!("{digit}(?:{digits})?")),
        (Some(digits), false) => Some(format!("{digit}{}", group(&digits))),
    }
}
