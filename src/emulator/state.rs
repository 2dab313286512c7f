//! The emulator's mutable state: data, credentials, tokens and clock, semantics, dialect,
//! faults, limits, statistics and the webhook store. Everything a test can script lives here, behind small locks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::data::{Data, DataConfig};
use super::dialect::Dialect;
use crate::rng::{mix, Rng};

/// Lifetime of a token in seconds, as the service reports it (just under 4 hours).
pub const DEFAULT_TOKEN_LIFETIME: u64 = 14_399;

use crate::time::DAY_MS;

/// The order in which `/v2/events` returns a window's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Ascending startTime.
    Asc,
    /// Descending startTime.
    Desc,
    /// A fixed pseudo-random order per query.
    Shuffled,
}

/// Which ends of `[startTime, endTime]` the events filter includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// startTime itself is included.
    pub start_inclusive: bool,
    /// endTime itself is included.
    pub end_inclusive: bool,
}

impl Bounds {
    /// Parses `"[)"`, `"[]"`, `"()"` or `"(]"`.
    pub fn parse(s: &str) -> Option<Bounds> {
        let b = s.as_bytes();
        if b.len() != 2 {
            return None;
        }
        let start_inclusive = match b[0] {
            b'[' => true,
            b'(' => false,
            _ => return None,
        };
        let end_inclusive = match b[1] {
            b']' => true,
            b')' => false,
            _ => return None,
        };
        Some(Bounds {
            start_inclusive,
            end_inclusive,
        })
    }
}

impl Order {
    /// Parses `"asc"`, `"desc"` or `"shuffled"`.
    pub fn parse(s: &str) -> Option<Order> {
        match s {
            "asc" => Some(Order::Asc),
            "desc" => Some(Order::Desc),
            "shuffled" => Some(Order::Shuffled),
            _ => None,
        }
    }
}

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

pub use crate::limits::Limits;

/// A token bucket holding up to one second of requests.
#[derive(Debug)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new() -> Self {
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
pub enum Class {
    /// The token endpoint: the daily quota only.
    Token,
    /// GET endpoints.
    Read,
    /// The webhook.
    Publish,
}

#[derive(Debug)]
struct TokenInfo {
    issued_ms: i64,
    lifetime_s: u64,
    generation: u64,
    /// Data requests it was accepted for.
    uses: u64,
}

/// Why a bearer token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token was issued with this value.
    Unknown,
    /// Issued before `revoke_tokens`.
    Revoked,
    /// Past its lifetime, or past the requests the dialect gives a token.
    Expired,
}

impl Refusal {
    /// The reason in the words of the 401 answer.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Unknown => "unknown access token",
            Refusal::Revoked => "access token revoked",
            Refusal::Expired => "access token expired",
        }
    }

    /// The reason as a sentence, for a 403 that explains itself.
    pub fn sentence(self) -> &'static str {
        match self {
            Refusal::Unknown => "the access token is not valid",
            Refusal::Revoked => "the access token has been revoked",
            Refusal::Expired => "the access token has expired",
        }
    }
}

/// Counters behind `stats()`.
#[derive(Debug, Default)]
pub struct Stats {
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
}

