//! The emulator's HTTP surface: `router(state)` with the endpoints of API.md (the lists from
//! `data::LISTINGS`, one handler for all of them), the gateway every request passes first (api
//! key, limits, faults, latency, bearer token), the dialect its error answers are spoken in,
//! and the `Date` every answer carries from the emulator's clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Query, Request, State as AxState};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::data::{Listing, LISTINGS};
use super::dialect::{ErrorBody, ExpiredToken, Failure, Rendered, RetryAfter, WebhookAnswer};
use super::state::{Class, Fault, Hostile, Order, Refusal, State, Verdict};
use crate::webhook as validate;

/// Lets a handler close its connection without answering (the `drop_rate` fault).
#[derive(Debug, Clone)]
pub struct ConnDrop(Arc<Notify>);

impl ConnDrop {
    /// The handle of a connection that `kill` closes (the server puts one in every request).
    pub fn new(kill: Arc<Notify>) -> ConnDrop {
        ConnDrop(kill)
    }

    /// Closes the connection this request came on.
    pub fn drop_now(&self) {
        self.0.notify_one();
    }
}

/// Records per page.
pub const PAGE: usize = 100;
/// Offsets at or above this are refused.
pub const OFFSET_CEILING: usize = 10_000;
/// Largest webhook body.
pub const MAX_BODY: usize = 10 * 1024 * 1024;
/// Most records in one webhook array.
pub const MAX_BATCH: usize = 100;

type Shared = Arc<State>;
type Params = Query<HashMap<String, String>>;

/// An error answer: status, code and a message that names what is wrong.
#[derive(Debug)]
pub struct ApiError(StatusCode, &'static str, String);

impl ApiError {
    fn bad(message: String) -> Self {
        ApiError(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

/// The code and text of an [`ApiError`], kept with its answer so that [`spoken`] can say them
/// in the dialect's error body.
#[derive(Debug, Clone)]
struct ErrorWords {
    code: &'static str,
    text: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = json_response(
            self.0,
            json!({"error": self.1, "message": self.2}).to_string(),
        );
        r.extensions_mut().insert(ErrorWords {
            code: self.1,
            text: self.2,
        });
        r
    }
}

/// An answer with `status` and a body of its own type (none when the type is None).
fn rendered(status: StatusCode, (kind, body): Rendered) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    if let Some(kind) = kind {
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    }
    r
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn too_many(retry_after: u64, message: String) -> Response {
    let mut r = ApiError(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    r
}

/// `ms` (Unix epoch milliseconds) as an HTTP date in the IMF-fixdate form,
/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110, section 5.6.7).
pub fn http_date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// The emulator's router over `state`, usable without a socket (`tower::ServiceExt::oneshot`).
/// Every answer it gives carries one `Date` header, from the emulator's clock.
pub fn router(state: Shared) -> Router {
    let mut router = Router::new().route("/v2/oauth/token", post(token));
    for listing in &LISTINGS {
        router = router.route(
            listing.path,
            get(
                move |AxState(state): AxState<Shared>, Query(p): Params| async move {
                    list(listing, &p, &state)
                },
            ),
        );
    }
    router
        .route("/v2/events", get(events))
        .route("/v2/webhook", post(webhook_us))
        .route("/eu/v2/webhook", post(webhook_eu))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), gateway))
        .layer(middleware::from_fn_with_state(state.clone(), spoken))
        .layer(middleware::from_fn_with_state(state.clone(), dated))
        .with_state(state)
}

async fn not_found(req: Request) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for `{} {}`", req.method(), req.uri().path()),
    )
}

/// Stamps every answer with the emulator's clock (`advance_clock` moves it), as the service
/// stamps its own: a client reads the service's UTC day from it. It replaces any `Date` set
/// before; the server adds none of its own (see `server::serve_connection`).
async fn dated(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    if let Ok(value) = HeaderValue::from_str(&http_date(state.now_ms())) {
        response.headers_mut().insert(header::DATE, value);
    }
    response
}

