//! Times between Python and the core's epoch milliseconds, in one place for the binding and
//! the package (`surveillance._time` names these): any time a user passes (datetime, date,
//! pandas Timestamp, ISO-8601 string) as an aware UTC datetime or as epoch ms, and epoch ms as
//! an aware UTC datetime. Only the standard library's `datetime` is used, whatever the abi3
//! limited API leaves out.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PySlice, PyString};

use crate::text::thousands;

/// The standard library's time classes and the epoch, looked up once per interpreter.
struct Classes {
    datetime: Py<PyAny>,
    date: Py<PyAny>,
    timedelta: Py<PyAny>,
    utc: Py<PyAny>,
    /// 1970-01-01T00:00:00+00:00.
    epoch: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || {
        let module = py.import("datetime")?;
        let datetime = module.getattr("datetime")?;
        let utc = module.getattr("timezone")?.getattr("utc")?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("tzinfo", &utc)?;
        let epoch = datetime.call((1970, 1, 1), Some(&kwargs))?;
        Ok(Classes {
            datetime: datetime.unbind(),
            date: module.getattr("date")?.unbind(),
            timedelta: module.getattr("timedelta")?.unbind(),
            utc: utc.unbind(),
            epoch: epoch.unbind(),
        })
    })
}

/// Epoch milliseconds (any Python int) as an aware UTC datetime: `epoch + timedelta(ms)`.
pub fn from_ms_value<'py>(ms: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = ms.py();
    let c = classes(py)?;
    // timedelta's fourth positional argument is its milliseconds.
    let delta = c.timedelta.bind(py).call1((0, 0, 0, ms))?;
    c.epoch.bind(py).add(delta)
}

/// Epoch milliseconds as an aware UTC datetime.
pub fn utc(py: Python<'_>, ms: i64) -> PyResult<Bound<'_, PyAny>> {
    let c = classes(py)?;
    let delta = c.timedelta.bind(py).call1((0, 0, 0, ms))?;
    c.epoch.bind(py).add(delta)
}

/// Longest a value is shown in a message, as `surveillance._check.SHOWN`.
const SHOWN: usize = 60;

/// A string as `surveillance._check.shown` shows it: its repr, a long one cut with its length.
fn shown(value: &Bound<'_, PyString>) -> PyResult<String> {
    let len = value.len()?;
    let full = value.repr()?.to_string();
    if len <= SHOWN - 10 {
        return Ok(if full.chars().count() <= SHOWN {
            full
        } else {
            full.chars().take(SHOWN - 1).chain(['…']).collect()
        });
    }
    let head = value
        .get_item(PySlice::new(value.py(), 0, (SHOWN - 10) as isize, 1))?
        .repr()?
        .to_string();
    let head = &head[..head.len() - 1];
    let quote = full.chars().last().unwrap_or('\'');
    Ok(format!(
        "{head}…{quote} ({} characters)",
        thousands(len as u64)
    ))
}

/// `value` (a datetime, date, pandas Timestamp or ISO-8601 string) as an aware UTC datetime;
/// a naive one is taken as UTC. `name` is the argument's, for the error.
pub fn to_datetime<'py>(value: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    let c = classes(py)?;
    let kind = value.get_type().name()?;
    if kind == "NaTType" || kind == "NAType" {
        return Err(PyValueError::new_err(format!(
            "`{name}` is a missing time ({}): give a time",
            value.repr()?
        )));
    }
    let datetime = c.datetime.bind(py);
    let dt = if value.is_instance(datetime)? {
        // pandas.Timestamp is a datetime subclass
        value.clone()
    } else if value.is_instance(c.date.bind(py))? {
        datetime.call1((
            value.getattr(intern!(py, "year"))?,
            value.getattr(intern!(py, "month"))?,
            value.getattr(intern!(py, "day"))?,
        ))?
    } else if let Ok(text) = value.cast::<PyString>() {
        let mut stripped = text
            .call_method0(intern!(py, "strip"))?
            .cast_into::<PyString>()?;
        let s = stripped.to_cow()?;
        if s.ends_with(['Z', 'z']) {
            let iso = format!("{}+00:00", &s[..s.len() - 1]);
            stripped = PyString::new(py, &iso);
        }
        match datetime.call_method1(intern!(py, "fromisoformat"), (stripped,)) {
            Ok(dt) => dt,
            Err(e) if e.is_instance_of::<PyValueError>(py) => {
                return Err(PyValueError::new_err(format!(
                    "`{name}` must be an ISO-8601 timestamp such as `2026-01-05T09:00:00Z`, \
                     got {}",
                    shown(text)?
                )))
            }
            Err(e) => return Err(e),
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "`{name}` must be a datetime, date, pandas Timestamp or ISO-8601 string, got {kind}"
        )));
    };
    let utc = c.utc.bind(py);
    let tz = dt.getattr(intern!(py, "tzinfo"))?;
    let dt = if tz.is_none() || tz.call_method1(intern!(py, "utcoffset"), (&dt,))?.is_none() {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item(intern!(py, "tzinfo"), utc)?;
        dt.call_method(intern!(py, "replace"), (), Some(&kwargs))?
    } else {
        dt
    };
    match dt.call_method1(intern!(py, "astimezone"), (utc,)) {
        Ok(dt) => Ok(dt),
        // the year 1 or 9999 pushed past by an offset
        Err(e)
            if e.is_instance_of::<PyOverflowError>(py) || e.is_instance_of::<PyValueError>(py) =>
        {
            Err(PyValueError::new_err(format!(
                "`{name}` is out of the range of dates ({}): {}",
                value.repr()?,
                e.value(py).str()?
            )))
        }
        Err(e) => Err(e),
    }
}

