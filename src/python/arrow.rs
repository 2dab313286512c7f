//! Arrow out through the PyCapsule interface (pyo3-arrow): tables for `output="arrow"` and a
//! record batch reader for `event_batches`, fed window by window from the Rust fetch.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader, PyTable};
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use super::{errors, runtime};
use crate::client::events::{self, Query};
use crate::client::{arrow::Layout, Client, Result};

/// A table of `batches` (an object with `__arrow_c_stream__`).
pub fn table(batches: Vec<RecordBatch>, schema: SchemaRef) -> PyResult<PyTable> {
    PyTable::try_new(batches, schema)
}

/// Record batches of events, pulled from the fetch as windows complete.
struct BatchReader {
    first: Option<RecordBatch>,
    rx: mpsc::Receiver<Result<RecordBatch>>,
    schema: SchemaRef,
    task: tokio::task::JoinHandle<()>,
}

impl Iterator for BatchReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.first.take() {
            return Some(Ok(batch));
        }
        // Called by the consumer (pyarrow, polars, duckdb) on its own thread, never on the runtime.
        match self.rx.blocking_recv()? {
            Ok(batch) => Some(Ok(batch)),
            // Crosses the C stream interface as text: scrubbed like every exception.
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e.scrubbed())))),
        }
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
) -> PyResult<PyRecordBatchReader> {
    let rt = runtime::get().map_err(errors::internal)?;
    let (tx, mut rx) = mpsc::channel(2);
    let task = rt.spawn(events::stream_batches(client, query, tx, None));
    let waited = super::wait::wait(py, async move {
        let first = rx.recv().await.transpose()?;
        Ok((rx, first))
    });
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
    };
    Ok(PyRecordBatchReader::new(Box::new(reader)))
}

/// Record batches of events for `async for` (see `AsyncClient.event_batches`): at most two
/// completed windows wait for the consumer.
#[pyclass(name = "BatchStream", module = "surveillance._core", frozen)]
pub struct BatchStream {
    rx: Arc<AsyncMutex<mpsc::Receiver<Result<RecordBatch>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BatchStream {
    /// Starts the fetch.
    pub fn start(client: Client, query: Query) -> PyResult<Self> {
        let rt = runtime::get().map_err(errors::internal)?;
        let (tx, rx) = mpsc::channel(2);
        let task = rt.spawn(events::stream_batches(client, query, tx, None));
        Ok(BatchStream {
            rx: Arc::new(AsyncMutex::new(rx)),
            task,
        })
    }
}

impl Drop for BatchStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The next batch of a stream, or None at its end.
struct NextBatch(Option<RecordBatch>);

impl<'py> IntoPyObject<'py> for NextBatch {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Some(batch) => Ok(Bound::new(py, PyRecordBatch::new(batch))?.into_any()),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

#[pymethods]
impl BatchStream {
    /// An awaitable of the next record batch (an object with `__arrow_c_array__`), or None
    /// when the stream is over.
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rx = self.rx.clone();
        super::aio::awaitable(py, async move {
            match rx.lock().await.recv().await {
                Some(batch) => batch.map(|b| NextBatch(Some(b))),
                None => Ok(NextBatch(None)),
            }
        })
    }

    /// Stops the fetch.
    fn close(&self) {
        self.task.abort();
    }
}

/// Writes any Arrow data (`__arrow_c_stream__` or `__arrow_c_array__`: our tables and
/// streams, pyarrow, polars) to the Parquet file `path`, with the GIL released; returns the
/// rows written. Nothing is left at `path` when it fails.
#[pyfunction]
pub fn write_parquet(
    py: Python<'_>,
    data: pyo3_arrow::input::AnyRecordBatch,
    path: std::path::PathBuf,
) -> PyResult<u64> {
    let reader = data.into_reader()?;
    let schema = reader.schema();
    py.detach(move || {
        let batches = reader.map(|b| {
            b.map_err(|e| crate::client::Error::Data(format!("cannot read the data: {e}")))
        });
        crate::client::parquet::write(&path, schema, batches)
    })
    .map_err(errors::to_py)
}

/// The typed events table of events given as JSON texts (as the service sends them).
#[pyfunction]
pub fn events_table(texts: Vec<String>) -> PyResult<PyTable> {
    let layout = Layout::events();
    let batch = layout
        .batch(texts.iter().map(String::as_str))
        .map_err(errors::to_py)?;
    table(vec![batch], layout.schema())
}
