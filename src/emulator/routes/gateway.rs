//! The gateway every request passes first: statistics, api key, quota and limits, faults,
//! latency, hostile answers, bearer token.

use std::time::Duration;

use axum::extract::{Request, State as AxState};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::hostile::misbehave;
use super::{too_many, ApiError, ConnDrop, Shared};
use crate::emulator::dialect::ExpiredToken;
use crate::emulator::state::{Fault, Refusal, RequestClass, Verdict};

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
pub(super) async fn gateway(AxState(state): AxState<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let route = format!("{} {}", req.method(), path);
    let class = if path == "/v2/oauth/token" {
        RequestClass::Token
    } else if req.method() == Method::POST {
        RequestClass::Publish
    } else {
        RequestClass::Read
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
    if let Some(tp) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        state.trace(&route, tp);
    }
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
    if class == RequestClass::Token {
        if let Some(h) = hostile {
            let r = misbehave(h, next, req).await;
            state.count(&route, r.status().as_str());
            return r;
        }
    }
    if class != RequestClass::Token || faults.token_endpoint {
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
    if class != RequestClass::Token {
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
