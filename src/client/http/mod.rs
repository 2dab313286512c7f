//! The HTTP layer: one reqwest client (rustls, gzip, keep-alive pool) shared by every task of a
//! client, and what a request is ([`Call`]). The token cache lives in `token`, `send` (limits,
//! timeouts, retries, a cap on body size) in `send`, the wait through an outage in `outage`.

mod outage;
mod said;
mod send;
mod shown;
mod token;
mod webhook;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use reqwest::{Method, StatusCode};
use url::Url;

use super::config::{is_loopback, Config};
use super::error::{Error, Result, Wording};
use super::limits::Gate;
use super::quota::Ledger;
use super::redact;
use super::scope::{Exchange, Observer};
use super::stats::{Stats, Tally};
use super::uses::Uses;

pub use super::retry::{
    backoff, outage_backoff, parse_retry_after, refuses_token, renewal_margin, Outage, OUTAGE_CAP,
};

use outage::Waiting;
pub use outage::{OutageClock, Wait};
pub use said::Fields;
pub use shown::body_start;
use shown::describe;
use token::Token;
pub use webhook::{Arrays, Webhook};

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Requests, retries, renewals.
    Debug,
    /// Giving up.
    Warning,
}

/// Where the client's log lines go, with the fields of the request each is about (the Python
/// binding buffers them for the `surveillance` logger, the fields as its records' `extra`).
/// Whether any sink wants debug lines (as the `log` crate's `max_level`): each request has
/// one, so one nobody reads is not made. On until said otherwise.
static DEBUG_WANTED: AtomicBool = AtomicBool::new(true);

/// Says whether debug lines are wanted (the binding: whether its logger is enabled for DEBUG).
pub fn want_debug(on: bool) {
    DEBUG_WANTED.store(on, Ordering::Relaxed);
}

pub type LogSink = Arc<dyn Fn(Level, String, Fields) + Send + Sync>;

/// Which limits a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// GET endpoints.
    Read,
    /// The webhook.
    Publish,
}

/// One request to send (again, if it fails in a retryable way).
#[derive(Debug, Clone)]
pub struct Call {
    /// GET or POST.
    pub method: Method,
    /// Full URL with query.
    pub url: Url,
    /// `"GET /v2/events"`: the key of `stats()`.
    pub route: &'static str,
    /// JSON body, for POST.
    pub body: Option<Bytes>,
    /// Limits it counts against.
    pub class: Class,
    /// Counts this call's retries and 429s, besides the client's totals (`stats`): the
    /// figures of one operation while others run on the same client.
    pub tally: Option<Arc<Tally>>,
    /// Counts the times this call's request left the machine (retries included), so that its
    /// caller knows whether an unanswered request may have reached the service.
    pub sent: Option<Arc<AtomicU64>>,
    /// The milliseconds waited after 429s by this call and by the earlier calls of the same
    /// records (a batch posted again in a later round): their waits stay within `max_wait` in
    /// all. None: the call's own.
    pub waited: Option<Arc<AtomicU64>>,
    /// The outage of the operation this call belongs to, shared by its calls (and the token
    /// requests made for them): `max_outage` is the operation's, not each call's.
    pub outage: Option<Arc<OutageClock>>,
}

impl Call {
    /// A GET of `url`.
    pub fn get(url: Url, route: &'static str) -> Call {
        Call {
            method: Method::GET,
            url,
            route,
            body: None,
            class: Class::Read,
            tally: None,
            sent: None,
            waited: None,
            outage: None,
        }
    }
}

