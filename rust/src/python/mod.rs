//! The PyO3 binding module `propertok._core` — the only module that knows about Python.
//!
//! One file per class, each a thin wrapper over a core type behind an `Arc` (as the core's
//! modules: [`vocab`], [`compiler`], [`guide`], [`matcher`], [`byte_dfa`]); errors map onto
//! Python exceptions in one place ([`to_py`]); long work (tokenizer DFA build, regex
//! compilation) runs with the GIL released. Nothing here imports the `propertok` Python package:
//! what is written in Python (`Compiler.compile_json_schema`) subclasses these classes there.

mod byte_dfa;
mod compiler;
mod detach;
mod grammar;
mod guide;
mod json_schema;
mod matcher;
mod vocab;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyNotImplementedError, PyValueError};
use pyo3::prelude::*;

use crate::error::Error;

/// The extension's Rust allocations go to mimalloc, not glibc's malloc. A Llama 3 compile frees
/// ~150 MB of temporaries and dropping a guide frees tens of thousands of blocks; under glibc
/// the next large allocation sorts those freed chunks first, and that allocation is usually the
/// mask cache's slot for the next state, so the first masks after a compile took 100–400 µs
/// instead of 3–10 µs (`benches/compare.py`, Llama 3: mask p99 115 → 14 µs). mimalloc frees
/// into per-page lists and has no such deferred work. `v2`, `no_thp` and `local_dynamic_tls`
/// (see `Cargo.toml`): its v3 with transparent huge pages made the tokenizer-DFA build ~30 %
/// slower (huge pages zeroed again after each purge), and a library loaded with `dlopen` needs
/// the dynamic TLS model. Only the extension uses it: the crate itself (`cargo test`,
/// criterion) keeps the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Returns the memory the extension has freed to the operating system (mimalloc's
/// `mi_collect(true)`; glibc's `malloc_trim` does not reach it). For measuring resident memory,
/// as `benches/compare.py` does; results of propertok never depend on it.
#[pyfunction]
fn _release_freed_memory(py: Python<'_>) {
    // SAFETY: `mi_collect` only returns free pages of mimalloc's own heaps to the OS.
    py.detach(|| unsafe { libmimalloc_sys::mi_collect(true) });
}

create_exception!(_core, PropertokError, PyException, "Base class of propertok's own exceptions.");
create_exception!(_core, LimitExceeded, PropertokError, "A documented size limit was reached.");

/// The one place where core errors become Python exceptions.
pub(crate) fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Unsupported(_) => PyNotImplementedError::new_err(msg),
        Error::LimitExceeded { .. } => LimitExceeded::new_err(msg),
        Error::InvalidRegex(_)
        | Error::UnsupportedRegex(_)
        | Error::InvalidGrammar(_)
        | Error::EmptyLanguage(_)
        | Error::MalformedTokenizer(_)
        | Error::UnsupportedTokenizer(_)
        | Error::InvalidArgument(_) => PyValueError::new_err(msg),
    }
}

/// A token id from Python, `ValueError` naming `what` when it is negative or too large.
pub(crate) fn token_id(v: i64, what: &str) -> PyResult<u32> {
    u32::try_from(v).map_err(|_| PyValueError::new_err(format!("{what} {v} is out of range")))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PropertokError", m.py().get_type::<PropertokError>())?;
    m.add("LimitExceeded", m.py().get_type::<LimitExceeded>())?;
    m.add_class::<vocab::PyVocabulary>()?;
    m.add_class::<byte_dfa::PyByteDfa>()?;
    m.add_class::<byte_dfa::PyRuleAutomaton>()?;
    m.add_class::<compiler::PyCompiler>()?;
    m.add_class::<guide::PyGuide>()?;
    m.add_class::<matcher::PyMatcher>()?;
    m.add_function(wrap_pyfunction!(_release_freed_memory, m)?)?;
    m.add_function(wrap_pyfunction!(grammar::grammar_to_regex, m)?)?;
    m.add_function(wrap_pyfunction!(json_schema::schema_to_rules_subset, m)?)?;
    Ok(())
}
