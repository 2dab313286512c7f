//! The client's settings as the binding receives them: the keywords of `surveillance.Client`
//! turned into the core's [`Settings`] (their types checked there, their values by the core),
//! and the resolved configuration back as a dict.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::{config, Config, Secret, Settings};
use crate::python::conversions::errors;
use crate::python::conversions::keywords::{self, Keywords};

/// A duration setting, checked by the core (see `config::seconds`).
fn seconds(name: &str, value: f64, positive: bool, max: f64) -> PyResult<Duration> {
    config::seconds(name, value, positive, max).map_err(errors::to_py)
}

/// The configuration of the keywords `given` (`Config::resolve`; durations and counts as
/// given, before they become a `Duration` or an unsigned number).
pub fn from_keywords(given: Keywords<'_>) -> PyResult<Config> {
    let timeout = given
        .get("timeout")?
        .map(|t| seconds("timeout", t, true, config::MAX_TIMEOUT_SECS))
        .transpose()?;
    let max_wait = given
        .get("max_wait")?
        .map(|t| seconds("max_wait", t, false, config::MAX_WAIT_SECS))
        .transpose()?;
    let max_outage = given
        .get("max_outage")?
        .map(|t| seconds("max_outage", t, false, config::MAX_OUTAGE_SECS))
        .transpose()?;
    let settle = given
        .get("settle")?
        .map(|t| seconds("settle", t, false, config::MAX_SETTLE_SECS))
        .transpose()?;
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
        max_body_bytes: given
            .count("max_body_bytes", config::BODY_BYTES)?
            .map(|v| v as usize),
        max_wait,
        max_outage,
        cache: given.get("cache")?,
        settle,
        cache_max_bytes: given.count("cache_max_bytes", config::CACHE_BYTES)?,
    };
    given.done()?;
    Config::from_settings(settings).map_err(errors::to_py)
}

/// The resolved configuration, secrets included (for pickling; never printed), as the
/// keywords that [`from_keywords`] takes.
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
