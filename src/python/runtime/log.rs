//! Log lines of the core, buffered and handed to the Python logger `surveillance` only while the
//! GIL is held by us, so that Rust never waits for the GIL to log. The fields of the request a
//! line is about go into its record's `extra` (`endpoint`, `status`, `request_id`, `attempt`;
//! None where a line is about no request).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use pyo3::types::PyDict;

use crate::client::{Fields, Level, LogSink};

/// Each line with its fields and the `traceparent` of the call it was logged in, when it has
/// one.
static BUFFER: Mutex<Vec<Line>> = Mutex::new(Vec::new());

/// A line, its level, its fields and its call's `traceparent`.
type Line = (Level, String, Fields, Option<String>);
/// Lines kept between two flushes; past it the oldest debug lines are dropped.
const CAP: usize = 20_000;

/// The sink given to every core client (the core makes a debug line only while
/// [`refresh`] says the logger wants one).
pub fn sink() -> LogSink {
    Arc::new(|level, line, fields| {
        let mut b = BUFFER.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() < CAP || level == Level::Warning {
            b.push((level, line, fields, crate::client::scope::traceparent()));
        }
    })
}

/// Re-reads whether the `surveillance` logger wants DEBUG lines.
pub fn refresh(py: Python<'_>) {
    let on = logger(py)
        .and_then(|l| l.call_method1("isEnabledFor", (10,)))
        .and_then(|v| v.extract::<bool>())
        .unwrap_or(false);
    crate::client::want_debug(on);
}

fn logger(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import("logging")?
        .call_method1("getLogger", ("surveillance",))
}

/// Hands the buffered lines to Python's logging.
pub fn flush(py: Python<'_>) {
    let lines = std::mem::take(&mut *BUFFER.lock().unwrap_or_else(|e| e.into_inner()));
    if lines.is_empty() {
        return;
    }
    let Ok(logger) = logger(py) else { return };
    for (level, line, fields, trace) in lines {
        let n = match level {
            Level::Debug => 10,
            Level::Warning => 30,
        };
        let Ok(kwargs) = extra(py, &fields, trace.as_deref()) else {
            continue;
        };
        // A failing handler is the application's business; never let it break a fetch.
        let _ = logger.call_method("log", (n, "%s", line), Some(&kwargs));
    }
}

/// The keyword arguments of a record's `log` call: its `extra`, the line's fields and the
/// trace and span of its call (`trace`: `00-TRACE-SPAN-FLAGS`; None each without one).
fn extra<'py>(
    py: Python<'py>,
    fields: &Fields,
    trace: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let extra = PyDict::new(py);
    let mut ids = trace.map(|t| t.split('-').skip(1)).into_iter().flatten();
    extra.set_item("trace_id", ids.next())?;
    extra.set_item("span_id", ids.next())?;
    extra.set_item("endpoint", fields.endpoint)?;
    extra.set_item("status", fields.status)?;
    extra.set_item("request_id", fields.request_id.as_deref())?;
    extra.set_item("attempt", fields.attempt)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("extra", extra)?;
    Ok(kwargs)
}
