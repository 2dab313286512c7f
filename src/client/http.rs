//! The HTTP layer: one reqwest client (rustls, gzip, keep-alive pool), the token cache with a
//! single renewal for all callers, and `send`: limits, timeouts, retries with full-jitter
//! backoff that honour `Retry-After`, a refused token renewed at every expiry, a cap on body
//! size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use url::Url;

use super::config::{is_loopback, Config, Secret};
use super::error::{Error, Result};
use super::limits::Gate;
use super::quota::Ledger;
use super::redact;
use super::stats::{Stats, Tally};
use super::uses::{Admit, Outcome, Use, Uses};
use super::words;

pub use super::retry::{
    backoff, outage_backoff, parse_retry_after, refuses_token, renewal_margin, Outage, OUTAGE_CAP,
};

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Requests, retries, renewals.
    Debug,
    /// Giving up.
    Warning,
}

/// Where the client's log lines go (the Python binding buffers them for the `surveillance` logger).
pub type LogSink = Arc<dyn Fn(Level, String) + Send + Sync>;

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
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    value: Secret,
    refresh_at: Instant,
    generation: u64,
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
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("base_url", &self.config.base_url.as_str())
            .finish_non_exhaustive()
    }
}

/// A request that got no answer: the error, the outage it says, and whether the request may
/// have reached the service (false only when no connection was made).
struct NoAnswer {
    error: Error,
    outage: Option<Outage>,
    reached: bool,
}

/// A wait of a call through an outage, for the progress display.
#[derive(Debug, Clone)]
struct Waiting {
    outage: Outage,
    next_try: Instant,
    gives_up: Instant,
    budget: Duration,
}

/// Renewals of the token within one call at most (each a token request of the day's quota):
/// a sanity bound on a service whose tokens stop working as soon as they are issued.
const MAX_RENEWALS: u32 = 64;
/// New tokens refused, with no success in between, before the credentials are taken as
/// refused.
const FRESH_REFUSALS: u32 = 2;

/// `detail` of an error message: the service's words, or that the answer had none.
fn detail_of(body: &[u8]) -> String {
    words::of_body(body).unwrap_or_else(|| "no details in the answer".to_owned())
}

/// What a failed request's error says happened: reqwest's own message is terse ("error
/// sending request for url (...)"), its causes say what. A connection that could not be made
/// reads "cannot reach URL: " and the causes; the layers' wrappers ("client error (Connect)",
/// "tcp connect error") are left out.
fn describe(e: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        let wrapper = text == "tcp connect error"
            || (text.starts_with("client error (") && text.ends_with(')'));
        if !wrapper {
            causes.push(text);
        }
        source = s.source();
    }
    let head = match e.url() {
        Some(url) if e.is_connect() => format!("cannot reach {url}"),
        _ => e.to_string(),
    };
    std::iter::once(head)
        .chain(causes)
        .collect::<Vec<_>>()
        .join(": ")
}

fn shown(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{}", url.path(), q),
        None => url.path().to_string(),
    }
}

/// Bytes of an error body kept in the error (a webhook refusal that names the failures of 100
/// records is read from it whole).
const BODY_KEPT: usize = 256 * 1024;

fn truncate(body: &[u8]) -> String {
    // Scrubbed before it is cut, so that a cut cannot leave part of a secret behind.
    redact::head_of(body, BODY_KEPT)
}

