//! The list endpoints (`data::LISTINGS`, one handler for all of them) and the events, paged.

use std::collections::HashMap;

use axum::extract::{Query, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::{json_response, ApiError, Params, Shared, OFFSET_CEILING, PAGE};
use crate::emulator::data::Listing;
use crate::emulator::state::{Order, State};

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
pub(super) fn list(
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

pub(super) async fn events(
    AxState(state): AxState<Shared>,
    Query(p): Params,
) -> Result<Response, ApiError> {
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
