//! A record that a publish did not accept, as Python sees it: `Failure` (frozen, made from the
//! core's failure, its message scrubbed of secrets), with its validation problems as
//! `surveillance.errors.Problem` tuples.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};

use crate::client::publish::Failure as CoreFailure;
use crate::client::redact::scrub;
use crate::python::conversions::values::to_py;
use crate::webhook::{Problem, Severity};

/// Problems, as a list of dicts: `path`, `message` and `severity` (`error` or `warning`).
pub fn problem_list<'py>(py: Python<'py>, problems: &[Problem]) -> PyResult<Bound<'py, PyList>> {
    Ok(to_py(py, problems)?.cast_into::<PyList>()?)
}

/// `surveillance.errors.Problem`, the named tuple a failure's problems are.
fn problem_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static PROBLEM: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    PROBLEM.import(py, "surveillance.errors", "Problem")
}

fn severity(name: &str) -> PyResult<Severity> {
    match name {
        "error" => Ok(Severity::Error),
        "warning" => Ok(Severity::Warning),
        other => Err(PyValueError::new_err(format!(
            "a problem's severity must be \"error\" or \"warning\", got {other:?}"
        ))),
    }
}

/// A record that was not accepted.
///
/// Attributes:
///     index: its position in the source (0-based; for a file, counting records, not blank
///         lines).
///     transaction_id: its ``transactionId``, when it has one.
///     status: the HTTP status of the service's refusal; None when it was not sent
///         (validation, interruption) or got no answer in the end (network).
///     problems: the validation problems that kept it back (list of :class:`Problem`).
///     message: what happened; for a refusal, the service's own message.
///     line: its line number in a JSON Lines file (1-based), for a file source.
///     record_json: the record as JSON text, as :meth:`PublishReport.write_failures` writes
///         it.
///     kind: why, in one word: ``"invalid"`` (kept back by validation), ``"refused"`` (the
///         service answered 4xx, or its answer listed the record as failed), ``"failed"`` (no
///         success after every retry, the last answer a 429 or a 5xx), ``"interrupted"``
///         (Ctrl-C came before the service accepted it, with no request of it in flight),
///         ``"not sent"`` (it never left: publishing stopped on an error before, or the service
///         could not be reached) or ``"unconfirmed"`` (sent, but nothing proves whether the
///         service stored it: every answer was a page that is not the API's, such as a proxy's
///         or a captive portal's HTML, none came (the service unreachable, the connection cut,
///         or publishing stopped or was interrupted while its request was in flight), or its
///         body was refused with the words of a refusal found systematic, naming no record,
///         and it was not posted alone; publishing it again is safe).
///
/// >>> import surveillance as sv
/// >>> f = sv.Failure(3, "t-3", 400, [], "bad request")
/// >>> str(f), f.kind, f.to_dict()["status"]
/// ('record 3 [t-3] 400: bad request', 'failed', 400)
#[pyclass(name = "Failure", module = "surveillance._core", frozen, eq)]
#[derive(Debug, PartialEq)]
pub struct PyFailure {
    /// Its position in the source (0-based).
    #[pyo3(get)]
    pub index: u64,
    /// Its ``transactionId``, when it has one.
    #[pyo3(get)]
    pub transaction_id: Option<String>,
    /// The HTTP status of the service's refusal, or None.
    #[pyo3(get)]
    pub status: Option<u16>,
    pub problems: Vec<Problem>,
    /// What happened; for a refusal, the service's own message.
    #[pyo3(get)]
    pub message: String,
    /// Its line number in a JSON Lines file (1-based), for a file source.
    #[pyo3(get)]
    pub line: Option<u64>,
    /// The record as JSON text, as ``write_failures`` writes it.
    #[pyo3(get)]
    pub record_json: Option<String>,
    /// Why, in one word (see the class's description).
    #[pyo3(get)]
    pub kind: String,
}

impl PyFailure {
    /// The core's failure, its message scrubbed of secrets.
    pub(super) fn of(f: &CoreFailure) -> PyFailure {
        PyFailure {
            index: f.index,
            transaction_id: f.transaction_id.clone(),
            status: f.status,
            problems: f.problems.clone(),
            message: scrub(&f.message).into_owned(),
            line: f.line,
            record_json: f.record.clone(),
            kind: f.kind.as_str().to_owned(),
        }
    }