/// Requests counted per UTC day of the emulator's clock, for the daily quota.
#[derive(Debug, Default)]
struct Daily {
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

/// Webhook records, upserted by key, in order of first arrival.
#[derive(Debug, Default)]
pub struct Published {
    /// (region, record as JSON text).
    pub records: Vec<(&'static str, String)>,
    /// (region, upsert key) -> index in `records`.
    pub index: HashMap<(&'static str, String), usize>,
}

/// The credentials the emulator accepts.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// `x-api-key`.
    pub api_key: String,
    /// OAuth client id.
    pub client_id: String,
    /// OAuth client secret.
    pub client_secret: String,
    /// OAuth audience.
    pub audience: String,
}

/// Everything one emulator knows; shared by its connections.
#[derive(Debug)]
pub struct State {
    data: RwLock<Data>,
    /// Accepted credentials.
    pub creds: Credentials,
    seed: u64,
    started: Instant,
    clock_offset_ms: AtomicI64,
    tokens: Mutex<HashMap<String, TokenInfo>>,
    revoked_generation: AtomicU64,
    token_generation: AtomicU64,
    token_lifetime: AtomicU64,
    token_counter: AtomicU64,
    semantics: Mutex<(Order, Bounds)>,
    dialect: Mutex<Dialect>,
    faults: Mutex<Faults>,
    hostile: Mutex<Option<HostileRule>>,
    /// An outage to come: the requests let through first, and how long the port stays closed.
    outage: Mutex<Option<(u64, Duration)>>,
    /// Tells the accept loop to close the port for a while (it takes the receiver).
    outages: (
        tokio::sync::mpsc::UnboundedSender<Duration>,
        Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Duration>>>,
    ),
    fault_counter: AtomicU64,
    limits: Mutex<Limits>,
    buckets: Mutex<(Bucket, Bucket)>,
    daily: Mutex<Daily>,
    webhook_arrays: AtomicBool,
    in_flight: [AtomicUsize; 3],
    stats: Mutex<Stats>,
    published: Mutex<Published>,
    /// Connections currently open.
    pub connections_open: AtomicUsize,
    /// Connections accepted so far.
    pub connections_total: AtomicU64,
    /// TLS handshakes that failed (a client refused the certificate, or spoke plain HTTP).
    pub tls_failures: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock must not take the whole emulator down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Generates the data and the credentials for `cfg`.
    pub fn new(cfg: &DataConfig) -> State {
        let data = Data::generate(cfg);
        let mut rng = Rng::new(cfg.seed, 2);
        let creds = Credentials {
            api_key: format!("emu-key-{:016x}", rng.next_u64()),
            client_id: format!("emu-client-{:08x}", rng.next_u64() as u32),
            client_secret: format!(
                "emu-secret-{:032x}",
                (rng.next_u64() as u128) << 64 | rng.next_u64() as u128
            ),
            audience: "https://api.surveillance.emulator/".to_string(),
        };
        State {
            data: RwLock::new(data),
            creds,
            seed: cfg.seed,
            started: Instant::now(),
            clock_offset_ms: AtomicI64::new(0),
            tokens: Mutex::new(HashMap::new()),
            revoked_generation: AtomicU64::new(0),
            token_generation: AtomicU64::new(0),
            token_lifetime: AtomicU64::new(DEFAULT_TOKEN_LIFETIME),
            token_counter: AtomicU64::new(0),
            semantics: Mutex::new((
                Order::Asc,
                Bounds {
                    start_inclusive: true,
                    end_inclusive: false,
                },
            )),
            dialect: Mutex::new(Dialect::default()),
            faults: Mutex::new(Faults::default()),
            hostile: Mutex::new(None),
            outage: Mutex::new(None),
            outages: {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                (tx, Mutex::new(Some(rx)))
            },
            fault_counter: AtomicU64::new(0),
            limits: Mutex::new(Limits::NONE),
            buckets: Mutex::new((Bucket::new(), Bucket::new())),
            daily: Mutex::new(Daily::default()),
            webhook_arrays: AtomicBool::new(true),
            in_flight: [
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            ],
            stats: Mutex::new(Stats::default()),
            published: Mutex::new(Published::default()),
            connections_open: AtomicUsize::new(0),
            connections_total: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
        }
    }

    /// Read access to the data set.
    pub fn data(&self) -> RwLockReadGuard<'_, Data> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access to the data set.
    pub fn data_mut(&self) -> RwLockWriteGuard<'_, Data> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The emulator's clock, Unix epoch milliseconds (real time plus `advance_clock`).
    pub fn now_ms(&self) -> i64 {
        let real = chrono::Utc::now().timestamp_millis();
        real.saturating_add(self.clock_offset_ms.load(Ordering::SeqCst))
    }

    /// Moves the clock forward (or back) by `seconds`.
    pub fn advance_clock(&self, seconds: f64) {
        self.clock_offset_ms
            .fetch_add((seconds * 1000.0) as i64, Ordering::SeqCst);
    }

    /// Every token issued so far is refused from now on.
    pub fn revoke_tokens(&self) {
        let g = self.token_generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.revoked_generation.store(g, Ordering::SeqCst);
    }

    /// `expires_in` of the tokens issued from now on.
    pub fn set_token_lifetime(&self, seconds: u64) {
        self.token_lifetime.store(seconds, Ordering::SeqCst);
    }

    /// Creates a token and returns it with its lifetime.
    pub fn issue_token(&self) -> (String, u64) {
        let n = self.token_counter.fetch_add(1, Ordering::SeqCst);
        let token = format!(
            "emu.{:016x}{:016x}",
            mix(self.seed ^ mix(n) ^ self.started.elapsed().as_nanos() as u64),
            mix(n ^ 0x70CE)
        );
        let lifetime = self.token_lifetime.load(Ordering::SeqCst);
        lock(&self.tokens).insert(
            token.clone(),
            TokenInfo {
                issued_ms: self.now_ms(),
                lifetime_s: lifetime,
                generation: self.token_generation.load(Ordering::SeqCst),
                uses: 0,
            },
        );
        lock(&self.stats).tokens_issued += 1;
        (token, lifetime)
    }

    /// Why a bearer token is refused, or None when it is good (and then counts one use of it,
    /// which the dialect's `token_requests` limits).
    pub fn use_token(&self, token: &str) -> Option<Refusal> {
        let limit = self.dialect().token_requests;
        let mut tokens = lock(&self.tokens);
        let Some(info) = tokens.get_mut(token) else {
            return Some(Refusal::Unknown);
        };
        if info.generation < self.revoked_generation.load(Ordering::SeqCst) {
            return Some(Refusal::Revoked);
        }
        let lifetime_ms = (info.lifetime_s as i64).saturating_mul(1000) + 1000;
        if self.now_ms() - info.issued_ms >= lifetime_ms {
            return Some(Refusal::Expired);
        }
        if limit.is_some_and(|n| info.uses >= n) {
            return Some(Refusal::Expired);
        }
        info.uses += 1;
        None
    }