/// The first characters of an answer, for a message that says what came instead of the
/// expected one (control characters left out, secrets scrubbed).
pub fn body_start(body: &[u8]) -> String {
    let text = redact::head_of(body, 4096);
    let mut shown = text.chars().filter(|c| !c.is_control());
    let start: String = shown.by_ref().take(80).collect();
    let cut = shown.next().is_some();
    redact::mask_cut(&start, false, cut).into_owned()
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
                Error::Config(format!(
                    "cannot read the CA bundle `{shown}` (`ca_bundle`, or `SSL_CERT_FILE` / \
                     `REQUESTS_CA_BUNDLE`): {e}"
                ))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                Error::Config(format!(
                    "the CA bundle `{shown}` (`ca_bundle`) is not PEM: {e}"
                ))
            })?;
            if certs.is_empty() {
                return Err(Error::Config(format!(
                    "the CA bundle `{shown}` (`ca_bundle`) holds no PEM certificate \
                     (`-----BEGIN CERTIFICATE-----`): give a file of PEM certificates"
                )));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| {
            Error::Config(format!("cannot build the HTTP client: {}", describe(&e)))
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
        })
    }

    fn log(&self, level: Level, msg: impl FnOnce() -> String) {
        if let Some(sink) = &self.log {
            let line = msg();
            let line = match redact::scrub(&line) {
                std::borrow::Cow::Borrowed(_) => line,
                std::borrow::Cow::Owned(scrubbed) => scrubbed,
            };
            sink(level, line);
        }
    }

    /// Logs a warning (scrubbed of secrets like every line).
    pub fn warn(&self, message: String) {
        self.log(Level::Warning, || message);
    }

    /// What a call waits for now, when the service is unreachable: `the service is
    /// unreachable (connection refused): next try in 2 s (48 s of the 60 s `max_outage`
    /// left)`, or `...: trying again (...)` while that try is under way; None when no call
    /// waits (a request answered since, or the wait's budget is over).
    pub fn waiting(&self) -> Option<String> {
        let w = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        let now = Instant::now();
        if now >= w.gives_up {
            return None;
        }
        let next = w
            .next_try
            .saturating_duration_since(now)
            .as_secs_f64()
            .ceil();
        let when = if next > 0.0 {
            format!("next try in {next} s")
        } else {
            "trying again".to_owned()
        };
        Some(format!(
            "{}: {when} ({} s of the {} s `max_outage` left)",
            w.outage.words(),
            w.gives_up
                .saturating_duration_since(now)
                .as_secs_f64()
                .ceil(),
            w.budget.as_secs_f64().round()
        ))
    }

    /// A 429 that asks for a wait longer than `max_wait` is no reason to sleep: the quota
    /// error, raised at once (and every client of the machine waits with this one).
    fn too_long(&self, headers: &HeaderMap, what: &str) -> Result<()> {
        match parse_retry_after(headers) {
            Some(wait) if wait > self.config.max_wait => {
                let why = format!(
                    "`{what}` answered 429 with `Retry-After: {}` s, longer than `max_wait` \
                     ({} s)",
                    wait.as_secs(),
                    self.config.max_wait.as_secs_f64()
                );
                Err(self.ledger.block(wait.as_millis() as i64, why))
            }
            _ => Ok(()),
        }
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

    /// A valid token and its generation; fetched once for all concurrent callers when needed.
    pub async fn token(&self) -> Result<(Secret, u64)> {
        self.token_inner().await.map_err(Error::scrubbed)
    }

    async fn token_inner(&self) -> Result<(Secret, u64)> {
        self.check_open()?;
        let refusals = self.refusals().0;
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref() {
            if Instant::now() < t.refresh_at {
                return Ok((t.value.clone(), t.generation));
            }
            self.log(Level::Debug, || "access token near expiry: renewing".into());
        }
        if let (n, Some(e)) = self.refusals() {
            if n != refusals {
                return Err(e);
            }
        }
        let t = match self.fetch_token().await {
            Ok(t) => t,
            Err(e) => {
                if matches!(e, Error::Auth { .. }) {
                    let mut r = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
                    *r = (r.0 + 1, Some(e.clone()));
                }
                return Err(e);
            }
        };
        let out = (t.value.clone(), t.generation);
        self.uses.start(t.generation);
        *slot = Some(t);
        Ok(out)
    }

    /// A valid token for one request, once its window lets one more request carry it (see
    /// [`Uses`]); the request counts in the window until the [`Use`] ends.
    async fn token_for_use(&self) -> Result<(Secret, u64, Use<'_>)> {
        loop {
            let mut changed = std::pin::pin!(self.uses.changed());
            changed.as_mut().enable();
            let (token, generation) = self.token().await?;
            match self.uses.admit(generation) {
                Admit::Granted => return Ok((token, generation, Use::new(&self.uses, generation))),
                Admit::Stale => continue,
                Admit::Renew => {
                    self.log(Level::Debug, || {
                        "access token used for as many requests as the last ones lasted: \
                         renewing"
                            .into()
                    });
                    self.invalidate(generation).await;
                    self.uses.wake();
                }
                Admit::Wait => {
                    self.unless_closed(async {
                        changed.await;
                        Ok(())
                    })
                    .await?
                }
            }
        }
    }

    /// How many times the credentials were refused, and the latest refusal.
    fn refusals(&self) -> (u64, Option<Error>) {
        self.refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets the token of `generation` (refused by the service), unless already replaced;
    /// whether it was the current one.
    async fn invalidate(&self, generation: u64) -> bool {
        let mut slot = self.token.lock().await;
        let current = slot.as_ref().is_some_and(|t| t.generation == generation);
        if current {
            *slot = None;
        }
        current
    }

    async fn fetch_token(&self) -> Result<Token> {
        let url = self.config.url("/v2/oauth/token");
        let body = serde_json::json!({
            "audience": self.config.audience,
            "client_id": self.config.client_id,
            "client_secret": self.config.client_secret.expose(),
        });
        let body = Bytes::from(body.to_string());
        let mut attempt = 0;
        let (mut outage_since, mut outage_tries) = (None, 0u32);
        loop {
            let granted = self.unless_closed(self.ledger.take_granted()).await?;
            let day = self.ledger.spend()?;
            let sent_at = Instant::now();
            self.stats.request("POST /v2/oauth/token");
            let told = self
                .unless_closed(async {
                    Ok(self
                        .exchange_told(&Method::POST, &url, None, Some(body.clone()))
                        .await)
                })
                .await?;
            let outage = self.told(&told, day, granted, "POST /v2/oauth/token", None);
            if outage.is_none() {
                outage_tries = 0;
                self.answered(outage_since.take(), "POST", &url);
            }
            let outcome = told.map_err(|f| f.error);
            let err = match outcome {
                // A 200 that is not a token (a proxy's page, a cut answer) is retried.
                Ok((status, _, bytes)) if status.is_success() => {
                    match self.parse_token(&url, &bytes, sent_at) {
                        Ok(token) => return Ok(token),
                        Err(e) => (e, None),
                    }
                }
                Ok((status, headers, bytes)) => {
                    let detail = detail_of(&bytes);
                    let code = status.as_u16();
                    if matches!(code, 400 | 401 | 403) {
                        return Err(Error::Auth {
                            message: format!("the service refused the token request ({status}): {detail}; check `client_id`, `client_secret`, `api_key` and `audience`"),
                            status: Some(code),
                        });
                    }
                    if !matches!(code, 429 | 500 | 502 | 503 | 504) {
                        // Not a verdict on the credentials: the address is wrong.
                        let to = headers
                            .get(LOCATION)
                            .and_then(|l| l.to_str().ok())
                            .map(|l| format!(" to `{}`", crate::text::shown(l)))
                            .unwrap_or_default();
                        let what = if status.is_redirection() {
                            format!("was redirected ({status}{to})")
                        } else {
                            format!("answered {status}: {detail}")
                        };
                        return Err(Error::Status {
                            status: code,
                            body: truncate(&bytes),
                            url: shown(&url),
                            message: format!(
                                "the token endpoint `POST {}` {what}; check `base_url` (the \
                                 service's address, without `/v2`)",
                                url.path()
                            ),
                        });
                    }
                    if status == StatusCode::TOO_MANY_REQUESTS {
                        self.stats.rate_limited(None);
                        self.too_long(&headers, "POST /v2/oauth/token")?;
                    }
                    // Not a verdict on the credentials: the service failed or is busy.
                    (
                        Error::Status {
                            status: code,
                            body: truncate(&bytes),
                            url: shown(&url),
                            message: format!("the token request failed ({status}): {detail}"),
                        },
                        parse_retry_after(&headers),
                    )
                }
                Err(e) => (e, None),
            };
            if let Some(outage) = outage {
                let what = "POST /v2/oauth/token";
                self.ride_out(
                    what,
                    None,
                    outage,
                    err.0,
                    err.1,
                    sent_at,
                    &mut outage_since,
                    &mut outage_tries,
                )
                .await?;
                continue;
            }
            if attempt >= self.config.max_retries {
                self.log(Level::Warning, || {
                    format!(
                        "giving up on the token request after {attempt} retries: {}",
                        err.0
                    )
                });
                return Err(err.0);
            }
            attempt += 1;
            self.stats.retry(None);
            let wait = backoff(attempt, err.1);
            self.log(Level::Debug, || {
                format!(
                    "token request failed ({}); retry {attempt} in {} ms",
                    err.0,
                    wait.as_millis()
                )
            });
            tokio::time::sleep(wait).await;
        }
    }

    fn parse_token(&self, url: &Url, bytes: &[u8], sent_at: Instant) -> Result<Token> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| Error::Decode {
            url: shown(url),
            detail: format!(
                "the token answer is not JSON ({e}); it starts with `{}`",
                body_start(bytes)
            ),
        })?;
        let value = v
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::Decode {
                url: shown(url),
                detail: "the token answer has no `access_token`".into(),
            })?;
        // `expires_in` missing, 0 or unreadable: an hour, renewed sooner if refused.
        let lifetime = match v.get("expires_in") {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
            Some(Value::String(s)) => s.trim().parse().unwrap_or(0.0),
            _ => 0.0,
        };
        let lifetime = if lifetime.is_finite() && lifetime > 0.0 {
            lifetime
        } else {
            3600.0
        };
        let lifetime = Duration::from_secs_f64(lifetime.min(366.0 * 86_400.0));
        redact::register_token(value);
        self.stats.token();
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.log(Level::Debug, || {
            format!("new access token, valid for {} s", lifetime.as_secs())
        });
        Ok(Token {
            value: Secret::new(value),
            refresh_at: sent_at + lifetime - renewal_margin(lifetime),
            generation,
        })
    }

    /// One exchange: send, then read the whole body within the size cap; a failure tells the
    /// outage it shows and whether the request may have reached the service.
    async fn exchange_told(
        &self,
        method: &Method,
        url: &Url,
        token: Option<&Secret>,
        body: Option<Bytes>,
    ) -> std::result::Result<(StatusCode, HeaderMap, Bytes), NoAnswer> {
        let mut req = self
            .client
            .request(method.clone(), url.clone())
            .header("x-api-key", self.config.api_key.expose())
            .header(ACCEPT, "application/json");
        if let Some(t) = token {
            req = req.header(AUTHORIZATION, format!("Bearer {}", t.expose()));
        }
        if let Some(b) = body {
            req = req.header(CONTENT_TYPE, "application/json").body(b);
        }
        let classify = |e: reqwest::Error| {
            let (outage, reached) = (Outage::of_error(&e), !e.is_connect());
            let error = if e.is_timeout() {
                Error::Timeout(format!(
                    "`{} {}` timed out after {:.1} s (`timeout`)",
                    method,
                    url.path(),
                    self.config.timeout.as_secs_f64()
                ))
            } else {
                Error::Transport(format!(
                    "`{} {}` failed: {}",
                    method,
                    url.path(),
                    describe(&e)
                ))
            };
            NoAnswer {
                error,
                outage,
                reached,
            }
        };
        let mut resp = req.send().await.map_err(classify)?;
        self.ledger.observe(resp.headers());
        let status = resp.status();
        let headers = resp.headers().clone();
        let cap = self.config.max_body_bytes;
        let too_big = || NoAnswer {
            error: Error::Decode {
                url: shown(url),
                detail: format!("the answer is larger than `max_body_bytes` ({cap} bytes)"),
            },
            outage: None,
            reached: true,
        };
        if resp.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_big());
        }
        let mut buf: Vec<u8> =
            Vec::with_capacity(resp.content_length().unwrap_or(16 * 1024).min(cap as u64) as usize);
        while let Some(chunk) = resp.chunk().await.map_err(classify)? {
            if buf.len() + chunk.len() > cap {
                return Err(too_big());
            }
            buf.extend_from_slice(&chunk);
        }
        self.stats.bytes(buf.len());
        Ok((status, headers, Bytes::from(buf)))
    }

    /// Sends `call` with a token, within the limits, retrying what deserves it; the body.
    pub async fn send(&self, call: &Call) -> Result<Bytes> {
        self.send_checked(call, Ok).await
    }

    /// As [`send`](Self::send), with `check` turning a success's body into the caller's value.
    ///
    /// A body that `check` refuses with [`Error::Decode`] is not the service's answer (a
    /// proxy's HTML page with status 200, a cut body, an object where a list belongs): it is
    /// retried like a 5xx, within `max_retries`, and only then returned. Its other errors are
    /// returned at once. Every error returned is scrubbed of the process's secrets.
    pub async fn send_checked<T>(
        &self,
        call: &Call,
        check: impl Fn(Bytes) -> Result<T>,
    ) -> Result<T> {
        self.send_inner(call, check).await.map_err(Error::scrubbed)
    }

    async fn send_inner<T>(&self, call: &Call, check: impl Fn(Bytes) -> Result<T>) -> Result<T> {
        let gate = self.gate(call.class);
        let mut attempt = 0u32;
        // Refusals of tokens not known to have worked, since a token last worked.
        let mut fresh_refusals = 0u32;
        let mut seen_worked = self.worked.load(Ordering::SeqCst);
        let mut renewals = 0u32;
        // The outage under way: since when (the start of its first failed request), and its
        // tries so far.
        let mut outage_since: Option<Instant> = None;
        let mut outage_tries = 0u32;
        loop {
            let (token, generation, mut token_use) = self.token_for_use().await?;
            let slot = gate.acquire().await?;
            // Counted against the day's budget only when it is about to go.
            let granted = self.unless_closed(self.ledger.take_granted()).await?;
            let day = self.ledger.spend()?;
            let started = Instant::now();
            self.stats.request(call.route);
            if let Some(t) = &call.tally {
                t.sent.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(n) = &call.sent {
                n.fetch_add(1, Ordering::Relaxed);
            }
            token_use.sent();
            let told = self
                .unless_closed(async {
                    Ok(self
                        .exchange_told(&call.method, &call.url, Some(&token), call.body.clone())
                        .await)
                })
                .await?;
            drop(slot);
            let outage = self.told(&told, day, granted, call.route, Some(call));
            if outage.is_none() {
                outage_tries = 0;
                self.answered(outage_since.take(), call.method.as_str(), &call.url);
            }
            let outcome = told.map_err(|f| f.error);
            let (err, retry_after) = match outcome {
                Ok((status, _, body)) if status.is_success() => {
                    let size = body.len();
                    // The token worked: a later refusal of it is an expiry, renewed.
                    self.worked.fetch_max(generation, Ordering::SeqCst);
                    token_use.end(Outcome::Worked);
                    match check(body) {
                        Ok(value) => {
                            gate.on_success(started);
                            self.log(Level::Debug, || {
                                format!(
                                    "{} {} -> {} ({} ms, {} bytes)",
                                    call.method,
                                    shown(&call.url),
                                    status.as_u16(),
                                    started.elapsed().as_millis(),
                                    size
                                )
                            });
                            return Ok(value);
                        }
                        Err(e @ Error::Decode { .. }) => (e, None),
                        Err(e) => return Err(e),
                    }
                }
                Ok((status, headers, body))
                    if status == StatusCode::UNAUTHORIZED
                        || (status == StatusCode::FORBIDDEN && refuses_token(&headers, &body)) =>
                {
                    // Renewed at every expiry of a token that worked, for as long as the job
                    // runs. New tokens refused while none works (not one success since) mean
                    // the credentials (or the key) are refused; a success in between (other
                    // requests used the new token up first) starts the count again.
                    let worked_now = self.worked.load(Ordering::SeqCst);
                    let worked = worked_now >= generation;
                    if !worked {
                        if worked_now > seen_worked {
                            seen_worked = worked_now;
                            fresh_refusals = 0;
                        }
                        fresh_refusals += 1;
                    }
                    if (worked || fresh_refusals <= FRESH_REFUSALS) && renewals < MAX_RENEWALS {
                        renewals += 1;
                        // Its token ends here: no request carries it any more, and the first
                        // request refused with it has the token renewed, once for all of them;
                        // one refused with an older token is sent again with the current one.
                        token_use.end(Outcome::Refused);
                        let renewing = self.invalidate(generation).await;
                        self.uses.wake();
                        self.stats.retry(call.tally.as_deref());
                        self.log(Level::Debug, || {
                            format!(
                                "{} {} -> {}: sent again with {} access token",
                                call.method,
                                call.url.path(),
                                status.as_u16(),
                                if renewing { "a renewed" } else { "the current" }
                            )
                        });
                        continue;
                    }
                    return Err(Error::Auth {
                        message: format!(
                            "`{} {}` was refused ({status}) with a new access token: {}",
                            call.method,
                            call.url.path(),
                            detail_of(&body)
                        ),
                        status: Some(status.as_u16()),
                    });
                }
                Ok((status, headers, body)) => {
                    let code = status.as_u16();
                    let detail = detail_of(&body);
                    if code == 403 {
                        return Err(Error::Auth {
                            message: format!(
                                "`{} {}` was refused ({status}): {detail}",
                                call.method,
                                call.url.path()
                            ),
                            status: Some(code),
                        });
                    }
                    let err = Error::Status {
                        status: code,
                        body: truncate(&body),
                        url: shown(&call.url),
                        message: format!(
                            "`{} {}` answered {status}: {detail}",
                            call.method,
                            shown(&call.url)
                        ),
                    };
                    if code == 429 {
                        self.stats.rate_limited(call.tally.as_deref());
                        self.too_long(&headers, &format!("{} {}", call.method, call.url.path()))?;
                        let ra = parse_retry_after(&headers);
                        gate.on_rate_limited(started, ra);
                        (err, ra)
                    } else if err.is_retryable() {
                        (err, parse_retry_after(&headers))
                    } else {
                        self.log(Level::Debug, || {
                            format!("{} {} -> {code}", call.method, shown(&call.url))
                        });
                        return Err(err);
                    }
                }
                Err(e) if (outage.is_some() || e.is_retryable()) && self.check_open().is_ok() => {
                    (e, None)
                }
                Err(e) => return Err(e),
            };
            // Answered or not, its place in the token's window is free during the wait.
            drop(token_use);
            if let Some(outage) = outage {
                let what = format!("{} {}", call.method, shown(&call.url));
                let tally = call.tally.as_deref();
                self.ride_out(
                    &what,
                    tally,
                    outage,
                    err,
                    retry_after,
                    started,
                    &mut outage_since,
                    &mut outage_tries,
                )
                .await?;
                continue;
            }
            if attempt >= self.config.max_retries {
                self.log(Level::Warning, || {
                    format!(
                        "giving up on {} {} after {attempt} retries: {err}",
                        call.method,
                        shown(&call.url)
                    )
                });
                return Err(err);
            }
            attempt += 1;
            self.stats.retry(call.tally.as_deref());
            let wait = backoff(attempt, retry_after);
            self.log(Level::Debug, || {
                format!(
                    "{} {} failed ({err}); retry {attempt} in {} ms",
                    call.method,
                    shown(&call.url),
                    wait.as_millis()
                )
            });
            tokio::time::sleep(wait).await;
        }
    }
}