/// Transport shared by every task of a client.
pub struct Http {
    /// The resolved configuration.
    pub config: Config,
    client: reqwest::Client,
    /// Counters.
    pub stats: Stats,
    reads: Gate,
    publishes: Gate,
    token: tokio::sync::Mutex<Option<Token>>,
    /// The latest refusal of the credentials, and how many there have been: a caller that
    /// waited for the token while a fetch was refused gets that refusal, rather than asking
    /// again (a publish has hundreds of batches waiting, each a request of the day's quota).
    refusal: std::sync::Mutex<(u64, Option<Error>)>,
    /// What publishing learned of the webhook (whether it takes arrays), for every publish.
    pub webhook: Webhook,
    generation: AtomicU64,
    /// The newest token generation that got a success: a refusal of it, or of an older one, is
    /// an expiry.
    worked: AtomicU64,
    /// How many requests may carry the current token at once (see [`Uses`]).
    uses: Uses,
    log: Option<LogSink>,
    closed: tokio::sync::watch::Sender<bool>,
    /// The daily quota, shared with every client of the machine that uses the same key.
    pub ledger: Ledger,
    /// The latest wait through an outage, until a request is answered again.
    waiting: std::sync::Mutex<Option<Waiting>>,
    /// The waits after 429s under way: each one's number and end.
    limited: std::sync::Mutex<Vec<(u64, std::time::Instant)>>,
    /// The number of the next wait after a 429.
    waits: AtomicU64,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("base_url", &self.config.base_url.as_str())
            .finish_non_exhaustive()
    }
}

impl Http {
    /// Builds the transport for `config`.
    pub fn new(config: Config, log: Option<LogSink>) -> Result<Http> {
        // reqwest is built without a crypto provider of its own: ring, unless this process
        // installed another one first (then that one is used; the race's loser is harmless).
        if tokio_rustls::rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        }
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .gzip(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("surveillance-python/", env!("CARGO_PKG_VERSION")));
        let all_loopback =
            is_loopback(&config.base_url) && config.eu_base_url.as_ref().is_none_or(is_loopback);
        if !config.trust_env || all_loopback {
            // A proxy cannot reach this machine's loopback, and trust_env=False ignores proxies.
            builder = builder.no_proxy();
        }
        if let Some(path) = &config.ca_bundle {
            let shown = crate::text::shown(&path.display().to_string());
            let pem = std::fs::read(path).map_err(|e| {
                Error::config(
                    Wording::new()
                        .text(format!("cannot read the CA bundle `{shown}` ("))
                        .arg("ca_bundle")
                        .text(format!(", or `SSL_CERT_FILE` / `REQUESTS_CA_BUNDLE`): {e}")),
                )
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                Error::config(
                    Wording::new()
                        .text(format!("the CA bundle `{shown}` ("))
                        .arg("ca_bundle")
                        .text(format!(") is not PEM: {e}")),
                )
            })?;
            if certs.is_empty() {
                return Err(Error::config(
                    Wording::new()
                        .text(format!("the CA bundle `{shown}` ("))
                        .arg("ca_bundle")
                        .text(
                            ") holds no PEM certificate (`-----BEGIN CERTIFICATE-----`): give a \
                             file of PEM certificates",
                        ),
                ));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| {
            Error::config(format!("cannot build the HTTP client: {}", describe(&e)))
        })?;
        redact::register(config.api_key.expose());
        redact::register(config.client_secret.expose());
        // The form HTTP Basic authentication gives the pair, which token endpoints echo.
        redact::register_basic(&config.client_id, config.client_secret.expose());
        let l = config.limits;
        let ledger = Ledger::open(
            config.base_url.as_str(),
            config.api_key.expose(),
            l.daily_requests,
            config.quota_dir.as_deref(),
        );
        Ok(Http {
            ledger,
            reads: Gate::new(l.read_per_second, l.read_concurrency),
            publishes: Gate::new(l.publish_per_second, l.publish_concurrency),
            config,
            client,
            stats: Stats::default(),
            token: tokio::sync::Mutex::new(None),
            refusal: std::sync::Mutex::new((0, None)),
            webhook: Webhook::default(),
            generation: AtomicU64::new(0),
            worked: AtomicU64::new(0),
            uses: Uses::default(),
            log,
            closed: tokio::sync::watch::Sender::new(false),
            waiting: std::sync::Mutex::new(None),
            limited: std::sync::Mutex::new(Vec::new()),
            waits: AtomicU64::new(0),
        })
    }

