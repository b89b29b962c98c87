//! Releasing the GIL only once a call's work turns out long (see `crate::util::long_work`).
//!
//! A lazy guide's first visit usually takes 3-10 µs, but may take milliseconds, and then other
//! Python threads must run meanwhile. `Python::detach` around every first visit made each pay
//! for releasing the GIL: ~0.1-0.3 µs when no other thread wants it, and, when another Python
//! thread is running, a wait of up to CPython's switch interval (5 ms) to get it back, since that
//! thread keeps it until then: with one spinning thread, the median mask along 60 of issue 17's
//! Llama 3 documents took 5.1 ms; with the hook below, 4.5 µs. [`detach_when_long`] keeps the GIL and
//! registers a hook with the core that releases it the first time the work is long (see
//! `crate::util::long_work`): past [`long_work::LONG_AFTER`] (1 ms) of a lazy guide's call or
//! compile, or before a step known to take longer (a wide trie walk, a region, a slice set, the
//! tokenizer's lazy parts). The GIL is taken back when the call returns or unwinds.
//!
//! Only calls whose core work reports when it is long use this (`Guide::reports_long_work`,
//! `Compiler::lazy_compiles_report_long_work`); the others keep `Python::detach`.

use std::cell::Cell;
use std::ptr::null_mut;

use pyo3::ffi;
use pyo3::Python;

use crate::util::long_work;

thread_local! {
    /// The thread state this thread's hook saved when it released the GIL; null while held.
    static SAVED: Cell<*mut ffi::PyThreadState> = const { Cell::new(null_mut()) };
}

/// The hook: releases the GIL this thread holds, keeping its thread state for [`Reattach`].
fn release() {
    // SAFETY: the hook runs only on the thread inside `detach_when_long`, which holds the GIL
    // (`py`), at most once per call (see `long_work`); the core code that runs until the GIL is
    // taken back makes no Python calls (it knows nothing of Python).
    let state = unsafe { ffi::PyEval_SaveThread() };
    SAVED.with(|s| s.set(state));
}

/// Takes the GIL back, if the hook released it, when dropped (also by a panic's unwinding, so
/// that PyO3 turns it into an exception with the GIL held).
struct Reattach;

impl Drop for Reattach {
    fn drop(&mut self) {
        let state = SAVED.with(|s| s.replace(null_mut()));
        if !state.is_null() {
            // SAFETY: `state` is this thread's state, saved by `release` on this thread.
            unsafe { ffi::PyEval_RestoreThread(state) };
        }
    }
}

/// Runs `call` with the GIL held until the core tells the work is long, then without it (see
/// the module docs). `Send` bounds as `Python::detach`'s on stable Rust: `call` holds no
/// Python reference, which would be unsound to touch without the GIL.
fn detach_when_long<T: Send>(_py: Python<'_>, call: impl FnOnce() -> T + Send) -> T {
    let _reattach = Reattach;
    long_work::with_hook(release, call)
}

/// `call`: [`detach_when_long`] where its work reports when it is long
/// (`Guide::reports_long_work`, `Compiler::lazy_compiles_report_long_work`), else without the
/// GIL throughout.
pub(crate) fn detach_for<T: Send>(py: Python<'_>, reports_long_work: bool, call: impl FnOnce() -> T + Send) -> T {
    match reports_long_work {
        true => detach_when_long(py, call),
        false => py.detach(call),
    }
}