    /// This failure at `index`.
    pub(super) fn at(&self, index: u64) -> PyFailure {
        PyFailure {
            index,
            transaction_id: self.transaction_id.clone(),
            status: self.status,
            problems: self.problems.clone(),
            message: self.message.clone(),
            line: self.line,
            record_json: self.record_json.clone(),
            kind: self.kind.clone(),
        }
    }
}

#[pymethods]
impl PyFailure {
    #[new]
    #[pyo3(
        signature = (index, transaction_id, status, problems, message, line=None, record_json=None, kind="failed".to_owned()),
        text_signature = "(index, transaction_id, status, problems, message, line=None, record_json=None, kind='failed')"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        index: u64,
        transaction_id: Option<String>,
        status: Option<u16>,
        problems: Vec<(String, String, String)>,
        message: String,
        line: Option<u64>,
        record_json: Option<String>,
        kind: String,
    ) -> PyResult<Self> {
        let problems = problems
            .into_iter()
            .map(|(path, message, level)| {
                Ok(Problem {
                    path,
                    message,
                    severity: severity(&level)?,
                })
            })
            .collect::<PyResult<_>>()?;
        Ok(PyFailure {
            index,
            transaction_id,
            status,
            problems,
            message,
            line,
            record_json,
            kind,
        })
    }

    /// The validation problems that kept it back (list of :class:`Problem`).
    #[getter]
    fn problems<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let class = problem_class(py)?;
        let items = self
            .problems
            .iter()
            .map(|p| class.call1((&p.path, &p.message, severity_name(p.severity))))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The record as a dict (parsed from :attr:`record_json`), or None.
    #[getter]
    fn record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.record_json {
            None => Ok(py.None().into_bound(py)),
            Some(text) => py.import("json")?.call_method1("loads", (text,)),
        }
    }

    /// Its fields as a dict (problems as dicts), as JSON can hold them.
    ///
    /// Returns:
    ///     A new ``dict``: ``index``, ``transaction_id``, ``status``, ``problems``,
    ///     ``message``, ...
    ///
    /// Raises nothing.
    ///
    /// Example:
    ///     >>> report = client.publish({"dataType": "other"}, progress=False)
    ///     >>> failure = report.rejected[0].to_dict()
    ///     >>> failure["index"], failure["status"], failure["problems"][0]["severity"]
    ///     (0, None, 'error')
    pub(super) fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("index", self.index)?;
        d.set_item("transaction_id", &self.transaction_id)?;
        d.set_item("status", self.status)?;
        d.set_item("problems", problem_list(py, &self.problems)?)?;
        d.set_item("message", &self.message)?;
        d.set_item("line", self.line)?;
        d.set_item("record_json", &self.record_json)?;
        d.set_item("kind", &self.kind)?;
        Ok(d)
    }

    fn __str__(&self) -> String {
        self.line_text()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |v: Bound<'_, PyAny>| v.repr().map(|s| s.to_string());
        Ok(format!(
            "Failure(index={}, transaction_id={}, status={}, problems={}, message={}, line={}, \
             kind={})",
            self.index,
            r(self.transaction_id.clone().into_pyobject(py)?)?,
            r(self.status.into_pyobject(py)?)?,
            r(self.problems(py)?.into_any())?,
            r(self.message.clone().into_pyobject(py)?.into_any())?,
            r(self.line.into_pyobject(py)?)?,
            r(self.kind.clone().into_pyobject(py)?.into_any())?,
        ))
    }

    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, pyo3::types::PyTuple>)> {
        let problems: Vec<(&str, &str, &str)> = self
            .problems
            .iter()
            .map(|p| {
                (
                    p.path.as_str(),
                    p.message.as_str(),
                    severity_name(p.severity),
                )
            })
            .collect();
        let args = (
            self.index,
            &self.transaction_id,
            self.status,
            problems,
            &self.message,
            self.line,
            &self.record_json,
            &self.kind,
        )
            .into_pyobject(py)?;
        Ok((py.get_type::<PyFailure>(), args))
    }
}

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
