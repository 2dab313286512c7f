//! Riding out an outage: the waits between tries while the service is unreachable, within
//! `max_outage`, and what a call waits for now, for the progress display.

use std::time::{Duration, Instant};

use url::Url;

use super::shown::shown;
use super::{outage_backoff, Http, Level, Outage};
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

    /// The service answered a request to `url` after an outage that began at `since`, if one
    /// was under way: said in the log, and no call waits any more.
    pub(super) fn answered(&self, since: Option<Instant>, method: &str, url: &Url) {
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
    pub(super) async fn ride_out(
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
