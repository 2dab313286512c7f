//! Publishing's results as Python values, converted in one place for both publish bindings and
//! `validate`: a report as the dict `surveillance.PublishReport` is built from and problems as
//! dicts, both derived from the core's serde types (`values::to_py`), and the exception that
//! comes with a report.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::client::publish::Report;
use crate::python::conversions::errors;
use crate::python::conversions::values::to_py;
use crate::webhook::Problem;

/// Problems, as a list of dicts: `path`, `message` and `severity` (`error` or `warning`).
pub fn problem_list<'py>(py: Python<'py>, problems: &[Problem]) -> PyResult<Bound<'py, PyList>> {
    Ok(to_py(py, problems)?.cast_into::<PyList>()?)
}

/// A report: its counts, its error (scrubbed) and its failures, each with its `kind`, index,
/// line, `transactionId`, status, problems, message (scrubbed) and record.
pub fn report_dict<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, r)?.cast_into::<PyDict>()?)
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
