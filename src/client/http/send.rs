//! `send`: one request within the limits and the day's quota, with a token, read within the
//! size cap, and retried as its failure deserves (full-jitter backoff that honours
//! `Retry-After`, a refused token renewed at every expiry).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use url::Url;

use super::outage::{FailedTry, Tries};
use super::said::Heard;
use super::shown::{cause_of, describe, detail_of, shown, truncate};
use super::token::Admitted;
use super::{parse_retry_after, refuses_token, Call, Http, Level, Outage, Watched};
use crate::client::config::Secret;
use crate::client::error::{Error, Result};
use crate::client::scope;
use crate::client::uses::Outcome;

/// A request that got no answer: the error, the outage it says, and whether the request may
/// have reached the service (false only when no connection was made).
pub(super) struct NoAnswer {
    pub(super) error: Error,
    /// Why no answer came, without the request (its log line names it).
    pub(super) why: String,
    outage: Option<Outage>,
    pub(super) reached: bool,
}

/// Renewals of the token within one call at most (each a token request of the day's quota):
/// a sanity bound on a service whose tokens stop working as soon as they are issued.
const MAX_RENEWALS: u32 = 64;
/// New tokens refused, with no success in between, before the credentials are taken as
/// refused.
const FRESH_REFUSALS: u32 = 2;

impl Http {
    /// A 429 that asks for a wait longer than `max_wait` is no reason to sleep: the quota
    /// error, raised at once (and, once the service confirms it, every client of the machine
    /// waits with this one: see [`Ledger::claim`](crate::client::quota::Ledger::claim)).
    pub(super) fn too_long(&self, headers: &HeaderMap, what: &str) -> Result<()> {
        match parse_retry_after(headers) {
            Some(wait) if wait > self.config.max_wait => {
                let why = format!(
                    "`{what}` answered 429 with `Retry-After: {}` s, longer than `max_wait` \
                     ({} s)",
                    wait.as_secs(),
                    self.config.max_wait.as_secs_f64()
                );
                Err(self.ledger.claim(wait.as_millis() as i64, why))
            }
            _ => Ok(()),
        }
    }

