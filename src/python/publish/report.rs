//! Publishing's results as Python values, made in one place for both publish bindings and
//! `validate`: the report, `PublishReport`, and its records not accepted, `Failure` (frozen
//! classes built from the core's report, with the rows a stopped publish did not read), problems
//! as dicts, and the exception that comes with a report. How they read is in `shown`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyType};

use super::unread::{Reread, Unread};
use crate::client::publish::Report;
use crate::python::conversions::errors;
use crate::python::results::fields::{result_class, Take};

pub use super::failure::{problem_list, PyFailure};

/// `surveillance.errors.PublishError`, which `raise_on_failure` raises.
fn publish_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    ERROR.import(py, "surveillance.errors", "PublishError")
}

/// `functools.partial`, which pickles a report as a call of its class with its fields.
pub(super) fn partial(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static PARTIAL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    PARTIAL.import(py, "functools", "partial")
}

result_class! {
    /// What :meth:`Client.publish <surveillance.Client.publish>` did. Every record taken from the
    /// source is accounted for: ``total == accepted + len(rejected) + len(unconfirmed)``.
    ///
    /// What the service's answers prove decides: a 2xx whose body is JSON of any shape, or empty
    /// (or a plain ``OK``), accepts every record posted, unless the body counts fewer accepted or
    /// lists records as failed; a 2xx that is plainly not the API's (an HTML page from a proxy or
    /// a captive portal) proves nothing, and its records end ``unconfirmed`` after the retries.
    ///
    /// Attributes:
    ///     total: records taken from the source.
    ///     sent: records that left the machine at least once.
    ///     accepted: records the service accepted.
    ///     rejected: the records not accepted, in source order (list of :class:`Failure`).
    ///     unconfirmed: the records sent whose fate no answer proves (list of :class:`Failure`
    ///         of kind ``"unconfirmed"``): neither accepted nor refused.
    ///     requests: requests that left the machine, retries included (each one of the day's
    ///         quota).
    ///     retries: this publish's requests sent again (not those of other calls on the client).
    ///     rate_limited: 429 answers to this publish's requests.
    ///     elapsed: wall time in seconds.
    ///     interrupted: stopped by Ctrl-C; records taken but not yet accepted are in
    ///         ``rejected``, but those whose request was in flight, which the service may have
    ///         stored, in ``unconfirmed``.
    ///     error: the message of an error that stopped publishing (e.g. refused credentials),
    ///         or None.
    ///     region: the region published to, as given (None: the client's).
    ///     batch_size: the batch size, as given (``"auto"`` or 1..100).
    ///     unread: records of the source not read when publishing stopped early (None when
    ///         unknown, e.g. for a generator, which resumes at the next record).
    ///
    /// A frozen value: ``==`` compares the fields, ``to_dict()`` gives them, it pickles (without
    /// the unread rest of its source, which stays with the process that read it).
    ///
    /// >>> import surveillance as sv
    /// >>> one = sv.PublishReport(total=2, accepted=2, elapsed=1.0)
    /// >>> both = sv.PublishReport.combine([one, one], elapsed=1.5)
    /// >>> both.total, both.accepted, both.elapsed, both.ok
    /// (4, 4, 1.5, True)
    #[pyclass(name = "PublishReport", module = "surveillance._core", frozen)]
    plain PyPublishReport "PublishReport" shown "(*, total=0, sent=0, accepted=0, rejected=[], unconfirmed=[], requests=0, retries=0, rate_limited=0, elapsed=0.0, interrupted=False, error=None, region=None, batch_size=None, unread=None)" [*] {
        /// Records taken from the source.
        total: u64 => "int" = 0,
        /// Records that left the machine at least once.
        sent: u64 => "int" = 0,
        /// Records the service accepted.
        accepted: u64 => "int" = 0,
        /// The records not accepted, in source order (list of :class:`Failure`).
        rejected: Vec<Py<PyFailure>> => "list[Failure]" = { Vec::new() },
        /// The records sent whose fate no answer proves (list of :class:`Failure`).
        unconfirmed: Vec<Py<PyFailure>> => "list[Failure]" = { Vec::new() },
        /// Requests that left the machine, retries included.
        requests: u64 => "int" = 0,
        /// This publish's requests sent again.
        retries: u64 => "int" = 0,
        /// 429 answers to this publish's requests.
        rate_limited: u64 => "int" = 0,
        /// Wall time in seconds.
        elapsed: f64 => "float" = 0.0,
        /// Stopped by Ctrl-C.
        interrupted: bool => "bool" = false,
        /// The message of an error that stopped publishing, or None.
        error: Option<String> => "Optional[str]" = None,
        /// The region published to, as given (None: the client's).
        region: Option<String> => "Optional[str]" = None,
        /// The batch size, as given: ``"auto"`` or 1..100.
        batch_size: BatchSize => "Union[str, int]" as "Union[str, int, None]" = None,
        /// Records of the source not read when publishing stopped early, or None.
        unread: Option<u64> => "Optional[int]" = None;
        // The rows not read, in source order, to be written by `write_failures`.
        rest: Vec<Unread> = Vec::new(),
    }
    {
        /// True when every record of the source was accepted.
        #[getter]
        fn ok(&self) -> bool {
            self.is_ok()
        }

        /// Every record not accepted, rejected or unconfirmed, in source order.
        #[getter]
        fn failures(&self, py: Python<'_>) -> Vec<Py<PyFailure>> {
            let mut out: Vec<Py<PyFailure>> = self
                .rejected
                .iter()
                .chain(&self.unconfirmed)
                .map(|f| f.clone_ref(py))
                .collect();
            out.sort_by_key(|f| f.get().index);
            out
        }

        /// Records accepted per second.
        #[getter]
        fn rate(&self) -> f64 {
            self.per_second()
        }

        /// Records not accepted by kind (see :attr:`Failure.kind`).
        ///
        /// Returns:
        ///     A ``dict`` of each kind that occurred and its count.
        ///
        /// Raises nothing.
        ///
        /// Example:
        ///     >>> report = client.publish({"dataType": "other"}, progress=False)
        ///     >>> report.counts()
        ///     {'invalid': 1}
        fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            for (kind, n) in self.kinds() {
                d.set_item(kind, n)?;
            }
            Ok(d)
        }

        /// One line: records, accepted, rejected by kind, interrupted or not sent (apart: the
        /// service refused none of them), unconfirmed, requests, retries, time.
        ///
        /// Returns:
        ///     The line, as ``print(report)`` starts.
        ///
        /// Raises nothing.
        ///
        /// Example:
        ///     >>> report = client.publish({"dataType": "other"}, progress=False)
        ///     >>> "0 accepted, 1 rejected (1 invalid)" in report.summary()
        ///     True
        fn summary(&self) -> String {
            self.summary_text()
        }

        /// The fields as a dict (failures as dicts), as JSON can hold them.
        ///
        /// Returns:
        ///     A new ``dict`` of the fields, in their order.
        ///
        /// Raises nothing.
        ///
        /// Example:
        ///     >>> report = client.publish({"dataType": "other"}, progress=False)
        ///     >>> fields = report.to_dict()
        ///     >>> fields["total"], fields["accepted"], len(fields["rejected"])
        ///     (1, 0, 1)
        fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
            Self::fields(slf, false)
        }

        /// The records not accepted (rejected and unconfirmed) as a pandas DataFrame, one row
        /// each in source order, with why: ``index`` (position in the source), ``line`` (in a
        /// JSON Lines file, else <NA>), ``transaction_id``, ``kind`` (see :attr:`Failure.kind`),
        /// ``status`` (the HTTP status of a refusal, else <NA>), ``message``, ``problems`` (the
        /// validation problems, ``"error path: message"`` joined by ``"; "``) and ``record`` (the
        /// record as JSON text, as :meth:`write_failures` writes it). Needs pandas.
        ///
        /// Returns:
        ///     A ``pandas.DataFrame``, empty (with those columns) when every record was accepted.
        ///
        /// Raises:
        ///     ImportError: pandas is not installed.
        ///
        /// Example:
        ///
        /// >>> import surveillance as sv
        /// >>> sale = {"dataType": "retail", "schemaVersion": "1", "startTime": 1794891600000,
        /// ...         "endTime": 1794891660000, "locationId": "store-1", "dataSourceId": "pos-1",
        /// ...         "transactionId": "t-1", "status": "sale", "items": []}
        /// >>> with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        /// ...     report = emu.client().publish(
        /// ...         [sale, dict(sale, transactionId="t-2", startTime="noon")], progress=False
        /// ...     )
        /// >>> df = report.to_pandas()
        /// >>> [(int(r.index), r.transaction_id, r.kind) for r in df.itertuples()]
        /// [(1, 't-2', 'invalid')]
        /// >>> df.at[0, "problems"].split(":")[0]
        /// 'error startTime'
        fn to_pandas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
            self.failures_frame(py)
        }

        /// Raises :class:`~surveillance.PublishError` (with this report as ``.report``) when
        /// any record was not accepted; returns the report otherwise, so it chains:
        /// ``client.publish(rows).raise_on_failure()``.
        ///
        /// Returns:
        ///     This report, when ``ok``.
        ///
        /// Raises:
        ///     PublishError: a record was not accepted; its message counts them by kind.
        ///
        /// Example:
        ///     >>> report = client.publish({"dataType": "other"}, progress=False)
        ///     >>> report.raise_on_failure()  # doctest: +ELLIPSIS, +IGNORE_EXCEPTION_DETAIL
        ///     Traceback (most recent call last):
        ///     PublishError: 1 of 1 records not accepted: ...
        fn raise_on_failure<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
            let report = slf.get();
            if report.is_ok() {
                return Ok(slf.clone());
            }
            let py = slf.py();
            let class = publish_error(py)?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("report", slf)?;
            let error = class.call((report.not_accepted_text(),), Some(&kwargs))?;
            Err(PyErr::from_value(error))
        }

        /// Writes the records not accepted (rejected and unconfirmed) to ``path`` as JSON
        /// Lines, ready to publish again (``client.publish(path)``).
        ///
        /// After an interruption it also writes the records of a list, DataFrame or file source
        /// that were not read yet, so that publishing the file completes the job.
        ///
        /// Args:
        ///     path: the file to write (replaced if it exists).
        ///
        /// Returns:
        ///     How many lines were written.
        ///
        /// Raises:
        ///     OSError: the file cannot be written.
        ///
        /// Example:
        ///     >>> import pathlib, tempfile
        ///     >>> report = client.publish({"dataType": "other"}, progress=False)
        ///     >>> path = pathlib.Path(tempfile.mkdtemp(), "failed.jsonl")
        ///     >>> report.write_failures(path), path.read_text()
        ///     (1, '{"dataType":"other"}\n')
        fn write_failures(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
            let file = File::create(&path)?;
            let mut out = BufWriter::new(file);
            let mut n = 0u64;
            for f in self.all_failures() {
                out.write_all(f.record_json.as_deref().unwrap_or("null").as_bytes())?;
                out.write_all(b"\n")?;
                n += 1;
            }
            for rest in &self.rest {
                let mut lines = rest.lines(py)?;
                while let Some(text) = lines.next(py)? {
                    out.write_all(text.as_bytes())?;
                    out.write_all(b"\n")?;
                    n += 1;
                }
            }
            out.flush()?;
            Ok(n)
        }

        /// One report for the publishes of consecutive parts of one source (e.g. the
        /// partitions of a Dask collection, published in parallel by
        /// :func:`surveillance.dask.publish`): counts added up, failures in part order with their
        /// ``index`` shifted by the sizes of the parts before theirs (so that it is the record's
        /// position in the whole source), ``write_failures`` covering every part.
        ///
        /// Args:
        ///     reports: the parts' reports, in source order.
        ///     sizes: the number of records of each part (default: each report's ``total``
        ///         plus its ``unread``).
        ///     elapsed: the wall time of the whole (default: the longest part's).
        ///
        /// Returns:
        ///     The combined :class:`PublishReport`.
        ///
        /// Raises:
        ///     ValueError: ``sizes`` does not give one size per report.
        ///
        /// Example:
        ///     >>> parts = [client.publish({"dataType": "other"}, progress=False) for _ in range(2)]
        ///     >>> whole = sv.PublishReport.combine(parts)
        ///     >>> whole.total, [f.index for f in whole.rejected]
        ///     (2, [0, 1])
        #[classmethod]
        #[pyo3(signature = (reports, *, sizes=None, elapsed=None))]
        fn combine(
            _cls: &Bound<'_, PyType>,
            py: Python<'_>,
            reports: Vec<Py<PyPublishReport>>,
            sizes: Option<Vec<u64>>,
            elapsed: Option<f64>,
        ) -> PyResult<PyPublishReport> {
            let parts: Vec<&PyPublishReport> = reports.iter().map(|r| r.get()).collect();
            let counts = match sizes {
                Some(sizes) => sizes,
                None => parts
                    .iter()
                    .map(|p| p.total + p.unread.unwrap_or(0))
                    .collect(),
            };
            if counts.len() != parts.len() {
                return Err(PyValueError::new_err(format!(
                    "{} reports but {} sizes",
                    parts.len(),
                    counts.len()
                )));
            }
            let sum = |f: fn(&PyPublishReport) -> u64| parts.iter().map(|p| f(p)).sum::<u64>();
            let unread: Vec<u64> = parts.iter().filter_map(|p| p.unread).collect();
            let (mut rejected, mut unconfirmed, mut offset) = (Vec::new(), Vec::new(), 0u64);
            for (part, count) in parts.iter().zip(&counts) {
                for f in &part.rejected {
                    rejected.push(Py::new(py, f.get().at(f.get().index + offset))?);
                }
                for f in &part.unconfirmed {
                    unconfirmed.push(Py::new(py, f.get().at(f.get().index + offset))?);
                }
                offset += count;
            }
            let first = parts.first();
            Ok(PyPublishReport {
                total: sum(|p| p.total),
                sent: sum(|p| p.sent),
                accepted: sum(|p| p.accepted),
                rejected,
                unconfirmed,
                requests: sum(|p| p.requests),
                retries: sum(|p| p.retries),
                rate_limited: sum(|p| p.rate_limited),
                elapsed: elapsed.unwrap_or_else(|| parts.iter().map(|p| p.elapsed).fold(0.0, f64::max)),
                interrupted: parts.iter().any(|p| p.interrupted),
                error: parts.iter().find_map(|p| p.error.clone()),
                region: first.and_then(|p| p.region.clone()),
                batch_size: BatchSize(first.and_then(|p| p.batch_size.0)),
                unread: (!unread.is_empty()).then(|| unread.iter().sum()),
                rest: parts
                    .iter()
                    .flat_map(|p| p.rest.iter().map(|r| r.clone_ref(py)))
                    .collect(),
            })
        }

        fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
            let Ok(other) = other.cast::<PyPublishReport>() else {
                return false;
            };
            let o = other.get();
            let same = |a: &[Py<PyFailure>], b: &[Py<PyFailure>]| {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.get() == y.get())
            };
            (
                self.total,
                self.sent,
                self.accepted,
                self.requests,
                self.retries,
            ) == (o.total, o.sent, o.accepted, o.requests, o.retries)
                && (self.rate_limited, self.interrupted, self.unread, self.batch_size)
                    == (o.rate_limited, o.interrupted, o.unread, o.batch_size)
                && self.elapsed.to_bits() == o.elapsed.to_bits()
                && self.error == o.error
                && self.region == o.region
                && same(&self.rejected, &o.rejected)
                && same(&self.unconfirmed, &o.unconfirmed)
        }

        fn __repr__(&self) -> String {
            format!("<PublishReport: {}>", self.summary_text())
        }

        fn __str__(&self) -> String {
            self.long_text()
        }

        fn _repr_html_(&self) -> String {
            self.html_table()
        }

        /// Pickled as a call of its class with its fields; the unread rest of a source stays with
        /// the process that read it.
        fn __reduce__<'py>(
            slf: &Bound<'py, Self>,
        ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, pyo3::types::PyTuple>)> {
            let py = slf.py();
            let kwargs = Self::fields(slf, true)?;
            let call = partial(py)?.call((slf.get_type(),), Some(&kwargs))?;
            Ok((call, pyo3::types::PyTuple::empty(py)))
        }
    }
}