/// Says the error answers in the dialect's words: the body of every error answer made as an
/// [`ApiError`] (not the webhook's validation answer, nor an echo) in the shape of
/// `error_body`, and any `Retry-After` in the form of `retry_after`.
async fn spoken(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
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

/// The answer to a bearer token refused for `why`, as the dialect's `expired_token` says.
fn refuse_token(why: Refusal, how: ExpiredToken) -> Response {
    match how {
        ExpiredToken::Status401 => ApiError(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            why.reason().into(),
        )
        .into_response(),
        ExpiredToken::Message403 => {
            ApiError(StatusCode::FORBIDDEN, "forbidden", why.sentence().into()).into_response()
        }
        ExpiredToken::WwwAuthenticate403 => {
            let mut r =
                ApiError(StatusCode::FORBIDDEN, "forbidden", "forbidden".into()).into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
            r
        }
    }
}

/// Every request passes here: statistics, api key, quota and limits, faults, latency, token.
async fn gateway(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let route = format!("{} {}", req.method(), path);
    let class = if path == "/v2/oauth/token" {
        Class::Token
    } else if req.method() == Method::POST {
        Class::Publish
    } else {
        Class::Read
    };
    let faults = state.faults();
    // Latency is added to every answer, refusals included; an admitted request holds its
    // concurrency slot while it waits.
    let latency = || async {
        if faults.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
        }
    };
    let headers = req.headers();
    let key_ok = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|k| k == state.creds.api_key);
    if !key_ok {
        latency().await;
        let r = ApiError(
            StatusCode::FORBIDDEN,
            "forbidden",
            "missing or invalid `x-api-key` header".into(),
        )
        .into_response();
        state.count(&route, "403");
        return r;
    }
    let _slot = match state.admit(class) {
        Verdict::Pass(slot) => {
            latency().await;
            slot
        }
        Verdict::Limited(retry, message) => {
            latency().await;
            state.count(&route, "429");
            return too_many(retry, message);
        }
    };
    if state.outage_due() {
        state.count(&route, "dropped");
        if req.extensions().get::<ConnDrop>().is_some() {
            // The server closes its port and this connection with the others.
            std::future::pending::<()>().await;
        }
        return StatusCode::BAD_GATEWAY.into_response();
    }
    let hostile = state.take_hostile(&path);
    if class == Class::Token {
        if let Some(h) = hostile {
            let r = misbehave(h, next, req).await;
            state.count(&route, r.status().as_str());
            return r;
        }
    }
    if class != Class::Token || faults.token_endpoint {
        match state.pick_fault() {
            Some(Fault::Drop) => {
                state.count(&route, "dropped");
                if let Some(conn) = req.extensions().get::<ConnDrop>() {
                    conn.drop_now();
                    std::future::pending::<()>().await;
                }
                // Without a connection (router tests) the closest thing is an empty 502.
                return StatusCode::BAD_GATEWAY.into_response();
            }
            Some(Fault::Error(status)) => {
                state.count(&route, &status.to_string());
                let code =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return ApiError(code, "server_error", "injected server error".into())
                    .into_response();
            }
            Some(Fault::RateLimit(retry)) => {
                state.count(&route, "429");
                return too_many(
                    retry,
                    format!("too many requests (injected rate limit); retry after {retry} s"),
                );
            }
            None => {}
        }
    }
    if class != Class::Token {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let refused = match bearer {
            None => Some(
                ApiError(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "missing `Authorization: Bearer` header".into(),
                )
                .into_response(),
            ),
            Some(token) => state
                .use_token(token.trim())
                .map(|why| refuse_token(why, state.dialect().expired_token)),
        };
        if let Some(r) = refused {
            state.count(&route, r.status().as_str());
            return r;
        }
    }
    let response = match hostile {
        Some(h) => misbehave(h, next, req).await,
        None => next.run(req).await,
    };
    state.count(&route, response.status().as_str());
    response
}

