//! `_core.schema_to_rules_subset`: the Rust JSON Schema converter (`crate::json_schema`).

use pyo3::prelude::*;

/// The rules of a schema (JSON text) as `propertok.json_schema.schema_to_rules` returns them, or
/// `None` outside the subset `crate::json_schema` handles; releases the GIL.
#[pyfunction]
#[pyo3(signature = (schema_json, whitespace))]
pub(crate) fn schema_to_rules_subset(
    py: Python<'_>,
    schema_json: String,
    whitespace: String,
) -> Option<Vec<(String, String)>> {
    py.detach(move || crate::json_schema::schema_to_rules(&schema_json, &whitespace))
}
