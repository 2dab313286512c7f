//! How the core's work runs for Python: the process-wide tokio runtime of the bindings (here),
//! rebuilt in a child after `fork()` (a forked child has none of its parent's threads, so the
//! parent's runtime is unusable there); the core's [`Work`], which a sync binding waits for
//! (`wait`) and an async one hands to asyncio (`aio`); the core's log lines handed to Python
//! (`log`), progress cells (`progress`) and Ctrl-C seen off the main thread (`sigint`).

pub(super) mod aio;
pub(super) mod log;
pub(super) mod progress;
pub(super) mod sigint;
pub(super) mod wait;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
    EXITING.store(true, Ordering::Release);
    let taken = RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some((owner, rt)) = taken else { return };
    if owner != std::process::id() {
        // A parent's runtime, whose threads do not exist here.
        std::mem::forget(rt);
        return;
    }
    if let Ok(rt) = Arc::try_unwrap(rt) {
        py.detach(move || rt.shutdown_timeout(EXIT_GRACE));
    }
}
