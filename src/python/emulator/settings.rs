//! The emulator's settings as the binding receives them: keywords and names turned into the
//! emulator's own types (its data, faults, dialect, hostile answers, events semantics), each
//! name the emulator does not know refused in words that list the ones it does.

use std::path::PathBuf;

use chrono::NaiveDate;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyTuple};

use crate::emulator::dialect::{
    ErrorBody, ExpiredToken, RetryAfter, TokenAnswer, WebhookAnswer, WebhookErrors,
};
use crate::emulator::{Bounds, DataConfig, Dialect, Faults, Hostile, HostileRule, Order};
use crate::python::conversions::keywords::Keywords;

/// What a new emulator starts with (the settings of `surveillance.Emulator`).
pub struct Start {
    pub data: DataConfig,
    pub latency_ms: u64,
    pub port: u16,
    pub tls: bool,
}

/// The settings of `surveillance.Emulator`, as keywords (checked there), the start day as
/// `YYYY-MM-DD`; and the directory of its clients' quota ledgers (`quota_dir`).
pub fn start(given: Keywords<'_>) -> PyResult<(Start, Option<PathBuf>)> {
    let start: String = given.need("start")?;
    let data = DataConfig {
        seed: given.need("seed")?,
        sites: given.need("sites")?,
        days: given.need("days")?,
        events_per_day: given.need("events_per_day")?,
        start: NaiveDate::parse_from_str(&start, "%Y-%m-%d").map_err(|_| {
            PyValueError::new_err(format!(
                "`start` must be a date like `2026-01-05`, got `{start}`"
            ))
        })?,
    };
    let start = Start {
        data,
        latency_ms: given.need("latency_ms")?,
        port: given.need("port")?,
        tls: given.need("tls")?,
    };
    let quota_dir = given.get("quota_dir")?;
    given.done()?;
    Ok((start, quota_dir))
}

/// The defaults of the emulator's data, by the names of `surveillance.Emulator`'s settings.
pub fn data_defaults(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let data = DataConfig::default();
    let d = PyDict::new(py);
    d.set_item("seed", data.seed)?;
    d.set_item("sites", data.sites)?;
    d.set_item("days", data.days)?;
    d.set_item("events_per_day", data.events_per_day)?;
    d.set_item("start", data.start.format("%Y-%m-%d").to_string())?;
    Ok(d.unbind())
}

/// A hostile answer for the next `count` requests whose path starts with `path` (all, when
/// None), by the name of its `mode`; None lifts it.
pub fn hostile(
    mode: Option<&str>,
    path: &str,
    count: Option<u64>,
    size: usize,
    status: u16,
) -> PyResult<Option<HostileRule>> {
    let Some(name) = mode else { return Ok(None) };
    let mode = Hostile::parse(name, size, status).ok_or_else(|| {
        PyValueError::new_err(format!(
            "`mode` must be one of `truncated`, `not_array`, `html`, `huge_string`, \
             `slow_body`, `no_answer`, `status`, `echo`, got `{name}`"
        ))
    })?;
    Ok(Some(HostileRule {
        mode,
        path: path.to_string(),
        remaining: count,
    }))
}

/// The injected faults, given by name (each one left out is none); their ranges are checked
/// once, by `surveillance.Emulator.set_faults`.
pub fn faults(given: Keywords<'_>) -> PyResult<Faults> {
    let faults = Faults {
        error_rate: given.get("error_rate")?.unwrap_or(0.0),
        rate_limit_rate: given.get("rate_limit_rate")?.unwrap_or(0.0),
        drop_rate: given.get("drop_rate")?.unwrap_or(0.0),
        latency_ms: given.get("latency_ms")?.unwrap_or(0),
        retry_after: given.get("retry_after")?.unwrap_or(0),
        corrupt_rate: given.get("corrupt_rate")?.unwrap_or(0.0),
        token_endpoint: given.get("token_endpoint")?.unwrap_or(false),
    };
    given.done()?;
    Ok(faults)
}

/// Each dialect setting and its values, the default first: a tuple of names, or for
/// `token_requests` `(None, int)`.
pub fn dialects(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for (setting, names) in Dialect::CHOICES {
        d.set_item(setting, PyTuple::new(py, names)?)?;
    }
    let counted = [py.None().into_bound(py), py.get_type::<PyInt>().into_any()];
    d.set_item("token_requests", PyTuple::new(py, counted)?)?;
    Ok(d.unbind())
}

/// The dialect, given by setting name (each one left out is its default). Values are checked
/// by `surveillance.Emulator.set_dialect`; a name is still refused here if unknown, never
/// taken for the default.
pub fn dialect(given: Keywords<'_>) -> PyResult<Dialect> {
    let dialect = Dialect {
        webhook_answer: choice(&given, "webhook_answer", WebhookAnswer::parse)?,
        webhook_errors: choice(&given, "webhook_errors", WebhookErrors::parse)?,
        error_body: choice(&given, "error_body", ErrorBody::parse)?,
        retry_after: choice(&given, "retry_after", RetryAfter::parse)?,
        token_answer: choice(&given, "token_answer", TokenAnswer::parse)?,
        expired_token: choice(&given, "expired_token", ExpiredToken::parse)?,
        token_requests: given.get("token_requests")?,
    };
    given.done()?;
    if dialect.token_requests == Some(0) {
        return Err(PyValueError::new_err(
            "`token_requests` must be at least 1, or None",
        ));
    }
    Ok(dialect)
}

/// The dialect setting `name` given by its value's name (absent or None: its default).
fn choice<T: Default>(
    given: &Keywords<'_>,
    name: &str,
    parse: fn(&str) -> Option<T>,
) -> PyResult<T> {
    let Some(value) = given.get::<String>(name)? else {
        return Ok(T::default());
    };
    parse(&value).ok_or_else(|| {
        let names = Dialect::CHOICES
            .iter()
            .find(|(setting, _)| *setting == name)
            .map_or(&[][..], |(_, names)| names);
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        PyValueError::new_err(format!(
            "`{name}` must be one of {}, got `{value}`",
            names.join(", ")
        ))
    })
}

/// The order and bound inclusivity of the events endpoint, by their names.
pub fn semantics(order: &str, bounds: &str) -> PyResult<(Order, Bounds)> {
    let o = Order::parse(order).ok_or_else(|| {
        PyValueError::new_err(format!(
            "`order` must be `asc`, `desc` or `shuffled`, got `{order}`"
        ))
    })?;
    let b = Bounds::parse(bounds).ok_or_else(|| {
        PyValueError::new_err(format!(
            "`bounds` must be `[)`, `[]`, `()` or `(]`, got `{bounds}`"
        ))
    })?;
    Ok((o, b))
}

/// A move of the emulator's clock, in seconds: finite, at most 1e11 either way.
pub fn clock_move(seconds: f64) -> PyResult<f64> {
    if !(seconds.is_finite() && seconds.abs() <= 1e11) {
        return Err(PyValueError::new_err(format!(
            "`seconds` must be a finite number of seconds (at most 1e11 either way), got `{seconds}`"
        )));
    }
    Ok(seconds)
}
