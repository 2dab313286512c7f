//! `EventStream`: completed windows of events, in time order, as lists of dicts or Arrow record
//! batches, while the next windows are fetched. Progress goes to a Python callable between
//! waits, never from Rust threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use arrow_array::RecordBatch;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3_arrow::PyRecordBatch;
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use super::ProgressCell;
use crate::client::events::{self, Event, EventForm, Query};
use crate::client::Result;
use crate::python::conversions::errors;
use crate::python::conversions::from_json::to_list;
use crate::python::runtime::sigint::Watch;
use crate::python::runtime::{self, aio, wait, Work};

/// How long `close` waits for the fetch it stopped to end.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The receiving end of a fetch, and what is left of the window being handed out in chunks.
struct Receiving {
    rx: mpsc::Receiver<Result<events::Completed>>,
    rest: VecDeque<Event>,
    /// The end of the window that `rest` is left of.
    rest_until_ms: i64,
}

/// Completed windows of events, in time order, as lists of dicts (see `Client.iter_events`),
/// or as Arrow record batches.
#[pyclass(name = "EventStream", module = "surveillance._core", frozen)]
pub struct EventStream {
    rx: Arc<AsyncMutex<Receiving>>,
    task: tokio::task::JoinHandle<()>,
    cell: ProgressCell,
    progress: Option<Py<PyAny>>,
    arrow: bool,
    /// The end of the last window handed out whole: every event before it has been.
    frontier: Arc<AtomicI64>,
    /// A watch of Ctrl-C for a stream consumed off the main thread: once it fires, the fetch
    /// stops and the stream raises `KeyboardInterrupt`.
    interrupt: Option<Arc<Watch>>,
}

impl EventStream {
    /// Starts the fetch; at most `buffer` completed windows wait for the consumer. With
    /// `interrupt`, the fetch sends no request once the watch fired.
    pub fn start(
        client: crate::client::Client,
        query: Query,
        progress: Option<Py<PyAny>>,
        buffer: usize,
        arrow: bool,
        interrupt: Option<Arc<Watch>>,
    ) -> PyResult<Self> {
        let rt = runtime::get().map_err(errors::internal)?;
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let cell = ProgressCell::of(&client);
        let sink = progress.as_ref().map(|_| cell.sink());
        let keep = if arrow {
            EventForm::Arrow
        } else {
            EventForm::Text
        };
        let frontier = Arc::new(AtomicI64::new(query.start_ms));
        let fetch = events::stream(client, query, keep, tx, sink);
        let task =
            match interrupt.clone() {
                // Dropping the fetch at the signal ends the channel: `__next__` then raises.
                Some(watch) => runtime::call::spawn(&rt, async move {
                    watch.unless_fired(fetch).await.unwrap_or(())
                }),
                None => runtime::call::spawn(&rt, fetch),
            };
        Ok(EventStream {
            rx: Arc::new(AsyncMutex::new(Receiving {
                rx,
                rest: VecDeque::new(),
                rest_until_ms: frontier.load(Ordering::Relaxed),
            })),
            task,
            cell,
            progress,
            arrow,
            frontier,
            interrupt,
        })
    }

    /// `KeyboardInterrupt` once the stream's watch of Ctrl-C fired.
    fn interrupted(&self) -> PyResult<()> {
        match &self.interrupt {
            Some(watch) if watch.fired() => Err(PyKeyboardInterrupt::new_err(())),
            _ => Ok(()),
        }
    }

    /// The work of `__next__` and `next_async`: the next events, at most `limit` of them (a
    /// window is handed out in chunks), or with `arrow` the next window as one record batch;
    /// None at the end.
    fn next_work(&self, limit: usize) -> impl Work<Option<Next>> {
        let (rx, frontier, arrow) = (self.rx.clone(), self.frontier.clone(), self.arrow);
        async move {
            let mut r = rx.lock().await;
            if r.rest.is_empty() {
                let Some(window) = r.rx.recv().await else {
                    return Ok(None);
                };
                let window = window?;
                if arrow {
                    frontier.store(window.until_ms, Ordering::Relaxed);
                    return Ok(Some(Next::Batch(window.record_batch()?)));
                }
                r.rest = window.events.into();
                r.rest_until_ms = window.until_ms;
            }
            let n = limit.min(r.rest.len());
            let events = r.rest.drain(..n).collect();
            if r.rest.is_empty() {
                frontier.store(r.rest_until_ms, Ordering::Relaxed);
            }
            Ok(Some(Next::Events(events)))
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Stops the requests of an abandoned iteration.
        self.task.abort();
    }
}

#[pymethods]
impl EventStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next window (or what is left of it), handing `progress` the fetch's progress while
    /// it waits. An error (Ctrl-C, the callback's, the fetch's) ends the stream.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Next>> {
        let next = self.interrupted().and_then(|()| {
            wait::wait_with(py, self.next_work(usize::MAX), |py| {
                self.interrupted()?;
                self.cell.report(py, self.progress.as_ref())
            })
        });
        // A fetch stopped by the watch ends the channel: that is no end of the range.
        let next = next.and_then(|next| self.interrupted().map(|()| next));
        next.inspect_err(|_| self.task.abort())
    }

    /// An awaitable of the next events, at most `limit` of them (a window is handed out in
    /// chunks, so that building the dicts never holds the event loop for long), or None at
    /// the end.
    #[pyo3(signature = (limit=1000))]
    fn next_async<'py>(&self, py: Python<'py>, limit: usize) -> PyResult<Bound<'py, PyAny>> {
        aio::awaitable(py, self.next_work(limit.max(1)))
    }

    /// Hands `progress` the fetch's latest progress, if it moved since the last call (for
    /// `async for`, whose awaiting thread cannot call it).
    fn report(&self, py: Python<'_>) -> PyResult<()> {
        self.cell.report(py, self.progress.as_ref())
    }

    /// Stops the fetch, and waits (a few seconds at most) until it has ended: a sync's fetch
    /// keeps the pages it read of an unfinished window in the cache as it ends, before the
    /// process may exit.
    fn close(&self, py: Python<'_>) {
        self.task.abort();
        let task = &self.task;
        runtime::detach(py, || {
            let deadline = std::time::Instant::now() + CLOSE_WAIT;
            while !task.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
    }

    /// The end (epoch ms, exclusive) of the last window handed out whole: every event of the
    /// range before it has been (the range's start before the first).
    #[getter]
    fn frontier_ms(&self) -> i64 {
        self.frontier.load(Ordering::Relaxed)
    }
}

/// What the stream hands out: events, built into a list of dicts, or a window as one record
/// batch.
pub enum Next {
    Events(Vec<Event>),
    Batch(RecordBatch),
}

impl<'py> IntoPyObject<'py> for Next {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Next::Events(events) => Ok(to_list(py, events.iter().map(Event::text))?.into_any()),
            Next::Batch(batch) => Ok(Bound::new(py, PyRecordBatch::new(batch))?.into_any()),
        }
    }
}
