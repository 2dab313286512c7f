//! How a publish's report reads: a failure as one line, the report's summary, its text, its
//! HTML table for Jupyter (made of the pieces every result's table is, `results::shown`), its
//! failures as a pandas DataFrame, and the message of the error that says records were not
//! accepted.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::failure::severity_name;
use super::report::{PyFailure, PyPublishReport};
use crate::python::results::shown::{esc, grid, rows_table};
use crate::text::thousands;

/// `n` as Python's `f"{n:,.0f}"` writes it.
fn rounded(n: f64) -> String {
    let whole = format!("{n:.0}");
    match whole.parse::<u64>() {
        Ok(v) => thousands(v),
        Err(_) => whole,
    }
}

impl PyFailure {
    /// `record 3 (line 4) [t-3] 400: message`.
    pub(super) fn line_text(&self) -> String {
        failure(self)
    }
}

impl PyPublishReport {
    /// See [`summary`].
    pub(super) fn summary_text(&self) -> String {
        summary(self)
    }

    /// See [`text`].
    pub(super) fn long_text(&self) -> String {
        text(self)
    }

    /// See [`html`].
    pub(super) fn html_table(&self) -> String {
        html(self)
    }

    /// See [`not_accepted`].
    pub(super) fn not_accepted_text(&self) -> String {
        not_accepted(self)
    }

    /// See [`failures_frame`].
    pub(super) fn failures_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        failures_frame(py, &self.all_failures())
    }
}

/// `record 3 (line 4) [t-3] 400: message`.
fn failure(f: &PyFailure) -> String {
    let line = match f.line {
        Some(n) if n != 0 => format!(" (line {n})"),
        _ => String::new(),
    };
    let tx = match f.transaction_id.as_deref() {
        Some(t) if !t.is_empty() => format!(" [{t}]"),
        _ => String::new(),
    };
    let status = f.status.map(|s| format!(" {s}")).unwrap_or_default();
    format!("record {}{line}{tx}{status}: {}", f.index, f.message)
}

/// The report's failures by kind, apart: those of the kinds that stop publishing
/// (`interrupted`, `not sent`, in that order), the refused ones (by kind, sorted by name), and
/// the number unconfirmed.
struct Kinds {
    stopped: Vec<(String, u64)>,
    refused: Vec<(String, u64)>,
}

fn kinds(r: &PyPublishReport) -> Kinds {
    let mut all = r.kinds();
    all.retain(|(k, _)| k != "unconfirmed");
    let mut stopped = Vec::new();
    for name in ["interrupted", "not sent"] {
        if let Some(i) = all.iter().position(|(k, _)| k == name) {
            stopped.push(all.remove(i));
        }
    }
    all.sort();
    Kinds {
        stopped,
        refused: all,
    }
}

/// One line: records, accepted, rejected by kind, interrupted or not sent, unconfirmed,
/// requests, retries, time.
fn summary(r: &PyPublishReport) -> String {
    let k = kinds(r);
    let rejected: u64 = k.refused.iter().map(|(_, n)| n).sum();
    let by_kind: Vec<String> = k
        .refused
        .iter()
        .map(|(name, n)| format!("{} {name}", thousands(*n)))
        .collect();
    let mut parts = vec![
        format!("{} records", thousands(r.total)),
        format!("{} accepted", thousands(r.accepted)),
        if by_kind.is_empty() {
            format!("{} rejected", thousands(rejected))
        } else {
            format!("{} rejected ({})", thousands(rejected), by_kind.join(", "))
        },
    ];
    parts.extend(
        k.stopped
            .iter()
            .map(|(name, n)| format!("{} {name}", thousands(*n))),
    );
    if !r.unconfirmed.is_empty() {
        parts.push(format!(
            "{} unconfirmed",
            thousands(r.unconfirmed.len() as u64)
        ));
    }
    parts.push(format!("{} requests", thousands(r.requests)));
    parts.push(format!("{} retries", thousands(r.retries)));
    parts.push(format!("{:.2} s", r.elapsed));
    if r.interrupted && !k.stopped.iter().any(|(name, _)| name == "interrupted") {
        parts.push("interrupted".to_owned());
    }
    if let Some(n) = r.unread.filter(|&n| n > 0) {
        parts.push(format!("{} not read", thousands(n)));
    }
    if let Some(e) = r.error.as_deref().filter(|e| !e.is_empty()) {
        parts.push(format!("stopped: {e}"));
    }
    parts.join(", ")
}

/// The summary, then the first ten failures, one a line.
fn text(r: &PyPublishReport) -> String {
    let failures = r.all_failures();
    let mut lines = vec![format!("PublishReport: {}", summary(r))];
    lines.extend(
        failures
            .iter()
            .take(10)
            .map(|f| format!("  {}", failure(f))),
    );
    if failures.len() > 10 {
        lines.push(format!(
            "  ... and {} more",
            thousands(failures.len() as u64 - 10)
        ));
    }
    lines.join("\n")
}