/// The answer of a hostile server (see [`Hostile`]) to `req`.
async fn misbehave(h: Hostile, next: Next, req: Request) -> Response {
    match h {
        Hostile::NoAnswer => std::future::pending().await,
        Hostile::Status(status) => {
            // The request is read first, as a server reads it: answered before its body, the
            // connection closes under the client, whose next request on it never arrives.
            let _ = to_bytes(req.into_body(), MAX_BODY).await;
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            ApiError(code, "injected", format!("injected status {status}")).into_response()
        }
        Hostile::Echo(status) => echo(status, req).await,
        Hostile::NotArray => json_response(
            StatusCode::OK,
            json!({"data": [], "message": "not the list you asked for"}).to_string(),
        ),
        Hostile::Html => {
            let mut r = Response::new(Body::from(
                "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1>\
                 <p>The proxy could not reach the service.</p></body></html>",
            ));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            r
        }
        Hostile::SlowBody => {
            // `[` at once, then a space a second, forever: a body that never ends.
            let chunks = futures_util::stream::unfold(true, |first| async move {
                if !first {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let chunk = if first { "[" } else { " " };
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(chunk)), false))
            });
            let mut r = Response::new(Body::from_stream(chunks));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Hostile::Truncated | Hostile::HugeString(_) => {
            let real = next.run(req).await;
            let status = real.status();
            let Ok(body) = to_bytes(real.into_body(), usize::MAX).await else {
                return StatusCode::BAD_GATEWAY.into_response();
            };
            let body = match h {
                Hostile::Truncated => body.slice(..body.len() / 2),
                Hostile::HugeString(size) => {
                    let text = String::from_utf8_lossy(&body);
                    let long = format!("\"title\":\"{}", "x".repeat(size));
                    bytes::Bytes::from(text.replacen("\"title\":\"", &long, 1))
                }
                _ => body,
            };
            let mut r = json_response(status, String::new());
            *r.body_mut() = Body::from(body);
            r
        }
    }
}

/// The error answer of a server that echoes the request back (see [`Hostile::Echo`]): `status`,
/// `Retry-After: 0` for a 429, and a body whose `request` holds the method, the path with its
/// query, every header and the body as text, and whose `message` says the same in plain text, so
/// that secrets appear verbatim, not only JSON-escaped.
async fn echo(status: u16, req: Request) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (parts, body) = req.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |pq| pq.as_str())
        .to_string();
    let body = match to_bytes(body, MAX_BODY).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => format!("<unreadable, or over {MAX_BODY} bytes>"),
    };
    let mut headers = serde_json::Map::new();
    let mut lines = Vec::new();
    for (name, value) in &parts.headers {
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        lines.push(format!("{name}: {text}"));
        match headers.get_mut(name.as_str()) {
            Some(Value::String(seen)) => {
                seen.push_str(", ");
                seen.push_str(&text);
            }
            _ => {
                headers.insert(name.as_str().to_string(), Value::String(text));
            }
        }
    }
    let reason = code.canonical_reason().unwrap_or("error");
    let method = parts.method.as_str();
    let message = format!(
        "{} {reason}: {method} {target}; {}; body: {body}",
        code.as_u16(),
        lines.join("; ")
    );
    let error = reason.to_ascii_lowercase().replace([' ', '-'], "_");
    let mut r = json_response(
        code,
        json!({
            "error": error,
            "message": message,
            "request": {"method": method, "path": target, "headers": headers, "body": body},
        })
        .to_string(),
    );
    if code == StatusCode::TOO_MANY_REQUESTS {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(0));
    }
    r
}

async fn token(AxState(state): AxState<Shared>, body: Body) -> Result<Response, ApiError> {
    let bytes = to_bytes(body, 64 * 1024)
        .await
        .map_err(|_| ApiError::bad("token request body too large or unreadable".into()))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad(format!("token request body is not JSON: {e}")))?;
    let field = |name: &str| -> Result<String, ApiError> {
        v.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                ApiError::bad(format!(
                    "missing or non-string field `{name}` in token request"
                ))
            })
    };
    let (audience, id, secret) = (
        field("audience")?,
        field("client_id")?,
        field("client_secret")?,
    );
    let c = &state.creds;
    if id != c.client_id || secret != c.client_secret {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "access_denied",
            "invalid client credentials".into(),
        ));
    }
    if audience != c.audience {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "access_denied",
            "invalid audience".into(),
        ));
    }
    let (token, lifetime) = state.issue_token();
    let body = state.dialect().token_answer.body(&token, lifetime);
    Ok(json_response(StatusCode::OK, body.to_string()))
}

fn offset_of(p: &HashMap<String, String>) -> Result<usize, ApiError> {
    let Some(raw) = p.get("offset") else {
        return Ok(0);
    };
    let offset: usize = raw.trim().parse().map_err(|_| {
        ApiError::bad(format!(
            "`offset` must be a non-negative integer, got `{raw}`"
        ))
    })?;
    if offset >= OFFSET_CEILING {
        return Err(ApiError::bad(format!(
            "`offset` must be below {OFFSET_CEILING}, got `{offset}`"
        )));
    }
    Ok(offset)
}

