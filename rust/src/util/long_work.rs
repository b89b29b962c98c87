//! A hook a caller may set around one call, run at most once, the first time the call's work
//! turns out long.
//!
//! Why: a binding releases its interpreter lock around work that may be long, so that other
//! threads run meanwhile. A lazy guide's first visit may take milliseconds (a trie walk, a
//! region, a slice set), but most take 3-10 µs, and releasing the lock costs each of them
//! twice: ~0.1-0.3 µs to release and retake it when no other thread wants it, and up to
//! CPython's switch interval (5 ms) to get it back when another Python thread is running, which
//! holds it until then. With the hook, the lock is kept for work that stays short and released
//! at the first sign that it is not: a [`crate::limits::Deadline`] check past [`LONG_AFTER`] (the
//! lazy engine's clock checks, a compile's), a large subset construction, and the steps known to
//! be long, whatever the time, call [`notify`].
//!
//! # Invariants
//! * The hook is per thread and per call: [`with_hook`] sets it for the call on the caller's
//!   thread and clears it when the call returns or unwinds; work on other threads never runs it.
//! * It runs at most once per [`with_hook`]: [`notify`] takes it out before running it.
//!
//! # Costs
//! [`notify`] is a thread-local read when no hook is set (every call outside a binding).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a call's work runs before its clock checks call [`notify`] ([`notify_past`]): a
/// millisecond, a fifth of the switch interval for which CPython itself lets a thread keep the
/// lock. A shorter
/// bound released the lock for more first visits, each of which, with another Python thread
/// running, waited up to 5 ms to get it back: along 100 of issue 17's Llama 3 documents with
/// one such thread, 20 µs gave 121-128 steps over 1 ms, 100 µs 50-61 and 1 ms 13-14; and a
/// lazy compile (0.2-0.5 ms) passed 100 µs (`docs/design.md` §9).
pub const LONG_AFTER: Duration = Duration::from_millis(1);

/// A hook and when its call started.
type Hook = (fn(), Instant);

thread_local! {
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
}

/// Runs `call` with `hook` as this thread's hook (see the module docs); the hook set before, if
/// any, is put back afterwards.
pub fn with_hook<T>(hook: fn(), call: impl FnOnce() -> T) -> T {
    struct Restore(Option<Hook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOOK.with(|h| h.set(self.0));
        }
    }
    let _restore = Restore(HOOK.with(|h| h.replace(Some((hook, Instant::now())))));
    call()
}

/// The current call's work is long: runs this thread's hook, if one is set and has not run.
#[inline]
pub fn notify() {
    if let Some((hook, _)) = HOOK.with(Cell::take) {
        hook();
    }
}

/// [`notify`] once the hook's call has run past [`LONG_AFTER`], told by a clock that started at
/// `started` and reads `elapsed` now (a [`crate::limits::Deadline`]'s: no clock is read here).
/// The hook's call may make several timed calls (a matcher's forced tokens step through
/// several states), so its own start counts, not the clock's.
#[inline]
pub fn notify_past(started: Instant, elapsed: Duration) {
    let Some((_, call_start)) = HOOK.with(Cell::get) else { return };
    let now = started + elapsed;
    if now.saturating_duration_since(call_start) > LONG_AFTER {
        notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RUNS: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        RUNS.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn runs_once_inside_the_call_and_on_its_thread_only() {
        notify(); // no hook: nothing
        let runs = with_hook(count, || {
            std::thread::spawn(notify).join().unwrap(); // another thread: not its hook
            let before = RUNS.load(Ordering::SeqCst);
            notify();
            notify();
            RUNS.load(Ordering::SeqCst) - before
        });
        assert_eq!(runs, 1);
        let after = RUNS.load(Ordering::SeqCst);
        notify(); // cleared when the call returned
        assert_eq!(RUNS.load(Ordering::SeqCst), after);
        // Past the bound of the hook's own call, whatever clock tells it.
        let before = RUNS.load(Ordering::SeqCst);
        with_hook(count, || {
            let now = Instant::now();
            let earlier = now - LONG_AFTER * 10;
            notify_past(earlier, LONG_AFTER * 5); // a clock that read long, but before the call
            assert_eq!(RUNS.load(Ordering::SeqCst), before);
            notify_past(now, LONG_AFTER * 2); // a reading past the bound of the call
        });
        assert_eq!(RUNS.load(Ordering::SeqCst), before + 1);
        let after = RUNS.load(Ordering::SeqCst);
        // Cleared when the call unwinds too.
        let _ = std::panic::catch_unwind(|| with_hook(count, || panic!("unwinds")));
        notify();
        assert_eq!(RUNS.load(Ordering::SeqCst), after);
    }
}