/// The figures as an HTML table, and the first twenty failures as another.
fn html(r: &PyPublishReport) -> String {
    let state = if r.interrupted {
        "interrupted"
    } else if r.is_ok() {
        "ok"
    } else {
        "with failures"
    };
    let k = kinds(r);
    let rejected: u64 = k.refused.iter().map(|(_, n)| n).sum();
    let mut rows: Vec<(String, String)> = vec![
        ("records".into(), thousands(r.total)),
        ("accepted".into(), thousands(r.accepted)),
        ("rejected".into(), thousands(rejected)),
    ];
    rows.extend(
        k.stopped
            .iter()
            .map(|(name, n)| (name.clone(), thousands(*n))),
    );
    rows.push(("unconfirmed".into(), thousands(r.unconfirmed.len() as u64)));
    rows.push((
        "requests / retries / 429s".into(),
        format!(
            "{} / {} / {}",
            thousands(r.requests),
            thousands(r.retries),
            thousands(r.rate_limited)
        ),
    ));
    rows.push((
        "elapsed".into(),
        format!("{:.2} s ({} records/s)", r.elapsed, rounded(r.per_second())),
    ));
    if let Some(n) = r.unread.filter(|&n| n > 0) {
        rows.push(("not read".into(), thousands(n)));
    }
    if let Some(e) = r.error.as_deref().filter(|e| !e.is_empty()) {
        rows.push(("stopped".into(), e.to_owned()));
    }
    let after = format!(" ({})", esc(state));
    let mut out = rows_table("PublishReport", &after, &rows);
    let failures = r.all_failures();
    if !failures.is_empty() {
        let columns = ["index", "transactionId", "status", "kind", "message"].map(String::from);
        let cells: Vec<Vec<String>> = failures
            .iter()
            .take(20)
            .map(|f| {
                vec![
                    f.index.to_string(),
                    f.transaction_id.clone().unwrap_or_default(),
                    f.status.map(|s| s.to_string()).unwrap_or_default(),
                    f.kind.clone(),
                    f.message.clone(),
                ]
            })
            .collect();
        out.push_str(&grid(&columns, &cells));
        if failures.len() > 20 {
            out.push_str(&format!(
                "<p>... and {} more</p>",
                thousands(failures.len() as u64 - 20)
            ));
        }
    }
    out
}

/// The message of the `PublishError` that says records were not accepted.
fn not_accepted(r: &PyPublishReport) -> String {
    let failures = r.all_failures();
    let first: Vec<String> = failures.iter().take(3).map(|f| failure(f)).collect();
    let more = if failures.len() > 3 {
        format!("; and {} more", failures.len() - 3)
    } else {
        String::new()
    };
    let unread = match r.unread {
        Some(n) if n > 0 => format!("; {} records not read", thousands(n)),
        _ => String::new(),
    };
    let reason = if r.interrupted { " (interrupted)" } else { "" };
    format!(
        "{} of {} records not accepted{reason}{unread}: {}{more}; see `report.rejected` and \
         `report.unconfirmed`, or `report.write_failures(path)` to publish them again",
        thousands(failures.len() as u64),
        thousands(r.total),
        first.join("; ")
    )
}

/// The records `failures` as the DataFrame of `PublishReport.to_pandas`, one row each: their
/// position, line, id, kind, status, message, problems (`"error path: message"` joined by
/// `"; "`) and record as JSON text; pandas' nullable `Int64` where a number may be missing.
fn failures_frame<'py>(py: Python<'py>, failures: &[&PyFailure]) -> PyResult<Bound<'py, PyAny>> {
    let pandas = match py.import("pandas") {
        Ok(pandas) => pandas,
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyImportError>(py) => {
            return Err(pyo3::exceptions::PyImportError::new_err(
                "PublishReport.to_pandas() needs pandas: pip install 'surveillance[pandas]'",
            ))
        }
        Err(e) => return Err(e),
    };
    let array = |values: Bound<'py, PyList>, dtype: &str| -> PyResult<Bound<'py, PyAny>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", dtype)?;
        pandas.call_method("array", (values,), Some(&kwargs))
    };
    let column = |f: &dyn Fn(&PyFailure) -> PyResult<Bound<'py, PyAny>>| {
        PyList::new(
            py,
            failures
                .iter()
                .map(|x| f(x))
                .collect::<PyResult<Vec<_>>>()?,
        )
    };
    let problems = |f: &PyFailure| -> String {
        f.problems
            .iter()
            .map(|p| {
                if p.path.is_empty() {
                    p.message.clone()
                } else {
                    format!("{} {}: {}", severity_name(p.severity), p.path, p.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let columns = PyDict::new(py);
    let any = |v: Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> { Ok(v) };
    columns.set_item(
        "index",
        array(
            column(&|f| any(f.index.into_pyobject(py)?.into_any()))?,
            "int64",
        )?,
    )?;
    columns.set_item(
        "line",
        array(column(&|f| any(f.line.into_pyobject(py)?))?, "Int64")?,
    )?;
    columns.set_item(
        "transaction_id",
        array(
            column(&|f| any(f.transaction_id.clone().into_pyobject(py)?))?,
            "object",
        )?,
    )?;
    columns.set_item(
        "kind",
        array(
            column(&|f| any(f.kind.clone().into_pyobject(py)?.into_any()))?,
            "object",
        )?,
    )?;
    columns.set_item(
        "status",
        array(column(&|f| any(f.status.into_pyobject(py)?))?, "Int64")?,
    )?;
    columns.set_item(
        "message",
        array(
            column(&|f| any(f.message.clone().into_pyobject(py)?.into_any()))?,
            "object",
        )?,
    )?;
    columns.set_item(
        "problems",
        array(
            column(&|f| any(problems(f).into_pyobject(py)?.into_any()))?,
            "object",
        )?,
    )?;
    columns.set_item(
        "record",
        array(
            column(&|f| any(f.record_json.clone().into_pyobject(py)?))?,
            "object",
        )?,
    )?;
    pandas.call_method1("DataFrame", (columns,))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_text_read_as_python_writes_them() {
        assert_eq!(rounded(1234567.5), "1,234,568");
        assert_eq!(rounded(2.5), "2");
        assert_eq!(rounded(0.0), "0");
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#x27;x&#x27;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
