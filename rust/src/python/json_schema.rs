//! `_core.schema_to_rules_subset`: the Rust JSON Schema converter (`crate::json_schema`).

use std::collections::HashSet;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString};

use crate::json_schema::json::{Json, Object, MAX_DEPTH};

/// `(name, regex)` rules, or `(keyword, pointer)` ignored keywords.
type Pairs = Vec<(String, String)>;

/// The rules of a schema (a dict, a bool, or JSON text) as
/// `propertok.json_schema.schema_to_rules` returns them, with the unknown keywords it ignored
/// (`(keyword, pointer)`, for its warning), or `None` outside the subset `crate::json_schema`
/// handles; releases the GIL while it converts.
#[pyfunction]
#[pyo3(signature = (schema, whitespace))]
pub(crate) fn schema_to_rules_subset(
    py: Python<'_>,
    schema: &Bound<'_, PyAny>,
    whitespace: String,
) -> Option<(Pairs, Pairs)> {
    if let Ok(text) = schema.cast_exact::<PyString>() {
        let text = text.to_cow().ok()?.into_owned();
        return py
            .detach(move || crate::json_schema::schema_to_rules(&text, &whitespace))
            .map(|c| (c.rules, c.ignored));
    }
    let mut dicts = Dicts::default();
    let root = plain_json(schema, 0, &mut dicts)?;
    let converted = py.detach(move || crate::json_schema::convert_value(&root, &whitespace).ok())?;
    // A dict placed twice in the schema has two pointers, of which Python reports the last it
    // indexed: leave that to Python when a pointer is reported.
    if dicts.shared && !converted.ignored.is_empty() {
        return None;
    }
    Some((converted.rules, converted.ignored))
}

/// The dicts [`plain_json`] read, by address, and whether one was met twice.
#[derive(Default)]
struct Dicts {
    seen: HashSet<usize>,
    shared: bool,
}

/// `value` as the JSON it stands for, if it is plain JSON data: exactly `dict` (with `str`
/// keys), `list`, `str`, `int`, finite `float`, `bool` or `None`, nested at most
/// [`MAX_DEPTH`] deep. Anything else (a tuple, a subclass, a non-string key, NaN) is `None`, so
/// that the Python converter sees it and says what it says: `json.dumps` would quietly turn a
/// tuple into a list and the key `1` into `"1"`.
fn plain_json(value: &Bound<'_, PyAny>, depth: usize, dicts: &mut Dicts) -> Option<Json> {
    if depth > MAX_DEPTH {
        return None;
    }
    if value.is_none() {
        return Some(Json::Null);
    }
    if let Ok(b) = value.cast_exact::<PyBool>() {
        return Some(Json::Bool(b.is_true()));
    }
    if value.is_exact_instance_of::<PyInt>() {
        return Some(value.extract::<i128>().map_or(Json::BigInt, Json::Int));
    }
    if let Ok(f) = value.cast_exact::<PyFloat>() {
        let f = f.value();
        return f.is_finite().then_some(Json::Float(f));
    }
    if let Ok(s) = value.cast_exact::<PyString>() {
        return Some(Json::Str(s.to_cow().ok()?.into_owned()));
    }
    if let Ok(list) = value.cast_exact::<PyList>() {
        return list.iter().map(|x| plain_json(&x, depth + 1, dicts)).collect::<Option<Vec<_>>>().map(Json::Arr);
    }
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        dicts.shared |= !dicts.seen.insert(dict.as_ptr() as usize);
        let mut object = Object::default();
        for (k, v) in dict.iter() {
            let key = k.cast_exact::<PyString>().ok()?.to_cow().ok()?.into_owned();
            object.insert(key, plain_json(&v, depth + 1, dicts)?);
        }
        return Some(Json::Obj(object));
    }
    None
}
