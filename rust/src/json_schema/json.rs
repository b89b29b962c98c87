//! JSON text as Python's `json.loads` reads it, for the converter: objects keep their key order
//! (the order properties are generated in), a repeated key keeps its first position and its last
//! value (as a Python `dict` does), integers stay integers of any size (`1` and `1.0` differ:
//! Python's `int` and `float`), and floats are parsed correctly rounded so that
//! [`float_repr`] spells them as Python's `repr` does. `serde_json::Value` has none of these
//! (its maps are sorted, its large integers are floats), hence this small reader.
//!
//! Anything Python reads differently, or that the converter should not meet, is refused
//! (`None`): `NaN`/`Infinity`, lone surrogate escapes, nesting deeper than [`MAX_DEPTH`].

use std::collections::HashMap;

/// Deeper documents are refused (Python's converter would hit its recursion limit first).
pub const MAX_DEPTH: usize = 200;

/// A JSON value. Integers beyond `i128` are kept as [`Json::BigInt`] and refused where read.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i128),
    BigInt,
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Object),
}

/// An object in key order, with an index for large ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object {
    pub entries: Vec<(String, Json)>,
    index: Option<HashMap<String, usize>>,
}

impl Object {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match &self.index {
            Some(index) => index.get(key).map(|&i| &self.entries[i].1),
            None => self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Json)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Sets `key` to `value`: a repeated key keeps its first position and takes the last value.
    pub(crate) fn insert(&mut self, key: String, value: Json) {
        let found = match &self.index {
            Some(index) => index.get(&key).copied(),
            None => self.entries.iter().position(|(k, _)| *k == key),
        };
        match found {
            Some(i) => self.entries[i].1 = value,
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(key.clone(), self.entries.len());
                }
                self.entries.push((key, value));
                if self.index.is_none() && self.entries.len() > 16 {
                    let index = self.entries.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
                    self.index = Some(index);
                }
            }
        }
    }
}

impl Json {
    pub fn as_obj(&self) -> Option<&Object> {
        match self {
            Json::Obj(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_number(&self) -> bool {
        matches!(self, Json::Int(_) | Json::BigInt | Json::Float(_))
    }
}

/// Parses JSON text as `json.loads` does; `None` for text it rejects or that is refused here.
pub fn parse(text: &str) -> Option<Json> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct Parser<'t> {
    s: &'t [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Json> {
        if depth > MAX_DEPTH {
            return None;
        }
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut obj = Object::default();
                self.ws();
                if self.eat(b"}") {
                    return Some(Json::Obj(obj));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return None;
                    }
                    let key = self.string()?;
                    self.ws();
                    if !self.eat(b":") {
                        return None;
                    }
                    self.ws();
                    let v = self.value(depth + 1)?;
                    obj.insert(key, v);
                    self.ws();
                    if self.eat(b"}") {
                        return Some(Json::Obj(obj));
                    }
                    if !self.eat(b",") {
                        return None;
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut arr = Vec::new();
                self.ws();
                if self.eat(b"]") {
                    return Some(Json::Arr(arr));
                }
                loop {
                    self.ws();
                    arr.push(self.value(depth + 1)?);
                    self.ws();
                    if self.eat(b"]") {
                        return Some(Json::Arr(arr));
                    }
                    if !self.eat(b",") {
                        return None;
                    }
                }
            }
            b'"' => self.string().map(Json::Str),
            b't' => self.eat(b"true").then_some(Json::Bool(true)),
            b'f' => self.eat(b"false").then_some(Json::Bool(false)),
            b'n' => self.eat(b"null").then_some(Json::Null),
            _ => self.number(),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Option<Json> {
        let start = self.i;
        self.eat(b"-");
        if self.eat(b"0") {
        } else if self.digits() == 0 {
            return None;
        }
        let mut float = false;
        if self.s.get(self.i) == Some(&b'.') && self.s.get(self.i + 1).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
            self.digits();
            float = true;
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let save = self.i;
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = save;
            } else {
                float = true;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if float {
            let f: f64 = text.parse().ok()?;
            f.is_finite().then_some(Json::Float(f))
        } else {
            Some(text.parse::<i128>().map(Json::Int).unwrap_or(Json::BigInt))
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let h = std::str::from_utf8(h).ok()?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u32::from_str_radix(h, 16).ok()
    }

    fn string(&mut self) -> Option<String> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && !matches!(self.s[self.i], b'"' | b'\\' | 0..=0x1F) {
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.s[start..self.i]).ok()?);
            match *self.s.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(out);
                }
                b'\\' => {
                    self.i += 1;
                    let c = *self.s.get(self.i)?;
                    self.i += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let u = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&u) {
                                // a pair, or a lone surrogate (which Rust strings cannot hold)
                                if !self.eat(b"\\u") {
                                    return None;
                                }
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return None;
                                }
                                0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                u
                            };
                            out.push(char::from_u32(cp)?);
                        }
                        _ => return None,
                    }
                }
                _ => return None, // a raw control character
            }
        }
    }
}

