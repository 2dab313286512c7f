//! The provider's published limits, in one shape for both readers of the spec: the client paces
//! itself by them (`client::limits`), and the emulator enforces them when asked
//! (`emulator::State::set_limits`). Neither owns the type, so neither imports the other.

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

    /// What is wrong with these limits, in words naming the field: a rate that is not a
    /// positive number, or a concurrency of zero.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("read_per_second", self.read_per_second),
            ("publish_per_second", self.publish_per_second),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v > 0.0)) {
                return Err(format!("`{name}` must be a positive number or None"));
            }
        }
        for (name, v) in [
            ("read_concurrency", self.read_concurrency),
            ("publish_concurrency", self.publish_concurrency),
        ] {
            if v == Some(0) {
                return Err(format!("`{name}` must be at least 1 or None"));
            }
        }
        Ok(())
    }
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
        assert!(zero.check().unwrap_err().contains("read_concurrency"));
        let nan = Limits {
            publish_per_second: Some(f64::NAN),
            ..Limits::NONE
        };
        assert!(nan.check().unwrap_err().contains("publish_per_second"));
    }
}
