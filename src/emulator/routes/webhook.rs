//! The webhook: records checked against their models and stored, upserted by key.

use axum::body::{to_bytes, Body};
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::value::RawValue;
use serde_json::Value;

use super::{json_response, rendered, ApiError, Shared, MAX_BATCH, MAX_BODY};
use crate::emulator::dialect::{RecordProblem, WebhookAnswer};
use crate::webhook as validate;

pub(super) async fn webhook_us(
    AxState(state): AxState<Shared>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    webhook(state, "us", headers, body).await
}

pub(super) async fn webhook_eu(
    AxState(state): AxState<Shared>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    webhook(state, "eu", headers, body).await
}

/// A webhook body: one record, or an array of them, each as the text it was sent as.
enum WebhookBody<'a> {
    One(&'a RawValue),
    Array(Vec<&'a RawValue>),
}

fn body_records(bytes: &[u8]) -> serde_json::Result<WebhookBody<'_>> {
    let array = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if array {
        serde_json::from_slice(bytes).map(WebhookBody::Array)
    } else {
        serde_json::from_slice(bytes).map(WebhookBody::One)
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
        WebhookBody::Array(_) if !state.webhook_arrays() => {
            return ApiError(
                StatusCode::BAD_REQUEST,
                "array_not_supported",
                "the body must be one JSON object; arrays are not accepted".into(),
            )
            .into_response()
        }
        WebhookBody::Array(items) if items.is_empty() => {
            return ApiError::bad("empty array: send at least one record".into()).into_response()
        }
        WebhookBody::Array(items) if items.len() > MAX_BATCH => {
            return ApiError::bad(format!(
                "a batch holds at most {MAX_BATCH} records, got {}",
                items.len()
            ))
            .into_response()
        }
        WebhookBody::Array(items) => items,
        WebhookBody::One(one) => vec![one],
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
        let failure = |path: &str, message: &str| RecordProblem {
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
