//! A hostile server's answers, or a broken proxy's in front of one (see [`Hostile`]).

use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{json_response, ApiError, MAX_BODY};
use crate::emulator::state::Hostile;

/// The answer of a hostile server (see [`Hostile`]) to `req`.
pub(super) async fn misbehave(h: Hostile, next: Next, req: Request) -> Response {
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
