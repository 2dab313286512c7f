//! Events as streams of Arrow record batches, fed window by window from the Rust fetch: a
//! record batch reader for `event_batches` (out through the PyCapsule interface) and
//! `BatchStream` for `async for`.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader};
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use super::ProgressCell;
use crate::client::events::{self, Query};
use crate::client::{arrow::Layout, Client, Result};
use crate::python::conversions::errors;
use crate::python::runtime::{self, aio, wait};

/// Record batches of events, pulled from the fetch as windows complete.
struct BatchReader {
    first: Option<RecordBatch>,
    rx: mpsc::Receiver<Result<RecordBatch>>,
    schema: SchemaRef,
    task: tokio::task::JoinHandle<()>,
    /// Ctrl-C ended the stream: it stays ended.
    interrupted: bool,
    /// The fetch's progress, and the callback it is handed to while the consumer waits.
    cell: ProgressCell,
    progress: Option<Py<PyAny>>,
}

impl Iterator for BatchReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    /// Called by the consumer (pyarrow, polars, duckdb, `write_parquet`) on its own thread,
    /// never on the runtime, usually with the GIL released: waits for the next window,
    /// checking for signals every 50 ms as the sync calls do.
    ///
    /// On Ctrl-C the fetch is stopped (its requests in flight dropped), the stream ends, and
    /// the interrupt is handed back to Python (`PyErr_SetInterrupt`), which raises
    /// `KeyboardInterrupt` as soon as the consumer's call returns, before its result is
    /// assigned: an error would reach Python as the consumer's own exception type (pyarrow's
    /// `ArrowInvalid`), never as `KeyboardInterrupt`. `write_parquet` checks for it before
    /// its file is moved into place, so nothing is left behind.
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.first.take() {
            return Some(Ok(batch));
        }
        if self.interrupted {
            return None;
        }
        let rt = match runtime::get() {
            Ok(rt) => rt,
            Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
        };
        loop {
            // The timer is made inside the runtime (it needs its clock).
            let rx = &mut self.rx;
            let step = rt.block_on(async { tokio::time::timeout(wait::TICK, rx.recv()).await });
            match step {
                Ok(Some(Ok(batch))) => return Some(self.report().map(|()| batch)),
                // Crosses the C stream interface as text: scrubbed like every exception.
                Ok(Some(Err(e))) => {
                    return Some(Err(ArrowError::ExternalError(Box::new(e.scrubbed()))))
                }
                Ok(None) => return self.report().err().map(Err),
                Err(_elapsed) => {
                    let (cell, progress) = (&self.cell, self.progress.as_ref());
                    let signal = Python::attach(|py| {
                        match wait::ticked(py, |py| cell.report(py, progress)) {
                            Ok(()) => None,
                            Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => {
                                // SAFETY: `PyErr_SetInterrupt` only marks SIGINT as pending; it
                                // may be called from any thread.
                                unsafe { pyo3::ffi::PyErr_SetInterrupt() };
                                Some(None)
                            }
                            Err(e) => Some(Some(e.to_string())),
                        }
                    });
                    match signal {
                        None => continue,
                        Some(other) => {
                            self.task.abort();
                            self.interrupted = true;
                            return other.map(|message| {
                                Err(ArrowError::ExternalError(
                                    format!("the events fetch was stopped: {message}").into(),
                                ))
                            });
                        }
                    }
                }
            }
        }
    }
}

impl BatchReader {
    /// Hands the latest progress to the callback, if any. A callback that raises ends the
    /// stream with its error, as it ends every fetch.
    fn report(&mut self) -> std::result::Result<(), ArrowError> {
        let Some(cb) = &self.progress else {
            return Ok(());
        };
        let done = Python::attach(|py| self.cell.report(py, Some(cb)).map_err(|e| e.to_string()));
        done.map_err(|message| {
            self.task.abort();
            self.interrupted = true;
            ArrowError::ExternalError(format!("the events fetch was stopped: {message}").into())
        })
    }
}

impl RecordBatchReader for BatchReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

impl Drop for BatchReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A stream of the events of `query` as record batches, at most two waiting for the consumer.
///
/// The first window is awaited here, so that what goes wrong at once (credentials, an unknown
/// report, a service that is down) raises its own typed exception from this call: an error
/// later in the stream can only cross the Arrow C stream interface as text.
pub fn event_batches(
    py: Python<'_>,
    client: Client,
    query: Query,
    progress: Option<Py<PyAny>>,
) -> PyResult<PyRecordBatchReader> {
    let rt = runtime::get().map_err(errors::internal)?;
    let (tx, mut rx) = mpsc::channel(2);
    let cell = ProgressCell::of(&client);
    let sink = progress.as_ref().map(|_| cell.sink());
    let task = runtime::call::spawn(&rt, events::stream_batches(client, query, tx, sink));
    let first = async move {
        let first = rx.recv().await.transpose()?;
        Ok((rx, first))
    };
    let waited = wait::wait_with(py, first, |py| cell.report(py, progress.as_ref()));
    let (rx, first) = match waited {
        Ok(v) => v,
        Err(e) => {
            task.abort();
            return Err(e);
        }
    };
    let reader = BatchReader {
        first,
        rx,
        schema: Layout::events().schema(),
        task,
        interrupted: false,
        cell,
        progress,
    };
    Ok(PyRecordBatchReader::new(Box::new(reader)))
}

/// Record batches of events for `async for` (see `AsyncClient.event_batches`): at most two
/// completed windows wait for the consumer.
#[pyclass(name = "BatchStream", module = "surveillance._core", frozen)]
pub struct BatchStream {
    rx: Arc<AsyncMutex<mpsc::Receiver<Result<RecordBatch>>>>,
    task: tokio::task::JoinHandle<()>,
    /// The fetch's progress, and the callback `report` hands it to.
    cell: ProgressCell,
    progress: Option<Py<PyAny>>,
}

impl BatchStream {
    /// Starts the fetch.
    pub fn start(client: Client, query: Query, progress: Option<Py<PyAny>>) -> PyResult<Self> {
        let rt = runtime::get().map_err(errors::internal)?;
        let (tx, rx) = mpsc::channel(2);
        let cell = ProgressCell::of(&client);
        let sink = progress.as_ref().map(|_| cell.sink());
        let task = runtime::call::spawn(&rt, events::stream_batches(client, query, tx, sink));
        Ok(BatchStream {
            rx: Arc::new(AsyncMutex::new(rx)),
            task,
            cell,
            progress,
        })
    }
}

impl Drop for BatchStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[pymethods]
impl BatchStream {
    /// An awaitable of the next record batch (an object with `__arrow_c_array__`), or None
    /// when the stream is over.
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rx = self.rx.clone();
        aio::awaitable(py, async move {
            let next = rx.lock().await.recv().await.transpose()?;
            Ok(next.map(PyRecordBatch::new))
        })
    }

    /// Hands `progress` the fetch's latest progress, if it moved since the last call.
    fn report(&self, py: Python<'_>) -> PyResult<()> {
        self.cell.report(py, self.progress.as_ref())
    }

    /// Stops the fetch.
    fn close(&self) {
        self.task.abort();
    }
}