/// Checks the shape of a UUID parameter.
fn uuid_param<'a>(p: &'a HashMap<String, String>, name: &str) -> Result<Option<&'a str>, ApiError> {
    let Some(v) = p.get(name) else {
        return Ok(None);
    };
    let b = v.as_bytes();
    let ok = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    if !ok {
        return Err(ApiError::bad(format!("`{name}` must be a UUID, got `{v}`")));
    }
    Ok(Some(v.as_str()))
}

fn page_of(records: &[&Value], offset: usize) -> Response {
    let end = (offset + PAGE).min(records.len());
    let page = records.get(offset..end).unwrap_or(&[]);
    json_response(
        StatusCode::OK,
        serde_json::to_string(page).unwrap_or_else(|_| "[]".into()),
    )
}

/// A page of `listing`, narrowed by its filters.
fn list(
    listing: &Listing,
    p: &HashMap<String, String>,
    state: &State,
) -> Result<Response, ApiError> {
    let offset = offset_of(p)?;
    let mut wanted = Vec::with_capacity(listing.filters.len());
    for (param, key) in listing.filters {
        if let Some(want) = uuid_param(p, param)? {
            wanted.push((*key, want));
        }
    }
    let data = state.data();
    let records: Vec<&Value> = (listing.records)(&data)
        .into_iter()
        .filter(|r| {
            wanted.iter().all(|(key, want)| {
                r[*key]
                    .as_str()
                    .is_some_and(|v| v.eq_ignore_ascii_case(want))
            })
        })
        .collect();
    Ok(page_of(&records, offset))
}

/// Parses a startTime/endTime parameter: ISO 8601 in UTC with a trailing `Z`.
fn time_param(p: &HashMap<String, String>, name: &str) -> Result<i64, ApiError> {
    let raw = p
        .get(name)
        .ok_or_else(|| ApiError::bad(format!("missing query parameter `{name}`")))?;
    let parsed = if raw.ends_with('Z') {
        chrono::DateTime::parse_from_rfc3339(raw).ok()
    } else {
        None
    };
    parsed.map(|t| t.timestamp_millis()).ok_or_else(|| {
        ApiError::bad(format!(
            "`{name}` must be an ISO 8601 UTC timestamp such as `2026-01-05T00:00:00.000Z`, got `{raw}`"
        ))
    })
}

async fn events(AxState(state): AxState<Shared>, Query(p): Params) -> Result<Response, ApiError> {
    let start = time_param(&p, "startTime")?;
    let end = time_param(&p, "endTime")?;
    if end < start {
        return Err(ApiError::bad("`endTime` is before `startTime`".into()));
    }
    let report_id = uuid_param(&p, "reportId")?;
    let offset = offset_of(&p)?;
    let (order, bounds) = state.semantics();
    let data = state.data();
    let report = match report_id {
        None => None,
        Some(id) => {
            let r = data.report_by_id(id).ok_or_else(|| {
                ApiError(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no report `{id}`"),
                )
            })?;
            if !data.reports[r].visible {
                return Err(ApiError(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!("no access to report `{id}`"),
                ));
            }
            Some(r)
        }
    };
    let a = data.lower_bound(report, start, !bounds.start_inclusive);
    let b = data.lower_bound(report, end, bounds.end_inclusive).max(a);
    let count = b - a;
    let key =
        data.seed ^ ((a as u64) << 32) ^ (b as u64) ^ report.map_or(0, |r| (r as u64 + 1) << 60);
    let mut out = String::with_capacity(PAGE * 900);
    out.push('[');
    for (n, p) in (offset..count.min(offset + PAGE)).enumerate() {
        let i = match order {
            Order::Asc => a + p,
            Order::Desc => b - 1 - p,
            Order::Shuffled => a + crate::rng::permute(p as u64, count as u64, key) as usize,
        };
        if n > 0 {
            out.push(',');
        }
        data.render_event(data.base_event(report, i), &mut out);
    }
    out.push(']');
    if state.pick_corruption() {
        // A wrong type in one event, as a broken upstream would send it; the JSON stays valid.
        out = out.replacen(
            "\"duration_sec\":",
            "\"duration_sec\":\"n/a\",\"duration_sec_was\":",
            1,
        );
    }
    Ok(json_response(StatusCode::OK, out))
}

async fn webhook_us(AxState(state): AxState<Shared>, headers: HeaderMap, body: Body) -> Response {
    webhook(state, "us", headers, body).await
}

