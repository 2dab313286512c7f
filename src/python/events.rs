//! Binding of the event fetches: `events_json` (everything, once) and `EventStream` (window after
//! window, bounded memory). Progress goes to a Python callable between waits, never from Rust
//! threads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::sync::mpsc;

use super::wait::wait_with;
use super::{errors, log, runtime};
use crate::client::events::{self, Event, Progress, ProgressSink, Query};
use crate::client::Result;

/// Latest progress, written by the fetch, read by the waiting Python thread.
#[derive(Default, Clone)]
pub struct ProgressCell(Arc<Mutex<Option<Progress>>>);

impl ProgressCell {
    /// The sink for the core.
    pub fn sink(&self) -> ProgressSink {
        let cell = self.0.clone();
        Arc::new(move |p| {
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        })
    }

    /// Hands the latest update, if new, to `callback`.
    pub fn report(&self, py: Python<'_>, callback: Option<&Py<PyAny>>) -> PyResult<()> {
        let Some(cb) = callback else { return Ok(()) };
        let latest = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = latest {
            let d = pyo3::types::PyDict::new(py);
            d.set_item("events", p.events)?;
            d.set_item("requests", p.requests)?;
            d.set_item("done_ms", p.done_ms)?;
            d.set_item("total_ms", p.total_ms)?;
            d.set_item("windows", p.windows)?;
            cb.call1(py, (d,))?;
        }
        Ok(())
    }
}

/// Raw JSON values joined into one JSON array text (for the Python layer's `json.loads`).
pub fn json_array<'a>(items: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut out = String::with_capacity(items.clone().map(|r| r.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, r) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(r);
    }
    out.push(']');
    out
}

/// The events of a window as one JSON array text.
pub fn join_events(events: &[Event]) -> String {
    json_array(events.iter().map(|e| e.raw.get()))
}

/// Fetches every event of the query; JSON array text.
pub fn events_json(
    py: Python<'_>,
    client: crate::client::Client,
    query: Query,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let cell = ProgressCell::default();
    let sink = progress.as_ref().map(|_| cell.sink());
    let fut = async move {
        events::fetch_all(client, query, sink)
            .await
            .map(|all| join_events(&all))
    };
    let result = wait_with(py, fut, |py| cell.report(py, progress.as_ref()));
    cell.report(py, progress.as_ref())?;
    result
}

/// Completed windows of events, in time order, as JSON array texts (see `Client.iter_events`).
#[pyclass(name = "EventStream", module = "surveillance._core", frozen)]
pub struct EventStream {
    rx: Mutex<mpsc::Receiver<Result<Vec<Event>>>>,
    task: tokio::task::JoinHandle<()>,
    cell: ProgressCell,
    progress: Option<Py<PyAny>>,
}

impl EventStream {
    /// Starts the fetch; at most two completed windows wait for the consumer.
    pub fn start(
        client: crate::client::Client,
        query: Query,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let rt = runtime::get().map_err(errors::internal)?;
        let (tx, rx) = mpsc::channel(2);
        let cell = ProgressCell::default();
        let sink = progress.as_ref().map(|_| cell.sink());
        let task = rt.spawn(events::stream(client, query, tx, sink));
        Ok(EventStream {
            rx: Mutex::new(rx),
            task,
            cell,
            progress,
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

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let rt = runtime::get().map_err(errors::internal)?;
        log::refresh(py);
        loop {
            let step = py.detach(|| {
                let mut rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
                rt.block_on(async {
                    tokio::time::timeout(Duration::from_millis(50), rx.recv()).await
                })
            });
            log::flush(py);
            self.cell.report(py, self.progress.as_ref())?;
            match step {
                Ok(Some(Ok(batch))) => return Ok(Some(join_events(&batch))),
                Ok(Some(Err(e))) => return Err(errors::to_py(e)),
                Ok(None) => return Ok(None),
                Err(_) => {
                    if let Err(e) = py.check_signals() {
                        self.task.abort();
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Stops the fetch.
    fn close(&self) {
        self.task.abort();
    }
}
