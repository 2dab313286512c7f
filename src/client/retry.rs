//! What an answer says about trying again: the backoffs (a retry's, an outage's), what counts
//! as an outage of the service, `Retry-After` in its two forms, and a 403 that refuses the
//! token rather than the key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{HeaderMap, DATE, RETRY_AFTER, WWW_AUTHENTICATE};
use reqwest::StatusCode;

/// The renewal margin of a token that lives `lifetime`: 5 minutes, or a tenth when shorter.
pub fn renewal_margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(300))
}

static JITTER: AtomicU64 = AtomicU64::new(0);

/// Full-jitter exponential backoff for retry `attempt` (1-based), at least `retry_after`.
pub fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let cap = 0.1 * 2f64.powi(attempt.saturating_sub(1).min(16) as i32);
    let cap = cap.min(8.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seed = JITTER.fetch_add(1, Ordering::Relaxed) ^ now.as_nanos() as u64;
    let unit =
        (crate::rng::mix(seed ^ std::process::id() as u64) >> 11) as f64 / (1u64 << 53) as f64;
    let jittered = Duration::from_secs_f64(cap * unit);
    match retry_after {
        Some(ra) => ra.max(jittered.min(Duration::from_millis(50))) + jittered / 4,
        None => jittered,
    }
}

/// The first wait of an outage's backoff, seconds: it doubles at each try...
const OUTAGE_BASE: f64 = 0.2;
/// ... up to this many seconds (a few: the service is found back within seconds of its
/// return). botocore's standard mode caps at 20 s, google-api-core's retries at 60 s; their
/// tries, and ours, are spread uniformly below the cap (full jitter).
pub const OUTAGE_CAP: Duration = Duration::from_secs(4);

/// Full-jitter exponential backoff for try `n` (1-based) of an outage: uniform in
/// `[0, min(0.2 s * 2^(n-1), 4 s))`.
pub fn outage_backoff(n: u32) -> Duration {
    let cap =
        (OUTAGE_BASE * 2f64.powi(n.saturating_sub(1).min(16) as i32)).min(OUTAGE_CAP.as_secs_f64());
    // `backoff`'s jitter, rescaled to this cap (its own cap is 0.1 s at the first retry).
    let unit = backoff(1, None).as_secs_f64() / 0.1;
    Duration::from_secs_f64(cap * unit.clamp(0.0, 1.0))
}

/// Why the service itself could not answer: it is unreachable (its connection refused, reset
/// or timed out), or the gateway in front of it says it is unavailable (502, 503, 504): a
/// restart, a deploy. Such failures are retried for `max_outage`, not `max_retries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// The connection was refused (or could not be made): nothing was sent.
    Refused,
    /// The connection was reset or closed before the answer.
    Reset,
    /// The connection or the answer timed out.
    TimedOut,
    /// A gateway's 502, 503 or 504.
    Gateway(u16),
}

impl Outage {
    /// The outage a status says, if any.
    pub fn of_status(status: StatusCode) -> Option<Outage> {
        matches!(status.as_u16(), 502..=504).then(|| Outage::Gateway(status.as_u16()))
    }

    /// The outage a failed request says, if any (a refused certificate, a bad address are not).
    pub(super) fn of_error(e: &reqwest::Error) -> Option<Outage> {
        use std::io::ErrorKind;
        if e.is_timeout() {
            return Some(Outage::TimedOut);
        }
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                match io.kind() {
                    ErrorKind::ConnectionRefused => return Some(Outage::Refused),
                    ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
                    | ErrorKind::NotConnected => return Some(Outage::Reset),
                    ErrorKind::TimedOut => return Some(Outage::TimedOut),
                    _ => {}
                }
            }
            if let Some(h) = s.downcast_ref::<hyper::Error>() {
                if h.is_incomplete_message() || h.is_closed() || h.is_canceled() {
                    return Some(Outage::Reset);
                }
            }
            source = s.source();
        }
        None
    }

    /// What it says of the service, for the log and the progress display.
    pub fn words(self) -> String {
        match self {
            Outage::Refused => "the service is unreachable (connection refused)".into(),
            Outage::Reset => "the service is unreachable (connection reset)".into(),
            Outage::TimedOut => "the service is unreachable (timed out)".into(),
            Outage::Gateway(code) => format!("the service is unavailable ({code})"),
        }
    }

    /// The same in a word or two, for a bar's few columns.
    pub fn brief(self) -> String {
        match self {
            Outage::Refused => "unreachable".into(),
            Outage::Reset => "connection reset".into(),
            Outage::TimedOut => "timed out".into(),
            Outage::Gateway(code) => format!("unavailable, {code}"),
        }
    }
}

/// The longest `Retry-After` taken as it is (two days; a wait that long is a quota anyway).
const MAX_RETRY_AFTER_MS: i64 = 2 * crate::time::DAY_MS;

/// Reads `Retry-After` as RFC 9110 allows it: a whole number of seconds (`delay-seconds`, digits
/// only), or an HTTP date in one of its three forms (IMF-fixdate, the obsolete RFC 850 and
/// asctime forms). A date is read against the answer's own `Date` when it has one (the
/// service's clock, not this machine's, which may be off by minutes), else against this
/// machine's clock. Anything else (a negative or decimal number, `NaN`, `inf`, an empty value,
/// text, a list of values or several headers) is taken as absent: the retry backs off as
/// without one.
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let mut values = headers.get_all(RETRY_AFTER).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    // The spaces around a field's value are not part of it (RFC 9110, section 5.5).
    let raw = value.to_str().ok()?.trim_matches([' ', '\t']);
    if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        // More digits than a u64 holds is a wait longer than the longest anyway.
        let secs = raw.parse::<u64>().unwrap_or(u64::MAX);
        let ms = secs.saturating_mul(1000).min(MAX_RETRY_AFTER_MS as u64);
        return Some(Duration::from_millis(ms));
    }
    let when = http_date(raw)?;
    let now = headers
        .get(DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(|d| chrono::DateTime::parse_from_rfc2822(d.trim()).ok())
        .map_or_else(
            || chrono::Utc::now().timestamp_millis(),
            |d| d.timestamp_millis(),
        );
    let wait = when - now;
    Some(Duration::from_millis(
        wait.clamp(0, MAX_RETRY_AFTER_MS) as u64
    ))
}

/// An HTTP date (RFC 9110, section 5.6.7) as epoch ms: `Sun, 06 Nov 1994 08:49:37 GMT`,
/// `Sunday, 06-Nov-94 08:49:37 GMT` or `Sun Nov  6 08:49:37 1994`, always UTC.
fn http_date(text: &str) -> Option<i64> {
    const FORMS: [&str; 3] = [
        "%a, %d %b %Y %H:%M:%S GMT",
        "%A, %d-%b-%y %H:%M:%S GMT",
        "%a %b %e %H:%M:%S %Y",
    ];
    FORMS.iter().find_map(|form| {
        chrono::NaiveDateTime::parse_from_str(text, form)
            .ok()
            .map(|t| t.and_utc().timestamp_millis())
    })
}

/// Whether a 403 refuses the bearer token (expired, revoked, invalid) rather than the API key
/// or the resource: `WWW-Authenticate` says `invalid_token`, or the body speaks of the token
/// and not of the key. Such a 403 is an expiry, as a 401 is.
pub fn refuses_token(headers: &HeaderMap, body: &[u8]) -> bool {
    let challenge = headers
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("invalid_token"));
    if challenge {
        return true;
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    let of_key = ["api key", "api-key", "api_key", "apikey"]
        .iter()
        .any(|k| text.contains(k));
    text.contains("token") && !of_key
}
