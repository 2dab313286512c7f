//! Where the daily quota stands (`Quota`, from the core's `quota::Quota`) and a client's
//! counters (`Stats`, from the core's `stats::Snapshot` and the quota).

use std::collections::BTreeMap;

use pyo3::prelude::*;

use super::fields::{result_class, Time};
use crate::client::quota::Quota;
use crate::client::stats::Snapshot;

result_class! {
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
        from_py_object
    )]
    #[derive(Clone)]
    mapping PyQuota "Quota" {
        /// Requests a day (None without a budget).
        limit: Option<u64> => "Optional[int]",
        /// Requests sent today (the service's UTC day), by every client of the machine with the
        /// key.
        used: u64 => "int",
        /// Requests left today (None without a limit).
        remaining: Option<u64> => "Optional[int]",
        /// When the budget comes back, an aware UTC datetime (the service's next midnight, or
        /// the end of a wait the service asked for).
        resets_at: Time => "datetime.datetime",
    }
    {}
}

impl From<Quota> for PyQuota {
    fn from(q: Quota) -> Self {
        PyQuota {
            limit: q.limit,
            used: q.used,
            remaining: q.remaining,
            resets_at: Time(q.resets_at_ms),
        }
    }
}

result_class! {
    /// The counters of a client (:meth:`Client.stats <surveillance.Client.stats>`), read-only, as
    /// a mapping of its attributes too: ``stats["requests"]``.
    ///
    /// >>> import surveillance as sv
    /// >>> def event_requests(stats: sv.Stats) -> int:
    /// ...     return stats["requests"].get("GET /v2/events", 0)
    #[pyclass(name = "Stats", module = "surveillance._core", frozen, mapping)]
    mapping PyStats "Stats" {
        /// Requests sent by ``"METHOD /path"``, retries and token requests included.
        requests: BTreeMap<String, u64> => "dict[str, int]",
        /// Requests sent again after a failure.
        retries: u64 => "int",
        /// 429 answers received.
        rate_limited: u64 => "int",
        /// Tokens fetched.
        tokens: u64 => "int",
        /// Response body bytes received.
        bytes_received: u64 => "int",
        /// Event requests that the cache of settled events saved.
        requests_saved: u64 => "int",
        /// Where the daily quota stands, as :meth:`Client.quota <surveillance.Client.quota>`
        /// gives it.
        quota: PyQuota => "Quota",
    }
    {}
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
