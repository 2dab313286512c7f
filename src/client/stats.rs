//! Counters behind `client.stats()`: requests by endpoint, retries, 429s, tokens, bytes, and
//! the requests the cache of settled events saved.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::scope::{self, Counted};

/// Counters shared by every task of a client.
#[derive(Debug, Default)]
pub struct Stats {
    requests: Mutex<BTreeMap<String, u64>>,
    retries: AtomicU64,
    rate_limited: AtomicU64,
    tokens: AtomicU64,
    bytes_received: AtomicU64,
    requests_saved: AtomicU64,
}

/// Requests, retries and 429s of one operation (a publish), counted by the calls it makes.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests that left the machine (retries included; not those the quota held back).
    pub sent: AtomicU64,
    /// Requests sent again after a failure.
    pub retries: AtomicU64,
    /// 429 answers received.
    pub rate_limited: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    /// Requests sent, by `"METHOD /path"`, retries and token requests included.
    pub requests: BTreeMap<String, u64>,
    /// Requests sent again after a failure.
    pub retries: u64,
    /// 429 answers received.
    pub rate_limited: u64,
    /// Tokens fetched.
    pub tokens: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    /// Event requests that windows served from the cache of settled events did not need.
    pub requests_saved: u64,
}

impl Stats {
    /// Counts one request sent to `route` (`"GET /v2/events"`), in the totals and in the
    /// call it belongs to.
    pub fn request(&self, route: &str) {
        scope::count(Counted::Sent);
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        match r.get_mut(route) {
            Some(n) => *n += 1,
            None => {
                r.insert(route.to_string(), 1);
            }
        }
    }

    /// Takes back one request counted for `route` that never left the machine (its
    /// connection was refused).
    pub fn unsent(&self, route: &str) {
        scope::count(Counted::Unsent);
        let mut r = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = r.get_mut(route) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                r.remove(route);
            }
        }
    }

    /// Counts a retry, in the totals, in the tally of the operation it belongs to and in its
    /// call's.
    pub fn retry(&self, tally: Option<&Tally>) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        scope::count(Counted::Retry);
        if let Some(o) = scope::observer() {
            o.retry();
        }
        if let Some(t) = tally {
            t.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a 429, in the totals, in the tally of the operation it belongs to and in its
    /// call's.
    pub fn rate_limited(&self, tally: Option<&Tally>) {
        self.rate_limited.fetch_add(1, Ordering::Relaxed);
        scope::count(Counted::RateLimited);
        if let Some(t) = tally {
            t.rate_limited.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a token fetched.
    pub fn token(&self) {
        self.tokens.fetch_add(1, Ordering::Relaxed);
        if let Some(o) = scope::observer() {
            o.token();
        }
    }

    /// Counts received body bytes.
    pub fn bytes(&self, n: usize) {
        self.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts event requests a read from the cache did not send.
    pub fn saved(&self, n: u64) {
        self.requests_saved.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            requests: self
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            retries: self.retries.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            tokens: self.tokens.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            requests_saved: self.requests_saved.load(Ordering::Relaxed),
        }
    }
}
