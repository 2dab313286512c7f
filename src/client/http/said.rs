//! How a request is said in the log: one line for each request sent (its outcome here, and
//! what follows it: a retry, a wait, a renewed token, giving up; see `Http::said`), with the
//! fields a log record carries apart from its text (endpoint, status, the service's request
//! id, attempt).

use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use super::shown::detail_of;

/// What a log line is about, as the fields of its log record (the Python logger's `extra`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    /// The request's route, `"GET /v2/events"` (no query): the key of `stats()`.
    pub endpoint: Option<&'static str>,
    /// The answer's HTTP status; None when no answer came.
    pub status: Option<u16>,
    /// The service's id of its answer (`x-request-id` and the like), when it sends one.
    pub request_id: Option<String>,
    /// Which try of its call the request was: 1 for the first.
    pub attempt: Option<u32>,
}

/// Headers in which services and their gateways name an answer, in the order read.
const REQUEST_ID_HEADERS: [&str; 5] = [
    "x-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "request-id",
    "x-correlation-id",
];

/// The longest request id kept: longer values are not ids.
const REQUEST_ID_MAX: usize = 128;

/// The service's id of an answer, from the first of [`REQUEST_ID_HEADERS`] that holds a short
/// printable value.
pub(super) fn request_id(headers: &HeaderMap) -> Option<String> {
    REQUEST_ID_HEADERS.iter().find_map(|name| {
        let value = headers.get(*name)?.to_str().ok()?.trim();
        let fits = !value.is_empty()
            && value.len() <= REQUEST_ID_MAX
            && value.chars().all(|c| c.is_ascii_graphic());
        fits.then(|| value.to_owned())
    })
}

/// One exchange as its log line says it: the status and size of the answer, or why none came.
pub(super) struct Heard {
    status: Option<StatusCode>,
    bytes: usize,
    took: Duration,
    request_id: Option<String>,
    /// The service's words in an answer that is not a success, or why no answer came.
    detail: Option<String>,
    /// The outage the call was in, over since this answer: how long it lasted.
    pub(super) back_after: Option<Duration>,
}

impl Heard {
    /// An answer of `status` with `headers` and `body`, to a request sent at `sent`.
    pub(super) fn answer(
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        sent: Instant,
    ) -> Heard {
        Heard {
            status: Some(status),
            bytes: body.len(),
            took: sent.elapsed(),
            request_id: request_id(headers),
            detail: (!status.is_success()).then(|| detail_of(body)),
            back_after: None,
        }
    }

    /// No answer to a request sent at `sent`, for the reason `why`.
    pub(super) fn none(why: &str, sent: Instant) -> Heard {
        Heard {
            status: None,
            bytes: 0,
            took: sent.elapsed(),
            request_id: None,
            detail: Some(why.to_owned()),
            back_after: None,
        }
    }

    /// A success whose body is not the service's answer: `detail` says why.
    pub(super) fn unread(&mut self, detail: &str) {
        self.detail = Some(format!("not the service's answer: {detail}"));
    }

    /// The fields of its log record, for the `attempt` of the `endpoint`'s call.
    pub(super) fn fields(&self, endpoint: &'static str, attempt: u32) -> Fields {
        Fields {
            endpoint: Some(endpoint),
            status: self.status.map(|s| s.as_u16()),
            request_id: self.request_id.clone(),
            attempt: Some(attempt),
        }
    }

    /// `-> 503 (2 ms, 57 bytes): the service's words`, or `-> no answer (1 ms): why`; then
    /// that an outage ended with it.
    pub(super) fn outcome(&self) -> String {
        let ms = self.took.as_millis();
        let mut line = match self.status {
            Some(s) => format!("-> {} ({ms} ms, {} bytes)", s.as_u16(), self.bytes),
            None => format!("-> no answer ({ms} ms)"),
        };
        if let Some(d) = &self.detail {
            line.push_str(": ");
            line.push_str(d);
        }
        if let Some(after) = self.back_after {
            line.push_str(&format!(
                "; the service answered again after {:.1} s",
                after.as_secs_f64()
            ));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_is_the_first_short_printable_one() {
        let mut h = HeaderMap::new();
        assert_eq!(request_id(&h), None);
        h.insert("x-amzn-requestid", "abc-1".parse().expect("header"));
        assert_eq!(request_id(&h).as_deref(), Some("abc-1"));
        h.insert("x-request-id", " req-7 ".parse().expect("header"));
        assert_eq!(request_id(&h).as_deref(), Some("req-7"));
        h.insert("x-request-id", "has space".parse().expect("header"));
        assert_eq!(request_id(&h).as_deref(), Some("abc-1"));
        h.insert("x-amzn-requestid", "x".repeat(200).parse().expect("header"));
        assert_eq!(request_id(&h), None);
    }
}
