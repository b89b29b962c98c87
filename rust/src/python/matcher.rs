//! `propertok._core.Matcher`.

use numpy::{PyArray1, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::to_py;
use crate::guide::matcher::Matcher;

#[pyclass(name = "Matcher", module = "propertok._core")]
pub(crate) struct PyMatcher {
    pub(crate) inner: Matcher,
}

#[pymethods]
impl PyMatcher {
    #[getter]
    fn state(&self) -> u32 {
        self.inner.state()
    }
    #[getter]
    fn num_accepted_tokens(&self) -> usize {
        self.inner.num_accepted_tokens()
    }
    fn accept_token(&mut self, py: Python<'_>, token_id: i64) -> PyResult<bool> {
        let t = u32::try_from(token_id)
            .map_err(|_| PyValueError::new_err(format!("token id {token_id} is out of range")))?;
        // A lazy guide may build the successor state here: without the GIL.
        let inner = &mut self.inner;
        py.detach(move || inner.accept_token(t)).map_err(to_py)
    }
    fn accept_tokens(&mut self, py: Python<'_>, token_ids: Vec<i64>) -> PyResult<bool> {
        for t in token_ids {
            if !self.accept_token(py, t)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner.rollback(num_tokens).map_err(to_py)
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
    fn allowed_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let inner = &self.inner;
        let tokens = py.detach(move || inner.allowed_tokens()).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, tokens.into_iter().map(|t| t as i32).collect()))
    }
    fn forced_tokens(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let inner = &self.inner;
        py.detach(move || inner.forced_tokens()).map_err(to_py)
    }
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&self, bitmask: Bound<'_, PyAny>, index: isize) -> PyResult<()> {
        let words = self.inner.guide().mask_words();
        let mut array: PyReadwriteArray2<i32> = bitmask.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "bitmask must be a writeable 2-D numpy array of dtype int32 with shape (batch, {words}); got {}",
                describe_array(&bitmask)
            ))
        })?;
        let shape = array.shape().to_vec();
        if shape[1] != words {
            return Err(PyValueError::new_err(format!(
                "bitmask has {} words per row; this guide needs ceil(vocab_size/32) = {words}",
                shape[1]
            )));
        }
        if index < 0 || index as usize >= shape[0] {
            return Err(PyValueError::new_err(format!("index {index} is out of range for a batch of {}", shape[0])));
        }
        if !array.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "bitmask must be C-contiguous (row-major); use np.ascontiguousarray or allocate_token_bitmask",
            ));
        }
        let slice = array.as_slice_mut().map_err(|_| PyValueError::new_err("bitmask must be C-contiguous"))?;
        let row = &mut slice[index as usize * words..(index as usize + 1) * words];
        // SAFETY: i32 and u32 have the same size and alignment; any bit pattern is valid for both.
        let row: &mut [u32] = unsafe { std::slice::from_raw_parts_mut(row.as_mut_ptr().cast::<u32>(), row.len()) };
        // A cached mask is a copy, made with the GIL held: releasing and taking it back cost
        // more than the copy.
        let inner = &self.inner;
        if inner.write_cached_mask(row) {
            return Ok(());
        }
        // Computed (a lazy guide's first visit) straight into the row, without the GIL: the
        // borrow of `array` keeps the row alive and numpy's borrow checker keeps other Rust
        // borrows off it meanwhile.
        bitmask.py().detach(move || inner.write_mask(row)).map_err(to_py)
    }
}

fn describe_array(obj: &Bound<'_, PyAny>) -> String {
    let get = |a: &str| obj.getattr(a).and_then(|v| v.str().map(|s| s.to_string())).unwrap_or_else(|_| "?".into());
    match obj.getattr("dtype") {
        Ok(_) => format!("dtype {}, shape {}", get("dtype"), get("shape")),
        Err(_) => format!("an object of type {}", obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
    }
}
