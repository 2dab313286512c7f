//! Binding of webhook publishing: one entry ([`publish`]) for both kinds of source, from Python
//! records or a JSON Lines file (`records`), from Arrow columns or a Parquet file (`columns`);
//! records checked without publishing (`check`), and the report (`report`, read as `shown`
//! writes it, with the rows not read, `unread`). The source and the options both kinds take are
//! read here ([`Given`], [`Publishing`]), with publishing's progress as the callback's dict.

pub(super) mod check;
pub(super) mod columns;
pub(super) mod failure;
pub(super) mod lines;
pub(super) mod records;
pub(super) mod report;
mod shown;
pub(super) mod structs;
mod unread;

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};

use crate::client::publish::{self as core, Input, Options, PublishProgress, Report};
use crate::python::client::PyClient;
use crate::python::conversions::errors;
use crate::python::conversions::keywords::Keywords;
use crate::python::runtime;
use crate::python::runtime::progress::{self, Update};
use report::PyPublishReport;
use unread::Reread;

/// Publishes the records of `source` (an iterable) or of the JSON Lines file `path`, or with
/// `columns` the rows of Arrow `source` or of the Parquet file `path` (see `records` and
/// `columns`).
///
/// Returns `(report, exception)`: the report, and the exception to raise with it
/// (KeyboardInterrupt or another signal's, the iterator's own, or the core's error that stopped
/// publishing), or None. Invalid arguments raise at once. `rereadable`: `source` can be read
/// again from any row (a sequence: `len(source)`, `source[n:]`; Arrow data that can be
/// exported again: a table, not a stream), so that the report of a publish that stopped early
/// keeps the rows not read, as it does for a file. `loose`, with `columns`: the columns of
/// lists of structs made from lists of dicts, which go as JSON text when they do not fit the
/// models (see `columns`). The options, as keywords: see [`Publishing`].
#[pyfunction]
#[pyo3(signature = (client, source=None, path=None, *, columns=false, rereadable=false, loose=Vec::new(), **options))]
#[allow(clippy::too_many_arguments)]
pub fn publish<'py>(
    py: Python<'py>,
    client: &Bound<'py, PyClient>,
    source: Option<Bound<'py, PyAny>>,
    path: Option<PathBuf>,
    columns: bool,
    rereadable: bool,
    loose: Vec<String>,
    options: Option<Bound<'py, PyDict>>,
) -> PyResult<(PyPublishReport, Option<Py<PyAny>>)> {
    let publishing = Publishing::new("publish", client, options)?;
    if source.is_some() == path.is_some() {
        return Err(PyValueError::new_err(
            "give exactly one of `source` and `path`",
        ));
    }
    let source = Given {
        object: source,
        path,
        rereadable,
    };
    if columns {
        self::columns::publish(py, publishing, source, &loose)
    } else {
        records::publish(py, publishing, source)
    }
}

/// What a publish reads: a Python object (an iterable of records, or Arrow data) or a file,
/// exactly one of them.
struct Given<'py> {
    object: Option<Bound<'py, PyAny>>,
    path: Option<PathBuf>,
    /// `object` can be read again from any row.
    rereadable: bool,
}

impl Given<'_> {
    /// The source as the report of a publish that stops early reads it again, with its size
    /// when known: the object through `object` when it can be read again, or the file through
    /// `file`; None when neither.
    fn again(
        &self,
        object: fn(Py<PyAny>) -> Reread,
        file: fn(PathBuf) -> Reread,
    ) -> PyResult<Option<(Reread, Option<u64>)>> {
        Ok(match (&self.object, &self.path) {
            (Some(given), None) if self.rereadable => {
                Some((object(given.clone().unbind()), Some(given.len()? as u64)))
            }
            (None, Some(path)) => Some((file(path.clone()), None)),
            _ => None,
        })
    }
}

/// What both kinds of publish take besides their source, as keywords (`region`, `batch_size`,
/// `validate`, `progress`, `cancelled`), checked before anything is read: the core client, the
/// options (the webhook's URL for their region too), the progress callback and `cancelled`,
/// and the region and batch size as given, which the report shows.
pub(super) struct Publishing {
    pub core: crate::client::Client,
    pub options: Options,
    pub asked: report::Asked,
    pub progress: Option<Py<PyAny>>,
    pub cancelled: Option<Py<PyAny>>,
}

impl Publishing {
    pub(super) fn new(
        call: &'static str,
        client: &Bound<'_, PyClient>,
        options: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let given = Keywords::new(call, options);
        let region: Option<String> = given.get("region")?;
        let batch_size = batch_size_arg(given.get("batch_size")?)?;
        let validate = given.get("validate")?.unwrap_or(true);
        let progress = given.get("progress")?;
        let cancelled = given.get("cancelled")?;
        given.done()?;
        let core = client.get().core()?;
        let options =
            Options::new(region.as_deref(), batch_size, validate).map_err(errors::to_py)?;
        let asked = report::Asked {
            region,
            batch_size: batch_size.and_then(|n| u64::try_from(n).ok()),
        };
        core.config()
            .webhook_url(options.region.unwrap_or(core.config().region))
            .map_err(errors::to_py)?;
        Ok(Publishing {
            core,
            options,
            asked,
            progress,
            cancelled,
        })
    }
}

/// A core publish under way: its task, the switch that stops it at once (it then reports what
/// it had), the cell its progress goes to, and the caller's callbacks.
pub(super) struct Started {
    pub task: JoinHandle<crate::client::Result<Report>>,
    pub stop: watch::Sender<bool>,
    pub cell: PublishCell,
    pub progress: Option<Py<PyAny>>,
    pub cancelled: Option<Py<PyAny>>,
}

impl Publishing {
    /// Starts the core's publish, on `rt`, of the chunks `rx` brings.
    pub(super) fn start(self, rt: &Runtime, rx: mpsc::Receiver<Vec<Input>>) -> Started {
        let (stop, cancel) = watch::channel(false);
        let cell = PublishCell::of(&self.core);
        let sink = self.progress.as_ref().map(|_| cell.sink());
        let Publishing {
            core,
            options,
            progress,
            cancelled,
            ..
        } = self;
        let task =
            runtime::call::spawn(
                rt,
                async move { core.publish(rx, options, sink, cancel).await },
            );
        Started {
            task,
            stop,
            cell,
            progress,
            cancelled,
        }
    }
}

/// The report of a core publish task that ended: its error, or the task's failure, raises.
pub(super) fn finished(
    outcome: Result<crate::client::Result<Report>, JoinError>,
) -> PyResult<Report> {
    match outcome {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(e)) => Err(errors::to_py(e)),
        Err(join) => Err(errors::internal(join)),
    }
}

/// `batch_size` as given (an int; None for "auto"), for [`Options::new`] to check: an int past
/// 64 bits gets the same error as any other out of range, rather than an `OverflowError`.
fn batch_size_arg(value: Option<Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    value
        .map(|v| {
            v.extract::<i64>().map_err(|_| {
                let shown = v.str().map(|s| s.to_string()).unwrap_or_default();
                errors::to_py(core::batch_size_error(crate::text::shown(&shown)))
            })
        })
        .transpose()
}

/// Publishing's progress cell.
pub(super) type PublishCell = progress::Cell<PublishProgress>;

impl Update for PublishProgress {
    fn fill(&self, d: &Bound<'_, PyDict>) -> PyResult<()> {
        d.set_item("read", self.read)?;
        d.set_item("accepted", self.accepted)?;
        d.set_item("rejected", self.rejected)?;
        d.set_item("requests", self.requests)
    }
}
