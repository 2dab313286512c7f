//! `EventStream`: completed windows of events, in time order, as lists of dicts or Arrow record
//! batches, while the next windows are fetched. Progress goes to a Python callable between
//! waits, never from Rust threads.

use std::sync::Arc;

use pyo3::prelude::*;
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use super::ProgressCell;
use crate::client::events::{self, Event, EventForm, Query};
use crate::client::Result;
use crate::python::conversions::errors;
use crate::python::conversions::from_json::to_list;
use crate::python::runtime::{self, aio, log, wait};

/// The receiving end of a fetch, and what is left of the window being handed out in chunks.
struct Receiving {
    rx: mpsc::Receiver<Result<events::Completed>>,
    rest: std::collections::VecDeque<Event>,
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
    /// The end of the last window handed out: every event before it has been.
    frontier: std::sync::atomic::AtomicI64,
}

impl EventStream {
    /// Starts the fetch; at most `buffer` completed windows wait for the consumer.
    pub fn start(
        client: crate::client::Client,
        query: Query,
        progress: Option<Py<PyAny>>,
        buffer: usize,
        arrow: bool,
    ) -> PyResult<Self> {
        let rt = runtime::get().map_err(errors::internal)?;
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let cell = ProgressCell::default();
        let sink = progress.as_ref().map(|_| cell.sink());
        let keep = if arrow {
            EventForm::Arrow
        } else {
            EventForm::Text
        };
        let frontier = std::sync::atomic::AtomicI64::new(query.start_ms);
        let task = rt.spawn(events::stream(client, query, keep, tx, sink));
        Ok(EventStream {
            rx: Arc::new(AsyncMutex::new(Receiving {
                rx,
                rest: Default::default(),
            })),
            task,
            cell,
            progress,
            arrow,
            frontier,
        })
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

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let rt = runtime::get().map_err(errors::internal)?;
        log::refresh(py);
        loop {
            let step = wait::step(py, &rt, wait::TICK, async {
                let mut r = self.rx.lock().await;
                if !r.rest.is_empty() {
                    let events: Vec<Event> = r.rest.drain(..).collect();
                    return Some(Ok(NextItem::Dicts(events)));
                }
                r.rx.recv().await.map(|window| {
                    window.and_then(|w| {
                        self.frontier
                            .store(w.until_ms, std::sync::atomic::Ordering::Relaxed);
                        if self.arrow {
                            w.record_batch().map(NextItem::Batch)
                        } else {
                            Ok(NextItem::Dicts(w.events))
                        }
                    })
                })
            });
            if let Err(e) = wait::ticked(py, |py| self.cell.report(py, self.progress.as_ref())) {
                self.task.abort();
                return Err(e);
            }
            match step {
                Some(Some(Ok(NextItem::Dicts(events)))) => {
                    return to_list(py, events.iter().map(Event::text)).map(|l| Some(l.into_any()))
                }
                Some(Some(Ok(NextItem::Batch(batch)))) => {
                    return Ok(Some(
                        Bound::new(py, pyo3_arrow::PyRecordBatch::new(batch))?.into_any(),
                    ))
                }
                Some(Some(Err(e))) => return Err(errors::to_py(e)),
                Some(None) => return Ok(None),
                None => {}
            }
        }
    }

    /// An awaitable of the next events, at most `limit` of them (a window is handed out in
    /// chunks, so that building the dicts never holds the event loop for long), or None at
    /// the end.
    #[pyo3(signature = (limit=1000))]
    fn next_async<'py>(&self, py: Python<'py>, limit: usize) -> PyResult<Bound<'py, PyAny>> {
        let rx = self.rx.clone();
        let limit = limit.max(1);
        aio::awaitable(py, async move {
            let mut r = rx.lock().await;
            if r.rest.is_empty() {
                match r.rx.recv().await {
                    Some(window) => r.rest = window?.events.into(),
                    None => return Ok(aio::Window(None)),
                }
            }
            let n = limit.min(r.rest.len());
            Ok(aio::Window(Some(r.rest.drain(..n).collect())))
        })
    }

    /// Stops the fetch.
    fn close(&self) {
        self.task.abort();
    }

    /// The end (epoch ms, exclusive) of the last window handed out: every event of the range
    /// before it has been (the range's start before the first).
    #[getter]
    fn frontier_ms(&self) -> i64 {
        self.frontier.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What `__next__` hands out.
enum NextItem {
    Dicts(Vec<Event>),
    Batch(arrow_array::RecordBatch),
}
