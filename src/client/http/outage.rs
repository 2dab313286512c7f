//! What follows a failed try of a call: a retry after a backoff, within `max_retries`, or, while
//! the service is unreachable, the waits between tries within `max_outage`; and what a call
//! waits for now (an outage, a 429), for the progress display.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use url::Url;

use super::said::Heard;
use super::shown::shown;
use super::{backoff, outage_backoff, Http, Level, Outage};
use crate::client::error::{Error, Result};
use crate::client::scope::{self, Counted, WaitKind};
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

/// The tries of one call so far: how many were sent, its retries, and the outage under way
/// (its own, or the operation's it belongs to) with its tries.
pub(super) struct Tries<'a> {
    method: &'a str,
    url: &'a Url,
    /// `"GET /v2/events"`: the call's route, the `endpoint` of its log lines.
    pub(super) route: &'static str,
    /// Counts the call's retries, besides the client's totals.
    tally: Option<&'a Tally>,
    /// Requests of the call sent so far (the `attempt` of the latest).
    pub(super) sent: u32,
    attempt: u32,
    /// The outage of the call alone, when it belongs to no operation's.
    own: OutageClock,
    shared: Option<&'a OutageClock>,
    outage_tries: u32,
}

impl<'a> Tries<'a> {
    /// No try yet of `method` `url` (`route`); its outage is `shared`'s, when given.
    pub(super) fn new(
        method: &'a str,
        url: &'a Url,
        route: &'static str,
        tally: Option<&'a Tally>,
        shared: Option<&'a OutageClock>,
    ) -> Self {
        Tries {
            method,
            url,
            route,
            tally,
            sent: 0,
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
    pub(super) fn what(&self) -> String {
        format!("{} {}", self.method, shown(self.url))
    }
}

/// A failed try of a call, as [`Http::retry`] takes it.
pub(super) struct FailedTry {
    /// The error the call ends with, if it is not tried again.
    pub(super) error: Error,
    /// The request's outcome, for its log line.
    pub(super) heard: Heard,
    /// The wait the service asked for.
    pub(super) retry_after: Option<Duration>,
    /// It was a 429: the wait says so on the progress display.
    pub(super) limited: bool,
}

/// A wait after a 429 under way, for [`Http::waiting`], until it is dropped.
struct LimitedWait<'a> {
    http: &'a Http,
    number: u64,
}

impl<'a> LimitedWait<'a> {
    fn new(http: &'a Http, wait: Duration) -> Self {
        let number = http.waits.fetch_add(1, Ordering::Relaxed);
        http.limited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((number, Instant::now() + wait));
        LimitedWait { http, number }
    }
}

impl Drop for LimitedWait<'_> {
    fn drop(&mut self) {
        self.http
            .limited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(n, _)| *n != self.number);
    }
}

/// What a call waits for now, for the progress display (see [`Http::waiting`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// In words: `the service is unreachable (connection refused): next try in 2 s (48 s of
    /// the 60 s `max_outage` left)`, or `rate limited (429): next try in 2 s`.
    pub words: String,
    /// In the few columns a bar has, the time first: `retry in 2 s, 48 s of max_outage left
    /// (unreachable)`, or `retry in 2 s (429)`.
    pub brief: String,
}

impl Http {
    /// Logs the request of `tries` that was answered as `heard`, once: its outcome, then
    /// `then` (what follows it), with its fields.
    pub(super) fn said(
        &self,
        level: Level,
        tries: &Tries<'_>,
        heard: &Heard,
        then: impl FnOnce() -> Option<String>,
    ) {
        let fields = || heard.fields(tries.route, tries.sent);
        self.log_with(level, fields, || {
            let mut line = format!("{} {}", tries.what(), heard.outcome());
            if let Some(then) = then() {
                line.push_str("; ");
                line.push_str(&then);
            }
            line
        });
    }

