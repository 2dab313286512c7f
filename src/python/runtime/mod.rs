//! How the core's work runs for Python: the process-wide tokio runtime of the bindings (here),
//! rebuilt in a child after `fork()` (a forked child has none of its parent's threads, so the
//! parent's runtime is unusable there); the core's [`Work`], which a sync binding waits for
//! (`wait`) and an async one hands to asyncio (`aio`); the core's log lines handed to Python
//! (`log`), progress cells (`progress`) and Ctrl-C seen off the main thread (`sigint`).

pub(super) mod aio;
pub(super) mod call;
pub(super) mod log;
pub(super) mod progress;
pub(super) mod sigint;
pub(super) mod telemetry;
pub(super) mod wait;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;

use tokio::runtime::Runtime;

use crate::client::Result;

/// Core work of a binding: a future of a core result, run on the runtime, which becomes Python
/// objects only when it is done. A binding with a sync and an async form builds it once, in one
/// function, and its two forms differ by one line: [`wait::wait`] or [`aio::awaitable`].
pub trait Work<T>: Future<Output = Result<T>> + Send + 'static {}

impl<T, F: Future<Output = Result<T>> + Send + 'static> Work<T> for F {}

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// Set when the interpreter begins to exit ([`stop_at_exit`] ran): the runtime is stopped and
/// is not built again.
static EXITING: AtomicBool = AtomicBool::new(false);

/// The thread that runs the interpreter's exit (the one [`stop_at_exit`] ran on).
static EXIT_THREAD: OnceLock<std::thread::ThreadId> = OnceLock::new();

/// Runs `f` with the GIL released, as `py.detach` does; every binding lets go of the GIL
/// through here (the layer check holds it).
///
/// A thread of the program's own (a daemon thread in a sync call, a publish's iterator) may
/// still be in `f` when the interpreter begins to exit. Were it to take the GIL back once the
/// interpreter finalizes, CPython would end the thread with `pthread_exit`, whose unwinding
/// through Rust frames aborts the process ("FATAL: exception not rethrown", exit status 134,
/// after the program's own work was done). Such a thread, once the exit has begun, waits
/// instead, holding no lock of ours and not the GIL, until the process ends, as CPython 3.14
/// holds its own daemon threads.
pub fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    T: Send,
    F: Send + FnOnce() -> T,
{
    py.detach(move || {
        let out = f();
        hold_if_exiting();
        out
    })
}

/// A point between two calls into Python of a long loop (the records a publish pulls from a
/// Python iterator): once the interpreter's exit has begun, a thread other than the one that
/// runs it lets go of the GIL here and waits for the process to end (see [`detach`]), rather
/// than being ended by CPython inside the Python code it would call next.
pub fn exit_point(py: Python<'_>) {
    if EXITING.load(Ordering::Acquire) {
        detach(py, || ());
    }
}

/// Parks the calling thread for good when the interpreter is exiting and the thread is not
/// the one that runs the exit (see [`detach`]).
fn hold_if_exiting() {
    if !EXITING.load(Ordering::Acquire) {
        return;
    }
    if EXIT_THREAD.get() == Some(&std::thread::current().id()) {
        return;
    }
    // The guards this thread is inside are all held with it.
    HELD.add(i64::from(GUARDS.with(|g| g.get())));
    loop {
        std::thread::park();
    }
}

thread_local! {
    /// How many [`ExitGuard`]s this thread is inside (a call within a call counts twice).
    static GUARDS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// [`ExitGuard`]s entered now, and the threads inside one held for good by
/// [`hold_if_exiting`], in this process.
static IN_CALLS: ProcessCount = ProcessCount(AtomicU64::new(0));
static HELD: ProcessCount = ProcessCount(AtomicU64::new(0));

/// A count of this process's threads: a child forked while a thread of its parent was counted
/// has not that thread, and counts from zero (the process id is kept beside the count).
struct ProcessCount(AtomicU64);

impl ProcessCount {
    /// Adds `n` to this process's count.
    fn add(&self, n: i64) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                let count = Self::mine(v).saturating_add_signed(n) & 0xffff_ffff;
                Some(u64::from(std::process::id()) << 32 | count)
            });
    }

    /// This process's count.
    fn get(&self) -> u64 {
        Self::mine(self.0.load(Ordering::Acquire))
    }

    /// The count that the stored value `v` holds for this process: none when another process
    /// stored it.
    fn mine(v: u64) -> u64 {
        if v >> 32 == u64::from(std::process::id()) {
            v & 0xffff_ffff
        } else {
            0
        }
    }
}