async fn webhook_eu(AxState(state): AxState<Shared>, headers: HeaderMap, body: Body) -> Response {
    webhook(state, "eu", headers, body).await
}

/// A webhook body: one record, or an array of them, each as the text it was sent as.
enum Records<'a> {
    One(&'a RawValue),
    Array(Vec<&'a RawValue>),
}

fn body_records(bytes: &[u8]) -> serde_json::Result<Records<'_>> {
    let array = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if array {
        serde_json::from_slice(bytes).map(Records::Array)
    } else {
        serde_json::from_slice(bytes).map(Records::One)
    }
}

/// The upsert key of a record that the fast check finds conforming to its model (its verdict
/// agrees with the detailed validator's), read by the same scan, without a tree; None leaves
/// the record to the careful path: parsed, validated in detail, keyed from its tree.
fn conforming(text: &str) -> Option<String> {
    match validate::scan::scan_with_key(text, true)? {
        (scanned, Some(key)) if scanned.conforms => Some(key),
        _ => None,
    }
}

async fn webhook(state: Shared, region: &'static str, headers: HeaderMap, body: Body) -> Response {
    let dialect = state.dialect();
    if dialect.webhook_answer == WebhookAnswer::ProxyHtml {
        // A login page in front of the service answers whatever is sent, and passes nothing on.
        return rendered(StatusCode::OK, dialect.webhook_answer.render(0, &[]).1);
    }
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json_type {
        return ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "`Content-Type` must be `application/json`".into(),
        )
        .into_response();
    }
    let Ok(bytes) = to_bytes(body, MAX_BODY).await else {
        return ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("body over {MAX_BODY} bytes"),
        )
        .into_response();
    };
    // The body's records as their texts: a tree is built only for a record the fast check does
    // not pass (see `conforming`).
    let records = match body_records(&bytes) {
        Ok(records) => records,
        Err(e) => return ApiError::bad(format!("body is not JSON: {e}")).into_response(),
    };
    let records = match records {
        Records::Array(_) if !state.webhook_arrays() => {
            return ApiError(
                StatusCode::BAD_REQUEST,
                "array_not_supported",
                "the body must be one JSON object; arrays are not accepted".into(),
            )
            .into_response()
        }
        Records::Array(items) if items.is_empty() => {
            return ApiError::bad("empty array: send at least one record".into()).into_response()
        }
        Records::Array(items) if items.len() > MAX_BATCH => {
            return ApiError::bad(format!(
                "a batch holds at most {MAX_BATCH} records, got {}",
                items.len()
            ))
            .into_response()
        }
        Records::Array(items) => items,
        Records::One(one) => vec![one],
    };
    let mut failures = Vec::new();
    let mut good = Vec::new();
    for (index, raw) in records.iter().enumerate() {
        if let Some(key) = conforming(raw.get()) {
            good.push((key, raw.get().to_owned()));
            continue;
        }
        let record: Value = match serde_json::from_str(raw.get()) {
            Ok(record) => record,
            Err(e) => return ApiError::bad(format!("body is not JSON: {e}")).into_response(),
        };
        let record = &record;
        let problems: Vec<_> = validate::validate(record)
            .into_iter()
            .filter(|p| p.severity == validate::Severity::Error)
            .collect();
        let failure = |path: &str, message: &str| Failure {
            index,
            key: validate::upsert_fields(record),
            path: path.to_string(),
            message: message.to_string(),
        };
        match (problems.is_empty(), validate::upsert_key(record)) {
            (true, Some(key)) => good.push((key, raw.get().to_owned())),
            (true, None) => failures.push(failure("", "record has no upsert key")),
            (false, _) => failures.extend(problems.iter().map(|p| failure(&p.path, &p.message))),
        }
    }
    if !failures.is_empty() && !dialect.webhook_errors.stores_valid() {
        good.clear();
    }
    let accepted = good.len();
    state.store_published(region, good);
    if failures.is_empty() {
        let first = records
            .first()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
            .as_ref()
            .and_then(validate::upsert_fields)
            .unwrap_or_default();
        let (status, body) = dialect.webhook_answer.render(accepted, &first);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        return rendered(status, body);
    }
    json_response(
        StatusCode::BAD_REQUEST,
        dialect.webhook_errors.body(&failures, accepted).to_string(),
    )
}