impl Http {
    /// The outage an exchange's outcome says, if any; a request that made no connection is
    /// taken back from the counts (`route`'s, `call`'s) and the day's quota (`day`, the
    /// allowance when `granted`): it never left the machine.
    fn told(
        &self,
        told: &std::result::Result<(StatusCode, HeaderMap, Bytes), NoAnswer>,
        day: i64,
        granted: bool,
        route: &str,
        call: Option<&Call>,
    ) -> Option<Outage> {
        match told {
            Ok((status, _, _)) => Outage::of_status(*status),
            Err(f) => {
                if !f.reached {
                    self.ledger.refund(day, granted);
                    self.stats.unsent(route);
                    if let Some(t) = call.and_then(|c| c.tally.as_deref()) {
                        t.sent.fetch_sub(1, Ordering::Relaxed);
                    }
                    if let Some(n) = call.and_then(|c| c.sent.as_deref()) {
                        n.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                f.outage
            }
        }
    }

    /// The service answered a request to `url` after an outage that began at `since`, if one
    /// was under way: said in the log, and no call waits any more.
    fn answered(&self, since: Option<Instant>, method: &str, url: &Url) {
        let Some(since) = since else { return };
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.log(Level::Debug, || {
            format!(
                "{method} {}: the service answered again after {:.1} s",
                shown(url),
                since.elapsed().as_secs_f64()
            )
        });
    }

    /// One failure of `what` (`GET /v2/sites`) in an outage that began with the request sent at `since` (set
    /// now if none is under way): waits for the next try (full-jitter backoff, at least a
    /// `Retry-After`, the last wait cut to end with `max_outage`), saying so; `err` once
    /// `max_outage` has passed since the outage began.
    #[allow(clippy::too_many_arguments)]
    async fn ride_out(
        &self,
        what: &str,
        tally: Option<&Tally>,
        outage: Outage,
        err: Error,
        retry_after: Option<Duration>,
        started: Instant,
        since: &mut Option<Instant>,
        tries: &mut u32,
    ) -> Result<()> {
        let since = *since.get_or_insert(started);
        let budget = self.config.max_outage;
        let spent = since.elapsed();
        if spent >= budget {
            *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.log(Level::Warning, || {
                format!(
                    "giving up on {what} after {:.1} s (`max_outage`): {}: {err}",
                    spent.as_secs_f64(),
                    outage.words()
                )
            });
            if budget.is_zero() {
                return Err(err);
            }
            let said = format!("for {:.0} s (`max_outage`)", spent.as_secs_f64());
            return Err(match err {
                Error::Transport(m) => Error::Transport(format!("{m}; unreachable {said}")),
                Error::Timeout(m) => Error::Timeout(format!("{m}; unreachable {said}")),
                Error::Status {
                    status,
                    body,
                    url,
                    message,
                } => Error::Status {
                    status,
                    body,
                    url,
                    message: format!("{message}; unavailable {said}"),
                },
                other => other,
            });
        }
        *tries += 1;
        let left = budget - spent;
        let wait = outage_backoff(*tries)
            .max(retry_after.unwrap_or_default())
            .min(left);
        let now = Instant::now();
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = Some(Waiting {
            outage,
            next_try: now + wait,
            gives_up: now + left,
            budget,
        });
        self.stats.retry(tally);
        self.log(Level::Debug, || {
            format!(
                "waiting: {what}: {}, retrying in {:.1} s ({:.1} s of the {} s `max_outage` \
                 left): {err}",
                outage.words(),
                wait.as_secs_f64(),
                left.as_secs_f64(),
                budget.as_secs_f64()
            )
        });
        // Ctrl-C drops this future (and the sleep); `close` ends it.
        self.unless_closed(async {
            tokio::time::sleep(wait).await;
            Ok(())
        })
        .await
    }
}

/// Whether the webhook takes JSON arrays, as far as a client has found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrays {
    /// Not tried yet, or only successes.
    Unknown,
    /// An array of one was accepted.
    Accepted,
    /// An array of one was refused where the same record alone was accepted.
    Refused,
}

/// What a client learned of the webhook, for all its publishes.
#[derive(Debug, Default)]
pub struct Webhook {
    arrays: std::sync::atomic::AtomicU8,
}

impl Webhook {
    /// Whether arrays are taken.
    pub fn arrays(&self) -> Arrays {
        match self.arrays.load(Ordering::Relaxed) {
            1 => Arrays::Accepted,
            2 => Arrays::Refused,
            _ => Arrays::Unknown,
        }
    }

    pub(crate) fn accept_arrays(&self) {
        let _ = self
            .arrays
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// True for the call that found it out first (which says so in the log).
    pub(crate) fn refuse_arrays(&self) -> bool {
        self.arrays.swap(2, Ordering::Relaxed) != 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::RETRY_AFTER;

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
        h.insert(RETRY_AFTER, "0.5".parse().expect("header"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(RETRY_AFTER, "soon".parse().expect("header"));
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