/// How long the interpreter's exit waits for the threads inside an [`ExitGuard`] to reach a point
/// where they let go of the GIL for good.
const EXIT_HOLD: Duration = Duration::from_secs(1);

/// A binding call that runs Python code from Rust for a long time (a publish pulling records
/// from a Python iterator, a wait calling the progress callback): while one lives, the
/// interpreter's exit waits (up to [`EXIT_HOLD`]) for its thread to reach an [`exit_point`] or
/// the end of a [`detach`], and be held there, before it goes on to finalize.
pub struct ExitGuard(());

impl ExitGuard {
    /// Counts this thread's call until the guard is dropped.
    pub fn enter() -> ExitGuard {
        GUARDS.with(|g| g.set(g.get() + 1));
        IN_CALLS.add(1);
        ExitGuard(())
    }
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        GUARDS.with(|g| g.set(g.get().saturating_sub(1)));
        IN_CALLS.add(-1);
    }
}

/// Waits, with the GIL released, until every thread inside an [`ExitGuard`] is held, or
/// [`EXIT_HOLD`] has passed.
fn hold_calls(py: Python<'_>) {
    let until = std::time::Instant::now() + EXIT_HOLD;
    detach(py, || {
        while IN_CALLS.get() > HELD.get() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// How long the interpreter's exit waits for the runtime's threads to leave a Python call.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// The runtime's worker threads: one per CPU this process may run on (its CPU affinity and its
/// cgroup's CPU quota, as `available_parallelism` reads them), as tokio's own default. More
/// workers than CPUs only add thread switches: publishing a DataFrame from a process held to
/// one CPU cost 8% more CPU time with two workers than with one (`bench/publish.py`).
fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The runtime of this process, built on first use.
pub fn get() -> std::io::Result<Arc<Runtime>> {
    if EXITING.load(Ordering::Acquire) {
        return Err(std::io::Error::other(
            "the Python interpreter is exiting: the client's runtime has stopped",
        ));
    }
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
    }
    if let Some((_, stale)) = slot.take() {
        // The parent's runtime: its threads do not exist here, so dropping it could block.
        std::mem::forget(stale);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .thread_name("surveillance-io")
            .enable_all()
            .build()?,
    );
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// Stops the runtime while the interpreter exits; `_core` registers it with `atexit`.
///
/// A worker thread can be inside a Python call when the main thread returns: an awaitable's
/// result is handed to asyncio by `loop.call_soon_threadsafe`, which lets go of the GIL while
/// it wakes the loop. Had the interpreter begun to finalize by the time that thread takes the
/// GIL back, CPython would end the thread with `pthread_exit`, whose unwinding through Rust
/// frames aborts the process (exit status -6 after all the work was done). Here, with the GIL
/// released, the runtime is shut down: such a call finishes, the workers stop, and whatever
/// tasks are left are dropped (up to [`EXIT_GRACE`]). A runtime still held by a call in flight
/// on another thread is left to it.
#[pyfunction]
pub fn stop_at_exit(py: Python<'_>) {
    let _ = EXIT_THREAD.set(std::thread::current().id());
    EXITING.store(true, Ordering::Release);
    hold_calls(py);
    let taken = RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some((owner, rt)) = taken else { return };
    if owner != std::process::id() {
        // A parent's runtime, whose threads do not exist here.
        std::mem::forget(rt);
        return;
    }
    if let Ok(rt) = Arc::try_unwrap(rt) {
        detach(py, move || rt.shutdown_timeout(EXIT_GRACE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_counts_its_own_threads_only() {
        let count = ProcessCount(AtomicU64::new(0));
        count.add(1);
        count.add(1);
        count.add(-1);
        assert_eq!(count.get(), 1);
        // As a child forked from another process finds its parent's count.
        let other = u64::from(std::process::id()) + 1;
        count.0.store(other << 32 | 5, Ordering::Release);
        assert_eq!(count.get(), 0);
        count.add(1);
        assert_eq!(count.get(), 1);
        count.add(-5);
        assert_eq!(count.get(), 0);
    }
}
