//! Misbehaviour on purpose: injected faults (errors, 429s, dropped connections, corrupted
//! events), hostile answers, and outages of the whole server.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{lock, State};
use crate::rng::Rng;

/// Injected misbehaviour (`set_faults`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Probability of a 500 or 503 answer.
    pub error_rate: f64,
    /// Probability of a 429 answer (sporadic 429s whatever the load, as per-node limits or a
    /// neighbour's burst give).
    pub rate_limit_rate: f64,
    /// Probability that the connection is closed without an answer.
    pub drop_rate: f64,
    /// Added to every answer.
    pub latency_ms: u64,
    /// `Retry-After` of injected 429s, seconds.
    pub retry_after: u64,
    /// Probability that an events page has one event whose `details.duration_sec` is a string.
    pub corrupt_rate: f64,
    /// Whether the errors, 429s and drops apply to the token endpoint too (by default only to
    /// the reads and the webhook).
    pub token_endpoint: bool,
}

/// An injected fault picked for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Close the connection without answering.
    Drop,
    /// Answer with this 5xx status.
    Error(u16),
    /// Answer 429 with this Retry-After.
    RateLimit(u64),
}

/// What a hostile server, or a broken proxy in front of one, does instead of answering well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// The JSON body is cut in the middle.
    Truncated,
    /// A JSON object where a list's array belongs.
    NotArray,
    /// An HTML error page with status 200, as some proxies send.
    Html,
    /// One record carries a string of this many bytes.
    HugeString(usize),
    /// Headers, then a body that trickles forever.
    SlowBody,
    /// The connection is accepted and the request read, but nothing is ever answered.
    NoAnswer,
    /// The answer is this status, with a JSON error body (e.g. the token endpoint's 500).
    Status(u16),
    /// The answer is this status, with a JSON error body that echoes the request back (method,
    /// path and query, every header, the body), as many servers and proxies do: secrets
    /// included, verbatim.
    Echo(u16),
}

impl Hostile {
    /// The mode named `name` (`truncated`, `not_array`, `html`, `huge_string`, `slow_body`,
    /// `no_answer`, `status`, `echo`); `size` and `status` complete the modes that take them.
    pub fn parse(name: &str, size: usize, status: u16) -> Option<Hostile> {
        Some(match name {
            "truncated" => Hostile::Truncated,
            "not_array" => Hostile::NotArray,
            "html" => Hostile::Html,
            "huge_string" => Hostile::HugeString(size),
            "slow_body" => Hostile::SlowBody,
            "no_answer" => Hostile::NoAnswer,
            "status" => Hostile::Status(status),
            "echo" => Hostile::Echo(status),
            _ => return None,
        })
    }
}

/// Which requests get a [`Hostile`] answer: those whose path starts with `path`, the next
/// `remaining` of them (all when None).
#[derive(Debug, Clone)]
pub struct HostileRule {
    /// The misbehaviour.
    pub mode: Hostile,
    /// Path prefix, e.g. `/v2/events` or `/v2/oauth/token`.
    pub path: String,
    /// How many more requests get it.
    pub remaining: Option<u64>,
}

impl State {
    /// A restart of the service: once `after` more requests have come, the next one is dropped
    /// and the server closes its port and every connection for `duration` (connections are
    /// refused), then listens on the same port again with the same state.
    pub fn schedule_outage(&self, after: u64, duration: Duration) {
        *lock(&self.outage) = Some((after, duration));
    }

    /// Whether this request meets the outage scheduled (which then begins).
    pub fn outage_due(&self) -> bool {
        let mut slot = lock(&self.outage);
        match slot.as_mut() {
            Some((0, duration)) => {
                let _ = self.outages.0.send(*duration);
                *slot = None;
                true
            }
            Some((after, _)) => {
                *after -= 1;
                false
            }
            None => false,
        }
    }

    /// The outages' receiver, for the accept loop (once).
    pub fn take_outages(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<Duration>> {
        lock(&self.outages.1).take()
    }

    /// Sets (or, with None, lifts) the hostile answers.
    pub fn set_hostile(&self, rule: Option<HostileRule>) {
        *lock(&self.hostile) = rule;
    }

    /// The hostile answer this request to `path` gets, if any (counting it).
    pub fn take_hostile(&self, path: &str) -> Option<Hostile> {
        let mut slot = lock(&self.hostile);
        let rule = slot.as_mut()?;
        if !path.starts_with(rule.path.as_str()) {
            return None;
        }
        match rule.remaining.as_mut() {
            Some(0) => return None,
            Some(n) => *n -= 1,
            None => {}
        }
        Some(rule.mode)
    }

    /// Current faults.
    pub fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    /// Replaces the faults.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.faults) = faults;
    }

    /// Whether the next events page gets a corrupted event, reproducibly under the seed.
    pub fn pick_corruption(&self) -> bool {
        let rate = self.faults().corrupt_rate;
        if rate <= 0.0 {
            return false;
        }
        let n = self.fault_counter.fetch_add(1, Ordering::SeqCst);
        Rng::new(self.seed, 0xC0DE_0000 ^ n).chance(rate)
    }

    /// Picks the fault of the next request, reproducibly under the seed.
    pub fn pick_fault(&self) -> Option<Fault> {
        let f = self.faults();
        if f.error_rate <= 0.0 && f.rate_limit_rate <= 0.0 && f.drop_rate <= 0.0 {
            return None;
        }
        let n = self.fault_counter.fetch_add(1, Ordering::SeqCst);
        let mut rng = Rng::new(self.seed, 0xFA17_0000 ^ n);
        if rng.chance(f.drop_rate) {
            return Some(Fault::Drop);
        }
        if rng.chance(f.error_rate) {
            return Some(Fault::Error(if rng.chance(0.5) { 500 } else { 503 }));
        }
        if rng.chance(f.rate_limit_rate) {
            return Some(Fault::RateLimit(f.retry_after));
        }
        None
    }
}
