//! The provider's published limits, in one shape for both readers of the spec: the client paces
//! itself by them (`client::limits`), and the emulator enforces them when asked
//! (`emulator::State::set_limits`). Neither owns the type, so neither imports the other.

use crate::wording::Wording;

/// Requests per second and requests in flight, for reads and for publishing, and requests a
/// day; None lifts one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// GET requests per second.
    pub read_per_second: Option<f64>,
    /// GET requests in flight.
    pub read_concurrency: Option<usize>,
    /// Webhook requests per second.
    pub publish_per_second: Option<f64>,
    /// Webhook requests in flight.
    pub publish_concurrency: Option<usize>,
    /// Requests a day with one API key, all endpoints.
    pub daily_requests: Option<u64>,
}

/// The provider's published daily quota per API key.
pub const DAILY_REQUESTS: u64 = 2_400;

impl Limits {
    /// The provider's published limits: reads 1/s and 3 in flight, webhook 100/s and 200, and
    /// 2,400 requests a day.
    pub const PUBLISHED: Limits = Limits {
        read_per_second: Some(1.0),
        read_concurrency: Some(3),
        publish_per_second: Some(100.0),
        publish_concurrency: Some(200),
        daily_requests: Some(DAILY_REQUESTS),
    };

    /// No limit at all.
    pub const NONE: Limits = Limits {
        read_per_second: None,
        read_concurrency: None,
        publish_per_second: None,
        publish_concurrency: None,
        daily_requests: None,
    };

    /// No limit at all (the client still slows down when the service answers 429).
    pub fn unlimited() -> Self {
        Self::NONE
    }

    /// What is wrong with these limits, in words naming the field (see [`check_rate`] and
    /// [`check_count`]).
    pub fn check(&self) -> Result<(), Wording> {
        for (name, v) in [
            ("read_per_second", self.read_per_second),
            ("publish_per_second", self.publish_per_second),
        ] {
            v.map_or(Ok(()), |v| check_rate(name, v))?;
        }
        for (name, v) in [
            ("read_concurrency", self.read_concurrency),
            ("publish_concurrency", self.publish_concurrency),
        ] {
            v.map_or(Ok(()), |v| check_count(name, v as i128, CONCURRENCY))?;
        }
        self.daily_requests
            .map_or(Ok(()), |v| check_count("daily_requests", v as i128, DAILY))
    }
}

/// Requests a second a rate may be: from one an hour to a million a second, so that every
/// wait stays finite.
pub const RATE: (f64, f64) = (1.0 / 3600.0, 1_000_000.0);
/// Requests a concurrency may hold in flight.
pub const CONCURRENCY: (u64, u64) = (1, 10_000);
/// Requests a daily budget may allow.
pub const DAILY: (u64, u64) = (1, 1_000_000_000);

/// Whether `v` is a rate the limit `name` may be (see [`RATE`]), in words naming it if not.
pub fn check_rate(name: &str, v: f64) -> Result<(), Wording> {
    let (low, high) = RATE;
    if v.is_finite() && (low..=high).contains(&v) {
        return Ok(());
    }
    Err(Wording::new().arg(name).text(format!(
        " must be a number of requests a second from 1/3600 (one an hour) to 1,000,000, got {v}"
    )))
}

/// Whether `v` is a count the limit `name` may be, from `low` to `high`, in words naming it if
/// not.
pub fn check_count(name: &str, v: i128, bounds: (u64, u64)) -> Result<(), Wording> {
    if (i128::from(bounds.0)..=i128::from(bounds.1)).contains(&v) {
        return Ok(());
    }
    Err(count_out_of_range(name, bounds, &v))
}

/// The words of a count out of its range, its value `shown` as the caller writes it (a number
/// too large for an `i128` is shown cut short).
pub fn count_out_of_range(
    name: &str,
    (low, high): (u64, u64),
    shown: &dyn std::fmt::Display,
) -> Wording {
    Wording::new().arg(name).text(format!(
        " must be from {} to {}, got {shown}",
        crate::text::thousands(low),
        crate::text::thousands(high)
    ))
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn the_published_limits_pass_and_nonsense_is_named() {
        assert!(Limits::PUBLISHED.check().is_ok());
        assert!(Limits::NONE.check().is_ok());
        let zero = Limits {
            read_concurrency: Some(0),
            ..Limits::NONE
        };
        assert!(zero
            .check()
            .unwrap_err()
            .to_string()
            .contains("read_concurrency"));
        let many = Limits {
            publish_concurrency: Some(10_001),
            ..Limits::NONE
        };
        assert!(many
            .check()
            .unwrap_err()
            .to_string()
            .contains("from 1 to 10,000"));
        let slow = Limits {
            read_per_second: Some(1.0 / 7200.0),
            ..Limits::NONE
        };
        assert!(slow
            .check()
            .unwrap_err()
            .to_string()
            .contains("read_per_second"));
        assert!(super::check_count("daily_requests", -1, super::DAILY).is_err());
        let nan = Limits {
            publish_per_second: Some(f64::NAN),
            ..Limits::NONE
        };
        assert!(nan
            .check()
            .unwrap_err()
            .to_string()
            .contains("publish_per_second"));
    }
}
