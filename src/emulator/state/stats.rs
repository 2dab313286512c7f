//! The emulator's statistics: requests by route and status, tokens, records stored, limits
//! met, connections.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde_json::{json, Value};

use super::{lock, RequestClass, State};

/// Counters behind `stats()`.
#[derive(Debug, Default)]
pub struct ServedCounts {
    /// "METHOD /path" -> status ("200", "429", "dropped") -> count.
    pub requests: BTreeMap<String, BTreeMap<String, u64>>,
    /// Tokens created.
    pub tokens_issued: u64,
    /// Webhook records written (new or replacing).
    pub published_stored: u64,
    /// Webhook records that replaced one with the same key.
    pub published_upserts: u64,
    /// 429s caused by the limits of `set_limits`.
    pub rate_limited: u64,
    /// "METHOD /path" -> the `traceparent` headers received, in order (the first
    /// [`TRACEPARENTS_KEPT`] of each route).
    pub traceparents: BTreeMap<String, Vec<String>>,
}

/// The `traceparent` headers kept per route: enough for a test, bounded for a long run.
pub const TRACEPARENTS_KEPT: usize = 10_000;

impl State {
    /// Counts one answered (or dropped) request.
    pub fn count(&self, route: &str, status: &str) {
        let mut stats = lock(&self.stats);
        *stats
            .requests
            .entry(route.to_string())
            .or_default()
            .entry(status.to_string())
            .or_default() += 1;
    }

    /// Keeps the `traceparent` header of a request to `route`.
    pub fn trace(&self, route: &str, traceparent: &str) {
        let mut stats = lock(&self.stats);
        let kept = stats.traceparents.entry(route.to_string()).or_default();
        if kept.len() < TRACEPARENTS_KEPT {
            kept.push(traceparent.to_string());
        }
    }

    /// The statistics with the `traceparent` headers received, as the emulator's
    /// `GET /_emulator/stats` answers them to a test in another process.
    pub fn introspection_json(&self) -> Value {
        let mut v = self.stats_json();
        let traceparents = json!(lock(&self.stats).traceparents);
        if let Some(m) = v.as_object_mut() {
            m.insert("traceparents".into(), traceparents);
        }
        v
    }

    /// The statistics as JSON.
    pub fn stats_json(&self) -> Value {
        let daily = self.daily_json();
        let stats = lock(&self.stats);
        json!({
            "requests": stats.requests,
            "tokens_issued": stats.tokens_issued,
            "published_stored": stats.published_stored,
            "published_upserts": stats.published_upserts,
            "rate_limited": stats.rate_limited,
            "connections_open": self.connections_open.load(Ordering::SeqCst),
            "connections_total": self.connections_total.load(Ordering::SeqCst),
            "tls_failures": self.tls_failures.load(Ordering::SeqCst),
            "daily": daily,
            // Requests admitted and not answered yet, by class (token, reads, webhook).
            "in_flight": {
                "token": self.in_flight[RequestClass::Token as usize].load(Ordering::SeqCst),
                "read": self.in_flight[RequestClass::Read as usize].load(Ordering::SeqCst),
                "publish": self.in_flight[RequestClass::Publish as usize].load(Ordering::SeqCst),
            },
        })
    }

    /// Zeroes the statistics (not the stored records, nor the daily quota's counts: those are
    /// the service's state, cleared when the quota is set anew or lifted).
    pub fn reset_stats(&self) {
        *lock(&self.stats) = ServedCounts::default();
        self.connections_total.store(0, Ordering::SeqCst);
    }
}
