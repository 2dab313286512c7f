//! `EventStream`: completed windows of events, in time order, as lists of dicts or Arrow record
//! batches, while the next windows are fetched. Progress goes to a Python callable between
//! waits, never from Rust threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use arrow_array::RecordBatch;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PyRecordBatch;
use tokio::sync::{mpsc, watch, Mutex as AsyncMutex};

use super::ProgressCell;
use crate::client::events::{self, Event, EventForm, Query};
use crate::client::scope::{Scope, Stop};
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
    /// The fetch's call, stopped by the watch of Ctrl-C or halted as the fetch is stopped:
    /// no request of it leaves after that, even from a task that runs late.
    call: Arc<Scope>,
    cell: ProgressCell,
    progress: Option<Py<PyAny>>,
    arrow: bool,
    /// The end of the last window handed out whole: every event before it has been.
    frontier: Arc<AtomicI64>,
    /// A watch of Ctrl-C for a stream consumed off the main thread: once it fires, the fetch
    /// stops and the stream raises `KeyboardInterrupt`.
    interrupt: Option<Arc<Watch>>,
    /// A sync's fetch: what it carries to the next run, and the switch that stops it.
    carrying: Option<Carrying>,
    /// What a wait received in the step that Ctrl-C stopped: handed out by the next call, so
    /// that no window is lost between a sync's fetch and its dataset.
    pending: std::sync::Mutex<Option<Next>>,
}

/// What a sync's stream needs to stop its fetch and hand over what the fetch carries.
struct Carrying {
    slot: events::CarrySlot,
    stop: watch::Sender<bool>,
    /// The account's name in a blob, and the report whose events the fetch reads.
    account: String,
    report: Option<String>,
}

impl EventStream {
    /// Starts the fetch; at most `buffer` completed windows wait for the consumer. With
    /// `interrupt`, the fetch sends no request once the watch fired. With `carry`, a sync's
    /// fetch (see `stop` and `carried`).
    pub fn start(
        client: crate::client::Client,
        query: Query,
        progress: Option<Py<PyAny>>,
        buffer: usize,
        arrow: bool,
        interrupt: Option<Arc<Watch>>,
        carry: bool,
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
        let carrying = carry.then(|| Carrying {
            slot: events::CarrySlot::default(),
            stop: watch::Sender::new(false),
            account: events::carry::account(&client),
            report: query.report_id.clone(),
        });
        let fetch: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = match &carrying
        {
            Some(c) => Box::pin(events::stream_carrying(
                client,
                query,
                keep,
                tx,
                sink,
                c.slot.clone(),
                c.stop.subscribe(),
            )),
            None => Box::pin(events::stream(client, query, keep, tx, sink)),
        };
        let call = runtime::call::stoppable(interrupt.clone().map(|w| w as Arc<dyn Stop>));
        let task = match interrupt.clone() {
            // Dropping the fetch at the signal ends the channel: `__next__` then raises.
            Some(watch) => runtime::call::spawn_within(&rt, call.clone(), async move {
                watch.unless_fired(fetch).await.unwrap_or(())
            }),
            None => runtime::call::spawn_within(&rt, call.clone(), fetch),
        };
        Ok(EventStream {
            rx: Arc::new(AsyncMutex::new(Receiving {
                rx,
                rest: VecDeque::new(),
                rest_until_ms: frontier.load(Ordering::Relaxed),
            })),
            task,
            call,
            cell,
            progress,
            arrow,
            frontier,
            interrupt,
            carrying,
            pending: std::sync::Mutex::new(None),
        })
    }

    /// Stops the fetch: nothing more is sent, and its task is dropped.
    fn abort(&self) {
        self.call.halt();
        self.task.abort();
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

impl EventStream {
    /// Waits for the next window, reporting progress and checking for Ctrl-C between steps.
    fn wait_next(&self, py: Python<'_>) -> PyResult<Option<Next>> {
        let rt = runtime::get().map_err(errors::internal)?;
        runtime::log::refresh(py);
        let mut task = rt.spawn(self.next_work(usize::MAX));
        let tick = |py: Python<'_>| {
            self.interrupted()?;
            self.cell.report(py, self.progress.as_ref())
        };
        match wait::until_done(py, &rt, &mut task, tick, None) {
            wait::Waited::Ended(Ok(next), None) => next.map_err(errors::to_py),
            wait::Waited::Ended(Err(join), None) => Err(errors::internal(join)),
            wait::Waited::Ended(done, Some(stopped)) => {
                if let (Ok(Ok(Some(next))), Some(_)) = (done, &self.carrying) {
                    *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(next);
                }
                Err(stopped.unwrap_or_else(|| errors::internal("the wait stopped")))
            }
            wait::Waited::Stopped(stopped) => {
                task.abort();
                Err(stopped.unwrap_or_else(|| errors::internal("the wait stopped")))
            }
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Stops the requests of an abandoned iteration.
        self.abort();
    }
}

#[pymethods]
impl EventStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next window (or what is left of it), handing `progress` the fetch's progress while
    /// it waits. An error (Ctrl-C, the callback's, the fetch's) ends the stream, but a sync's
    /// (see `stop`): what its wait received in the step that Ctrl-C stopped is kept, for the
    /// next call.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Next>> {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(next) = pending {
            return Ok(Some(next));
        }
        let next = self.interrupted().and_then(|()| self.wait_next(py));
        // A fetch stopped by the watch ends the channel: that is no end of the range.
        let next = next.and_then(|next| self.interrupted().map(|()| next));
        // A sync's fetch is stopped by `stop`, which lets the answers in flight come in.
        next.inspect_err(|_| {
            if self.carrying.is_none() {
                self.abort()
            }
        })
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
        self.abort();
        let task = &self.task;
        runtime::detach(py, || {
            let deadline = std::time::Instant::now() + CLOSE_WAIT;
            while !task.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
    }

    /// A sync's fetch: asks nothing more, and ends once the answers of the requests in flight
    /// are in (a few seconds at most). The windows it completed before still come out of the
    /// stream, then `carried` hands over the pages read of the others.
    fn stop(&self) {
        match &self.carrying {
            Some(c) => {
                c.stop.send_replace(true);
            }
            None => self.abort(),
        }
    }

    /// A sync's fetch, once it ended (waited for, a few seconds at most; Ctrl-C again stops
    /// the wait and the answers still in flight): the pages it read of the windows it did not
    /// hand out whole, as a blob for `Client.hold_carried` in the next run; None when there
    /// are none.
    fn carried<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        let c = self.carrying.as_ref()?;
        let deadline = std::time::Instant::now() + events::STOP_GRACE + CLOSE_WAIT;
        while !self.task.is_finished() && std::time::Instant::now() < deadline {
            runtime::detach(py, || {
                std::thread::sleep(std::time::Duration::from_millis(5))
            });
            if py.check_signals().is_err() {
                break;
            }
        }
        if !self.task.is_finished() {
            // Dropped, the fetch carries what is in.
            self.close(py);
        }
        let pages = std::mem::take(&mut *c.slot.lock().unwrap_or_else(|e| e.into_inner()));
        let blob = events::carry::encode(&c.account, c.report.as_deref(), &pages)?;
        Some(PyBytes::new(py, &blob))
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
