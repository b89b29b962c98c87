//! Regex building blocks for JSON text, ported from `python/propertok/json_schema/_json_regex.py`
//! character for character (the differential test compares the output byte for byte). The
//! constants are that module's values, expanded.

use super::json::{float_repr, Json};

/// Counted repetitions above this are lowered to it (`_json_regex.MAX_COUNT`).
pub const MAX_COUNT: i128 = 256;

pub const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u(?:(?:(?:[0-9a-cA-CeEfF]\p{AHex}|[dD][0-7])\p{AHex}{2})|[dD][89abAB]\p{AHex}{2}\\u[dD][c-fC-F]\p{AHex}{2})))"#;
pub const BOUNDED_STRING_CHAR: &str =
    r#"(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u(?:(?:[0-9a-cA-CeEfF]\p{AHex}|[dD][0-7])\p{AHex}{2})))"#;
/// A `\u` escape of a surrogate pair after its `\u` (`_U_PAIR`), inside [`STRING_CHAR`].
pub const U_PAIR: &str = r#"[dD][89abAB]\p{AHex}{2}\\u[dD][c-fC-F]\p{AHex}{2}"#;
/// One hex digit, either case (`HEX`).
pub const HEX: &str = "[0-9a-fA-F]";
pub const NULL: &str = r#"null"#;
pub const BOOLEAN: &str = r#"(?:true|false)"#;
pub const INTEGER: &str = r#"(?:0|-?[1-9][0-9]*)"#;
pub const NUMBER: &str = r#"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"#;
pub const FORMATS: [(&str, &str, usize, Option<usize>); 10] = [
    (
        "date",
        r#"(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)"#,
        10,
        Some(10),
    ),
    (
        "time",
        r#"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"#,
        14,
        None,
    ),
    (
        "date-time",
        r#"(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"#,
        25,
        None,
    ),
    ("uuid", r#"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"#, 36, Some(36)),
    (
        "email",
        r#"[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\-]+(?:\.[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\-]+)*@(?:[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,58}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,58}[a-zA-Z0-9])?){0,2}|[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,25}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,25}[a-zA-Z0-9])?){3,7})"#,
        3,
        None,
    ),
    (
        "uri",
        r#"[a-zA-Z][a-zA-Z0-9+\-.]*:(?://(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|:)*@)?(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2})*)(?::[0-9]*)?(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*|/(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?(?:\?(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?(?:#(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?"#,
        2,
        None,
    ),
    (
        "uri-reference",
        r#"(?:[a-zA-Z][a-zA-Z0-9+\-.]*:(?://(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|:)*@)?(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2})*)(?::[0-9]*)?(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*|/(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?(?:\?(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?(?:#(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?|(?://(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|:)*@)?(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2})*)(?::[0-9]*)?(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*|/(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?|(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|@)+(?:/(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])*)*)?(?:\?(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?(?:#(?:(?:[a-zA-Z0-9\-._~!$&'()*+,;=]|%[0-9a-fA-F]{2}|[:@])|[/?])*)?)"#,
        0,
        None,
    ),
    (
        "ipv4",
        r#"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"#,
        7,
        Some(15),
    ),
    (
        "ipv6",
        r#"(?:(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|(?:[0-9a-fA-F]{1,4}:){1,7}:|(?:[0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|(?:[0-9a-fA-F]{1,4}:){1,5}(?::[0-9a-fA-F]{1,4}){1,2}|(?:[0-9a-fA-F]{1,4}:){1,4}(?::[0-9a-fA-F]{1,4}){1,3}|(?:[0-9a-fA-F]{1,4}:){1,3}(?::[0-9a-fA-F]{1,4}){1,4}|(?:[0-9a-fA-F]{1,4}:){1,2}(?::[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(?::[0-9a-fA-F]{1,4}){1,6}|:(?::[0-9a-fA-F]{1,4}){1,7}|::)"#,
        2,
        Some(39),
    ),
    (
        "hostname",
        r#"(?:[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,58}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,58}[a-zA-Z0-9])?){0,2}|[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,25}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-][a-zA-Z0-9-][a-zA-Z0-9]|[a-zA-Z0-9-](?:[a-zA-Z0-9][a-zA-Z0-9-]|-[a-zA-Z0-9])[a-zA-Z0-9-]{0,25}[a-zA-Z0-9])?){3,7})"#,
        1,
        Some(247),
    ),
];

/// Characters special somewhere in Rust regex syntax (`_META`).
pub fn is_meta(c: char) -> bool {
    "\\.+*?()|[]{}^$#&-~".contains(c)
}

/// One character as a regex literal outside a class.
pub fn escape_char(c: char, out: &mut String) {
    let cp = c as u32;
    if is_meta(c) {
        out.push('\\');
        out.push(c);
    } else if (0x20 < cp && cp < 0x7F) || c == ' ' {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{cp:X}}}"));
    }
}

