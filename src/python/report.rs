//! Publishing's results as Python values, converted in one place for both publish bindings and
//! `validate`: a report as the dict `surveillance.PublishReport` is built from, its failures
//! with their typed `kind`, problems as dicts, and the exception that comes with a report.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::errors;
use crate::client::publish::Report;
use crate::client::redact;
use crate::webhook::{Problem, Severity};

/// A problem: `path`, `message` and `severity` (`error` or `warning`).
pub fn problem_dict<'py>(py: Python<'py>, p: &Problem) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", &p.path)?;
    d.set_item("message", &p.message)?;
    d.set_item(
        "severity",
        match p.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        },
    )?;
    Ok(d)
}

/// Problems, as a list of [`problem_dict`]s.
pub fn problem_list<'py>(py: Python<'py>, problems: &[Problem]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for p in problems {
        out.append(problem_dict(py, p)?)?;
    }
    Ok(out)
}

/// A report: its counts, its error (scrubbed) and its failures, each with its `kind`, index,
/// line, status, problems, message (scrubbed) and record.
pub fn report_dict<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("total", r.total)?;
    d.set_item("sent", r.sent)?;
    d.set_item("accepted", r.accepted)?;
    d.set_item("requests", r.requests)?;
    d.set_item("retries", r.retries)?;
    d.set_item("rate_limited", r.rate_limited)?;
    d.set_item("elapsed", r.elapsed.as_secs_f64())?;
    d.set_item("interrupted", r.interrupted)?;
    d.set_item(
        "error",
        r.error.as_ref().map(|e| e.clone().scrubbed().to_string()),
    )?;
    let failures = PyList::empty(py);
    for f in &r.failures {
        let fd = PyDict::new(py);
        fd.set_item("kind", f.kind.as_str())?;
        fd.set_item("index", f.index)?;
        fd.set_item("line", f.line)?;
        fd.set_item("transactionId", &f.transaction_id)?;
        fd.set_item("status", f.status)?;
        fd.set_item("problems", problem_list(py, &f.problems)?)?;
        fd.set_item("message", redact::scrub(&f.message))?;
        fd.set_item("record", &f.record)?;
        failures.append(fd)?;
    }
    d.set_item("failures", failures)?;
    Ok(d)
}

/// What a publish binding returns: the report as a dict, and the exception to raise with it:
/// the one `raised` on the Python side (a signal's, the source's own, a callback's), else the
/// core's error that stopped publishing, else None.
pub fn outcome<'py>(
    py: Python<'py>,
    report: &Report,
    raised: Option<PyErr>,
) -> PyResult<(Bound<'py, PyDict>, Option<Py<PyAny>>)> {
    let error = raised.or_else(|| report.error.clone().map(errors::to_py));
    Ok((
        report_dict(py, report)?,
        error.map(|e| e.into_value(py).into_any()),
    ))
}
