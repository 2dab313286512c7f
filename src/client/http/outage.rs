//! What follows a failed try of a call: a retry after a backoff, within `max_retries`, or, while
//! the service is unreachable, the waits between tries within `max_outage`; and what a call
//! waits for now, for the progress display.

use std::time::{Duration, Instant};

use url::Url;

use super::shown::shown;
use super::{backoff, outage_backoff, Http, Level, Outage};
use crate::client::error::{Error, Result};
use crate::client::stats::Tally;

/// A wait of a call through an outage, for the progress display.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    outage: Outage,
    next_try: Instant,
    gives_up: Instant,
    budget: Duration,
}

/// The failed tries of one call so far: its retries, and the outage under way (since the start
/// of its first failed request) with its tries.
pub(super) struct Tries<'a> {
    method: &'a str,
    url: &'a Url,
    /// Counts the call's retries, besides the client's totals.
    tally: Option<&'a Tally>,
    attempt: u32,
    outage_since: Option<Instant>,
    outage_tries: u32,
}

impl<'a> Tries<'a> {
    /// No failed try yet of `method` `url`.
    pub(super) fn new(method: &'a str, url: &'a Url, tally: Option<&'a Tally>) -> Self {
        Tries {
            method,
            url,
            tally,
            attempt: 0,
            outage_since: None,
            outage_tries: 0,
        }
    }

    /// The call, as the log says it: `GET /v2/sites?offset=100`.
    fn what(&self) -> String {
        format!("{} {}", self.method, shown(self.url))
    }
}

impl Http {
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

    /// The service answered the call of `tries` (its answer says no outage): an outage under
    /// way is over, said in the log, and no call waits any more.
    pub(super) fn answered(&self, tries: &mut Tries<'_>) {
        tries.outage_tries = 0;
        let Some(since) = tries.outage_since.take() else {
            return;
        };
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.log(Level::Debug, || {
            format!(
                "{}: the service answered again after {:.1} s",
                tries.what(),
                since.elapsed().as_secs_f64()
            )
        });
    }

    /// After a failed try of the call of `tries`, sent at `started`: in an `outage`, the wait
    /// for its next try (see [`ride_out`](Self::ride_out)); otherwise a retry after a
    /// full-jitter backoff (at least `retry_after`), or `err` once `max_retries` retries are
    /// spent.
    pub(super) async fn retry(
        &self,
        tries: &mut Tries<'_>,
        outage: Option<Outage>,
        err: Error,
        retry_after: Option<Duration>,
        started: Instant,
    ) -> Result<()> {
        if let Some(outage) = outage {
            return self
                .ride_out(tries, outage, err, retry_after, started)
                .await;
        }
        let what = tries.what();
        if tries.attempt >= self.config.max_retries {
            let attempt = tries.attempt;
            self.log(Level::Warning, || {
                format!("giving up on {what} after {attempt} retries: {err}")
            });
            return Err(err);
        }
        tries.attempt += 1;
        let attempt = tries.attempt;
        self.stats.retry(tries.tally);
        let wait = backoff(attempt, retry_after);
        self.log(Level::Debug, || {
            format!(
                "{what} failed ({err}); retry {attempt} in {} ms",
                wait.as_millis()
            )
        });
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// One failure of the call of `tries` in an outage that began with the request sent at
    /// `started` (when none is under way): waits for the next try (full-jitter backoff, at
    /// least a `Retry-After`, the last wait cut to end with `max_outage`), saying so; `err`
    /// once `max_outage` has passed since the outage began.
    async fn ride_out(
        &self,
        tries: &mut Tries<'_>,
        outage: Outage,
        err: Error,
        retry_after: Option<Duration>,
        started: Instant,
    ) -> Result<()> {
        let since = *tries.outage_since.get_or_insert(started);
        let what = tries.what();
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
            let mut err = err;
            match &mut err {
                Error::Transport(m) | Error::Timeout(m) => {
                    m.push_str(&format!("; unreachable {said}"))
                }
                Error::Status { message, .. } => message.push_str(&format!("; unavailable {said}")),
                _ => {}
            }
            return Err(err);
        }
        tries.outage_tries += 1;
        let left = budget - spent;
        let wait = outage_backoff(tries.outage_tries)
            .max(retry_after.unwrap_or_default())
            .min(left);
        let now = Instant::now();
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = Some(Waiting {
            outage,
            next_try: now + wait,
            gives_up: now + left,
            budget,
        });
        self.stats.retry(tries.tally);
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
