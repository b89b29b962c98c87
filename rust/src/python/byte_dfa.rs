//! `propertok._core.ByteDfa`: a regex's byte DFA, for matching and sampling in tests and tools.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::to_py;
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
