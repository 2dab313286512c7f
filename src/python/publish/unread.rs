//! The rows a stopped publish did not read, kept in its report so that `write_failures` writes
//! them: what the source was ([`Reread`]: a JSON Lines or Parquet file, Arrow data that can be
//! exported again, a Python sequence) and how many rows it had read ([`Unread`]).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyIterator, PySlice};

use super::lines::{open_source, Lines};
use crate::client::publish::jsonl_rest;
use crate::python::conversions::to_json::{ConvError, Writer};

/// A source whose rows can be read again from any row.
pub(super) enum Reread {
    /// A JSON Lines file, its records numbered as publishing numbers them.
    Jsonl(PathBuf),
    /// A Parquet file.
    Parquet(PathBuf),
    /// Arrow data that can be exported again (a table, not a one-shot stream).
    Arrow(Py<PyAny>),
    /// A Python sequence of records (a list, a tuple, a DataFrame's rows): `source[n:]`.
    Records(Py<PyAny>),
}

impl Reread {
    /// Its rows after the first `skip`.
    pub(super) fn after(self, skip: u64) -> Unread {
        Unread { source: self, skip }
    }
}

/// The rows of a source after the first `skip`.
pub(super) struct Unread {
    source: Reread,
    skip: u64,
}

/// The JSON texts of [`Unread`] rows, one at a time.
pub(super) enum UnreadLines<'py> {
    /// Of a file or of Arrow data.
    Json(Lines),
    /// Of Python records, written as `publish` writes them (with `json.dumps`'s
    /// `default=str` for one that has no JSON form).
    Records(Bound<'py, PyIterator>, Writer<'py>),
}

impl Unread {
    pub(super) fn clone_ref(&self, py: Python<'_>) -> Unread {
        let source = match &self.source {
            Reread::Jsonl(p) => Reread::Jsonl(p.clone()),
            Reread::Parquet(p) => Reread::Parquet(p.clone()),
            Reread::Arrow(d) => Reread::Arrow(d.clone_ref(py)),
            Reread::Records(s) => Reread::Records(s.clone_ref(py)),
        };
        Unread {
            source,
            skip: self.skip,
        }
    }

    /// Reads the rows from the start of the rest.
    pub(super) fn lines<'py>(&self, py: Python<'py>) -> PyResult<UnreadLines<'py>> {
        let skip = self.skip;
        Ok(match &self.source {
            Reread::Jsonl(path) => UnreadLines::Json(Lines::File(jsonl_rest(path.clone(), skip))),
            Reread::Parquet(path) => {
                UnreadLines::Json(Lines::arrow(open_source(None, Some(path.clone()))?.0, skip))
            }
            Reread::Arrow(data) => {
                let data = data.bind(py).extract()?;
                UnreadLines::Json(Lines::arrow(open_source(Some(data), None)?.0, skip))
            }
            Reread::Records(source) => {
                let from = isize::try_from(skip).unwrap_or(isize::MAX);
                let slice = PySlice::new(py, from, isize::MAX, 1);
                let rest = source.bind(py).get_item(slice)?;
                UnreadLines::Records(rest.try_iter()?, Writer::new(py)?)
            }
        })
    }
}

impl<'py> UnreadLines<'py> {
    /// The next row's JSON text, None after the last.
    pub(super) fn next(&mut self, py: Python<'py>) -> PyResult<Option<String>> {
        let (rows, writer) = match self {
            UnreadLines::Json(lines) => return lines.next(py),
            UnreadLines::Records(rows, writer) => (rows, writer),
        };
        let Some(record) = rows.next().transpose()? else {
            return Ok(None);
        };
        match writer.text(&record) {
            Ok(text) => Ok(Some(text)),
            Err(ConvError {
                interrupt: Some(e), ..
            }) => Err(*e),
            Err(_) => {
                let kwargs = pyo3::types::PyDict::new(py);
                kwargs.set_item("default", py.get_type::<pyo3::types::PyString>())?;
                let text = py
                    .import("json")?
                    .call_method("dumps", (record,), Some(&kwargs))?;
                Ok(Some(text.extract()?))
            }
        }
    }
}
