//! Arrow out through the PyCapsule interface (pyo3-arrow): tables for `output="arrow"` and a
//! record batch reader for `event_batches`, fed window by window from the Rust fetch.

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use pyo3::prelude::*;
use pyo3_arrow::{PyRecordBatchReader, PyTable};
use tokio::sync::mpsc;

use super::{errors, runtime};
use crate::client::events::{self, Query};
use crate::client::{arrow::Layout, Client, Result};

/// A table of `batches` (an object with `__arrow_c_stream__`).
pub fn table(batches: Vec<RecordBatch>, schema: SchemaRef) -> PyResult<PyTable> {
    PyTable::try_new(batches, schema)
}

/// Record batches of events, pulled from the fetch as windows complete.
struct BatchReader {
    rx: mpsc::Receiver<Result<RecordBatch>>,
    schema: SchemaRef,
    task: tokio::task::JoinHandle<()>,
}

impl Iterator for BatchReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Called by the consumer (pyarrow, polars, duckdb) on its own thread, never on the runtime.
        match self.rx.blocking_recv()? {
            Ok(batch) => Some(Ok(batch)),
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
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
pub fn event_batches(client: Client, query: Query) -> PyResult<PyRecordBatchReader> {
    let rt = runtime::get().map_err(errors::internal)?;
    let (tx, rx) = mpsc::channel(2);
    let task = rt.spawn(events::stream_batches(client, query, tx, None));
    let reader = BatchReader {
        rx,
        schema: Layout::events().schema(),
        task,
    };
    Ok(PyRecordBatchReader::new(Box::new(reader)))
}
