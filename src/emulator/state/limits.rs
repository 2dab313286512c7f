//! The limits the emulator applies before a handler runs: the daily quota, the per-second
//! rate and the concurrency of each class of request.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{lock, Limits, State};
use crate::time::DAY_MS;

/// A token bucket holding up to one second of requests.
#[derive(Debug)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub(super) fn new() -> Self {
        Bucket {
            tokens: f64::NAN,
            last: Instant::now(),
        }
    }

    /// Takes one token at `rate` per second, or says how long until one is there.
    pub fn take(&mut self, rate: f64, now: Instant) -> Result<(), Duration> {
        let capacity = rate.max(1.0);
        if self.tokens.is_nan() {
            self.tokens = capacity;
        }
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * rate).min(capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - self.tokens) / rate.max(1e-9),
            ))
        }
    }
}

/// Which limits a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestClass {
    /// The token endpoint: the daily quota only.
    Token,
    /// GET endpoints.
    Read,
    /// The webhook.
    Publish,
}

/// Requests counted per UTC day of the emulator's clock, for the daily quota.
#[derive(Debug, Default)]
pub(super) struct Daily {
    /// Day number (days since 1970-01-01, UTC) -> requests that arrived that day.
    days: BTreeMap<i64, u64>,
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
fn day_name(day: i64) -> String {
    chrono::DateTime::from_timestamp_millis(day.saturating_mul(DAY_MS))
        .map(|t| t.date_naive().to_string())
        .unwrap_or_else(|| format!("day {day}"))
}

/// Epoch milliseconds as ISO 8601 UTC with seconds and a `Z` (`2026-11-24T00:00:00Z`).
fn iso_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("{ms} ms after the epoch"))
}

/// What the gate decided about a request before it reaches its handler.
#[derive(Debug)]
pub enum Verdict {
    /// Go on; the guard releases the concurrency slot when dropped.
    Pass(SlotGuard),
    /// Answer 429 with this Retry-After (seconds) and message.
    Limited(u64, String),
}

/// Holds one in-flight slot of a class.
#[derive(Debug)]
pub struct SlotGuard {
    state: Option<Arc<State>>,
    class: usize,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(s) = &self.state {
            s.in_flight[self.class].fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl State {
    /// Replaces the limits and forgets what the old ones counted, but the daily counts while a
    /// quota stays set (its value may change): a quota set anew, or lifted, starts from zero.
    pub fn set_limits(&self, limits: Limits) {
        let mut current = lock(&self.limits);
        if limits.daily_requests.is_none() || current.daily_requests.is_none() {
            lock(&self.daily).days.clear();
        }
        *current = limits;
        *lock(&self.buckets) = (Bucket::new(), Bucket::new());
    }

    /// Applies the daily quota, the per-second rate and the concurrency of `class`.
    ///
    /// Every request that reaches it (one with the right `x-api-key`) counts against the UTC day
    /// of the emulator's clock in which it arrives, whatever its answer: those the quota or
    /// another limit refuses, injected faults and hostile answers included. A request past the
    /// day's quota is answered 429 with `Retry-After` = seconds until the next UTC midnight of
    /// the emulator's clock, when the count starts again from zero.
    pub fn admit(self: &Arc<Self>, class: RequestClass) -> Verdict {
        let limits = *lock(&self.limits);
        let index = class as usize;
        let now = self.now_ms();
        let day = now.div_euclid(DAY_MS);
        let used = {
            let mut daily = lock(&self.daily);
            let count = daily.days.entry(day).or_default();
            *count += 1;
            *count - 1
        };
        if let Some(max) = limits.daily_requests {
            if used >= max {
                let midnight = (day + 1).saturating_mul(DAY_MS);
                let wait = midnight.saturating_sub(now);
                let retry = u64::try_from(wait).unwrap_or(0).div_ceil(1000);
                let message = format!(
                    "daily quota of {max} requests used up for {}; it resets at {}",
                    day_name(day),
                    iso_utc(midnight)
                );
                return self.limited(retry.max(1), message);
            }
        }
        let (rate, conc) = match class {
            RequestClass::Token => (None, None),
            RequestClass::Read => (limits.read_per_second, limits.read_concurrency),
            RequestClass::Publish => (limits.publish_per_second, limits.publish_concurrency),
        };
        if let Some(rate) = rate {
            let mut buckets = lock(&self.buckets);
            let bucket = if class == RequestClass::Read {
                &mut buckets.0
            } else {
                &mut buckets.1
            };
            if let Err(wait) = bucket.take(rate, Instant::now()) {
                let retry = wait.as_secs_f64().ceil().max(1.0) as u64;
                return self.limited(
                    retry,
                    format!("limit of {rate} requests per second exceeded"),
                );
            }
        }
        let held = self.in_flight[index].fetch_add(1, Ordering::SeqCst);
        let guard = SlotGuard {
            state: Some(self.clone()),
            class: index,
        };
        if let Some(max) = conc {
            if held >= max {
                drop(guard);
                return self.limited(1, format!("limit of {max} concurrent requests exceeded"));
            }
        }
        Verdict::Pass(guard)
    }

    fn limited(&self, retry: u64, message: String) -> Verdict {
        lock(&self.stats).rate_limited += 1;
        Verdict::Limited(retry, message)
    }

    /// The daily quota's counts as JSON: the emulator's current UTC day, the requests counted
    /// in it, the quota (null when none) and the count of every day seen since the quota was
    /// last set anew.
    pub fn daily_json(&self) -> Value {
        let today = self.now_ms().div_euclid(DAY_MS);
        let limit = lock(&self.limits).daily_requests;
        let daily = lock(&self.daily);
        let days: serde_json::Map<String, Value> = daily
            .days
            .iter()
            .map(|(day, n)| (day_name(*day), json!(n)))
            .collect();
        json!({
            "day": day_name(today),
            "used": daily.days.get(&today).copied().unwrap_or(0),
            "limit": limit,
            "days": days,
        })
    }
}