    /// What a call waits for now: the service unreachable (the next try, the `max_outage`
    /// left; `trying again` while that try is under way), else a wait after a 429 while it
    /// lasts; None when no call waits (a request answered since, the wait over).
    pub fn waiting(&self) -> Option<Wait> {
        let now = Instant::now();
        let outage = self
            .waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|w| now < w.gives_up);
        if let Some(w) = outage {
            let next = w
                .next_try
                .saturating_duration_since(now)
                .as_secs_f64()
                .ceil();
            let left = w
                .gives_up
                .saturating_duration_since(now)
                .as_secs_f64()
                .ceil();
            let when = if next > 0.0 {
                format!("next try in {next} s")
            } else {
                "trying again".to_owned()
            };
            let soon = if next > 0.0 {
                format!("retry in {next} s")
            } else {
                "retrying".to_owned()
            };
            return Some(Wait {
                words: format!(
                    "{}: {when} ({left} s of the {} s `max_outage` left)",
                    w.outage.words(),
                    w.budget.as_secs_f64().round()
                ),
                brief: format!("{soon}, {left} s of max_outage left ({})", w.outage.brief()),
            });
        }
        let until = self
            .limited
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, until)| *until)
            .max()?;
        let next = until.saturating_duration_since(now).as_secs_f64().ceil();
        (next > 0.0).then(|| Wait {
            words: format!("rate limited (429): next try in {next} s"),
            brief: format!("retry in {next} s (429)"),
        })
    }

    /// The service answered the call of `tries` (its answer says no outage): an outage under
    /// way is over, and no call waits any more; how long it lasted, for the request's line.
    pub(super) fn answered(&self, tries: &mut Tries<'_>) -> Option<Duration> {
        tries.outage_tries = 0;
        scope::count(Counted::Answered);
        let since = tries.clock().end()?;
        *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Some(since.elapsed())
    }

    /// After a failed try of the call of `tries`, sent at `started`: in an `outage`, the wait
    /// for its next try (see [`ride_out`](Self::ride_out)); otherwise a retry after a
    /// full-jitter backoff (at least the `Retry-After`), or the error once `max_retries`
    /// retries are spent. The request's line says which.
    pub(super) async fn retry(
        &self,
        tries: &mut Tries<'_>,
        outage: Option<Outage>,
        failed: FailedTry,
        started: Instant,
    ) -> Result<()> {
        if let Some(outage) = outage {
            return self.ride_out(tries, outage, failed, started).await;
        }
        let FailedTry {
            error,
            heard,
            retry_after,
            limited,
        } = failed;
        if tries.attempt >= self.config.max_retries {
            let attempt = tries.attempt;
            self.said(Level::Warning, tries, &heard, || {
                Some(format!("giving up after {attempt} retries"))
            });
            return Err(error);
        }
        tries.attempt += 1;
        let attempt = tries.attempt;
        self.stats.retry(tries.tally);
        let wait = backoff(attempt, retry_after);
        if let Some(o) = scope::observer() {
            let kind = match &error {
                Error::Status { status: 429, .. } => WaitKind::RateLimited,
                _ => WaitKind::Backoff,
            };
            o.wait(kind, &tries.route(), wait);
        }
        self.said(Level::Debug, tries, &heard, || {
            Some(format!("retry {attempt} in {} ms", wait.as_millis()))
        });
        // Shown while it lasts: until it ends, or the call is dropped (Ctrl-C, a fetch done
        // with this page no longer needed).
        let _shown = limited.then(|| LimitedWait::new(self, wait));
        tokio::time::sleep(wait).await;
        if limited {
            scope::count(Counted::Waited(
                u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            ));
        }
        Ok(())
    }

    /// One failure of the call of `tries` in an outage that began with the request sent at
    /// `started` (when none is under way, for the call or its operation): waits for the next
    /// try (full-jitter backoff, at least a `Retry-After`, the last wait cut to end with
    /// `max_outage`), saying so; the error once `max_outage` has passed since the outage
    /// began.
    async fn ride_out(
        &self,
        tries: &mut Tries<'_>,
        outage: Outage,
        failed: FailedTry,
        started: Instant,
    ) -> Result<()> {
        let FailedTry {
            error,
            heard,
            retry_after,
            ..
        } = failed;
        let since = tries.clock().begin(started);
        scope::count(Counted::OutageMet(since));
        let budget = self.config.max_outage;
        let spent = since.elapsed();
        if spent >= budget {
            *self.waiting.lock().unwrap_or_else(|p| p.into_inner()) = None;
            self.said(Level::Warning, tries, &heard, || {
                Some(format!(
                    "{}: giving up after {:.1} s (`max_outage`)",
                    outage.words(),
                    spent.as_secs_f64(),
                ))
            });
            if budget.is_zero() {
                return Err(error);
            }
            let said = format!("for {:.0} s (`max_outage`)", spent.as_secs_f64());
            let mut err = error;
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
            let kind = match &error {
                Error::Status { status: 429, .. } => WaitKind::RateLimited,
                _ => WaitKind::Outage,
            };
            o.wait(kind, &tries.route(), wait);
        }
        self.said(Level::Debug, tries, &heard, || {
            Some(format!(
                "waiting: {}, retrying in {:.1} s ({:.1} s of the {} s `max_outage` left)",
                outage.words(),
                wait.as_secs_f64(),
                left.as_secs_f64(),
                budget.as_secs_f64()
            ))
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
