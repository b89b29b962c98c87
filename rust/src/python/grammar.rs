//! `_core.grammar_to_regex`: a Lark or GBNF grammar as one regex (`crate::grammar`).

use pyo3::prelude::*;

use super::to_py;
use crate::grammar::{
    grammar_to_regex as to_regex, lower::LowerOptions, lower::DEFAULT_MAX_GRAMMAR_REGEX_BYTES, Syntax,
};

/// Writes a grammar's start rule as one regex; see `propertok.grammar_to_regex`.
#[pyfunction]
#[pyo3(signature = (grammar, syntax = "lark", *, start = None, max_recursion_depth = None, max_regex_bytes = DEFAULT_MAX_GRAMMAR_REGEX_BYTES))]
pub(crate) fn grammar_to_regex(
    py: Python<'_>,
    grammar: String,
    syntax: &str,
    start: Option<String>,
    max_recursion_depth: Option<u32>,
    max_regex_bytes: usize,
) -> PyResult<String> {
    let syntax = Syntax::parse(syntax).map_err(to_py)?;
    let options = LowerOptions { max_recursion_depth, max_regex_bytes };
    py.detach(move || to_regex(&grammar, syntax, start.as_deref(), options)).map_err(to_py)
}
