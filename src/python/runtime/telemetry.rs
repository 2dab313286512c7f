//! A call's telemetry as the core tells it: the [`Recorder`] keeps what the call's tasks
//! observe (requests, waits, tokens, events read) without the GIL, and the Python layer takes
//! the records in the caller's thread (`CallScope.drain`) to make spans and metrics of them
//! with the OpenTelemetry API, so that no tokio thread ever waits for the GIL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use pyo3::prelude::*;

use crate::client::scope::{Exchange, Observer, WaitKind};

/// One request as `drain` hands it to Python (a dict of these names).
#[derive(Debug, IntoPyObject)]
pub struct ExchangeRecord {
    method: &'static str,
    /// `url.template`: the path, without its query.
    template: String,
    server: String,
    port: u16,
    status: Option<u16>,
    /// `error.type`.
    error: Option<String>,
    /// `http.request.resend_count`.
    resend: u32,
    /// Whether it left the machine.
    sent: bool,
    /// Whether it asked for a token.
    token: bool,
    /// Unix ns.
    start: u64,
    /// ns.
    duration: u64,
}

/// One wait before a request is sent again (a dict of these names).
#[derive(Debug, IntoPyObject)]
pub struct WaitRecord {
    /// `rate_limited`, `outage`, `backoff`.
    reason: &'static str,
    /// `GET /v2/events`.
    request: String,
    seconds: f64,
    /// When it began, Unix ns.
    at: u64,
}

/// What a call's tasks observed since the last drain (a dict of these names).
#[derive(Debug, IntoPyObject)]
pub struct Drained {
    exchanges: Vec<ExchangeRecord>,
    waits: Vec<WaitRecord>,
    /// Access tokens received.
    tokens: u64,
    /// Requests to be sent again.
    retries: u64,
    /// Events read from the service.
    events: u64,
}

/// What a call's tasks observe, until it is drained.
#[derive(Debug, Default)]
pub struct Recorder {
    exchanges: Mutex<Vec<ExchangeRecord>>,
    waits: Mutex<Vec<WaitRecord>>,
    tokens: AtomicU64,
    retries: AtomicU64,
    events: AtomicU64,
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn method_name(m: &str) -> &'static str {
    match m {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        _ => "_OTHER",
    }
}

impl Observer for Recorder {
    fn exchange(&self, e: &Exchange<'_>) {
        let record = ExchangeRecord {
            method: method_name(e.method),
            template: e.template.to_string(),
            server: e.server.to_string(),
            port: e.port,
            status: e.status,
            error: e.error.map(str::to_string),
            resend: e.resend,
            sent: e.sent,
            token: e.token,
            start: unix_ns(e.start),
            duration: u64::try_from(e.duration.as_nanos()).unwrap_or(u64::MAX),
        };
        self.exchanges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
    }

    fn wait(&self, kind: WaitKind, route: &str, wait: Duration) {
        let record = WaitRecord {
            reason: kind.name(),
            request: route.to_string(),
            seconds: wait.as_secs_f64(),
            at: unix_ns(SystemTime::now()),
        };
        self.waits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
    }

    fn token(&self) {
        self.tokens.fetch_add(1, Ordering::Relaxed);
    }

    fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    fn events(&self, n: u64) {
        self.events.fetch_add(n, Ordering::Relaxed);
    }
}

impl Recorder {
    /// What was observed since the last take.
    pub fn take(&self) -> Drained {
        let exchanges =
            std::mem::take(&mut *self.exchanges.lock().unwrap_or_else(|p| p.into_inner()));
        let waits = std::mem::take(&mut *self.waits.lock().unwrap_or_else(|p| p.into_inner()));
        Drained {
            exchanges,
            waits,
            tokens: self.tokens.swap(0, Ordering::Relaxed),
            retries: self.retries.swap(0, Ordering::Relaxed),
            events: self.events.swap(0, Ordering::Relaxed),
        }
    }
}

/// `text` with every secret this process knows replaced, as error messages are: what
/// telemetry takes from outside the client goes through it.
#[pyfunction]
pub fn scrub(text: &str) -> String {
    crate::client::redact::scrub(text).into_owned()
}