    /// One exchange: send, then read the whole body within the size cap; a failure tells the
    /// outage it shows and whether the request may have reached the service.
    pub(super) async fn exchange_told(
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
        if self.config.trace_context {
            if let Some(parent) = scope::traceparent() {
                req = req.header("traceparent", parent);
            }
        }
        let classify = |e: reqwest::Error| {
            let (outage, reached) = (Outage::of_error(&e), !e.is_connect());
            let why = if e.is_timeout() {
                format!(
                    "timed out after {:.1} s (`timeout`)",
                    self.config.timeout.as_secs_f64()
                )
            } else {
                cause_of(&e)
            };
            let error = if e.is_timeout() {
                Error::Timeout(format!("`{} {}` {why}", method, url.path()))
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
                why,
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
            why: format!("the answer is larger than `max_body_bytes` ({cap} bytes)"),
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
        // Refusals of tokens not known to have worked, since a token last worked.
        let mut fresh_refusals = 0u32;
        let mut seen_worked = self.worked.load(Ordering::SeqCst);
        let mut renewals = 0u32;
        let waited = call.waited.clone().unwrap_or_default();
        let outage = call.outage.as_deref();
        let mut tries = Tries::new(
            call.method.as_str(),
            &call.url,
            call.route,
            call.tally.as_deref(),
            outage,
        );
        let observer = scope::observer();
        loop {
            // A call that stopped sends nothing more: not a try, nor a token request for it.
            scope::hold_if_stopping().await;
            let mut admitted = self.token_for_use(outage).await?;
            let slot = gate.acquire().await?;
            if !admitted.still_good(&self.uses) {
                // The turn came after the token was refused, replaced or due for renewal (a
                // rate cut to a few requests a second makes a queue longer than a token
                // lives): sent, it would be refused, and judged a new token refused. The
                // request goes with the current token instead, or, when that one's window has
                // no place for it, gives its turn back and waits for one.
                let from = admitted.generation;
                drop(admitted);
                match self.token_in_place_of(from, outage).await? {
                    Some(current) => admitted = current,
                    None => {
                        drop(slot);
                        continue;
                    }
                }
            }
            let Admitted {
                token,
                generation,
                window: mut token_use,
                ..
            } = admitted;
            // Counted against the day's budget only when it is about to go.
            let granted = self.unless_closed(self.ledger.take_granted()).await?;
            if scope::stopping() {
                // The call stopped while this request waited for its turn (or before its task
                // ran): it does not leave, and its turn and grant go to other calls' requests.
                drop((slot, token_use));
                if granted {
                    self.ledger.return_grant();
                }
                return std::future::pending().await;
            }
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
            let watch = Watched::new(
                observer.as_ref(),
                &call.method,
                &call.url,
                tries.sent,
                false,
            );
            tries.sent += 1;
            let told = self
                .unless_closed(async {
                    Ok(self
                        .exchange_told(&call.method, &call.url, Some(&token), call.body.clone())
                        .await)
                })
                .await?;
            drop(slot);
            watch.end(
                told.as_ref()
                    .map(|a| a.0)
                    .map_err(|f| (&f.error, f.reached)),
            );
            let outage = self.told(&told, day, granted, call.route, Some(call));
            let mut heard = self.heard(&told, started);
            if outage.is_none() {
                heard.back_after = self.answered(&mut tries);
            }
            let outcome = told.map_err(|f| f.error);
            let mut limited = false;
            let (err, retry_after) = match outcome {
                Ok((status, _, body)) if status.is_success() => {
                    // The token worked: a later refusal of it is an expiry, renewed.
                    self.worked.fetch_max(generation, Ordering::SeqCst);
                    token_use.end(Outcome::Worked);
                    match check(body) {
                        Ok(value) => {
                            gate.on_success(started);
                            self.said(Level::Debug, &tries, &heard, || None);
                            return Ok(value);
                        }
                        Err(e @ Error::Decode { .. }) => {
                            if let Error::Decode { detail, .. } = &e {
                                heard.unread(detail);
                            }
                            (e, None)
                        }
                        Err(e) => {
                            self.said(Level::Debug, &tries, &heard, || Some(e.to_string()));
                            return Err(e);
                        }
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
                        self.said(Level::Debug, &tries, &heard, || {
                            Some(format!(
                                "sent again with {} access token",
                                if renewing { "a renewed" } else { "the current" }
                            ))
                        });
                        continue;
                    }
                    self.said(Level::Debug, &tries, &heard, || {
                        Some("refused with a new access token: the credentials are refused".into())
                    });
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
                        self.said(Level::Debug, &tries, &heard, || None);
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
                        let what = format!("{} {}", call.method, call.url.path());
                        if let Err(e) = self.too_long(&headers, &what) {
                            self.said(Level::Debug, &tries, &heard, || {
                                Some("a wait longer than `max_wait`: not tried again".into())
                            });
                            return Err(e);
                        }
                        let ra = parse_retry_after(&headers);
                        gate.on_rate_limited(started, ra);
                        limited = true;
                        match self.within_max_wait(&waited, ra, err) {
                            Ok(err) => (err, ra),
                            Err(err) => {
                                self.said(Level::Debug, &tries, &heard, || {
                                    Some("past `max_wait`: not tried again".into())
                                });
                                return Err(err);
                            }
                        }
                    } else if err.is_retryable() {
                        (err, parse_retry_after(&headers))
                    } else {
                        self.said(Level::Debug, &tries, &heard, || None);
                        return Err(err);
                    }
                }
                Err(e) if (outage.is_some() || e.is_retryable()) && self.check_open().is_ok() => {
                    (e, None)
                }
                Err(e) => {
                    self.said(Level::Debug, &tries, &heard, || None);
                    return Err(e);
                }
            };
            // Answered or not, its place in the token's window is free during the wait.
            drop(token_use);
            let before = Instant::now();
            let failed = FailedTry {
                error: err,
                heard,
                retry_after,
                limited,
            };
            self.retry(&mut tries, outage, failed, started).await?;
            if limited {
                let ms = u64::try_from(before.elapsed().as_millis()).unwrap_or(u64::MAX);
                waited.fetch_add(ms, Ordering::Relaxed);
            }
        }
    }

    /// The error of a 429 (`err`) when waiting `wait` more would take the waits after 429s
    /// (`waited` ms: this call's, and those of the earlier calls of its records) past
    /// `max_wait`: the call ends with it rather than waiting. Else `err`, to retry after the
    /// wait.
    fn within_max_wait(
        &self,
        waited: &AtomicU64,
        wait: Option<Duration>,
        mut err: Error,
    ) -> Result<Error> {
        let spent = Duration::from_millis(waited.load(Ordering::Relaxed));
        let wait = wait.unwrap_or_default();
        if spent + wait <= self.config.max_wait {
            return Ok(err);
        }
        if let Error::Status { message, .. } = &mut err {
            message.push_str(&format!(
                "; not tried again: {:.0} s waited after 429s, and {:.0} s more would be past \
                 `max_wait` ({:.0} s)",
                spent.as_secs_f64(),
                wait.as_secs_f64(),
                self.config.max_wait.as_secs_f64()
            ));
        }
        Err(err)
    }
}

impl Http {
    /// An exchange's outcome, for its log line.
    pub(super) fn heard(
        &self,
        told: &std::result::Result<(StatusCode, HeaderMap, Bytes), NoAnswer>,
        sent: Instant,
    ) -> Heard {
        match told {
            Ok((status, headers, body)) => Heard::answer(*status, headers, body, sent),
            Err(f) => Heard::none(&f.why, sent),
        }
    }

    /// The outage an exchange's outcome says, if any; a request that made no connection is
    /// taken back from the counts (`route`'s, `call`'s) and the day's quota (`day`, the
    /// allowance when `granted`): it never left the machine.
    pub(super) fn told(
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
}
