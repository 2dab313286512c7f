//! The one mapping from the core's errors to the Python exception hierarchy, which is written in
//! `surveillance/errors.py` (so the classes carry attributes and docstrings, and pickle).

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::{PyErr, Python};

use crate::client::Error;

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