/// What a publish was asked, which its report shows: the region and batch size as given.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub region: Option<String>,
    pub batch_size: Option<u64>,
}

impl PyPublishReport {
    /// The report of the core's `report`. `again`: the source, when its rows not read can be
    /// read again, and its number of rows when known; kept when publishing stopped early.
    pub(super) fn of(
        py: Python<'_>,
        report: &Report,
        asked: Asked,
        stopped: bool,
        again: Option<(Reread, Option<u64>)>,
    ) -> PyResult<PyPublishReport> {
        let mut rejected = Vec::new();
        let mut unconfirmed = Vec::new();
        for f in &report.failures {
            let failure = Py::new(py, PyFailure::of(f))?;
            if f.kind == crate::client::publish::FailureKind::Unconfirmed {
                unconfirmed.push(failure);
            } else {
                rejected.push(failure);
            }
        }
        let (mut unread, mut rest) = (None, Vec::new());
        if let (true, Some((source, size))) = (stopped, again) {
            unread = size.map(|n| n.saturating_sub(report.total));
            if unread != Some(0) {
                rest.push(source.after(report.total));
            }
        }
        Ok(PyPublishReport {
            total: report.total,
            sent: report.sent,
            accepted: report.accepted,
            rejected,
            unconfirmed,
            requests: report.requests,
            retries: report.retries,
            rate_limited: report.rate_limited,
            elapsed: report.elapsed.as_secs_f64(),
            interrupted: report.interrupted,
            error: report.error.clone().map(|e| e.scrubbed().to_string()),
            region: asked.region,
            batch_size: BatchSize(asked.batch_size),
            unread,
            rest,
        })
    }

