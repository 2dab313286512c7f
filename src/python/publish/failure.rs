//! A publish's records not accepted, `Failure` (a frozen class built from the core's failure,
//! by one field list), and problems as dicts; the report that holds them is `report`'s.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};

use crate::client::publish::Failure as CoreFailure;
use crate::client::redact::scrub;
use crate::python::conversions::values::to_py;
use crate::python::results::fields::{result_class, Take};
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

result_class! {
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
    #[pyclass(name = "Failure", module = "surveillance._core", frozen)]
    #[derive(Debug, PartialEq)]
    plain PyFailure "Failure" shown "(index, transaction_id, status, problems, message, line=None, record_json=None, kind=\"failed\")" {
        /// Its position in the source (0-based).
        index: u64 => "int",
        /// Its ``transactionId``, when it has one.
        transaction_id: Option<String> => "Optional[str]",
        /// The HTTP status of the service's refusal, or None.
        status: Option<u16> => "Optional[int]",
        /// The validation problems that kept it back (list of :class:`Problem`).
        problems: Problems => "list[Problem]" as "list[tuple[str, str, str]]",
        /// What happened; for a refusal, the service's own message.
        message: String => "str",
        /// Its line number in a JSON Lines file (1-based), for a file source.
        line: Option<u64> => "Optional[int]" = None,
        /// The record as JSON text, as ``write_failures`` writes it.
        record_json: Option<String> => "Optional[str]" = None,
        /// Why, in one word (see the class's description).
        kind: String => "str" = { "failed".to_owned() },
    }
    {
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
        pub(super) fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(slf.py());
            for (key, value) in slf.get().values(slf, |p| Ok(problem_list(slf.py(), p)?.into_any()))? {
                d.set_item(key, value)?;
            }
            Ok(d)
        }

        fn __str__(&self) -> String {
            self.line_text()
        }

        /// The same fields; NotImplemented against anything else.
        fn __eq__(&self, other: PyRef<'_, Self>) -> bool {
            *self == *other
        }

        fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
            let r = |v: Bound<'_, PyAny>| v.repr().map(|s| s.to_string());
            Ok(format!(
                "Failure(index={}, transaction_id={}, status={}, problems={}, message={}, line={}, \
                 kind={})",
                self.index,
                r(self.transaction_id.clone().into_pyobject(py)?)?,
                r(self.status.into_pyobject(py)?)?,
                r((&self.problems).into_pyobject(py)?.into_any())?,
                r(self.message.clone().into_pyobject(py)?.into_any())?,
                r(self.line.into_pyobject(py)?)?,
                r(self.kind.clone().into_pyobject(py)?.into_any())?,
            ))
        }

        /// Pickled as a call of its class with its fields, problems as plain triples.
        fn __reduce__<'py>(
            slf: &Bound<'py, Self>,
        ) -> PyResult<(Bound<'py, PyType>, Bound<'py, pyo3::types::PyTuple>)> {
            let triples = |p: &Problems| {
                let triples: Vec<_> =
                    p.iter().map(|p| (&p.path, &p.message, severity_name(p.severity))).collect();
                Ok(triples.into_pyobject(slf.py())?.into_any())
            };
            let values = slf.get().values(slf, triples)?.into_iter().map(|(_, v)| v);
            Ok((slf.get_type(), pyo3::types::PyTuple::new(slf.py(), values)?))
        }
    }
}

/// A failure's validation problems: `surveillance.errors.Problem`s to Python, taken from
/// `(path, message, severity)` triples.
#[derive(Debug, Clone, PartialEq)]
pub struct Problems(pub Vec<Problem>);

impl std::ops::Deref for Problems {
    type Target = Vec<Problem>;

    fn deref(&self) -> &Vec<Problem> {
        &self.0
    }
}

impl<'py> IntoPyObject<'py> for &Problems {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let class = problem_class(py)?;
        let items = self
            .iter()
            .map(|p| class.call1((&p.path, &p.message, severity_name(p.severity))))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
}

impl Take for Problems {
    type Arg = Vec<(String, String, String)>;

    fn take(_py: Python<'_>, arg: Self::Arg, _name: &str) -> PyResult<Self> {
        let problems = arg.into_iter().map(|(path, message, level)| {
            let severity = severity(&level)?;
            Ok(Problem {
                path,
                message,
                severity,
            })
        });
        problems.collect::<PyResult<_>>().map(Problems)
    }
}

impl PyFailure {
    /// Its fields by name, in order, `problems` as `problems` makes them.
    fn values<'py>(
        &self,
        slf: &Bound<'py, Self>,
        problems: impl Fn(&Problems) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Vec<(&'static str, Bound<'py, PyAny>)>> {
        Self::KEYS
            .iter()
            .map(|&key| match key {
                "problems" => Ok((key, problems(&self.problems)?)),
                _ => Ok((key, slf.getattr(key)?)),
            })
            .collect()
    }

    /// The core's failure, its message scrubbed of secrets.
    pub(super) fn of(f: &CoreFailure) -> PyFailure {
        PyFailure {
            index: f.index,
            transaction_id: f.transaction_id.clone(),
            status: f.status,
            problems: Problems(f.problems.clone()),
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

pub(super) fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