pub fn escape_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        escape_char(c, &mut out);
    }
    out
}

/// `(?:a|b|...)` without duplicates (order kept); a single option as is.
pub fn alternation(options: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::with_capacity(options.len());
    let mut set = std::collections::HashSet::new();
    for o in options {
        if set.insert(o.clone()) {
            seen.push(o);
        }
    }
    if seen.len() == 1 {
        return seen.pop().expect("one option");
    }
    format!("(?:{})", seen.join("|"))
}

/// `unit` repeated `lo..=hi` times (`hi` None: unbounded).
pub fn repeat(unit: &str, lo: i128, hi: Option<i128>) -> String {
    match hi {
        Some(hi) if hi == lo => match lo {
            0 => String::new(),
            1 => unit.to_string(),
            _ => format!("{unit}{{{lo}}}"),
        },
        None => match lo {
            0 => format!("{unit}*"),
            1 => format!("{unit}+"),
            _ => format!("{unit}{{{lo},}}"),
        },
        Some(1) if lo == 0 => format!("{unit}?"),
        Some(hi) => format!("{unit}{{{lo},{hi}}}"),
    }
}

/// The characters of `text` as they may appear inside a JSON string literal (`json_string_content`).
pub fn json_string_content(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let cp = c as u32;
        let short = match cp {
            0x22 => Some('"'),
            0x5C => Some('\\'),
            0x08 => Some('b'),
            0x0C => Some('f'),
            0x0A => Some('n'),
            0x0D => Some('r'),
            0x09 => Some('t'),
            _ => None,
        };
        if let Some(s) = short {
            out.push_str(&escape_literal(&format!("\\{s}")));
        } else if cp < 0x20 {
            out.push_str(&escape_literal(&format!("\\u{cp:04x}")));
        } else if cp < 0x80 {
            escape_char(c, &mut out);
        } else {
            let units = if cp < 0x10000 {
                vec![cp]
            } else {
                let v = cp - 0x10000;
                vec![0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)]
            };
            out.push_str("(?:");
            escape_char(c, &mut out);
            out.push('|');
            for u in units {
                out.push_str("\\\\u");
                for d in format!("{u:04x}").chars() {
                    if d.is_ascii_alphabetic() {
                        out.push_str(&format!("[{}{}]", d.to_ascii_lowercase(), d.to_ascii_uppercase()));
                    } else {
                        out.push(d);
                    }
                }
            }
            out.push(')');
        }
    }
    out
}

/// A JSON value as a regex (`literal`): `ws` between structural tokens, numbers as `json.dumps`
/// spells them. `None` for a big integer (not handled).
pub fn literal(value: &Json, ws: &str) -> Option<String> {
    Some(match value {
        Json::Null => "null".into(),
        Json::Bool(true) => "true".into(),
        Json::Bool(false) => "false".into(),
        Json::Int(i) => escape_literal(&i.to_string()),
        Json::BigInt => return None,
        Json::Float(f) => escape_literal(&float_repr(*f)),
        Json::Str(s) => format!("\"{}\"", json_string_content(s)),
        Json::Arr(items) => {
            if items.is_empty() {
                return Some(format!("\\[{ws}\\]"));
            }
            let sep = format!("{ws},{ws}");
            let parts: Option<Vec<String>> = items.iter().map(|v| literal(v, ws)).collect();
            format!("\\[{ws}{}{ws}\\]", parts?.join(&sep))
        }
        Json::Obj(o) => {
            if o.is_empty() {
                return Some(format!("\\{{{ws}\\}}"));
            }
            let sep = format!("{ws},{ws}");
            let mut parts = Vec::with_capacity(o.len());
            for (k, v) in o.iter() {
                parts.push(format!("\"{}\"{ws}:{ws}{}", json_string_content(k), literal(v, ws)?));
            }
            format!("\\{{{ws}{}{ws}\\}}", parts.join(&sep))
        }
    })
}

/// A JSON string of `min..=max` characters (upper bound capped at [`MAX_COUNT`]).
pub fn string(min: i128, max: Option<i128>) -> String {
    match max {
        None => format!("\"{}\"", repeat(STRING_CHAR, min, None)),
        Some(max) => {
            let max = max.min(min.max(MAX_COUNT));
            format!("\"{}\"", repeat(BOUNDED_STRING_CHAR, min, Some(max)))
        }
    }
}

