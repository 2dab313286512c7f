//! Binding of the client: `surveillance._core.Client`. Takes its settings by name
//! (`settings`), runs core futures through `runtime` (waited for, or awaitable),
//! returns Python objects, Arrow tables and event streams. Rebuilt after `fork()`. Also the
//! functions over a cache directory without a client.

mod settings;

pub use settings::check_seconds;

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;
use pyo3_arrow::{PyRecordBatch, PyTable};

use crate::client::arrow::Layout;
use crate::client::events::{self, ProgressSink, Query};
use crate::client::scope::{self, Stop};
use crate::client::{self, Config};
use crate::python::conversions::from_json::Records;
use crate::python::conversions::keywords::Keywords;
use crate::python::conversions::values::to_py;
use crate::python::conversions::{arrow, errors};
use crate::python::emulator::PyEmulator;
use crate::python::events::batches::{self, BatchStream};
use crate::python::events::query::PyEventQuery;
use crate::python::events::stream::EventStream;
use crate::python::results::{PyCacheInfo, PyEventPlan, PyQuota, PyStats};
use crate::python::runtime::sigint::InterruptWatch;
use crate::python::runtime::wait::{wait, wait_reporting};
use crate::python::runtime::{aio, log, Work};

/// A core client of `config`, whose log lines go to Python's logging.
fn core_of(config: &Config) -> PyResult<client::Client> {
    client::Client::new(config.clone(), Some(log::sink())).map_err(errors::to_py)
}

/// The native client (see `surveillance.Client`).
#[pyclass(name = "Client", module = "surveillance._core", frozen)]
pub struct PyClient {
    config: Config,
    core: Mutex<(u32, client::Client)>,
}

impl PyClient {
    /// The core client of this process (a forked child gets a fresh one: new pool, new token).
    pub(crate) fn core(&self) -> PyResult<client::Client> {
        let pid = std::process::id();
        let mut slot = self.core.lock().unwrap_or_else(|e| e.into_inner());
        if slot.0 != pid {
            *slot = (pid, core_of(&self.config)?);
        }
        Ok(slot.1.clone())
    }
}

/// The work of the calls that have a sync and an async form, one function for both: it checks
/// the arguments (an error raises at the call, before anything is sent) and builds the core's
/// work, whose output becomes Python objects only when the caller has it. The call waits for
/// it (`wait`) or, with `awaitable` (or as `name_async`), hands it to asyncio
/// (`aio::awaitable`); where the sync form hands progress to a callback, the async one builds
/// the same work with no sink.
impl PyClient {
    /// `list`: the records of a list; an unknown `kind` is an error.
    fn list_dicts_work(
        &self,
        kind: &str,
        site_id: Option<String>,
        device_id: Option<String>,
    ) -> PyResult<impl Work<Records>> {
        let list = client::lists::List::named(kind).map_err(errors::to_py)?;
        let c = self.core()?;
        Ok(async move {
            let records = c
                .list(list, site_id.as_deref(), device_id.as_deref())
                .await?;
            Ok(Records(records))
        })
    }

    /// `list` with `arrow`: the records of a list as one typed Arrow table.
    fn list_arrow_work(
        &self,
        kind: &str,
        site_id: Option<String>,
        device_id: Option<String>,
    ) -> PyResult<impl Work<PyTable>> {
        let layout = client::lists::List::named(kind)
            .map_err(errors::to_py)?
            .layout();
        let records = self.list_dicts_work(kind, site_id, device_id)?;
        Ok(async move {
            let Records(records) = records.await?;
            let batch = layout.batch(records.iter().map(|r| r.get()))?;
            arrow::table(vec![batch], layout.schema())
        })
    }

    /// `events_arrow`: every event of the range as an Arrow table (one batch per window).
    fn events_arrow_work(
        &self,
        query: Query,
        sink: Option<ProgressSink>,
    ) -> PyResult<impl Work<PyTable>> {
        let c = self.core()?;
        Ok(async move {
            let batches = events::fetch_batches(c, query, sink).await?;
            arrow::table(batches, Layout::events().schema())
        })
    }

