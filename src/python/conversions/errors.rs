//! The one mapping from the core's errors to the Python exception hierarchy, which is written in
//! `surveillance/errors.py` (so the classes carry attributes and docstrings, and pickle).

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyErr, Python};

use crate::client::Error;
use crate::wording::{Part, Wording};

pyo3::import_exception!(surveillance.errors, SurveillanceError);
pyo3::import_exception!(surveillance.errors, ConfigError);
pyo3::import_exception!(surveillance.errors, AuthError);
pyo3::import_exception!(surveillance.errors, ApiError);
pyo3::import_exception!(surveillance.errors, BadRequestError);
pyo3::import_exception!(surveillance.errors, NotFoundError);
pyo3::import_exception!(surveillance.errors, RateLimitError);
pyo3::import_exception!(surveillance.errors, ServerError);
pyo3::import_exception!(surveillance.errors, TransportError);
pyo3::import_exception!(surveillance.errors, DenseWindowError);
pyo3::import_exception!(surveillance.errors, QuotaExhaustedError);
pyo3::import_exception!(surveillance.errors, ValidationError);

/// Converts a core error into its Python exception, scrubbed of every secret the process
/// knows (whatever part of the core made it, and whatever server text it quotes).
pub fn to_py(e: Error) -> PyErr {
    let e = e.scrubbed();
    let words = match &e {
        Error::Config(w) | Error::Argument(w) | Error::Quota { message: w, .. } => Some(w.clone()),
        _ => None,
    };
    let err = exception(e);
    if let Some(words) = words.filter(|w| w.parts().iter().any(|p| matches!(p, Part::Name { .. })))
    {
        Python::attach(|py| {
            // An error whose wording cannot be attached still says what it says.
            if let Ok(wording) = wording(py, &words) {
                let _ = err.value(py).setattr("wording", wording);
            }
        });
    }
    err
}

/// `words` as a `surveillance.errors.Wording`: a `str.format` template (a `{}` for each name,
/// literal braces doubled) and the `Name` of each, so that each surface names them in its
/// own words.
fn wording<'py>(py: Python<'py>, words: &Wording) -> PyResult<Bound<'py, PyAny>> {
    let errors = py.import("surveillance.errors")?;
    let name = errors.getattr("Name")?;
    let mut template = String::new();
    let mut names = Vec::new();
    for part in words.parts() {
        match part {
            Part::Text(t) => template.push_str(&t.replace('{', "{{").replace('}', "}}")),
            Part::Name { key, said } => {
                template.push_str("{}");
                names.push(name.call1((key, said))?);
            }
        }
    }
    errors
        .getattr("Wording")?
        .call1((template, PyTuple::new(py, names)?))
}

/// The Python exception of a core error (scrubbed), without its wording.
fn exception(e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::Config(_) => ConfigError::new_err(message),
        Error::Argument(_) => PyValueError::new_err(message),
        Error::Auth { .. } => AuthError::new_err(message),
        Error::Status {
            status, body, url, ..
        } => {
            let args = (message, status, body, url);
            match status {
                400 => BadRequestError::new_err(args),
                404 => NotFoundError::new_err(args),
                429 => RateLimitError::new_err(args),
                500..=599 => ServerError::new_err(args),
                _ => ApiError::new_err(args),
            }
        }
        Error::Transport(_) | Error::Timeout(_) | Error::Closed => TransportError::new_err(message),
        Error::Decode { url, .. } => ApiError::new_err((message, 200u16, String::new(), url)),
        Error::Data(_) => ApiError::new_err((message, 200u16, String::new(), String::new())),
        Error::Io(_) => PyOSError::new_err(message),
        Error::Ceiling { .. } => SurveillanceError::new_err(message),
        Error::DenseWindow { timestamp } => DenseWindowError::new_err((message, timestamp)),
        Error::Quota {
            used,
            limit,
            resets_at_ms,
            ..
        } => QuotaExhaustedError::new_err((message, resets_at_ms, used, limit)),
        Error::Validation { problems, .. } => {
            // As the dicts `validate` and a report's failures give: `ValidationError` makes
            // them `Problem`s.
            let problems =
                Python::attach(|py| pythonize::pythonize(py, &problems).map(|list| list.unbind()));
            match problems {
                Ok(list) => ValidationError::new_err((message, list)),
                Err(e) => e.into(),
            }
        }
    }
}

/// A failure of the machinery itself (a task that panicked or was cancelled).
pub fn internal(what: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("internal error: {what}"))
}