    /// The fields by name, as the constructor takes them: the failures as themselves
    /// (`failures`) or as dicts.
    fn fields<'py>(slf: &Bound<'py, Self>, failures: bool) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let d = PyDict::new(py);
        for &key in Self::KEYS {
            let value = slf.getattr(key)?;
            let value = match key {
                "rejected" | "unconfirmed" if !failures => {
                    let dicts = value
                        .cast_into::<PyList>()?
                        .iter()
                        .map(|f| PyFailure::to_dict(f.cast::<PyFailure>()?))
                        .collect::<PyResult<Vec<_>>>()?;
                    PyList::new(py, dicts)?.into_any()
                }
                _ => value,
            };
            d.set_item(key, value)?;
        }
        Ok(d)
    }

    /// Every record not accepted, in source order.
    pub fn all_failures(&self) -> Vec<&PyFailure> {
        let mut out: Vec<&PyFailure> = self
            .rejected
            .iter()
            .chain(&self.unconfirmed)
            .map(|f| f.get())
            .collect();
        out.sort_by_key(|f| f.index);
        out
    }

    /// True when every record of the source was accepted.
    pub fn is_ok(&self) -> bool {
        self.rejected.is_empty()
            && self.unconfirmed.is_empty()
            && !self.interrupted
            && self.unread.unwrap_or(0) == 0
    }

    /// Records accepted per second.
    pub fn per_second(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.accepted as f64 / self.elapsed
        } else {
            0.0
        }
    }

    /// Records not accepted by kind, in the order the kinds first come.
    pub fn kinds(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for f in self.all_failures() {
            match out.iter_mut().find(|(k, _)| *k == f.kind) {
                Some((_, n)) => *n += 1,
                None => out.push((f.kind.clone(), 1)),
            }
        }
        out
    }
}

