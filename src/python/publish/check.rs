//! Records checked and written without publishing, on `publish`'s writer: `validate` (the
//! problems of one record under its model), `to_json` (its JSON text), and `_check` for tests.

use pyo3::prelude::*;
use pyo3::types::PyList;

use super::report::problem_list;
use crate::python::conversions::to_json::{ConvError, Writer};
use crate::webhook::{self as rules, Problem, Severity};

/// The problems of `text` under its model (JSON text the writer made).
fn problems_of(text: &str) -> Vec<Problem> {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => rules::validate(&value),
        Err(e) => vec![Problem {
            path: String::new(),
            message: format!("not valid JSON: {e}"),
            severity: Severity::Error,
        }],
    }
}

/// The problems of one record under its standard model, as dicts with `path`, `message` and
/// `severity`; empty when it conforms.
#[pyfunction]
#[pyo3(name = "validate")]
pub fn validate_record<'py>(
    py: Python<'py>,
    record: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let problems = match Writer::new(py)?.text(record) {
        Ok(text) => problems_of(&text),
        Err(ConvError {
            interrupt: Some(e), ..
        }) => return Err(*e),
        Err(e) => vec![e.problem()],
    };
    problem_list(py, &problems)
}

/// The JSON text of a record, as `publish` writes it; ValueError naming the path of a value
/// with no JSON form.
#[pyfunction]
#[pyo3(name = "to_json")]
pub fn record_json(py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<String> {
    Writer::new(py)?
        .text(record)
        .map_err(|e| e.into_value_error(str::to_owned))
}

/// What `publish` makes of one record, for tests: `(text, verdict, key, text_key, problems)`:
/// the JSON text (None when the record has no JSON form); the fused check's verdict (None when
/// it leaves the record to the careful path); the upsert key hashed in the walk; the key the
/// core's check of the text finds (None when it refuses the text); and the detailed
/// validator's problems, as `validate` gives them.
#[cfg(feature = "test-seams")]
#[pyfunction]
#[pyo3(name = "_check")]
#[allow(clippy::type_complexity)]
pub fn check_record<'py>(
    py: Python<'py>,
    record: &Bound<'py, PyAny>,
) -> PyResult<(
    Option<String>,
    Option<bool>,
    u64,
    Option<u64>,
    Bound<'py, PyList>,
)> {
    use crate::client::publish::{self as core, Input};
    use bytes::Bytes;

    let mut writer = Writer::new(py)?;
    let mut out = Vec::new();
    match writer.record(record, &mut out, true) {
        Ok(written) => {
            let text = String::from_utf8(out)
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not UTF-8: {e}")))?;
            let text_key = match core::check_text(0, None, Bytes::from(text.clone()), false) {
                Input::Ready { key, .. } => Some(key),
                _ => None,
            };
            let problems = problem_list(py, &problems_of(&text))?;
            let verdict = written.judged.then_some(written.conforms);
            Ok((Some(text), verdict, written.key, text_key, problems))
        }
        Err(ConvError {
            interrupt: Some(e), ..
        }) => Err(*e),
        Err(e) => Ok((
            None,
            Some(false),
            0,
            None,
            problem_list(py, &[e.problem()])?,
        )),
    }
}
