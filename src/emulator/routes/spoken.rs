//! How answers are said: the `Date` every answer carries, from the emulator's clock, its
//! `x-request-id`, and the error answers in the dialect's words.

use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::{http_date, ErrorWords, Shared};
use crate::emulator::dialect::{ErrorBody, RetryAfter};

/// Stamps every answer with the emulator's clock (`advance_clock` moves it), as the service
/// stamps its own: a client reads the service's UTC day from it. It replaces any `Date` set
/// before; the server adds none of its own (see `server::serve_connection`). Each answer is
/// named too (`x-request-id`), as the gateways in front of such services name theirs.
pub(super) async fn dated(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    if let Ok(value) = HeaderValue::from_str(&http_date(state.now_ms())) {
        response.headers_mut().insert(header::DATE, value);
    }
    if let Ok(value) = HeaderValue::from_str(&state.answer_id()) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// Says the error answers in the dialect's words: the body of every error answer made as an
/// [`ApiError`] (not the webhook's validation answer, nor an echo) in the shape of
/// `error_body`, and any `Retry-After` in the form of `retry_after`.
pub(super) async fn spoken(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let dialect = state.dialect();
    let words = response.extensions_mut().remove::<ErrorWords>();
    if let Some(words) = words.filter(|_| dialect.error_body != ErrorBody::ErrorMessage) {
        let status = response.status();
        let reason = status.canonical_reason().unwrap_or("Error");
        let head = format!("{} {reason}", status.as_u16());
        let (kind, body) = dialect.error_body.render(&head, words.code, &words.text);
        *response.body_mut() = Body::from(body);
        let headers = response.headers_mut();
        headers.remove(header::CONTENT_LENGTH);
        match kind {
            Some(kind) => headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind)),
            None => headers.remove(header::CONTENT_TYPE),
        };
    }
    match dialect.retry_after {
        RetryAfter::Seconds => {}
        RetryAfter::Absent => {
            response.headers_mut().remove(header::RETRY_AFTER);
        }
        RetryAfter::HttpDate => {
            let seconds = response
                .headers()
                .get(header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<i64>().ok());
            // The instant the wait ends, on the clock of `Date` (both name whole seconds, so
            // the date less `Date` is the wait in seconds).
            let at = seconds
                .and_then(|s| s.checked_mul(1000))
                .and_then(|ms| state.now_ms().checked_add(ms));
            if let Some(value) = at.and_then(|ms| HeaderValue::from_str(&http_date(ms)).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
    }
    response
}