/// A publish's batch size as given: a number, or None for ``"auto"``.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchSize(pub Option<u64>);

impl<'py> IntoPyObject<'py> for BatchSize {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.0 {
            Some(n) => n.into_pyobject(py)?.into_any(),
            None => "auto".into_pyobject(py)?.into_any(),
        })
    }
}

impl Take for BatchSize {
    type Arg = Option<Py<PyAny>>;

    fn take(py: Python<'_>, arg: Self::Arg, _name: &str) -> PyResult<Self> {
        batch_arg(arg.as_ref().map(|v| v.bind(py))).map(BatchSize)
    }
}

fn batch_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.extract::<String>().is_ok_and(|s| s == "auto") => Ok(None),
        Some(v) => v.extract::<u64>().map(Some).map_err(|_| {
            PyTypeError::new_err("`batch_size` must be \"auto\" or an int from 1 to 100")
        }),
    }
}

/// What a publish binding returns: the report, and the exception to raise with it: the one
/// `raised` on the Python side (a signal's, the source's own, a callback's), else the core's
/// error that stopped publishing, else None. `again`: see [`PyPublishReport::of`].
pub(super) fn outcome(
    py: Python<'_>,
    report: &Report,
    raised: Option<PyErr>,
    asked: Asked,
    again: Option<(Reread, Option<u64>)>,
) -> PyResult<(PyPublishReport, Option<Py<PyAny>>)> {
    let stopped = report.interrupted || report.error.is_some() || raised.is_some();
    let shown = PyPublishReport::of(py, report, asked, stopped, again)?;
    let error = raised.or_else(|| report.error.clone().map(errors::to_py));
    Ok((shown, error.map(|e| e.into_value(py).into_any())))
}
