//! The emulator's HTTP surface: `router(state)` with the endpoints of API.md, and the error
//! answers every part of it gives. The gateway every request passes first (api key, limits,
//! faults, latency, bearer token) lives in `gateway`, a hostile server's answers in `hostile`,
//! the dialect error answers are spoken in and the `Date` every answer carries from the
//! emulator's clock in `spoken`; the endpoints in `token`, `lists` (the lists of
//! `data::LISTINGS`, one handler for all of them, and the events) and `webhook`.

mod gateway;
mod hostile;
mod lists;
mod spoken;
mod token;
mod webhook;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, Request, State as AxState};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use tokio::sync::Notify;

use super::data::LISTINGS;
use super::dialect::Rendered;
use super::state::State;

use gateway::gateway;
use lists::{events, list};
use spoken::{dated, spoken};
use token::token;
use webhook::{webhook_eu, webhook_us};

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
/// Every answer it gives carries one `Date` header, from the emulator's clock, and an
/// `x-request-id`.
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
    let service = router
        .route("/v2/events", get(events))
        .route("/v2/webhook", post(webhook_us))
        .route("/eu/v2/webhook", post(webhook_eu))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), gateway))
        .layer(middleware::from_fn_with_state(state.clone(), spoken))
        .layer(middleware::from_fn_with_state(state.clone(), dated))
        .with_state(state.clone());
    // The test's window on an emulator in another process: outside the gateway, so neither
    // counted nor limited; it tells only what `stats()` tells, and no credential.
    Router::new()
        .route(
            "/_emulator/stats",
            get(|AxState(state): AxState<Shared>| async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    state.introspection_json().to_string(),
                )
            }),
        )
        .with_state(state)
        .merge(service)
}

async fn not_found(req: Request) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for `{} {}`", req.method(), req.uri().path()),
    )
}