    fn log(&self, level: Level, msg: impl FnOnce() -> String) {
        self.log_with(level, Fields::default, msg);
    }

    /// Logs `msg` (scrubbed of secrets) with the `fields` of the request it is about; a debug
    /// line nobody wants (see [`want_debug`]) is neither formatted nor scrubbed.
    fn log_with(
        &self,
        level: Level,
        fields: impl FnOnce() -> Fields,
        msg: impl FnOnce() -> String,
    ) {
        if level == Level::Debug && !DEBUG_WANTED.load(Ordering::Relaxed) {
            return;
        }
        if let Some(sink) = &self.log {
            let line = msg();
            let line = match redact::scrub(&line) {
                std::borrow::Cow::Borrowed(_) => line,
                std::borrow::Cow::Owned(scrubbed) => scrubbed,
            };
            sink(level, line, fields());
        }
    }

    /// Logs a warning (scrubbed of secrets like every line).
    pub fn warn(&self, message: String) {
        self.log(Level::Warning, || message);
    }

    /// Stops every request in flight or waiting, and refuses new ones.
    pub fn close(&self) {
        self.closed.send_replace(true);
        self.reads.close();
        self.publishes.close();
    }

    fn check_open(&self) -> Result<()> {
        if *self.closed.borrow() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Runs `fut` unless the client is closed first.
    async fn unless_closed<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.check_open()?;
        let mut closed = self.closed.subscribe();
        tokio::select! {
            r = fut => r,
            _ = closed.wait_for(|c| *c) => Err(Error::Closed),
        }
    }

    /// The gate of a class.
    pub fn gate(&self, class: Class) -> &Gate {
        match class {
            Class::Read => &self.reads,
            Class::Publish => &self.publishes,
        }
    }
}

/// One exchange watched for the call's [`Observer`]: told of its outcome by [`Watched::end`],
/// or, when the request's future is dropped before its answer (a fetch that no longer needs
/// it, Ctrl-C, `close`), as `cancelled`: every request sent is told once.
pub(super) struct Watched<'a> {
    observer: Option<Arc<dyn Observer>>,
    method: &'a Method,
    url: &'a Url,
    /// Earlier sends of the same request.
    resend: u32,
    token: bool,
    start: SystemTime,
    started: Instant,
}

