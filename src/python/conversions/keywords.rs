//! Keyword arguments taken by name. The native constructors (`Client`, `Emulator`) and the two
//! publish calls receive, as keywords, what the Python layer documents and checks once, so the
//! list of names is written there and where the binding builds the core's settings, not again
//! in a signature and a stub. Limits cross the same way, by their field names.

use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyOverflowError, PyTypeError as TypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::limits::Limits;

/// The keyword arguments of one call, taken one by one; [`Keywords::done`] refuses any left.
pub struct Keywords<'py> {
    call: &'static str,
    given: Option<Bound<'py, PyDict>>,
}

impl<'py> Keywords<'py> {
    /// The keywords `given` to `call` (the name errors show).
    pub fn new(call: &'static str, given: Option<Bound<'py, PyDict>>) -> Self {
        Keywords { call, given }
    }

    /// The argument `name`, None when it is absent or None.
    pub fn get<T: FromPyObjectOwned<'py>>(&self, name: &str) -> PyResult<Option<T>> {
        let Some(given) = &self.given else {
            return Ok(None);
        };
        let Some(value) = given.get_item(name)? else {
            return Ok(None);
        };
        given.del_item(name)?;
        if value.is_none() {
            return Ok(None);
        }
        value.extract::<T>().map(Some).map_err(|e| {
            let e: PyErr = e.into();
            TypeError::new_err(format!("{}(): `{name}`: {e}", self.call))
        })
    }

    /// The count `name` (a Python int of any size), checked against `bounds` by the core as
    /// given, so that a negative or huge number gets the core's words, never an overflow;
    /// None when it is absent or None.
    pub fn count(&self, name: &str, bounds: (u64, u64)) -> PyResult<Option<u64>> {
        let Some(value) = self.get::<Bound<'py, PyAny>>(name)? else {
            return Ok(None);
        };
        let v = match value.extract::<i128>() {
            Ok(v) => v,
            // An int past an i128's range is out of every count's.
            Err(e) if e.is_instance_of::<PyOverflowError>(value.py()) => {
                let digits = value.str()?.to_string();
                let shown = match digits.get(..20) {
                    Some(head) if digits.len() > 24 => {
                        format!("{head}… ({} digits)", digits.trim_start_matches('-').len())
                    }
                    _ => digits,
                };
                let words = crate::limits::count_out_of_range(name, bounds, &shown);
                return Err(config_error(words));
            }
            Err(e) => {
                return Err(TypeError::new_err(format!(
                    "{}(): `{name}`: {e}",
                    self.call
                )));
            }
        };
        crate::client::config::count(name, v, bounds)
            .map(Some)
            .map_err(super::errors::to_py)
    }

    /// The argument `name`, which must be given.
    pub fn need<T: FromPyObjectOwned<'py>>(&self, name: &str) -> PyResult<T> {
        self.get(name)?.ok_or_else(|| {
            TypeError::new_err(format!("{}() needs the argument `{name}`", self.call))
        })
    }

    /// The end of the arguments: one that was not taken is a name the call does not know.
    pub fn done(self) -> PyResult<()> {
        match self.given.as_ref().and_then(|g| g.keys().iter().next()) {
            Some(name) => Err(TypeError::new_err(format!(
                "{}() got an unexpected keyword argument `{name}`",
                self.call
            ))),
            None => Ok(()),
        }
    }
}

/// Limits given by their field names (`dataclasses.asdict` of a `surveillance.Limits`, or the
/// keywords of `Emulator.set_limits`); an absent or None field lifts that limit. Each is
/// checked against the core's bounds (`crate::limits`) as given, so that a negative or huge
/// number is refused in the core's words, never as an overflow.
pub fn limits(given: Keywords<'_>) -> PyResult<Limits> {
    let rate = |name: &str| -> PyResult<Option<f64>> {
        let v: Option<f64> = given.get(name)?;
        if let Some(v) = v {
            crate::limits::check_rate(name, v).map_err(config_error)?;
        }
        Ok(v)
    };
    let (concurrency, daily) = (crate::limits::CONCURRENCY, crate::limits::DAILY);
    let limits = Limits {
        read_per_second: rate("read_per_second")?,
        read_concurrency: given
            .count("read_concurrency", concurrency)?
            .map(|v| v as usize),
        publish_per_second: rate("publish_per_second")?,
        publish_concurrency: given
            .count("publish_concurrency", concurrency)?
            .map(|v| v as usize),
        daily_requests: given.count("daily_requests", daily)?,
    };
    given.done()?;
    Ok(limits)
}

/// The core's words on a setting, as `surveillance.ConfigError`.
fn config_error(message: crate::wording::Wording) -> PyErr {
    super::errors::to_py(crate::client::Error::config(message))
}

/// Checks limits given by their field names against the core's bounds, for
/// `surveillance.Limits`, which checks only their types.
#[pyfunction]
#[pyo3(signature = (**limits))]
pub fn check_limits(limits: Option<Bound<'_, PyDict>>) -> PyResult<()> {
    self::limits(Keywords::new("Limits", limits)).map(|_| ())
}

/// Limits as a dict of their field names, as [`limits`] takes them.
pub fn limits_dict<'py>(py: Python<'py>, l: &Limits) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("read_per_second", l.read_per_second)?;
    d.set_item("read_concurrency", l.read_concurrency)?;
    d.set_item("publish_per_second", l.publish_per_second)?;
    d.set_item("publish_concurrency", l.publish_concurrency)?;
    d.set_item("daily_requests", l.daily_requests)?;
    Ok(d)
}
