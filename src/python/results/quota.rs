//! Where the daily quota stands (`Quota`, from the core's `quota::Quota`) and a client's
//! counters (`Stats`, from the core's `stats::Snapshot` and the quota).

use std::collections::BTreeMap;

use pyo3::prelude::*;

use super::{epoch_ms, result_methods, utc};
use crate::client::quota::Quota;
use crate::client::stats::Snapshot;

/// Where the daily request quota stands (:meth:`Client.quota <surveillance.Client.quota>`),
/// read-only, as a mapping of its attributes too: ``quota["remaining"]``, ``dict(quota)``.
///
/// >>> import surveillance as sv
/// >>> def left(quota: sv.Quota) -> str:
/// ...     return "unlimited" if quota["remaining"] is None else f"{quota['remaining']:,}"
#[pyclass(
    name = "Quota",
    module = "surveillance._core",
    frozen,
    mapping,
    skip_from_py_object
)]
#[derive(Clone)]
pub struct PyQuota {
    /// Requests a day (None without a budget).
    #[pyo3(get)]
    pub(super) limit: Option<u64>,
    /// Requests sent today (the service's UTC day), by every client of the machine with the
    /// key.
    #[pyo3(get)]
    used: u64,
    /// Requests left today (None without a limit).
    #[pyo3(get)]
    pub(super) remaining: Option<u64>,
    resets_at_ms: i64,
}

impl From<Quota> for PyQuota {
    fn from(q: Quota) -> Self {
        PyQuota {
            limit: q.limit,
            used: q.used,
            remaining: q.remaining,
            resets_at_ms: q.resets_at_ms,
        }
    }
}

/// The quota's keys, in the constructor's order.
const QUOTA: &[&str] = &["limit", "used", "remaining", "resets_at"];

result_methods!(mapping PyQuota, "Quota", QUOTA, {
    #[new]
    #[pyo3(signature = (limit, used, remaining, resets_at))]
    fn new(
        limit: Option<u64>,
        used: u64,
        remaining: Option<u64>,
        resets_at: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let resets_at_ms = epoch_ms(resets_at, "resets_at")?;
        Ok(Quota { limit, used, remaining, resets_at_ms }.into())
    }

    /// When the budget comes back, an aware UTC datetime (the service's next midnight, or
    /// the end of a wait the service asked for).
    #[getter]
    fn resets_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        utc(py, self.resets_at_ms)
    }
});

/// The counters of a client (:meth:`Client.stats <surveillance.Client.stats>`), read-only, as
/// a mapping of its attributes too: ``stats["requests"]``.
///
/// >>> import surveillance as sv
/// >>> def event_requests(stats: sv.Stats) -> int:
/// ...     return stats["requests"].get("GET /v2/events", 0)
#[pyclass(name = "Stats", module = "surveillance._core", frozen, mapping)]
pub struct PyStats {
    /// Requests sent by ``"METHOD /path"``, retries and token requests included.
    #[pyo3(get)]
    requests: BTreeMap<String, u64>,
    /// Requests sent again after a failure.
    #[pyo3(get)]
    retries: u64,
    /// 429 answers received.
    #[pyo3(get)]
    rate_limited: u64,
    /// Tokens fetched.
    #[pyo3(get)]
    tokens: u64,
    /// Response body bytes received.
    #[pyo3(get)]
    bytes_received: u64,
    /// Event requests that the cache of settled events saved.
    #[pyo3(get)]
    requests_saved: u64,
    /// Where the daily quota stands, as :meth:`Client.quota <surveillance.Client.quota>`
    /// gives it.
    #[pyo3(get)]
    quota: PyQuota,
}

impl PyStats {
    /// The counters of `snapshot`, with the quota then.
    pub fn of(snapshot: Snapshot, quota: Quota) -> Self {
        PyStats {
            requests: snapshot.requests,
            retries: snapshot.retries,
            rate_limited: snapshot.rate_limited,
            tokens: snapshot.tokens,
            bytes_received: snapshot.bytes_received,
            requests_saved: snapshot.requests_saved,
            quota: quota.into(),
        }
    }
}

/// The stats' keys, in the constructor's order.
const STATS: &[&str] = &[
    "requests",
    "retries",
    "rate_limited",
    "tokens",
    "bytes_received",
    "requests_saved",
    "quota",
];

result_methods!(mapping PyStats, "Stats", STATS, {
    #[new]
    #[pyo3(signature = (requests, retries, rate_limited, tokens, bytes_received, requests_saved, quota))]
    fn new(
        requests: BTreeMap<String, u64>,
        retries: u64,
        rate_limited: u64,
        tokens: u64,
        bytes_received: u64,
        requests_saved: u64,
        quota: PyRef<'_, PyQuota>,
    ) -> Self {
        PyStats {
            requests,
            retries,
            rate_limited,
            tokens,
            bytes_received,
            requests_saved,
            quota: quota.clone(),
        }
    }
});
