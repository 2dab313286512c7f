//! What the cache of settled events holds (`CacheInfo` and its `CacheEntry`s, from the core's
//! `cache::Info` and `cache::Entry`).

use pyo3::prelude::*;

use super::fields::{result_class, Time};
use crate::client::cache::{Entry, Info};

result_class! {
    /// What the cache of settled events holds of one account and endpoint (an item of
    /// :class:`CacheInfo`'s ``entries``), read-only, as a mapping of its attributes too.
    ///
    /// >>> import surveillance as sv
    /// >>> def hours(entry: sv.CacheEntry) -> float:
    /// ...     return sum((hi - lo).total_seconds() for lo, hi in entry["ranges"]) / 3600
    #[pyclass(name = "CacheEntry", module = "surveillance._core", frozen, mapping)]
    mapping PyCacheEntry "CacheEntry" {
        /// A hash of the base URL, API key and client id (never a secret).
        account: String => "str",
        /// The service's base URL, when known.
        base_url: Option<String> => "Optional[str]",
        /// The endpoint, e.g. ``"GET /v2/events"``.
        endpoint: String => "str",
        /// The report, or None for all events.
        report_id: Option<String> => "Optional[str]",
        /// The ranges held, ``[start, end)`` pairs of aware UTC datetimes.
        ranges: Vec<(Time, Time)> => "list[tuple[datetime.datetime, datetime.datetime]]",
        /// Events held.
        events: u64 => "int",
        /// Requests the reads that filled it spent, which a read of all it holds saves.
        requests: u64 => "int",
        /// Bytes of its files.
        bytes: u64 => "int",
        /// Its files.
        files: u64 => "int",
    }
    {}
}

impl From<Entry> for PyCacheEntry {
    fn from(e: Entry) -> Self {
        PyCacheEntry {
            account: e.account,
            base_url: e.base_url,
            endpoint: e.endpoint,
            report_id: e.report_id,
            ranges: e
                .ranges
                .into_iter()
                .map(|(lo, hi)| (Time(lo), Time(hi)))
                .collect(),
            events: e.events,
            requests: e.requests,
            bytes: e.bytes,
            files: e.files,
        }
    }
}

result_class! {
    /// What the cache of settled events holds (:meth:`Client.cache_info
    /// <surveillance.Client.cache_info>`), read-only, as a mapping of its attributes too.
    ///
    /// >>> import surveillance as sv
    /// >>> def events_held(info: sv.CacheInfo) -> int:
    /// ...     return sum(entry["events"] for entry in info["entries"])
    #[pyclass(name = "CacheInfo", module = "surveillance._core", frozen, mapping)]
    mapping PyCacheInfo "CacheInfo" {
        /// The directory (the one named, or the cache's own folder in it).
        path: String => "str",
        /// Bytes of its files.
        bytes: u64 => "int",
        /// Its files of events.
        files: u64 => "int",
        /// Requests this client's reads did not send, thanks to the cache (0 without a client).
        requests_saved: u64 => "int",
        /// What it holds of each account and endpoint.
        entries: Vec<Py<PyCacheEntry>> => "list[CacheEntry]",
    }
    {}
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