/// `value` (any time [`to_datetime`] reads) as Unix epoch milliseconds, sub-millisecond parts
/// truncated.
pub fn to_ms(value: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    let py = value.py();
    let c = classes(py)?;
    // An aware UTC datetime (what the package hands out) is one already: no conversion.
    let utc = value.get_type().is(c.datetime.bind(py))
        && value.getattr(intern!(py, "tzinfo"))?.is(c.utc.bind(py));
    let dt = if utc {
        value.clone()
    } else {
        to_datetime(value, name)?
    };
    let delta = dt.sub(c.epoch.bind(py))?;
    let part = |attr: &Bound<'_, PyString>| -> PyResult<i64> { delta.getattr(attr)?.extract() };
    let days = part(intern!(py, "days"))?;
    let seconds = part(intern!(py, "seconds"))?;
    let micros = part(intern!(py, "microseconds"))?;
    Ok((days * 86_400 + seconds) * 1000 + micros.div_euclid(1000))
}

/// Returns ``value`` (a datetime, date, pandas Timestamp or ISO-8601 string) as an aware UTC
/// datetime; naive values are taken as UTC. ``name`` names the argument in errors.
///
/// Raises:
///     ValueError: a string that is not ISO 8601, a missing time (NaT, NA), or a time past
///         the calendar's range once in UTC.
///     TypeError: anything else.
#[pyfunction(name = "to_datetime")]
#[pyo3(signature = (value, name="time"))]
pub fn py_to_datetime<'py>(value: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    to_datetime(value, name)
}

/// Returns ``value`` (as :func:`to_datetime` reads it) as Unix epoch milliseconds
/// (sub-millisecond parts are truncated).
///
/// Raises:
///     ValueError: as :func:`to_datetime`.
///     TypeError: as :func:`to_datetime`.
#[pyfunction(name = "to_ms")]
#[pyo3(signature = (value, name="time"))]
pub fn py_to_ms(value: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    to_ms(value, name)
}

/// Returns epoch milliseconds as an aware UTC datetime.
///
/// Raises:
///     OverflowError: past the calendar's range.
#[pyfunction(name = "from_ms")]
pub fn py_from_ms<'py>(ms: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    from_ms_value(ms)
}

/// Whether `value` is a `datetime.datetime` (a pandas Timestamp included).
pub fn is_datetime(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    value.is_instance(classes(value.py())?.datetime.bind(value.py()))
}

/// `datetime.timezone.utc`.
pub fn utc_zone(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    Ok(classes(py)?.utc.bind(py))
}
