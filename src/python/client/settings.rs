//! The client's settings as the binding receives them: the keywords of `surveillance.Client`
//! turned into the core's [`Settings`] (their types checked there, their values by the core),
//! and the resolved configuration back as a dict.

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::{config, Config, Secret, Settings};
use crate::python::conversions::errors;
use crate::python::conversions::keywords::{self, Keywords};

/// The duration setting `name` of `value` seconds, checked by the core (see
/// `config::seconds`): `timeout` above 0, the others from 0, each up to its bound.
fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    let (positive, max) = match name {
        "timeout" => (true, config::MAX_TIMEOUT_SECS),
        "max_wait" => (false, config::MAX_WAIT_SECS),
        "max_outage" => (false, config::MAX_OUTAGE_SECS),
        "settle" => (false, config::MAX_SETTLE_SECS),
        _ => {
            return Err(PyValueError::new_err(format!(
                "`{name}` is not a duration setting (timeout, max_wait, max_outage, settle)"
            )))
        }
    };
    config::seconds(name, value, positive, max).map_err(errors::to_py)
}

/// Checks the duration setting `name` of `value` seconds against the core's bounds, as
/// `surveillance.Client` does, for the settings read from the config file and the variables.
#[pyfunction]
pub fn check_seconds(name: &str, value: f64) -> PyResult<()> {
    seconds(name, value).map(|_| ())
}

/// The configuration of the keywords `given` (`Config::resolve`; durations and counts as
/// given, before they become a `Duration` or an unsigned number).
pub fn from_keywords(given: Keywords<'_>) -> PyResult<Config> {
    let duration = |name: &str| -> PyResult<Option<Duration>> {
        given.get(name)?.map(|t| seconds(name, t)).transpose()
    };
    let timeout = duration("timeout")?;
    let max_wait = duration("max_wait")?;
    let max_outage = duration("max_outage")?;
    let settle = duration("settle")?;
    let limits = given
        .get::<Bound<'_, PyDict>>("limits")?
        .map(|d| keywords::limits(Keywords::new("Limits", Some(d))))
        .transpose()?;
    let settings = Settings {
        api_key: given.get::<String>("api_key")?.map(Secret::new),
        client_id: given.get("client_id")?,
        client_secret: given.get::<String>("client_secret")?.map(Secret::new),
        region: given.get("region")?,
        base_url: given.get("base_url")?,
        eu_base_url: given.get("eu_base_url")?,
        audience: given.get("audience")?,
        timeout,
        max_retries: given
            .count("max_retries", config::RETRIES)?
            .map(|v| v as u32),
        limits,
        ca_bundle: given.get("ca_bundle")?,
        trust_env: given.get("trust_env")?,
        trace_context: given.get("trace_context")?,
        max_body_bytes: given
            .count("max_body_bytes", config::BODY_BYTES)?
            .map(|v| v as usize),
        max_wait,
        max_outage,
        cache: given.get("cache")?,
        settle,
        cache_max_bytes: given.count("cache_max_bytes", config::CACHE_BYTES)?,
        quota_dir: given.get("quota_dir")?,
    };
    given.done()?;
    Config::from_settings(settings).map_err(errors::to_py)
}

/// The resolved configuration, secrets included (for pickling; never printed), as the
/// keywords that [`from_keywords`] takes; but `quota_dir`, which a worker reads from its own
/// environment (a ledger per machine).
pub fn to_keywords<'py>(py: Python<'py>, c: &Config) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("api_key", c.api_key.expose())?;
    d.set_item("client_id", &c.client_id)?;
    d.set_item("client_secret", c.client_secret.expose())?;
    d.set_item("region", c.region.as_str())?;
    d.set_item("base_url", c.base_url.as_str())?;
    d.set_item("eu_base_url", c.eu_base_url.as_ref().map(|u| u.to_string()))?;
    d.set_item("audience", &c.audience)?;
    d.set_item("timeout", c.timeout.as_secs_f64())?;
    d.set_item("max_retries", c.max_retries)?;
    d.set_item("limits", keywords::limits_dict(py, &c.limits)?)?;
    d.set_item(
        "ca_bundle",
        c.ca_bundle.as_ref().map(|p| p.display().to_string()),
    )?;
    d.set_item("trust_env", c.trust_env)?;
    d.set_item("trace_context", c.trace_context)?;
    d.set_item("max_body_bytes", c.max_body_bytes)?;
    d.set_item("max_wait", c.max_wait.as_secs_f64())?;
    d.set_item("max_outage", c.max_outage.as_secs_f64())?;
    // The directory resolved (or off), so that a worker's client uses the same one.
    match &c.cache_dir {
        Some(dir) => d.set_item("cache", dir.display().to_string())?,
        None => d.set_item("cache", false)?,
    }
    d.set_item("settle", c.settle_ms as f64 / 1000.0)?;
    d.set_item("cache_max_bytes", c.cache_max_bytes)?;
    Ok(d)
}
