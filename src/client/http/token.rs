//! The access token: one cached for all callers, renewed once for all of them near its expiry
//! or when the service refuses it, and the token request with its own retries.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::LOCATION;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use url::Url;

use super::outage::{FailedTry, OutageClock, Tries};
use super::shown::{body_start, detail_of, shown, truncate};
use super::{parse_retry_after, renewal_margin, Http, Level, Watched};
use crate::client::config::Secret;
use crate::client::error::{Error, Result};
use crate::client::redact;
use crate::client::scope;
use crate::client::uses::{Admit, Use};

/// A token admitted for one request (see [`Http::token_for_use`]).
pub(super) struct Admitted<'a> {
    /// The token the request carries.
    pub(super) token: Secret,
    /// Which token it is: each new token has the next number.
    pub(super) generation: u64,
    /// When the token is due for renewal: a request that waited for its turn past it carries
    /// the token that replaces it instead.
    pub(super) refresh_at: Instant,
    /// The request's place in the token's window, until it ends.
    pub(super) window: Use<'a>,
}

impl Admitted<'_> {
    /// Whether the token may still go out with a request: not refused or replaced since it
    /// was admitted, nor due for renewal. A request waits for its turn (the rate, the
    /// concurrency) after taking its token, and the wait can outlast the token.
    pub(super) fn still_good(&self, uses: &crate::client::uses::Uses) -> bool {
        Instant::now() < self.refresh_at && uses.is_current(self.generation)
    }
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    value: Secret,
    refresh_at: Instant,
    generation: u64,
    lifetime: Duration,
}

/// The token endpoint's route, as `stats()` and the log name it.
const TOKEN_ROUTE: &str = "POST /v2/oauth/token";

impl Http {
    /// A valid token and its generation; fetched once for all concurrent callers when needed.
    pub async fn token(&self) -> Result<(Secret, u64)> {
        let t = self.token_inner(None).await.map_err(Error::scrubbed)?;
        Ok((t.value, t.generation))
    }

    /// The current token, fetched when there is none or it is due for renewal; the outage
    /// of the fetch is `outage`'s, when given (the operation it is fetched for).
    async fn token_inner(&self, outage: Option<&OutageClock>) -> Result<Token> {
        self.check_open()?;
        let refusals = self.refusals().0;
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref() {
            if Instant::now() < t.refresh_at {
                return Ok(t.clone());
            }
            self.log(Level::Debug, || "access token near expiry: renewing".into());
        }
        if let (n, Some(e)) = self.refusals() {
            if n != refusals {
                return Err(e);
            }
        }
        let t = match self.fetch_token(outage).await {
            Ok(t) => t,
            Err(e) => {
                if matches!(e, Error::Auth { .. }) {
                    let mut r = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
                    *r = (r.0 + 1, Some(e.clone()));
                }
                return Err(e);
            }
        };
        self.uses.start(t.generation);
        *slot = Some(t.clone());
        Ok(t)
    }

