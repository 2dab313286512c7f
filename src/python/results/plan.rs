//! The plan of a fetch (`EventPlan`, from the core's `plan::EventPlan`) and what a call spent
//! of the daily quota (`Cost`, with the `Quota` after it), with the words they are printed in.

use pyo3::prelude::*;

use super::fields::result_class;
use super::PyQuota;
use crate::client::plan::EventPlan;
use crate::text::thousands;

/// Python's `format(value, spec)`: the figures of a float as Python writes them.
fn format(py: Python<'_>, value: f64, spec: &str) -> PyResult<String> {
    py.import("builtins")?
        .call_method1("format", (value, spec))?
        .extract()
}

/// Days of quota: `2.5`, `0.2`; under a tenth, one figure (`0.0004`), not `0.0`.
fn days(py: Python<'_>, days: f64) -> PyResult<String> {
    format(py, days, if days >= 0.1 { ".1f" } else { ".1g" })
}

/// A duration: `45 s`, `7 min`, `2 h 5 min`, `3 d 4 h`.
fn duration(seconds: f64) -> String {
    let s = seconds.round_ties_even();
    if s < 60.0 {
        return format!("{s} s");
    }
    if s < 3600.0 {
        return format!("{} min", (s / 60.0).round_ties_even());
    }
    if s < 86_400.0 {
        let minutes = (s / 60.0).round_ties_even();
        let (h, m) = ((minutes / 60.0).floor(), minutes % 60.0);
        return if m > 0.0 {
            format!("{h} h {m} min")
        } else {
            format!("{h} h")
        };
    }
    let hours = (s / 3600.0).round_ties_even();
    let (d, h) = ((hours / 24.0).floor(), hours % 24.0);
    if h > 0.0 {
        format!("{d} d {h} h")
    } else {
        format!("{d} d")
    }
}

result_class! {
    /// What fetching the events of a range will cost (:meth:`Client.plan_events`).
    /// ``print(plan)`` reads it in words.
    ///
    /// >>> import surveillance as sv
    /// >>> print(sv.EventPlan(41_000, 415, 415.0, 0.17, 5))
    /// about 41,000 events, 415 requests, 7 min at the read limit, 0.2 days of quota (plan: 5 requests)
    #[pyclass(name = "EventPlan", module = "surveillance._core", frozen)]
    record PyEventPlan "EventPlan" {
        /// Events in the range (estimated; exact when ``exact``).
        events: u64 => "int",
        /// Requests :meth:`Client.events` would make for them.
        requests: u64 => "int",
        /// How long they take at the client's read rate (0 when it is unlimited).
        seconds: f64 => "float",
        /// Days of the daily quota they take, what remains today counting first (0 without a
        /// daily limit). 0.2 is a fifth of a day's quota, which fits today; 2.5 the rest of
        /// today, all of tomorrow and half the day after.
        days: f64 => "float",
        /// Requests the plan itself made (they count against the quota too).
        probes: u64 => "int",
        /// Every window's size was found, not estimated.
        exact: bool => "bool" = false,
    }
    {
        /// Its figures' hash, as a frozen dataclass's.
        fn __hash__(slf: &Bound<'_, Self>) -> PyResult<isize> {
            super::record_hash(slf.as_any(), Self::KEYS)
        }

        fn __str__(&self, py: Python<'_>) -> PyResult<String> {
            let about = if self.exact { "" } else { "about " };
            let mut parts = vec![
                format!("{about}{} events", thousands(self.events)),
                format!("{} requests", thousands(self.requests)),
            ];
            if self.seconds > 0.0 {
                parts.push(format!("{} at the read limit", duration(self.seconds)));
            }
            if self.days > 0.0 {
                parts.push(format!("{} days of quota", days(py, self.days)?));
            }
            Ok(format!("{} (plan: {} requests)", parts.join(", "), thousands(self.probes)))
        }

        /// Its fields, the time to a tenth of a second and the days to three figures.
        ///
        /// >>> import surveillance as sv
        /// >>> sv.EventPlan(6_000, 61, 30.500001, 0.0004166666666666667, 3, True)
        /// EventPlan(events=6000, requests=61, seconds=30.5, days=0.000417, probes=3, exact=True)
        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            let seconds = py
                .import("builtins")?
                .call_method1("round", (self.seconds, 1))?
                .repr()?;
            Ok(format!(
                "EventPlan(events={}, requests={}, seconds={seconds}, days={}, probes={}, exact={})",
                self.events,
                self.requests,
                format(py, self.days, ".3g")?,
                self.probes,
                if self.exact { "True" } else { "False" },
            ))
        }
    }
}