    /// `plan`: what fetching the events of the range costs, as the core's plan.
    fn plan_work(
        &self,
        query: Query,
        sink: Option<ProgressSink>,
    ) -> PyResult<impl Work<PyEventPlan>> {
        let c = self.core()?;
        Ok(async move { Ok(client::plan::plan(&c, &query, sink).await?.into()) })
    }

    /// `access_token`: a valid access token.
    fn access_token_work(&self) -> PyResult<impl Work<String>> {
        let c = self.core()?;
        Ok(async move { c.access_token().await.map(|t| t.expose().to_string()) })
    }

    /// `diagnose`: the effective settings and whether a token can be had, as text.
    fn diagnose_work(&self) -> PyResult<impl Work<String>> {
        let c = self.core()?;
        Ok(async move { Ok(c.diagnose().await) })
    }
}

#[pymethods]
impl PyClient {
    /// The settings of `surveillance.Client`, as keywords: their types checked there, their
    /// values by the core (`Config::resolve`; durations and counts as given, before they
    /// become a `Duration` or an unsigned number).
    #[new]
    #[pyo3(signature = (**settings))]
    fn new(settings: Option<Bound<'_, PyDict>>) -> PyResult<Self> {
        let config = settings::from_keywords(Keywords::new("Client", settings))?;
        let core = Mutex::new((std::process::id(), core_of(&config)?));
        Ok(PyClient { config, core })
    }

