//! What follows a failed try of a call: a retry after a backoff, within `max_retries`, or, while
//! the service is unreachable, the waits between tries within `max_outage`; and what a call
//! waits for now, for the progress display.

use std::time::{Duration, Instant};

use url::Url;

use super::shown::shown;
use super::{backoff, outage_backoff, Http, Level, Outage};
use crate::client::error::{Error, Result};
use crate::client::scope::{self, WaitKind};
use crate::client::stats::Tally;

/// A wait of a call through an outage, for the progress display.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    outage: Outage,
    next_try: Instant,
    gives_up: Instant,
    budget: Duration,
}

/// The outage one operation is in: since the start of the first of its requests that met it,
/// until one of its requests is answered. Shared by every request of an operation (a
/// publish's posts and the token requests made for them), so that the operation rides out
/// `max_outage` once, not once per request, per retry round or per token request.
#[derive(Debug, Default)]
pub struct OutageClock {
    since: std::sync::Mutex<Option<Instant>>,
}

impl OutageClock {
    fn since(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The start of the outage under way, which begins at `at` when none is.
    fn begin(&self, at: Instant) -> Instant {
        *self.since().get_or_insert(at)
    }

    /// A request was answered: the outage under way, if any, is over; when it began.
    fn end(&self) -> Option<Instant> {
        self.since().take()
    }

    /// Whether an outage has been under way for `budget` or longer (no request answered
    /// since): the operation is to stop, its requests give up.
    pub fn spent(&self, budget: Duration) -> bool {
        self.since().is_some_and(|since| since.elapsed() >= budget)
    }
}

/// The failed tries of one call so far: its retries, and the outage under way (its own, or
/// the operation's it belongs to) with its tries.
pub(super) struct Tries<'a> {
    method: &'a str,
    url: &'a Url,
    /// Counts the call's retries, besides the client's totals.
    tally: Option<&'a Tally>,
    attempt: u32,
    /// The outage of the call alone, when it belongs to no operation's.
    own: OutageClock,
    shared: Option<&'a OutageClock>,
    outage_tries: u32,
}

impl<'a> Tries<'a> {
    /// No failed try yet of `method` `url`; its outage is `shared`'s, when given.
    pub(super) fn new(
        method: &'a str,
        url: &'a Url,
        tally: Option<&'a Tally>,
        shared: Option<&'a OutageClock>,
    ) -> Self {
        Tries {
            method,
            url,
            tally,
            attempt: 0,
            own: OutageClock::default(),
            shared,
            outage_tries: 0,
        }
    }

    fn clock(&self) -> &OutageClock {
        self.shared.unwrap_or(&self.own)
    }

    /// The call's method and path, without its query: `GET /v2/sites`.
    fn route(&self) -> String {
        format!("{} {}", self.method, self.url.path())
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
        let Some(since) = tries.clock().end() else {
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
        if let Some(o) = scope::observer() {
            let kind = match err {
                Error::Status { status: 429, .. } => WaitKind::RateLimited,
                _ => WaitKind::Backoff,
            };
            o.wait(kind, &tries.route(), wait);
        }
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
    /// `started` (when none is under way, for the call or its operation): waits for the next try (full-jitter backoff, at
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
        let since = tries.clock().begin(started);
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
        if let Some(o) = scope::observer() {
            let kind = match err {
                Error::Status { status: 429, .. } => WaitKind::RateLimited,
                _ => WaitKind::Outage,
            };
            o.wait(kind, &tries.route(), wait);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operations_outage_begins_with_its_first_request_that_meets_it_and_ends_at_an_answer() {
        let clock = OutageClock::default();
        assert!(!clock.spent(Duration::ZERO));
        let first = Instant::now()
            .checked_sub(Duration::from_secs(5))
            .expect("an instant 5 s ago");
        assert_eq!(clock.begin(first), first);
        // Its other requests, and their later tries, meet the same outage: one budget.
        assert_eq!(clock.begin(Instant::now()), first);
        assert!(clock.spent(Duration::from_secs(5)) && !clock.spent(Duration::from_secs(60)));
        // One answered: over, and the next failure begins another.
        assert_eq!(clock.end(), Some(first));
        assert!(!clock.spent(Duration::ZERO));
        let now = Instant::now();
        assert_eq!(clock.begin(now), now);
    }
}
