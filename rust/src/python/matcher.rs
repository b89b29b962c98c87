//! `propertok._core.Matcher`.

use std::ptr::NonNull;

use numpy::{npyffi, PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::detach::detach_for;
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
        // A lazy guide may build the successor state here: without the GIL once that turns out
        // long (see `detach`).
        let reports = self.inner.guide().reports_long_work();
        let inner = &mut self.inner;
        detach_for(py, reports, move || inner.accept_token(t)).map_err(to_py)
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
        let tokens =
            detach_for(py, inner.guide().reports_long_work(), move || inner.allowed_tokens()).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, tokens.into_iter().map(|t| t as i32).collect()))
    }
    fn forced_tokens(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        // A chain of states: the GIL is released once the whole call passes a millisecond.
        let inner = &self.inner;
        detach_for(py, inner.guide().reports_long_work(), move || inner.forced_tokens()).map_err(to_py)
    }
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&self, bitmask: Bound<'_, PyAny>, index: isize) -> PyResult<()> {
        let words = self.inner.guide().mask_words();
        let start = bitmask_row(&bitmask, words, index)?;
        // SAFETY: `start` is row `index`'s first of `words` writable, aligned u32 slots (u32 and
        // int32 share size and alignment; any bit pattern is valid). `bitmask` keeps the array
        // and its data alive for the call, and `row` does not outlive it; this call makes no
        // other reference to the row (see `bitmask_row` for concurrent callers).
        let row = unsafe { std::slice::from_raw_parts_mut(start.as_ptr(), words) };
        // A cached mask is a copy (or, inside a string, one pass over shared words), made with
        // the GIL held: releasing and taking it back cost more than the copy.
        let inner = &self.inner;
        if inner.write_cached_mask(row) {
            return Ok(());
        }
        // Computed (a lazy guide's first visit) straight into the row; without the GIL once
        // the work turns out long (most first visits take a few microseconds, less than
        // releasing and retaking the GIL costs them; see `detach`).
        let reports = inner.guide().reports_long_work();
        detach_for(bitmask.py(), reports, move || inner.write_mask(row)).map_err(to_py)
    }
}

/// The first word of row `index` of `bitmask`, a writeable, aligned, C-contiguous int32 array of
/// shape `(batch, words)`; a `ValueError` naming what is wrong otherwise.
///
/// The row is taken from the array's data pointer rather than through `numpy`'s borrow
/// checker, which tracks borrows per array: two threads filling different rows of one bitmask,
/// each having released the GIL while its mask is computed, made the second borrow fail (a
/// panic inside `numpy`'s extraction), and the checker's bookkeeping cost ~0.12 µs a call.
/// Writing only row `index` keeps concurrent fills of distinct rows apart, as in a batch filled
/// by a thread pool; filling one row from two threads at once, or resizing the array with
/// `refcheck=False` meanwhile, is the caller's race, as with any numpy buffer.
fn bitmask_row(bitmask: &Bound<'_, PyAny>, words: usize, index: isize) -> PyResult<NonNull<u32>> {
    let wrong = || {
        PyValueError::new_err(format!(
            "bitmask must be a writeable 2-D numpy array of dtype int32 with shape (batch, {words}); got {}",
            describe_array(bitmask)
        ))
    };
    let array = bitmask.cast::<PyArray2<i32>>().map_err(|_| wrong())?;
    // SAFETY: `array` is a live numpy array (checked above); its flags are plain fields.
    let flags = unsafe { (*array.as_array_ptr()).flags };
    if flags & npyffi::NPY_ARRAY_WRITEABLE == 0 {
        return Err(wrong());
    }
    let (rows, row_words) = (array.shape()[0], array.shape()[1]);
    if row_words != words {
        return Err(PyValueError::new_err(format!(
            "bitmask has {row_words} words per row; this guide needs ceil(vocab_size/32) = {words}"
        )));
    }
    if index < 0 || index as usize >= rows {
        return Err(PyValueError::new_err(format!("index {index} is out of range for a batch of {rows}")));
    }
    if flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0 || flags & npyffi::NPY_ARRAY_ALIGNED == 0 {
        return Err(PyValueError::new_err(
            "bitmask must be C-contiguous (row-major) and aligned; use np.ascontiguousarray or allocate_token_bitmask",
        ));
    }
    // `index < rows`, so the offset stays inside the array's `rows × words` elements.
    NonNull::new(array.data().cast::<u32>().wrapping_add(index as usize * words))
        .ok_or_else(|| PyValueError::new_err("bitmask has no data"))
}

fn describe_array(obj: &Bound<'_, PyAny>) -> String {
    let get = |a: &str| obj.getattr(a).and_then(|v| v.str().map(|s| s.to_string())).unwrap_or_else(|_| "?".into());
    match obj.getattr("dtype") {
        Ok(_) => format!("dtype {}, shape {}", get("dtype"), get("shape")),
        Err(_) => format!("an object of type {}", obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
    }
}
