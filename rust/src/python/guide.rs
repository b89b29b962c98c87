//! `propertok._core.Guide`.

use std::borrow::Cow;
use std::sync::Arc;

use numpy::{ndarray::ArrayView1, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::detach::detach_for;
use super::matcher::PyMatcher;
use super::to_py;
use crate::guide::matcher::Matcher;
use crate::guide::Guide;

#[pyclass(name = "Guide", module = "propertok._core", frozen)]
pub(crate) struct PyGuide {
    pub(crate) inner: Arc<Guide>,
}

impl PyGuide {
    fn state(&self, state: i64) -> PyResult<u32> {
        let s = u32::try_from(state).map_err(|_| PyValueError::new_err(format!("state {state} is out of range")))?;
        self.inner.check_state(s).map_err(to_py)?;
        Ok(s)
    }
}

#[pymethods]
impl PyGuide {
    #[getter]
    fn initial_state(&self) -> u32 {
        self.inner.initial_state()
    }
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method().name()
    }
    fn num_transitions(&self, py: Python<'_>) -> PyResult<usize> {
        let g = self.inner.clone();
        py.detach(move || g.num_transitions()).map_err(to_py)
    }
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.inner.clone();
        let (st, stacks) = py.detach(move || g.stats().map(|st| (st, g.lazy_grammar_stacks()))).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("method", self.inner.method().name())?;
        d.set_item("num_states", st.num_states)?;
        d.set_item("num_transitions", st.num_transitions)?;
        d.set_item("mean_allowed_tokens", st.mean_allowed_tokens)?;
        d.set_item("single_choice_share", st.single_choice_share)?;
        let (cached, max_cached) = self.inner.mask_cache_bytes();
        d.set_item("mask_cache_bytes", cached)?;
        d.set_item("max_mask_cache_bytes", max_cached)?;
        d.set_item("lazy", self.inner.is_lazy())?;
        if let Some((bytes, max_bytes)) = self.inner.lazy_memo_bytes() {
            d.set_item("lazy_memo_bytes", bytes)?;
            d.set_item("max_lazy_memo_bytes", max_bytes)?;
        }
        if let Some(kind) = self.inner.lazy_text_automaton() {
            d.set_item("lazy_text_automaton", kind)?;
        }
        if let Some((built, sliced)) = self.inner.lazy_text_states() {
            d.set_item("lazy_text_states", built)?;
            d.set_item("lazy_sliced_text_states", sliced)?;
        }
        if let Some((frames, per_rule)) = stacks {
            d.set_item("grammar_stack_frames", frames)?;
            let stacks = PyDict::new(py);
            for (rule, n) in per_rule {
                stacks.set_item(rule, n)?;
            }
            d.set_item("grammar_stacks_per_rule", stacks)?;
        }
        Ok(d)
    }
    fn allowed_tokens<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let s = self.state(state)?;
        let g = self.inner.clone();
        let v: Vec<i32> = detach_for(py, g.reports_long_work(), move || g.allowed_tokens(s))
            .map_err(to_py)?
            .into_iter()
            .map(|t| t as i32)
            .collect();
        Ok(PyArray1::from_vec(py, v))
    }
    fn mask<'py>(slf: Bound<'py, Self>, state: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let this = slf.get();
        let s = this.state(state)?;
        // A lazy guide's first visit can take milliseconds: without the GIL once it turns out long.
        let g = this.inner.clone();
        let reports = g.reports_long_work();
        let owned = detach_for(slf.py(), reports, move || {
            g.mask(s).map(|m| matches!(m, Cow::Owned(_)).then(|| m.into_owned()))
        });
        let words = match owned.map_err(to_py)? {
            None => this.inner.cached_words(s).expect("borrowed from the cache above"),
            Some(owned) => {
                // A mask with few tokens (cached as ids), or past `max_mask_cache_bytes`: a
                // fresh, owned array.
                let array = PyArray1::from_vec(slf.py(), owned);
                array.call_method1("setflags", (false,))?;
                return Ok(array);
            }
        };
        let view = ArrayView1::from(words);
        // SAFETY: the words live in the guide's cache (a boxed slice that is never moved or
        // freed while the guide lives), and `slf` — which owns the guide — becomes the array's
        // base object, so the memory outlives the array. The array is made read-only below.
        let array = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        array.call_method1("setflags", (false,))?;
        Ok(array)
    }
    fn next_state(&self, py: Python<'_>, state: i64, token_id: i64) -> PyResult<u32> {
        let s = self.state(state)?;
        let t = u32::try_from(token_id)
            .map_err(|_| PyValueError::new_err(format!("token id {token_id} is out of range")))?;
        let g = self.inner.clone();
        detach_for(py, g.reports_long_work(), move || g.next_state(s, t)).map_err(to_py)
    }
    fn is_final(&self, state: i64) -> PyResult<bool> {
        Ok(self.inner.is_final(self.state(state)?))
    }
    fn count_sequences(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let g = self.inner.clone();
        let count = py.detach(move || g.count_sequences()).map_err(to_py)?;
        Ok(count.map(|c| u64::try_from(c).unwrap_or(u64::MAX)))
    }
    #[pyo3(signature = (seed, max_tokens=64))]
    fn random_walk(&self, py: Python<'_>, seed: u64, max_tokens: usize) -> PyResult<Vec<u32>> {
        let g = self.inner.clone();
        py.detach(move || g.random_walk(seed, max_tokens)).map_err(to_py)
    }
    /// `None` when both guides accept the same token sequences, else a shortest token sequence
    /// after which their masks differ.
    fn first_difference(&self, py: Python<'_>, other: PyRef<'_, PyGuide>) -> PyResult<Option<Vec<u32>>> {
        if self.inner.vocab_size() != other.inner.vocab_size() {
            return Err(PyValueError::new_err("the guides have different vocab sizes"));
        }
        let (a, b) = (self.inner.clone(), other.inner.clone());
        py.detach(move || a.first_difference(&b)).map_err(to_py)
    }
    /// Whether states are built as decoders reach them.
    #[getter]
    fn is_lazy(&self) -> bool {
        self.inner.is_lazy()
    }
    /// The same guide with every state built up front (an eager guide): what `to_bytes` needs.
    /// An eager guide is returned as it is.
    fn materialize(&self, py: Python<'_>) -> PyResult<PyGuide> {
        if !self.inner.is_lazy() {
            return Ok(PyGuide { inner: self.inner.clone() });
        }
        let g = self.inner.clone();
        let eager = py.detach(move || crate::build::materialize(&g)).map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(eager) })
    }
    /// The guide as bytes (versioned, checksummed; load with `Compiler.guide_from_bytes`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let g = self.inner.clone();
        let bytes = py.detach(move || crate::guide::io::guide_to_bytes(&g)).map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }
    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "a Guide cannot be pickled on its own (it shares its tokenizer's data): send guide.to_bytes() \
             and load it with Compiler(vocab).guide_from_bytes(data)",
        ))
    }
    fn matcher(&self) -> PyMatcher {
        PyMatcher { inner: Matcher::new(self.inner.clone()) }
    }
    fn __repr__(&self) -> String {
        format!(
            "Guide(method={:?}, {}num_states={}, vocab_size={})",
            self.inner.method().name(),
            if self.inner.is_lazy() { "lazy=True, " } else { "" },
            self.inner.num_states(),
            self.inner.vocab_size()
        )
    }
}
