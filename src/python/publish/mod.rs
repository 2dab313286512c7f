//! Binding of webhook publishing: from Python records or a JSON Lines file (`records`), from
//! Arrow columns or a Parquet file (`columns`), records checked without publishing (`check`),
//! and the report (`report`, read as `shown` writes it, with the rows not read, `unread`). The
//! options both publish bindings take are read here ([`Publishing`]), with publishing's progress
//! as the callback's dict.

pub(super) mod check;
pub(super) mod columns;
pub(super) mod lines;
pub(super) mod records;
pub(super) mod report;
mod shown;
pub(super) mod structs;
mod unread;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};

use crate::client::publish::{self as core, Input, Options, PublishProgress, Report};
use crate::python::client::PyClient;
use crate::python::conversions::errors;
use crate::python::conversions::keywords::Keywords;
use crate::python::runtime::progress::{self, Update};

/// What both publish bindings take besides their source, as keywords (`region`, `batch_size`,
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
        let task = rt.spawn(async move { core.publish(rx, options, sink, cancel).await });
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