    /// Every record of a list (`sites`, `devices`, `cameras`, `reports`): a list of dicts, or
    /// with `arrow` one typed Arrow table; with `awaitable`, an awaitable of it.
    #[pyo3(signature = (kind, site_id=None, device_id=None, *, arrow=false, awaitable=false))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        kind: String,
        site_id: Option<String>,
        device_id: Option<String>,
        arrow: bool,
        awaitable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        match (arrow, awaitable) {
            (false, false) => {
                wait(py, self.list_dicts_work(&kind, site_id, device_id)?)?.into_bound_py_any(py)
            }
            (false, true) => aio::awaitable(py, self.list_dicts_work(&kind, site_id, device_id)?),
            (true, false) => {
                wait(py, self.list_arrow_work(&kind, site_id, device_id)?)?.into_bound_py_any(py)
            }
            (true, true) => aio::awaitable(py, self.list_arrow_work(&kind, site_id, device_id)?),
        }
    }

    /// The events of `query`, window after window (lists of dicts, or with `arrow` record
    /// batches); at most `buffer` completed windows wait for the consumer (bounded memory)
    /// while the next ones are fetched.
    /// `interrupt`: a watch of Ctrl-C, for a stream consumed off the main thread (see
    /// `InterruptWatch`). `carry`: a sync's fetch, which carries what it read to its next
    /// run when it stops early (see `EventStream.stop` and `EventStream.carried`).
    #[pyo3(signature = (query, progress=None, buffer=2, arrow=false, interrupt=None, *, carry=false))]
    fn events_stream(
        &self,
        query: &PyEventQuery,
        progress: Option<Py<PyAny>>,
        buffer: usize,
        arrow: bool,
        interrupt: Option<PyRef<'_, InterruptWatch>>,
        carry: bool,
    ) -> PyResult<EventStream> {
        let interrupt = interrupt.map(|w| w.watch.clone());
        let query = query.query.clone();
        EventStream::start(
            self.core()?,
            query,
            progress,
            buffer,
            arrow,
            interrupt,
            carry,
        )
    }

    /// The first page of a fetch of `query`'s range, held for that fetch, and the events it
    /// shows to be the range's first, as an Arrow record batch, with where they end (epoch ms)
    /// and the events a millisecond of a page that showed a descending order: see
    /// `events::peek`. `interrupt`: a watch of Ctrl-C, as `events_stream`'s
    /// (`KeyboardInterrupt` once it fires).
    #[pyo3(signature = (query, interrupt=None))]
    fn events_peek(
        &self,
        py: Python<'_>,
        query: &PyEventQuery,
        interrupt: Option<PyRef<'_, InterruptWatch>>,
    ) -> PyResult<(PyRecordBatch, i64, Option<f64>)> {
        let query = query.query.clone();
        let c = self.core()?;
        let watch = interrupt.map(|w| w.watch.clone());
        let peeked = wait(py, async move {
            let peek = async {
                let (first, density) = events::peek(&c, &query, events::EventForm::Arrow).await?;
                let batch = PyRecordBatch::new(first.record_batch()?);
                Ok((batch, first.until_ms, density))
            };
            match watch {
                Some(watch) => {
                    let stop = watch.clone() as Arc<dyn Stop>;
                    scope::stoppable(stop, watch.unless_fired(peek))
                        .await
                        .transpose()
                }
                None => peek.await.map(Some),
            }
        })?;
        peeked.ok_or_else(|| pyo3::exceptions::PyKeyboardInterrupt::new_err(()))
    }

    /// The most events a millisecond this client's fetches found in a window of the report
    /// (or of all events), or None before any: see `events::density_seen`.
    #[pyo3(signature = (report_id=None))]
    fn events_density(&self, report_id: Option<String>) -> PyResult<Option<f64>> {
        Ok(events::density_seen(&self.core()?, report_id.as_deref()))
    }

    /// Every event of `query` as Arrow data: one table (one batch per window), or with
    /// `stream` record batches as they come (bounded memory); with `awaitable`, the table as an
    /// awaitable and the batches for `async for`. `progress` gets the fetch's progress while
    /// the caller waits (for the batches, while their consumer waits; for the `async for`
    /// stream, from its `report`); the awaitable table reports none.
    #[pyo3(signature = (query, progress=None, *, stream=false, awaitable=false))]
    fn events_arrow<'py>(
        &self,
        py: Python<'py>,
        query: &PyEventQuery,
        progress: Option<Py<PyAny>>,
        stream: bool,
        awaitable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let query = query.query.clone();
        match (stream, awaitable) {
            (false, false) => wait_reporting(py, &self.core()?, progress.as_ref(), |sink| {
                self.events_arrow_work(query, sink)
            })?
            .into_bound_py_any(py),
            (false, true) => aio::awaitable(py, self.events_arrow_work(query, None)?),
            (true, false) => {
                batches::event_batches(py, self.core()?, query, progress)?.into_bound_py_any(py)
            }
            (true, true) => {
                BatchStream::start(self.core()?, query, progress)?.into_bound_py_any(py)
            }
        }
    }

    /// A valid access token.
    fn access_token(&self, py: Python<'_>) -> PyResult<String> {
        wait(py, self.access_token_work()?)
    }

    /// As `access_token`, as an awaitable.
    fn access_token_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        aio::awaitable(py, self.access_token_work()?)
    }

    /// The effective settings and whether a token can be had, as text (no secrets).
    fn diagnose(&self, py: Python<'_>) -> PyResult<String> {
        wait(py, self.diagnose_work()?)
    }

    /// As `diagnose`, as an awaitable.
    fn diagnose_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        aio::awaitable(py, self.diagnose_work()?)
    }

    /// What fetching the events of `query` costs, found with a few requests: the core's plan,
    /// as an `EventPlan`; with `awaitable`, an awaitable of it.
    /// `progress`: called with the count's progress (its requests, the range done) while the
    /// caller waits (not with `awaitable`).
    #[pyo3(signature = (query, progress=None, *, awaitable=false))]
    fn plan<'py>(
        &self,
        py: Python<'py>,
        query: &PyEventQuery,
        progress: Option<Py<PyAny>>,
        awaitable: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let query = query.query.clone();
        if awaitable {
            return aio::awaitable(py, self.plan_work(query, None)?);
        }
        wait_reporting(py, &self.core()?, progress.as_ref(), |sink| {
            self.plan_work(query, sink)
        })?
        .into_bound_py_any(py)
    }

    /// Where the daily quota stands, as a `Quota`.
    fn quota(&self) -> PyResult<PyQuota> {
        Ok(self.core()?.quota().into())
    }

    /// What the cache of settled events holds (its whole directory), with the requests this
    /// client's reads saved, as a `CacheInfo`; None without a cache.
    fn cache_info(&self, py: Python<'_>) -> PyResult<Option<PyCacheInfo>> {
        let core = self.core()?;
        let info = core.cache_info().map_err(errors::to_py)?;
        let saved = core.stats().requests_saved;
        info.map(|i| PyCacheInfo::of(py, i, saved)).transpose()
    }

    /// Holds the pages an earlier run of a sync carried (a blob that `EventStream.carried`
    /// gave) for this client's fetches of `report_id`'s events, which take them instead of
    /// asking them again; how many. `ValueError` saying why (to complete "the pages ...")
    /// when the blob is damaged, or of another account or report.
    #[pyo3(signature = (data, report_id=None))]
    fn hold_carried(&self, data: &[u8], report_id: Option<String>) -> PyResult<usize> {
        let core = self.core()?;
        let report = report_id.as_deref();
        let pages = events::carry::decode(&events::carry::account(&core), report, data)
            .map_err(pyo3::exceptions::PyValueError::new_err)?;
        let n = pages.len();
        events::carry::hold(&core, report, pages);
        Ok(n)
    }

    /// Keeps in the cache of settled events the pages a fetch stopped early carried (a blob
    /// that `EventStream.carried` gave), read from `start_ms` to `end_ms`, for the next fetch
    /// from `start_ms` (`carried_from_cache`); false without a cache (or one that cannot be
    /// written, with a warning).
    #[pyo3(signature = (data, start_ms, end_ms, report_id=None))]
    fn carry_to_cache(
        &self,
        data: &[u8],
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
    ) -> PyResult<bool> {
        let core = self.core()?;
        let Some(cache) = core.cache() else {
            return Ok(false);
        };
        match cache.carry(report_id.as_deref(), start_ms, end_ms, data) {
            Ok(()) => Ok(true),
            Err(e) => {
                core.http().warn(format!(
                    "cannot keep the pages read so far in the cache ({e}): the next run asks \
                     them again"
                ));
                Ok(false)
            }
        }
    }

    /// The pages carried in the cache from `start_ms` (see `carry_to_cache`), taken: the
    /// blob, and the end of the range they were read of; None when there are none.
    #[pyo3(signature = (start_ms, report_id=None))]
    fn carried_from_cache<'py>(
        &self,
        py: Python<'py>,
        start_ms: i64,
        report_id: Option<String>,
    ) -> PyResult<Option<(Bound<'py, pyo3::types::PyBytes>, i64)>> {
        let core = self.core()?;
        let taken = core
            .cache()
            .and_then(|c| c.take_carried(report_id.as_deref(), start_ms));
        Ok(taken.map(|(end, data)| (pyo3::types::PyBytes::new(py, &data), end)))
    }

    /// Drops the carried pages of `report_id`'s events that no fetch took (a sync that
    /// completed); how many.
    #[pyo3(signature = (report_id=None))]
    fn drop_carried(&self, report_id: Option<String>) -> PyResult<usize> {
        Ok(events::carry::left(&self.core()?, report_id.as_deref()).len())
    }

    /// Empties the cache of settled events; the files removed.
    fn clear_cache(&self) -> PyResult<u64> {
        self.core()?.clear_cache().map_err(errors::to_py)
    }

    /// Adds `n` requests to the allowance that a shared budget grants this client, putting
    /// one in force: each request then takes one, waiting for the next grant when none is left.
    fn grant_requests(&self, n: u64) -> PyResult<()> {
        self.core()?.ledger().grant(n);
        Ok(())
    }

    /// No more grants will come: a request that finds the allowance spent raises
    /// `QuotaExhaustedError` instead of waiting.
    fn close_allowance(&self) -> PyResult<()> {
        self.core()?.ledger().close_allowance();
        Ok(())
    }

    /// Ends the allowance (requests are no longer bounded by one); the requests left unspent.
    fn end_allowance(&self) -> PyResult<u64> {
        Ok(self.core()?.ledger().end_allowance())
    }

    /// Requests left of the allowance in force, or None when none is.
    fn allowance(&self) -> PyResult<Option<u64>> {
        Ok(self.core()?.ledger().allowance())
    }

    /// Reads the day of the daily quota from `emulator`'s clock (which its `advance_clock`
    /// moves) instead of the local one, until the service's `Date` headers correct it.
    fn follow_clock(&self, emulator: PyRef<'_, PyEmulator>) -> PyResult<()> {
        self.core()?.ledger().follow(emulator.clock());
        Ok(())
    }

    /// The counters, with the quota, as a `Stats`.
    fn stats(&self) -> PyResult<PyStats> {
        let core = self.core()?;
        Ok(PyStats::of(core.stats(), core.quota()))
    }

    /// Stops requests in flight; the client refuses new ones.
    fn close(&self) -> PyResult<()> {
        self.core()?.close();
        Ok(())
    }

    /// The resolved configuration, secrets included (for pickling; never printed).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        settings::to_keywords(py, &self.config)
    }

    /// The directory of the cache of settled events (its root: the directory asked, or the
    /// cache's own folder in it), or None without one.
    #[getter]
    fn cache_dir(&self) -> PyResult<Option<String>> {
        Ok(self.core()?.cache().map(|c| c.root().display().to_string()))
    }

    /// Base URL (no secret).
    #[getter]
    fn base_url(&self) -> String {
        self.config.base_url.to_string()
    }

    /// Default publishing region.
    #[getter]
    fn region(&self) -> &'static str {
        self.config.region.as_str()
    }
}

