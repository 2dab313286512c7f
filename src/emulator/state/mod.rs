//! The emulator's mutable state: data, credentials and clock, the semantics and dialect of its
//! answers. Everything a test can script lives here, behind small locks: tokens in `tokens`,
//! faults and hostile answers in `faults`, limits and the daily quota in `limits`, statistics
//! in `stats`, the webhook's store in `webhook`.

mod faults;
mod limits;
mod stats;
mod tokens;
mod webhook;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use super::data::{Data, DataConfig};
use super::dialect::Dialect;
use crate::rng::Rng;

pub use faults::{Fault, Faults, Hostile, HostileRule};
use limits::{Bucket, Daily};
pub use limits::{RequestClass, SlotGuard, Verdict};
pub use stats::ServedCounts;
use tokens::TokenInfo;
pub use tokens::{Refusal, DEFAULT_TOKEN_LIFETIME};
pub use webhook::Published;

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

pub use crate::limits::Limits;

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
    stats: Mutex<ServedCounts>,
    published: Mutex<Published>,
    /// Connections currently open.
    pub connections_open: AtomicUsize,
    /// Connections accepted so far.
    pub connections_total: AtomicU64,
    /// TLS handshakes that failed (a client refused the certificate, or spoke plain HTTP).
    pub tls_failures: AtomicU64,
    /// Answers given so far: the number in each answer's `x-request-id`.
    answers: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock must not take the whole emulator down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
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
            stats: Mutex::new(ServedCounts::default()),
            published: Mutex::new(Published::default()),
            connections_open: AtomicUsize::new(0),
            connections_total: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
            answers: AtomicU64::new(0),
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

    /// The id of a new answer (its `x-request-id`, as a gateway names its answers).
    pub fn answer_id(&self) -> String {
        let n = self.answers.fetch_add(1, Ordering::Relaxed) + 1;
        format!("emu-{:08x}-{n}", self.seed as u32)
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