/// Python's `repr` of a finite float (`1.0`, `1e+16`, `1.5e-05`, `-0.0`): the shortest digits
/// that round-trip, in fixed notation when the decimal exponent is in -4..16.
pub fn float_repr(f: f64) -> String {
    let (negative, digits, point) = float_digits(f);
    let sign = if negative { "-" } else { "" };
    let n = digits.len() as i64;
    if !(point <= -4 || point > 16) {
        if point <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        } else if point >= n {
            format!("{sign}{digits}{}.0", "0".repeat((point - n) as usize))
        } else {
            format!("{sign}{}.{}", &digits[..point as usize], &digits[point as usize..])
        }
    } else {
        let mantissa = if n > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits.clone() };
        let e = point - 1;
        format!("{sign}{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

/// `(negative, digits, point)`: `|f| = 0.digits × 10^point`, shortest round-trip digits
/// (`"0"` and point 1 for zero).
pub fn float_digits(f: f64) -> (bool, String, i64) {
    let negative = f.is_sign_negative();
    if f == 0.0 {
        return (negative, "0".into(), 1);
    }
    let text = format!("{:e}", f.abs());
    let (mantissa, exp) = text.split_once('e').expect("{:e} has an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0').to_string();
    let digits = if digits.is_empty() { "0".to_string() } else { digits };
    (negative, digits, exp.parse::<i64>().expect("an integer exponent") + 1)
}

/// Python's `_json_type`: `1.0` is an integer, booleans are not.
pub fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Int(_) | Json::BigInt => "integer",
        Json::Float(f) if f.fract() == 0.0 => "integer",
        Json::Float(_) => "number",
        Json::Str(_) => "string",
        Json::Arr(_) => "array",
        Json::Obj(_) => "object",
    }
}

/// Python's `_same_json` (equal `json.dumps(..., sort_keys=True)` and type): `1` and `1.0`
/// differ, key order does not matter. `None`: a big integer, not decided here.
pub fn same_json(a: &Json, b: &Json) -> Option<bool> {
    Some(match (a, b) {
        (Json::BigInt, _) | (_, Json::BigInt) => return None,
        (Json::Float(x), Json::Float(y)) => x.to_bits() == y.to_bits(),
        (Json::Arr(x), Json::Arr(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (p, q) in x.iter().zip(y) {
                if !same_json(p, q)? {
                    return Some(false);
                }
            }
            true
        }
        (Json::Obj(x), Json::Obj(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (k, p) in x.iter() {
                match y.get(k) {
                    Some(q) if same_json(p, q)? => {}
                    _ => return Some(false),
                }
            }
            true
        }
        _ => a == b,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_spelled_as_python_repr() {
        for (f, s) in [
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e300, "1.5e+300"),
            (123.456, "123.456"),
        ] {
            assert_eq!(float_repr(f), s);
        }
    }

    #[test]
    fn objects_keep_order_and_the_last_of_repeated_keys() {
        let v = parse(r#"{"b": 1, "a": [1.0, -0, 10000000000000000000000000000000000000000], "b": 2}"#).unwrap();
        let o = v.as_obj().unwrap();
        let keys: Vec<&str> = o.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(o.get("b"), Some(&Json::Int(2)));
        assert_eq!(o.get("a"), Some(&Json::Arr(vec![Json::Float(1.0), Json::Int(0), Json::BigInt])));
        assert_eq!(parse(r#""\ud800""#), None);
        assert_eq!(parse("NaN"), None);
        assert_eq!(parse(r#""\ud83d\ude00""#), Some(Json::Str("\u{1F600}".into())));
    }
}