/// The regex and length bounds of a supported `format`.
pub fn format(name: &str) -> Option<(&'static str, usize, Option<usize>)> {
    FORMATS.iter().find(|f| f.0 == name).map(|f| (f.1, f.2, f.3))
}

/// Whether every length in `within` lies in `[lo, hi]` (`length_bounds`).
pub fn length_bounds(lo: i128, hi: Option<i128>, within: (usize, Option<usize>)) -> bool {
    let (w_lo, w_hi) = within;
    w_lo as i128 >= lo && (hi.is_none() || w_hi.is_some_and(|w| hi.is_some_and(|h| w as i128 <= h)))
}

/// Regex for the integers in `[lo, hi]` (None: unbounded); None when the range is empty.
pub fn integer_range(lo: Option<i128>, hi: Option<i128>) -> Option<String> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return None;
        }
    }
    if lo.is_none() && hi.is_none() {
        return Some(INTEGER.into());
    }
    let mut parts = Vec::new();
    if hi.is_none_or(|h| h >= 0) {
        parts.push(uint_range(lo.map_or(0, |l| l.max(0)), hi));
    }
    if lo.is_none_or(|l| l < 0) {
        let mag_lo = hi.map_or(1, |h| (-h).max(1));
        parts.push(format!("-{}", group(&uint_range(mag_lo, lo.map(|l| -l)))));
    }
    Some(alternation(parts))
}

/// `regex` as one atom: itself when it already is one group, else wrapped in `(?:...)`.
pub fn group(regex: &str) -> String {
    if regex.starts_with("(?:") && is_one_group(regex) {
        regex.to_string()
    } else {
        format!("(?:{regex})")
    }
}

fn is_one_group(regex: &str) -> bool {
    let r: Vec<char> = regex.chars().collect();
    let (mut depth, mut i) = (0i64, 0usize);
    while i < r.len() {
        let c = r[i];
        if c == '\\' {
            i += 2;
            continue;
        }
        if c == '[' {
            i += 1;
            while i < r.len() && r[i] != ']' {
                i += if r[i] == '\\' { 2 } else { 1 };
            }
        } else if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth -= 1;
            if depth == 0 && i != r.len() - 1 {
                return false;
            }
        }
        i += 1;
    }
    regex.ends_with(')')
}

fn pow10(n: usize) -> i128 {
    10i128.pow(n as u32)
}

/// Non-negative integers in `[lo, hi]` (hi None: unbounded), lo <= hi.
pub fn uint_range(lo: i128, hi: Option<i128>) -> String {
    if hi.is_none() && lo <= 1 {
        return if lo == 0 { "(?:0|[1-9][0-9]*)".into() } else { "[1-9][0-9]*".into() };
    }
    let lo_len = lo.to_string().len();
    let top = match hi {
        None => lo_len,
        Some(h) => h.to_string().len(),
    };
    let mut parts = Vec::new();
    for n in lo_len..=top {
        let a = lo.max(if n > 1 { pow10(n - 1) } else { 0 });
        let b = match hi {
            None => pow10(n) - 1,
            Some(h) => h.min(pow10(n) - 1),
        };
        if a <= b {
            parts.push(same_length(&a.to_string(), &b.to_string()));
        }
    }
    if hi.is_none() {
        parts.push(format!("[1-9][0-9]{{{lo_len},}}"));
    }
    alternation(parts)
}

/// Digit strings of one length between lo and hi (inclusive).
fn same_length(lo: &str, hi: &str) -> String {
    if lo == hi {
        return lo.to_string();
    }
    if lo.len() == 1 {
        return format!("[{lo}-{hi}]");
    }
    if lo.as_bytes()[0] == hi.as_bytes()[0] {
        return format!("{}{}", &lo[..1], group(&same_length(&lo[1..], &hi[1..])));
    }
    let k = lo.len() - 1;
    let mut parts = Vec::new();
    let mut first = (lo.as_bytes()[0] - b'0') as i32;
    let mut last = (hi.as_bytes()[0] - b'0') as i32;
    if lo[1..] != "0".repeat(k) {
        parts.push(format!("{}{}", &lo[..1], group(&same_length(&lo[1..], &"9".repeat(k)))));
        first += 1;
    }
    let tail = if hi[1..] != "9".repeat(k) {
        last -= 1;
        Some(format!("{}{}", &hi[..1], group(&same_length(&"0".repeat(k), &hi[1..]))))
    } else {
        None
    };
    if first <= last {
        let digit = if first == last { first.to_string() } else { format!("[{first}-{last}]") };
        parts.push(if k > 1 { format!("{digit}[0-9]{{{k}}}") } else { format!("{digit}[0-9]") });
    }
    if let Some(t) = tail {
        parts.push(t);
    }
    alternation(parts)
}
