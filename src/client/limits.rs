//! Client-side limits: for reads and for publishing, a pacing rate and a concurrency cap shared by
//! every task of one client, lowered for a while after a 429 (adaptive) and raised back slowly.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::{Error, Result};

/// Requests per second and requests in flight, for reads and for publishing, and requests a
/// day; None lifts one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// GET requests per second.
    pub read_per_second: Option<f64>,
    /// GET requests in flight.
    pub read_concurrency: Option<usize>,
    /// Webhook requests per second.
    pub publish_per_second: Option<f64>,
    /// Webhook requests in flight.
    pub publish_concurrency: Option<usize>,
    /// Requests a day with one API key, all endpoints (see [`super::quota`]).
    pub daily_requests: Option<u64>,
}

/// The provider's published daily quota per API key.
pub const DAILY_REQUESTS: u64 = 2_400;

impl Default for Limits {
    /// The provider's published limits: reads 1/s and 3 in flight, webhook 100/s and 200, and
    /// 2,400 requests a day.
    fn default() -> Self {
        Limits {
            read_per_second: Some(1.0),
            read_concurrency: Some(3),
            publish_per_second: Some(100.0),
            publish_concurrency: Some(200),
            daily_requests: Some(DAILY_REQUESTS),
        }
    }
}

impl Limits {
    /// No client-side limit (the client still slows down when the service answers 429).
    pub fn unlimited() -> Self {
        Limits {
            read_per_second: None,
            read_concurrency: None,
            publish_per_second: None,
            publish_concurrency: None,
            daily_requests: None,
        }
    }

    /// Refuses rates that are not positive and concurrencies of zero.
    pub fn check(&self) -> Result<()> {
        for (name, v) in [
            ("read_per_second", self.read_per_second),
            ("publish_per_second", self.publish_per_second),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(Error::Config(format!(
                    "`{name}` must be a positive number or None"
                )));
            }
        }
        for (name, v) in [
            ("read_concurrency", self.read_concurrency),
            ("publish_concurrency", self.publish_concurrency),
        ] {
            if v == Some(0) {
                return Err(Error::Config(format!(
                    "`{name}` must be at least 1 or None"
                )));
            }
        }
        Ok(())
    }
}

/// In flight at most when a concurrency is unlimited (a sanity cap on sockets).
const UNLIMITED_CONCURRENCY: usize = 512;
/// Time without a 429 before the rate is raised again.
const CALM: Duration = Duration::from_secs(2);
/// The adaptive rate never goes below this many requests per second.
const FLOOR: f64 = 0.5;

#[derive(Debug)]
struct Pace {
    /// The rate in force (configured, or lowered after a 429); None = unlimited.
    rate: Option<f64>,
    /// Earliest start of the next request.
    next_free: Instant,
    /// No request starts before this (a Retry-After shared by everyone).
    cooldown_until: Instant,
    last_429: Option<Instant>,
    /// Recent starts, to measure the rate when none is configured.
    recent: VecDeque<Instant>,
}

/// The pacing and concurrency of one class of requests (reads, or publishing).
#[derive(Debug)]
pub struct Gate {
    configured: Option<f64>,
    pace: Mutex<Pace>,
    slots: Arc<Semaphore>,
}

/// Held while a request is in flight.
#[derive(Debug)]
pub struct Slot(#[allow(dead_code)] OwnedSemaphorePermit);

impl Gate {
    /// A gate of `rate` per second and `concurrency` in flight.
    pub fn new(rate: Option<f64>, concurrency: Option<usize>) -> Gate {
        let now = Instant::now();
        Gate {
            configured: rate,
            pace: Mutex::new(Pace {
                rate,
                next_free: now,
                cooldown_until: now,
                last_429: None,
                recent: VecDeque::new(),
            }),
            slots: Arc::new(Semaphore::new(concurrency.unwrap_or(UNLIMITED_CONCURRENCY))),
        }
    }

    fn pace(&self) -> std::sync::MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a concurrency slot, then for the request's turn under the rate.
    pub async fn acquire(&self) -> Result<Slot> {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Transport("the client is closed".into()))?;
        let start =
            {
                let mut p = self.pace();
                let now = Instant::now();
                let start = now.max(p.next_free).max(p.cooldown_until);
                if let Some(rate) = p.rate {
                    p.next_free = start + Duration::from_secs_f64(1.0 / rate);
                }
                if self.configured.is_none() {
                    p.recent.push_back(start);
                    while p.recent.front().is_some_and(|t| {
                        start.saturating_duration_since(*t) > Duration::from_secs(1)
                    }) {
                        p.recent.pop_front();
                    }
                }
                start
            };
        tokio::time::sleep_until(start.into()).await;
        Ok(Slot(permit))
    }

    /// Refuses every waiting and future request (the client was closed).
    pub fn close(&self) {
        self.slots.close();
    }

    /// After a 429: everyone waits `retry_after`; when the service asks for a wait (not for an
    /// immediate retry), the rate is also halved for a while.
    pub fn on_rate_limited(&self, retry_after: Option<Duration>) {
        let mut p = self.pace();
        let now = Instant::now();
        if let Some(wait) = retry_after {
            p.cooldown_until = p.cooldown_until.max(now + wait);
        }
        if retry_after.is_some_and(|w| w.is_zero()) {
            return;
        }
        // Halve at most once per burst of 429s from requests that were already in flight.
        let fresh = p
            .last_429
            .is_none_or(|t| now.saturating_duration_since(t) > Duration::from_millis(500));
        if fresh {
            let current = p.rate.unwrap_or_else(|| (p.recent.len() as f64).max(2.0));
            p.rate = Some((current / 2.0).max(FLOOR));
        }
        p.last_429 = Some(now);
    }

    /// After a success: once calm for a while, raise the rate back towards the configured one.
    pub fn on_success(&self) {
        let mut p = self.pace();
        let Some(last) = p.last_429 else { return };
        if last.elapsed() < CALM {
            return;
        }
        match (p.rate, self.configured) {
            (Some(r), Some(c)) => p.rate = Some((r * 1.1).min(c)),
            (Some(r), None) if r * 1.1 > 1000.0 => {
                p.rate = None;
                p.last_429 = None;
            }
            (Some(r), None) => p.rate = Some(r * 1.1),
            (None, _) => p.last_429 = None,
        }
    }

    /// The rate in force now (None = unlimited).
    pub fn current_rate(&self) -> Option<f64> {
        self.pace().rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paces_at_the_rate() {
        let g = Gate::new(Some(50.0), Some(3));
        let t0 = Instant::now();
        for _ in 0..6 {
            drop(g.acquire().await.expect("open"));
        }
        // Five intervals of 20 ms after the first.
        assert!(
            t0.elapsed() >= Duration::from_millis(95),
            "{:?}",
            t0.elapsed()
        );
    }

    #[tokio::test]
    async fn halves_after_429_and_honours_retry_after() {
        let g = Gate::new(Some(10.0), None);
        g.on_rate_limited(Some(Duration::from_millis(100)));
        assert_eq!(g.current_rate(), Some(5.0));
        let t0 = Instant::now();
        drop(g.acquire().await.expect("open"));
        assert!(t0.elapsed() >= Duration::from_millis(95));
    }

    #[test]
    fn published_limits_are_the_default() {
        let l = Limits::default();
        assert_eq!(l.read_per_second, Some(1.0));
        assert_eq!(l.publish_concurrency, Some(200));
        assert!(Limits {
            read_per_second: Some(0.0),
            ..l
        }
        .check()
        .is_err());
        assert!(Limits::unlimited().check().is_ok());
    }
}