    /// A valid token for one request, once its window lets one more request carry it (see
    /// [`Uses`]); the request counts in the window until the [`Use`] ends. A token request
    /// rides out an outage within `outage`'s budget, when given.
    pub(super) async fn token_for_use(&self, outage: Option<&OutageClock>) -> Result<Admitted<'_>> {
        loop {
            if let Some(admitted) = self.admit_token(true, outage).await? {
                return Ok(admitted);
            }
        }
    }

    /// A token for a request whose turn at the gate came after its token of `from` was
    /// refused, replaced or due for renewal: the current token, in the place it had when `from`
    /// was renewed near its expiry (see [`Uses::carry`]); else as
    /// [`token_for_use`](Self::token_for_use), but None where the window is full rather than
    /// waiting for it, since the request holds its turn, which requests waiting for the window
    /// may be waiting for.
    pub(super) async fn token_in_place_of(
        &self,
        from: u64,
        outage: Option<&OutageClock>,
    ) -> Result<Option<Admitted<'_>>> {
        let t = self.token_inner(outage).await.map_err(Error::scrubbed)?;
        if self.uses.carry(from, t.generation) {
            return Ok(Some(Admitted {
                token: t.value,
                generation: t.generation,
                refresh_at: t.refresh_at,
                window: Use::new(&self.uses, t.generation),
            }));
        }
        self.admit_token(false, outage).await
    }

    async fn admit_token(
        &self,
        wait: bool,
        outage: Option<&OutageClock>,
    ) -> Result<Option<Admitted<'_>>> {
        loop {
            let mut changed = std::pin::pin!(self.uses.changed());
            changed.as_mut().enable();
            let t = self.token_inner(outage).await.map_err(Error::scrubbed)?;
            let generation = t.generation;
            match self.uses.admit(generation) {
                Admit::Granted => {
                    let window = Use::new(&self.uses, generation);
                    return Ok(Some(Admitted {
                        token: t.value,
                        generation,
                        refresh_at: t.refresh_at,
                        window,
                    }));
                }
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
                Admit::Wait if !wait => return Ok(None),
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
    pub(super) async fn invalidate(&self, generation: u64) -> bool {
        let mut slot = self.token.lock().await;
        let current = slot.as_ref().is_some_and(|t| t.generation == generation);
        if current {
            *slot = None;
        }
        current
    }

    async fn fetch_token(&self, outage: Option<&OutageClock>) -> Result<Token> {
        let url = self.config.url("/v2/oauth/token");
        let body = serde_json::json!({
            "audience": self.config.audience,
            "client_id": self.config.client_id,
            "client_secret": self.config.client_secret.expose(),
        });
        let body = Bytes::from(body.to_string());
        let mut tries = Tries::new("POST", &url, TOKEN_ROUTE, None, outage);
        let observer = scope::observer();
        loop {
            let granted = self.unless_closed(self.ledger.take_granted()).await?;
            if scope::stopping() {
                // As a request of the call: it does not leave (see `send_inner`).
                if granted {
                    self.ledger.return_grant();
                }
                return std::future::pending().await;
            }
            let day = self.ledger.spend()?;
            let sent_at = Instant::now();
            self.stats.request(TOKEN_ROUTE);
            let watch = Watched::new(observer.as_ref(), &Method::POST, &url, tries.sent, true);
            tries.sent += 1;
            let told = self
                .unless_closed(async {
                    Ok(self
                        .exchange_told(&Method::POST, &url, None, Some(body.clone()))
                        .await)
                })
                .await?;
            watch.end(
                told.as_ref()
                    .map(|a| a.0)
                    .map_err(|f| (&f.error, f.reached)),
            );
            let outage = self.told(&told, day, granted, TOKEN_ROUTE, None);
            let mut heard = self.heard(&told, sent_at);
            if outage.is_none() {
                heard.back_after = self.answered(&mut tries);
            }
            let outcome = told.map_err(|f| f.error);
            let mut limited = false;
            let err = match outcome {
                // A 200 that is not a token (a proxy's page, a cut answer) is retried.
                Ok((status, _, bytes)) if status.is_success() => {
                    match self.parse_token(&url, &bytes, sent_at) {
                        Ok(token) => {
                            let lifetime = token.lifetime.as_secs();
                            self.said(Level::Debug, &tries, &heard, || {
                                Some(format!("new access token, valid for {lifetime} s"))
                            });
                            return Ok(token);
                        }
                        Err(e) => {
                            if let Error::Decode { detail, .. } = &e {
                                heard.unread(detail);
                            }
                            (e, None)
                        }
                    }
                }
                Ok((status, headers, bytes)) => {
                    let detail = detail_of(&bytes);
                    let code = status.as_u16();
                    if matches!(code, 400 | 401 | 403) {
                        self.said(Level::Debug, &tries, &heard, || {
                            Some("the credentials are refused".into())
                        });
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
                            .map(|l| format!(" to `{}`", redact::shown(l)))
                            .unwrap_or_default();
                        let what = if status.is_redirection() {
                            format!("was redirected ({status}{to})")
                        } else {
                            format!("answered {status}: {detail}")
                        };
                        self.said(Level::Debug, &tries, &heard, || {
                            Some("not the token endpoint: check `base_url`".into())
                        });
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
                        if let Err(e) = self.too_long(&headers, TOKEN_ROUTE) {
                            self.said(Level::Debug, &tries, &heard, || {
                                Some("a wait longer than `max_wait`: not tried again".into())
                            });
                            return Err(e);
                        }
                        limited = true;
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
            let (error, retry_after) = err;
            let failed = FailedTry {
                error,
                heard,
                retry_after,
                limited,
            };
            self.retry(&mut tries, outage, failed, sent_at).await?;
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
        Ok(Token {
            value: Secret::new(value),
            refresh_at: sent_at + lifetime - renewal_margin(lifetime),
            generation,
            lifetime,
        })
    }
}
