//! Records as JSON texts, one at a time ([`Lines`]): the rows of Arrow data or of a Parquet
//! file, batch by batch, or the records of a JSON Lines file; for `write_failures` (the rows a
//! stopped publish did not read) and for tests (`columns_json`, `jsonl_rest`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

use arrow_array::RecordBatchReader;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_arrow::input::AnyRecordBatch;

use crate::client::publish::columns;
use crate::client::publish::{jsonl_rest as core_jsonl_rest, JsonlRest};
use crate::python::conversions::errors;
use crate::python::runtime;

/// The batches of `data` or of the Parquet file `path` (exactly one), and the number of rows
/// when it is known without reading them.
pub(super) fn open_source(
    data: Option<AnyRecordBatch>,
    path: Option<PathBuf>,
) -> PyResult<(Box<dyn RecordBatchReader + Send>, Option<u64>)> {
    match (data, path) {
        (Some(data), None) => Ok((data.into_reader()?, None)),
        (None, Some(path)) => {
            let (reader, rows) = columns::parquet_batches(&path).map_err(errors::to_py)?;
            Ok((reader, Some(rows)))
        }
        _ => Err(PyValueError::new_err(
            "give exactly one of `data` and `path`",
        )),
    }
}

/// Records as JSON texts: what [`JsonLines`] and a report's rows not read read from.
pub(super) enum Lines {
    /// Arrow batches, written as JSON row by row.
    Arrow {
        reader: Option<Box<dyn RecordBatchReader + Send>>,
        skip: u64,
        ready: VecDeque<String>,
    },
    /// The records of a JSON Lines file, numbered as the publishing source numbers them.
    File(JsonlRest),
}

impl Lines {
    /// The rows of `reader` after the first `skip`.
    pub(super) fn arrow(reader: Box<dyn RecordBatchReader + Send>, skip: u64) -> Lines {
        Lines::Arrow {
            reader: Some(reader),
            skip,
            ready: VecDeque::new(),
        }
    }

    /// The next record's JSON text, None after the last.
    pub(super) fn next(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        let (reader, skip, ready) = match self {
            Lines::File(rest) => {
                return runtime::detach(py, || rest.next())
                    .transpose()
                    .map_err(errors::to_py);
            }
            Lines::Arrow {
                reader,
                skip,
                ready,
            } => (reader, skip, ready),
        };
        loop {
            if let Some(line) = ready.pop_front() {
                return Ok(Some(line));
            }
            let Some(batches) = reader.as_mut() else {
                return Ok(None);
            };
            let next = runtime::detach(py, || batches.next());
            let batch = match next {
                None => {
                    *reader = None;
                    return Ok(None);
                }
                Some(Err(e)) => {
                    *reader = None;
                    return Err(errors::to_py(crate::client::Error::Io(format!(
                        "cannot read the data: {e}"
                    ))));
                }
                Some(Ok(batch)) => batch,
            };
            let n = batch.num_rows() as u64;
            if *skip >= n {
                *skip -= n;
                continue;
            }
            let from = usize::try_from(*skip).unwrap_or(usize::MAX);
            *skip = 0;
            let rest = batch.slice(from, batch.num_rows() - from);
            let texts =
                runtime::detach(py, || columns::json_lines(&rest)).map_err(errors::to_py)?;
            ready.extend(texts);
        }
    }
}

/// Records as JSON texts, one at a time: the rows of Arrow data, batch by batch, or the
/// records of a JSON Lines file.
#[pyclass(name = "JsonLines", module = "surveillance._core", frozen)]
pub struct JsonLines(Mutex<Lines>);

#[pymethods]
impl JsonLines {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).next(py)
    }
}

/// The records of the JSON Lines file `path` after the first `skip`, numbered as `publish`
/// numbers them (non-blank lines), as texts.
#[pyfunction]
#[pyo3(signature = (path, *, skip=0))]
pub fn jsonl_rest(path: PathBuf, skip: u64) -> JsonLines {
    JsonLines(Mutex::new(Lines::File(core_jsonl_rest(path, skip))))
}

/// The rows of Arrow `data` or of the Parquet file `path`, after the first `skip`, as JSON
/// texts written as `publish` writes columns (unchecked; NaN written as Python writes it).
#[pyfunction]
#[pyo3(signature = (data=None, path=None, *, skip=0))]
pub fn columns_json(
    data: Option<AnyRecordBatch>,
    path: Option<PathBuf>,
    skip: u64,
) -> PyResult<JsonLines> {
    let (reader, _) = open_source(data, path)?;
    Ok(JsonLines(Mutex::new(Lines::arrow(reader, skip))))
}