impl From<EventPlan> for PyEventPlan {
    fn from(p: EventPlan) -> Self {
        PyEventPlan {
            events: p.events,
            requests: p.requests,
            seconds: p.seconds,
            days: p.days,
            probes: p.probes,
            exact: p.exact,
        }
    }
}

result_class! {
    /// What a call spent of the daily request quota: :attr:`Client.last_cost` after each fetch,
    /// sync, list or publish, with the quota as it stood after the call.
    ///
    /// >>> import surveillance as sv
    /// >>> cost = sv.Cost(12, sv.Quota(2400, 570, 1830, resets_at="2026-01-06"))
    /// >>> print(cost)
    /// 12 requests, 0.5% of the day's 2,400 (1,830 left)
    /// >>> cost.share, cost.quota.remaining
    /// (0.005, 1830)
    /// >>> print(sv.Cost(14, retries=3, rate_limited=2, waited=4.2, outage=12.5))
    /// 14 requests; 3 retries, 2 answered 429 (4.2 s waited), 12.5 s of outage ridden out
    #[pyclass(name = "Cost", module = "surveillance._core", frozen)]
    record PyCost "Cost" {
        /// Requests this client sent during the call, token requests and retries included (the
        /// service counts them all). Calls running at the same time on the same client, from
        /// other threads, count here too.
        requests: i64 => "int",
        /// Where the daily quota stood after the call, as :meth:`Client.quota
        /// <surveillance.Client.quota>` gives it (None before a client's first call).
        quota: Option<PyQuota> => "Optional[Quota]" = None,
        /// Requests of the call sent again after a failure (a 429, a 5xx, an outage's tries).
        retries: i64 => "int" = 0,
        /// Answers 429 (too many requests) the call received.
        rate_limited: i64 => "int" = 0,
        /// Seconds the call's requests waited after 429s (waits at the same time each counted).
        waited: f64 => "float" = 0.0,
        /// Seconds the service was unreachable during the call, ridden out within `max_outage`.
        outage: f64 => "float" = 0.0,
    }
    {
        /// ``requests`` as a share of the day's quota (0.005 is half a percent), or None.
        #[getter]
        fn share(&self) -> Option<f64> {
            self.limit().map(|l| self.requests as f64 / l as f64)
        }

        fn __str__(&self, py: Python<'_>) -> PyResult<String> {
            let plural = if self.requests == 1 { "" } else { "s" };
            let sign = if self.requests < 0 { "-" } else { "" };
            let count = thousands(self.requests.unsigned_abs());
            let mut text = format!("{sign}{count} request{plural}");
            if let Some(limit) = self.limit() {
                let percent = 100.0 * self.requests as f64 / limit as f64;
                text += &format!(
                    ", {}% of the day's {}",
                    format(py, percent, ".1f")?,
                    thousands(limit)
                );
                if let Some(remaining) = self.quota.as_ref().and_then(|q| q.remaining) {
                    text += &format!(" ({} left)", thousands(remaining));
                }
            }
            text += &self.trouble(py)?;
            Ok(text)
        }

        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            super::repr(slf.as_any(), "Cost", Self::KEYS)
        }
    }
}

impl PyCost {
    /// The day's quota, when there is one (not None, not 0).
    fn limit(&self) -> Option<u64> {
        self.quota.as_ref().and_then(|q| q.limit).filter(|l| *l > 0)
    }

    /// What the call met, when it met anything: `; 3 retries, 2 answered 429 (4.2 s
    /// waited), 12.5 s of outage ridden out`.
    fn trouble(&self, py: Python<'_>) -> PyResult<String> {
        let mut trouble = Vec::new();
        if self.retries != 0 {
            let plural = if self.retries == 1 {
                "retry"
            } else {
                "retries"
            };
            trouble.push(format!(
                "{} {plural}",
                thousands(self.retries.unsigned_abs())
            ));
        }
        if self.rate_limited != 0 {
            trouble.push(format!(
                "{} answered 429 ({} s waited)",
                thousands(self.rate_limited.unsigned_abs()),
                format(py, self.waited, ".1f")?
            ));
        }
        // A gateway's 502 answered again at once is an outage of no time: not worth a word.
        if self.outage >= 0.05 {
            trouble.push(format!(
                "{} s of outage ridden out",
                format(py, self.outage, ".1f")?
            ));
        }
        Ok(if trouble.is_empty() {
            String::new()
        } else {
            format!("; {}", trouble.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_read_in_their_largest_units() {
        assert_eq!(duration(45.4), "45 s");
        assert_eq!(duration(415.0), "7 min");
        assert_eq!(duration(7500.0), "2 h 5 min");
        assert_eq!(duration(7200.0), "2 h");
        assert_eq!(duration(273_600.0), "3 d 4 h");
        assert_eq!(duration(172_800.0), "2 d");
    }
}
