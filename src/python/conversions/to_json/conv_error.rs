//! Why a value has no JSON form, and where it is in its record.

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::webhook::{Problem, Severity};

pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// Why a value has no JSON form, and where it is.
pub struct ConvError {
    /// Innermost first.
    pub(super) path: Vec<Seg>,
    /// What is wrong, lowercase.
    pub message: String,
    /// A KeyboardInterrupt (or another exception that is not an `Exception`) raised by Python
    /// code the conversion called: it stops everything, it is not the record's fault.
    /// (Boxed: the error travels up every level of the walk, so it is kept small.)
    pub interrupt: Option<Box<PyErr>>,
    /// Not an error: the fast walk met something for the careful walk (see [`Writer`]).
    pub(super) careful: bool,
}

impl ConvError {
    pub(super) fn new(message: String) -> Self {
        ConvError {
            path: Vec::new(),
            message,
            interrupt: None,
            careful: false,
        }
    }

    /// The fast walk gives the record to the careful walk.
    pub(super) fn careful() -> Self {
        ConvError {
            careful: true,
            ..ConvError::new(String::new())
        }
    }

    /// The error of Python code called for a value: an interrupt, or the value's problem.
    pub(super) fn python(py: Python<'_>, e: PyErr, message: String) -> Self {
        let interrupt = (!e.is_instance_of::<PyException>(py)).then(|| Box::new(e));
        ConvError {
            interrupt,
            ..ConvError::new(message)
        }
    }

    pub(super) fn at(mut self, seg: Seg) -> Self {
        self.path.push(seg);
        self
    }

    /// The path as the validator writes it: `items[3].unitPrice`.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// The error as a Python exception: its interrupt, or a ValueError of its message after
    /// `place(path)` (the path as [`path`](Self::path) writes it, maybe empty), when that is
    /// not empty.
    pub fn into_value_error(self, place: impl FnOnce(&str) -> String) -> PyErr {
        if let Some(interrupt) = self.interrupt {
            return *interrupt;
        }
        match place(&self.path()) {
            at if at.is_empty() => PyValueError::new_err(self.message),
            at => PyValueError::new_err(format!("{at}: {}", self.message)),
        }
    }

    /// The error as a validation problem of the record.
    pub fn problem(&self) -> Problem {
        Problem {
            path: self.path(),
            message: self.message.clone(),
            severity: Severity::Error,
        }
    }
}

pub(super) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}