/// The directory of the cache of settled events that a client of a remote service uses by
/// default: `cache` (the setting, as `SURVEILLANCE_CACHE` gives it) when it names a directory,
/// else the user's cache directory's.
#[pyfunction]
#[pyo3(signature = (cache=None))]
pub fn cache_location(cache: Option<String>) -> Option<String> {
    let named = cache
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && client::config::cache_switch(v).is_none());
    named
        .map(std::path::PathBuf::from)
        .or_else(|| client::cache::default_dir(&|var| std::env::var(var).ok()))
        .map(|p| p.display().to_string())
}

/// What the cache of settled events that `path` names holds, as a `CacheInfo` (no client's
/// reads: none saved).
#[pyfunction]
pub fn cache_info_at(py: Python<'_>, path: String) -> PyResult<PyCacheInfo> {
    let info = client::cache::info(std::path::Path::new(&path)).map_err(errors::to_py)?;
    PyCacheInfo::of(py, info, 0)
}

/// Empties the cache of settled events that `path` names; the files removed.
#[pyfunction]
pub fn clear_cache_at(path: String) -> PyResult<u64> {
    client::cache::clear(std::path::Path::new(&path)).map_err(errors::to_py)
}

/// The core's list table (`client::lists`) as the Python layer needs it: for each list, its
/// `name`, what it holds (`about`), the keywords of its `filters` and its table's `columns`.
pub fn lists(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    #[derive(serde::Serialize)]
    struct Shown {
        name: &'static str,
        about: &'static str,
        filters: Vec<&'static str>,
        /// The columns of its table, in order (those of `output="arrow"`).
        columns: Vec<String>,
    }
    let shown: Vec<Shown> = crate::client::lists::List::ALL
        .iter()
        .map(|l| Shown {
            name: l.name(),
            about: l.spec().about,
            filters: l.spec().filters.iter().map(|f| f.keyword).collect(),
            columns: l
                .layout()
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect(),
        })
        .collect();
    to_py(py, &shown)
}
