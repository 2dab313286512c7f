//! What fetching the events of a range will cost: `plan_events`.
//!
//! The plan is a count (`events::count`): the window fetch itself, making the same decisions
//! window by window (chained cuts on a sorting service, sampled parts on one that does not),
//! but asking only the pages that decide: each window's first page, its ceiling page when the
//! fetch asks it, and a few pages that find where it ends, from below where it can. The pages
//! in between are known full without being asked. So the events are counted, not extrapolated,
//! but for the last few percent of a window: a sorted window's end is taken where the density of
//! its pages puts it once that is within about 6% of the events counted (searched from below, so
//! that no page past it is asked); an unsorted one's is found within 3%; and the events at a
//! window's widened edges on pages not asked are taken as the window's. The requests are those
//! of the fetch's windows.
//!
//! Cost: on a sorting service about one probe a window of 10,000 events (1% of the fetch's
//! 100 requests) plus a few for the last; on one that does not sort, about six a part of 7,000
//! events. The pages a plan reads of a range that has settled are held for the fetch that
//! follows on the same client (`events::Held`), which does not ask them again: a plan followed
//! by its fetch costs only the probes past a window's end (none on a sorting service under a
//! daily quota). A page past an end is asked only where it costs the fetch at most 2%: an
//! unsorted window of a fetch under 50 requests, which no density sizes, is walked page by page
//! instead, up to a quarter of what remains of the day's quota (the fetch then asks none of
//! those pages). The plan's own requests count against the daily quota.

use super::error::Result;
use super::events::ProgressSink;
use super::events::{self, Query};
use super::Client;

/// An estimate of a fetch's cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EventPlan {
    /// Events in the range (estimated).
    pub events: u64,
    /// Requests `events()` would make for them (estimated).
    pub requests: u64,
    /// Seconds at the client's read limits (requests per second, or the concurrency at the
    /// measured latency when no rate is set; 0 when unlimited).
    pub seconds: f64,
    /// Days of quota at the daily limit, what remains today counting first: 0.2 is a fifth
    /// of a day's quota (it fits today); 2.5 the rest of today, tomorrow and half the day
    /// after. 0 without a daily limit.
    pub days: f64,
    /// Requests the plan itself made.
    pub probes: u64,
    /// True when the count is exact (every window's size was found).
    pub exact: bool,
}

/// Plans the fetch of `query` (see the module's documentation).
pub async fn plan(client: &Client, query: &Query, sink: Option<ProgressSink>) -> Result<EventPlan> {
    // Under a daily quota, a walk spends at most a quarter of what is left of it.
    let walk = match client.config().limits.daily_requests {
        Some(limit) => (client.quota().remaining.unwrap_or(limit) / 4) as usize,
        None => usize::MAX,
    };
    let count = events::count(client.clone(), query, sink, walk).await?;
    Ok(finish(
        client,
        count.events.round() as u64,
        count.requests.round().max(1.0) as u64,
        count.probes,
        count.exact,
    ))
}

/// Time and quota of `requests` at the client's limits.
fn finish(client: &Client, events: u64, requests: u64, probes: u64, exact: bool) -> EventPlan {
    let limits = client.config().limits;
    let seconds = match (limits.read_per_second, limits.read_concurrency) {
        (Some(rate), _) => requests as f64 / rate,
        _ => 0.0,
    };
    let days = match limits.daily_requests {
        Some(limit) => {
            let remaining = client.quota().remaining.unwrap_or(limit) as f64;
            let (r, l) = (requests as f64, limit as f64);
            if r <= remaining {
                r / l
            } else {
                1.0 + (r - remaining) / l
            }
        }
        None => 0.0,
    };
    EventPlan {
        events,
        requests,
        seconds,
        days,
        probes,
        exact,
    }
}
