//! Waiting for core work from a sync binding, one way for every call (lists, events, streams,
//! publishing): on the shared runtime with the GIL released, in steps of at most [`TICK`].
//! Between steps the Python thread hands buffered log lines to Python, reports progress, checks
//! for signals (Ctrl-C) and asks a caller that may give up (an asyncio task cancelled). A wait
//! that stops leaves the work to its caller: dropped (`wait`), or told to stop and report
//! (publishing).

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;
use tokio::task::{JoinError, JoinHandle};

use super::progress::{Cell, Sink, Update};
use super::{self as runtime, call, log, Work};
use crate::python::conversions::errors;

/// The longest the Python thread waits without looking at signals and progress.
pub const TICK: Duration = Duration::from_millis(50);

/// Why a wait stopped before its work was done: the exception to raise (a signal handler's, a
/// progress callback's, or `cancelled`'s own), or None when the caller gave up.
pub type Stopped = Option<PyErr>;

/// One step: waits up to `budget` for `fut` with the GIL released, then hands the log lines
/// buffered meanwhile to Python. None: the budget ran out first.
pub fn step<F>(py: Python<'_>, rt: &Runtime, budget: Duration, fut: F) -> Option<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let done = runtime::detach(py, || {
        rt.block_on(async { tokio::time::timeout(budget, fut).await.ok() })
    });
    log::flush(py);
    done
}

/// Between steps: `tick` (a progress update, Python code that Ctrl-C may interrupt too), then
/// pending signals.
pub fn ticked(py: Python<'_>, tick: impl FnOnce(Python<'_>) -> PyResult<()>) -> PyResult<()> {
    tick(py).and_then(|()| py.check_signals())
}

/// As [`ticked`], then `cancelled` (called; a true answer is the caller giving up).
pub fn between(
    py: Python<'_>,
    tick: impl FnOnce(Python<'_>) -> PyResult<()>,
    cancelled: Option<&Py<PyAny>>,
) -> std::result::Result<(), Stopped> {
    runtime::exit_point(py);
    ticked(py, tick).map_err(Some)?;
    match cancelled.map(|c| c.call0(py).and_then(|r| r.is_truthy(py))) {
        None | Some(Ok(false)) => Ok(()),
        Some(Ok(true)) => Err(None),
        Some(Err(e)) => Err(Some(e)),
    }
}

/// How [`until_done`] ended.
pub enum Waited<T> {
    /// The task ended, with its output; with a stop when one came in the same step (the
    /// output is whole, and the handle is spent: it must not be awaited again).
    Ended(std::result::Result<T, JoinError>, Option<Stopped>),
    /// A stop came first: the task is still running, for the caller to end.
    Stopped(Stopped),
}

/// Waits for a spawned `task`, calling `tick` and asking `cancelled` between steps.
pub fn until_done<T>(
    py: Python<'_>,
    rt: &Runtime,
    task: &mut JoinHandle<T>,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
    cancelled: Option<&Py<PyAny>>,
) -> Waited<T>
where
    T: Send + 'static,
{
    let _call = runtime::ExitGuard::enter();
    loop {
        let done = step(py, rt, TICK, &mut *task);
        let stopped = between(py, &mut tick, cancelled).err();
        match (done, stopped) {
            (Some(done), stopped) => return Waited::Ended(done, stopped),
            (None, Some(stopped)) => return Waited::Stopped(stopped),
            (None, None) => {}
        }
    }
}

/// Runs `work` to completion, or until a signal handler raises (the work is then dropped,
/// which cancels its requests).
pub fn wait<T: Send + 'static>(py: Python<'_>, work: impl Work<T>) -> PyResult<T> {
    wait_with(py, work, |_| Ok(()))
}

/// As [`wait`], for work of `client` that reports its progress: `work` is made with the sink
/// of a fresh cell (None without a `callback`), whose latest update (and what the client waits
/// for) `callback` gets between steps and once more when the wait is over.
pub fn wait_reporting<P: Update, T: Send + 'static, W: Work<T>>(
    py: Python<'_>,
    client: &crate::client::Client,
    callback: Option<&Py<PyAny>>,
    work: impl FnOnce(Option<Sink<P>>) -> PyResult<W>,
) -> PyResult<T> {
    let cell = Cell::of(client);
    let work = work(callback.map(|_| cell.sink()))?;
    let done = wait_with(py, work, |py| cell.report(py, callback));
    cell.report(py, callback)?;
    done
}

/// As [`wait`], calling `tick` with the GIL between steps (progress updates).
pub fn wait_with<T: Send + 'static>(
    py: Python<'_>,
    work: impl Work<T>,
    tick: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<T> {
    let rt = runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    let mut task = call::spawn(&rt, work);
    match until_done(py, &rt, &mut task, tick, None) {
        Waited::Ended(Ok(result), None) => result.map_err(errors::to_py),
        Waited::Ended(Err(join), None) => Err(errors::internal(join)),
        Waited::Ended(_, Some(stopped)) | Waited::Stopped(stopped) => {
            task.abort();
            Err(stopped.unwrap_or_else(|| errors::internal("the wait stopped")))
        }
    }
}