    /// Current order and bounds of the events endpoint.
    pub fn semantics(&self) -> (Order, Bounds) {
        *lock(&self.semantics)
    }

    /// Sets the order and bounds of the events endpoint.
    pub fn set_semantics(&self, order: Order, bounds: Bounds) {
        *lock(&self.semantics) = (order, bounds);
    }

    /// The dialect spoken where API.md says "not shown".
    pub fn dialect(&self) -> Dialect {
        *lock(&self.dialect)
    }

    /// Replaces the dialect.
    pub fn set_dialect(&self, dialect: Dialect) {
        *lock(&self.dialect) = dialect;
    }

    /// Current faults.
    pub fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    /// Replaces the faults.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.faults) = faults;
    }

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

    /// Whether the webhook accepts a JSON array of records as a body (the default), or answers
    /// it 400 `array_not_supported`, storing nothing.
    pub fn set_webhook_arrays(&self, accept: bool) {
        self.webhook_arrays.store(accept, Ordering::SeqCst);
    }

    /// See [`State::set_webhook_arrays`].
    pub fn webhook_arrays(&self) -> bool {
        self.webhook_arrays.load(Ordering::SeqCst)
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

    /// Applies the daily quota, the per-second rate and the concurrency of `class`.
    ///
    /// Every request that reaches it (one with the right `x-api-key`) counts against the UTC day
    /// of the emulator's clock in which it arrives, whatever its answer: those the quota or
    /// another limit refuses, injected faults and hostile answers included. A request past the
    /// day's quota is answered 429 with `Retry-After` = seconds until the next UTC midnight of
    /// the emulator's clock, when the count starts again from zero.
    pub fn admit(self: &Arc<Self>, class: Class) -> Verdict {
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
            Class::Token => (None, None),
            Class::Read => (limits.read_per_second, limits.read_concurrency),
            Class::Publish => (limits.publish_per_second, limits.publish_concurrency),
        };
        if let Some(rate) = rate {
            let mut buckets = lock(&self.buckets);
            let bucket = if class == Class::Read {
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

    /// Stores webhook records; returns how many replaced an existing one.
    pub fn store_published(&self, region: &'static str, records: Vec<(String, String)>) {
        let mut published = lock(&self.published);
        let mut upserts = 0;
        let n = records.len() as u64;
        let Published {
            records: stored,
            index,
        } = &mut *published;
        for (key, text) in records {
            match index.entry((region, key)) {
                std::collections::hash_map::Entry::Occupied(at) => {
                    stored[*at.get()].1 = text;
                    upserts += 1;
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(stored.len());
                    stored.push((region, text));
                }
            }
        }
        let mut stats = lock(&self.stats);
        stats.published_stored += n;
        stats.published_upserts += upserts;
    }

    /// The stored webhook records of `region` (or all), as JSON texts.
    pub fn published(&self, region: Option<&str>) -> Vec<String> {
        lock(&self.published)
            .records
            .iter()
            .filter(|(r, _)| region.is_none_or(|want| want == *r))
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Number of stored webhook records.
    pub fn published_len(&self) -> usize {
        lock(&self.published).records.len()
    }

    /// Forgets the stored webhook records.
    pub fn clear_published(&self) {
        *lock(&self.published) = Published::default();
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
                "token": self.in_flight[Class::Token as usize].load(Ordering::SeqCst),
                "read": self.in_flight[Class::Read as usize].load(Ordering::SeqCst),
                "publish": self.in_flight[Class::Publish as usize].load(Ordering::SeqCst),
            },
        })
    }

    /// Zeroes the statistics (not the stored records, nor the daily quota's counts: those are
    /// the service's state, cleared when the quota is set anew or lifted).
    pub fn reset_stats(&self) {
        *lock(&self.stats) = Stats::default();
        self.connections_total.store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_one_second_then_paces() {
        let mut b = Bucket::new();
        let t0 = Instant::now();
        for _ in 0..5 {
            assert!(b.take(5.0, t0).is_ok());
        }
        let wait = b
            .take(5.0, t0)
            .expect_err("sixth in the same instant is refused");
        assert!(wait <= Duration::from_millis(201));
        assert!(b.take(5.0, t0 + Duration::from_millis(250)).is_ok());
    }

    #[test]
    fn bounds_and_order_parse() {
        assert_eq!(
            Bounds::parse("[)"),
            Some(Bounds {
                start_inclusive: true,
                end_inclusive: false
            })
        );
        assert_eq!(
            Bounds::parse("()"),
            Some(Bounds {
                start_inclusive: false,
                end_inclusive: false
            })
        );
        assert_eq!(Bounds::parse("[["), None);
        assert_eq!(Order::parse("desc"), Some(Order::Desc));
        assert_eq!(Order::parse("random"), None);
    }
}
