//! `propertok._core.ByteDfa`: a regex's byte DFA, for matching and sampling in tests and tools;
//! `RuleAutomaton`, its counterpart for rule sets that nest.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::to_py;
use crate::lazy::pushdown::{PushdownDfa, RuleAutomata};
use crate::regex::byte_dfa::ByteDfa;

#[pyclass(name = "ByteDfa", module = "propertok._core", frozen)]
pub(crate) struct PyByteDfa {
    inner: ByteDfa,
}

#[pymethods]
impl PyByteDfa {
    #[new]
    #[pyo3(signature = (pattern, max_states=crate::limits::DEFAULT_MAX_BYTE_DFA_STATES))]
    fn new(py: Python<'_>, pattern: String, max_states: usize) -> PyResult<Self> {
        let inner = py.detach(|| ByteDfa::from_regex(&pattern, max_states)).map_err(to_py)?;
        Ok(PyByteDfa { inner })
    }
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    fn matches(&self, data: &[u8]) -> bool {
        self.inner.matches(data)
    }
    #[pyo3(signature = (n, seed, max_len=64))]
    fn sample<'py>(&self, py: Python<'py>, n: usize, seed: u64, max_len: usize) -> Vec<Bound<'py, PyBytes>> {
        self.inner.sample(n, seed, max_len).iter().map(|s| PyBytes::new(py, s)).collect()
    }
}

/// `propertok._core.RuleAutomaton`: the pushdown automaton of a rule set (a nesting grammar's,
/// or `propertok.json_schema.schema_to_rules`'), for matching in tests and tools.
#[pyclass(name = "RuleAutomaton", module = "propertok._core", frozen)]
pub(crate) struct PyRuleAutomaton {
    inner: PushdownDfa,
}

#[pymethods]
impl PyRuleAutomaton {
    #[new]
    #[pyo3(signature = (rules, max_recursion_depth=None, max_states=crate::limits::DEFAULT_MAX_BYTE_DFA_STATES))]
    fn new(
        py: Python<'_>,
        rules: Vec<(String, Option<String>)>,
        max_recursion_depth: Option<u32>,
        max_states: usize,
    ) -> PyResult<Self> {
        if rules.is_empty() {
            return Err(to_py(crate::Error::InvalidArgument("no rules: the first rule is the start".into())));
        }
        let inner = py
            .detach(|| {
                PushdownDfa::new(
                    &rules,
                    &RuleAutomata::default(),
                    &[true; 256],
                    max_recursion_depth,
                    max_states,
                    max_states,
                )
            })
            .map_err(to_py)?;
        Ok(PyRuleAutomaton { inner })
    }
    /// States built so far (they are built as texts are matched).
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    fn matches(&self, data: &[u8]) -> PyResult<bool> {
        self.inner.matches(data).map_err(to_py)
    }
}
