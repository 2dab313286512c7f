//! What the cache of settled events holds (`CacheInfo` and its `CacheEntry`s, from the core's
//! `cache::Info` and `cache::Entry`).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::{epoch_ms, result_methods, utc};
use crate::client::cache::{Entry, Info};

/// What the cache of settled events holds of one account and endpoint (an item of
/// :class:`CacheInfo`'s ``entries``), read-only, as a mapping of its attributes too.
///
/// >>> import surveillance as sv
/// >>> def hours(entry: sv.CacheEntry) -> float:
/// ...     return sum((hi - lo).total_seconds() for lo, hi in entry["ranges"]) / 3600
#[pyclass(name = "CacheEntry", module = "surveillance._core", frozen, mapping)]
pub struct PyCacheEntry {
    /// A hash of the base URL, API key and client id (never a secret).
    #[pyo3(get)]
    account: String,
    /// The service's base URL, when known.
    #[pyo3(get)]
    base_url: Option<String>,
    /// The endpoint, e.g. ``"GET /v2/events"``.
    #[pyo3(get)]
    endpoint: String,
    /// The report, or None for all events.
    #[pyo3(get)]
    report_id: Option<String>,
    ranges: Vec<(i64, i64)>,
    /// Events held.
    #[pyo3(get)]
    events: u64,
    /// Requests the reads that filled it spent, which a read of all it holds saves.
    #[pyo3(get)]
    requests: u64,
    /// Bytes of its files.
    #[pyo3(get)]
    bytes: u64,
    /// Its files.
    #[pyo3(get)]
    files: u64,
}

impl From<Entry> for PyCacheEntry {
    fn from(e: Entry) -> Self {
        PyCacheEntry {
            account: e.account,
            base_url: e.base_url,
            endpoint: e.endpoint,
            report_id: e.report_id,
            ranges: e.ranges,
            events: e.events,
            requests: e.requests,
            bytes: e.bytes,
            files: e.files,
        }
    }
}

/// The entry's keys, in the constructor's order.
const ENTRY: &[&str] = &[
    "account",
    "base_url",
    "endpoint",
    "report_id",
    "ranges",
    "events",
    "requests",
    "bytes",
    "files",
];

result_methods!(mapping PyCacheEntry, "CacheEntry", ENTRY, {
    #[new]
    #[pyo3(signature = (account, base_url, endpoint, report_id, ranges, events, requests, bytes, files))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        account: String,
        base_url: Option<String>,
        endpoint: String,
        report_id: Option<String>,
        ranges: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        events: u64,
        requests: u64,
        bytes: u64,
        files: u64,
    ) -> PyResult<Self> {
        let ranges = ranges
            .iter()
            .map(|(lo, hi)| Ok((epoch_ms(lo, "ranges")?, epoch_ms(hi, "ranges")?)))
            .collect::<PyResult<_>>()?;
        Ok(PyCacheEntry {
            account,
            base_url,
            endpoint,
            report_id,
            ranges,
            events,
            requests,
            bytes,
            files,
        })
    }

    /// The ranges held, ``[start, end)`` pairs of aware UTC datetimes.
    #[getter]
    fn ranges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pairs = self
            .ranges
            .iter()
            .map(|&(lo, hi)| PyTuple::new(py, [utc(py, lo)?, utc(py, hi)?]))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, pairs)
    }
});

/// What the cache of settled events holds (:meth:`Client.cache_info
/// <surveillance.Client.cache_info>`), read-only, as a mapping of its attributes too.
///
/// >>> import surveillance as sv
/// >>> def events_held(info: sv.CacheInfo) -> int:
/// ...     return sum(entry["events"] for entry in info["entries"])
#[pyclass(name = "CacheInfo", module = "surveillance._core", frozen, mapping)]
pub struct PyCacheInfo {
    /// The directory (the one named, or the cache's own folder in it).
    #[pyo3(get)]
    path: String,
    /// Bytes of its files.
    #[pyo3(get)]
    bytes: u64,
    /// Its files of events.
    #[pyo3(get)]
    files: u64,
    /// Requests this client's reads did not send, thanks to the cache (0 without a client).
    #[pyo3(get)]
    requests_saved: u64,
    entries: Vec<Py<PyCacheEntry>>,
}

impl PyCacheInfo {
    /// What `info` holds, with the requests a client's reads saved.
    pub fn of(py: Python<'_>, info: Info, requests_saved: u64) -> PyResult<Self> {
        let entries = info
            .entries
            .into_iter()
            .map(|e| Py::new(py, PyCacheEntry::from(e)))
            .collect::<PyResult<_>>()?;
        Ok(PyCacheInfo {
            path: info.path,
            bytes: info.bytes,
            files: info.files,
            requests_saved,
            entries,
        })
    }
}

/// The cache's keys, in the constructor's order.
const INFO: &[&str] = &["path", "bytes", "files", "requests_saved", "entries"];

result_methods!(mapping PyCacheInfo, "CacheInfo", INFO, {
    #[new]
    #[pyo3(signature = (path, bytes, files, requests_saved, entries))]
    fn new(
        path: String,
        bytes: u64,
        files: u64,
        requests_saved: u64,
        entries: Vec<Py<PyCacheEntry>>,
    ) -> Self {
        PyCacheInfo { path, bytes, files, requests_saved, entries }
    }

    /// What it holds of each account and endpoint.
    #[getter]
    fn entries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.entries.iter().map(|e| e.bind(py)))
    }
});