impl<'a> Watched<'a> {
    /// A request about to be sent (nothing is kept when nobody observes).
    pub(super) fn new(
        observer: Option<&Arc<dyn Observer>>,
        method: &'a Method,
        url: &'a Url,
        resend: u32,
        token: bool,
    ) -> Watched<'a> {
        Watched {
            observer: observer.cloned(),
            method,
            url,
            resend,
            token,
            start: SystemTime::now(),
            started: Instant::now(),
        }
    }

    /// The exchange ended: with a status, or with an error and whether the request may
    /// have reached the service.
    pub(super) fn end(mut self, told: std::result::Result<StatusCode, (&Error, bool)>) {
        let Some(observer) = self.observer.take() else {
            return;
        };
        let (status, error, sent) = match &told {
            Ok(status) => {
                let failed = status.is_client_error() || status.is_server_error();
                (Some(status.as_u16()), failed.then(|| status.as_str()), true)
            }
            Err((error, reached)) => {
                let kind = match error {
                    Error::Timeout(_) => "timeout",
                    Error::Decode { .. } => "body_too_large",
                    Error::Closed => "cancelled",
                    _ if !reached => "connection_refused",
                    _ => "transport",
                };
                (None, Some(kind), *reached)
            }
        };
        self.tell(&*observer, status, error, sent);
    }

    fn tell(&self, observer: &dyn Observer, status: Option<u16>, error: Option<&str>, sent: bool) {
        observer.exchange(&Exchange {
            method: self.method.as_str(),
            template: self.url.path(),
            server: self.url.host_str().unwrap_or_default(),
            port: self.url.port_or_known_default().unwrap_or_default(),
            status,
            error,
            resend: self.resend,
            sent,
            token: self.token,
            start: self.start,
            duration: self.started.elapsed(),
        });
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        if let Some(observer) = self.observer.take() {
            self.tell(&*observer, None, Some("cancelled"), true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, RETRY_AFTER};

    #[test]
    fn margin_is_a_tenth_capped_at_five_minutes() {
        assert_eq!(
            renewal_margin(Duration::from_secs(14_399)),
            Duration::from_secs(300)
        );
        assert_eq!(
            renewal_margin(Duration::from_secs(60)),
            Duration::from_secs(6)
        );
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(RETRY_AFTER, "soon".parse().expect("header"));
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn retry_after_is_read_as_rfc_9110_allows_and_the_rest_is_absent() {
        let one = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, value.parse().expect("header"));
            h.insert(
                reqwest::header::DATE,
                "Sun, 06 Nov 1994 08:49:37 GMT".parse().expect("header"),
            );
            parse_retry_after(&h)
        };
        let secs = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(one("7"), secs(7));
        assert_eq!(one("  7  "), secs(7));
        assert_eq!(one("0"), secs(0));
        assert_eq!(one("007"), secs(7));
        // The longest wait at most, however many digits.
        assert_eq!(one("99999999999999999999999"), secs(2 * 86_400));
        // The three forms of an HTTP date, against the answer's `Date`.
        assert_eq!(one("Sun, 06 Nov 1994 08:49:47 GMT"), secs(10));
        assert_eq!(one("Sunday, 06-Nov-94 08:50:37 GMT"), secs(60));
        assert_eq!(one("Sun Nov  6 08:49:57 1994"), secs(20));
        assert_eq!(one("Sun, 06 Nov 1994 08:00:00 GMT"), secs(0));
        for bad in [
            "-1", "-0", "", "   ", "NaN", "nan", "inf", "-inf", "infinity", "abc", "1, 2", "1,2",
            "1e3", "1E3", "0.5", "1.", ".5", "+5", "0x10", "7 s", "1 2",
        ] {
            assert_eq!(one(bad), None, "{bad:?}");
        }
        // Several headers are a list too.
        let mut h = HeaderMap::new();
        h.append(RETRY_AFTER, "1".parse().expect("header"));
        h.append(RETRY_AFTER, "2".parse().expect("header"));
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn an_outage_backs_off_exponentially_with_full_jitter_capped_at_4_s() {
        for n in 1..40u32 {
            let cap = (0.2 * 2f64.powi(n.min(20) as i32 - 1)).min(4.0);
            let waits: Vec<f64> = (0..400).map(|_| outage_backoff(n).as_secs_f64()).collect();
            assert!(waits.iter().all(|w| (0.0..=cap).contains(w)), "{n}");
            // Full jitter: spread over the whole range, not bunched at its top.
            let mean = waits.iter().sum::<f64>() / waits.len() as f64;
            assert!(
                (0.35 * cap..0.65 * cap).contains(&mean),
                "{n}: {mean} of {cap}"
            );
            assert!(waits.iter().any(|w| *w < 0.2 * cap) && waits.iter().any(|w| *w > 0.8 * cap));
        }
        // A minute of outage takes about 30 tries: 3 s for the first five, then 2 s each.
        let mean: f64 = (1..=30u32)
            .map(|n| (0.2 * 2f64.powi(n as i32 - 1)).min(4.0) / 2.0)
            .sum();
        assert!((50.0..60.0).contains(&mean), "{mean}");
    }

    #[test]
    fn backoff_is_bounded_and_honours_retry_after() {
        for attempt in 1..30 {
            assert!(backoff(attempt, None) <= Duration::from_secs(8));
        }
        assert!(backoff(1, Some(Duration::from_secs(1))) >= Duration::from_secs(1));
    }
}
