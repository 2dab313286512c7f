//! The token endpoint.

use axum::body::{to_bytes, Body};
use axum::extract::State as AxState;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{json_response, ApiError, Shared};

pub(super) async fn token(
    AxState(state): AxState<Shared>,
    body: Body,
) -> Result<Response, ApiError> {
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
