//! Arrow out through the PyCapsule interface (pyo3-arrow): tables for `output="arrow"` and a
//! record batch reader for `event_batches`, fed window by window from the Rust fetch.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatch, PyRecordBatchReader, PyTable};
use tokio::sync::{mpsc, Mutex as AsyncMutex};

use super::events::ProgressCell;
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
            let step =
                rt.block_on(async { tokio::time::timeout(super::wait::TICK, rx.recv()).await });
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
                        match super::wait::ticked(py, |py| cell.report(py, progress)) {
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
    let cell = ProgressCell::default();
    let sink = progress.as_ref().map(|_| cell.sink());
    let task = rt.spawn(events::stream_batches(client, query, tx, sink));
    let first = async move {
        let first = rx.recv().await.transpose()?;
        Ok((rx, first))
    };
    let waited = super::wait::wait_with(py, first, |py| cell.report(py, progress.as_ref()));
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
    let mut interrupt: Option<PyErr> = None;
    let written = py.detach(|| {
        let batches = reader.map(|b| {
            b.map_err(|e| crate::client::Error::Data(format!("cannot read the data: {e}")))
        });
        // A source that Ctrl-C ended early (an event stream) leaves SIGINT pending: the file is
        // not moved into place, and the interrupt is raised.
        let commit = || match Python::attach(|py| py.check_signals()) {
            Ok(()) => Ok(()),
            Err(e) => {
                interrupt = Some(e);
                Err(crate::client::Error::Io("interrupted".into()))
            }
        };
        crate::client::parquet::write_checked(&path, schema, batches, commit)
    });
    match (written, interrupt) {
        (_, Some(e)) => Err(e),
        (Ok(rows), None) => Ok(rows),
        (Err(e), None) => Err(errors::to_py(e)),
    }
}

/// The Arrow schema of events (`output="arrow"`, `event_batches`, synced datasets): the one
/// definition, which the dask meta and the CSV columns are derived from.
#[pyfunction]
pub fn events_schema() -> pyo3_arrow::PySchema {
    pyo3_arrow::PySchema::new(crate::client::arrow::events_schema())
}

/// Columns of an Arrow table as Python lists (strings, integers, booleans; timestamps as epoch
/// milliseconds), for code that summarises a table without pyarrow (`surveillance demo`).
#[pyfunction]
pub fn columns<'py>(
    py: Python<'py>,
    table: PyTable,
    names: Vec<String>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMillisecondType};
    use arrow_schema::DataType;
    let (batches, schema) = table.into_inner();
    let out = pyo3::types::PyDict::new(py);
    for name in names {
        let index = schema.index_of(&name).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("`names`: no column `{name}`"))
        })?;
        let list = pyo3::types::PyList::empty(py);
        for batch in &batches {
            let column = batch.column(index);
            for row in 0..column.len() {
                let value: Bound<'py, PyAny> = if column.is_null(row) {
                    py.None().into_bound(py)
                } else {
                    match column.data_type() {
                        DataType::Utf8 => column.as_string::<i32>().value(row).into_pyobject(py)?.into_any(),
                        DataType::Int64 => column.as_primitive::<Int64Type>().value(row).into_pyobject(py)?.into_any(),
                        DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, _) => column
                            .as_primitive::<TimestampMillisecondType>()
                            .value(row)
                            .into_pyobject(py)?
                            .into_any(),
                        DataType::Boolean => pyo3::types::PyBool::new(py, column.as_boolean().value(row))
                            .to_owned()
                            .into_any(),
                        other => {
                            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                                "`names`: column `{name}` is {other}, not a string, integer, boolean or timestamp"
                            )))
                        }
                    }
                };
                list.append(value)?;
            }
        }
        out.set_item(name, list)?;
    }
    Ok(out)
}
