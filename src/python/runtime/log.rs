//! Log lines of the core, buffered and handed to the Python logger `surveillance` only while the
//! GIL is held by us, so that Rust never waits for the GIL to log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::IntoPyDict;

use crate::client::{Level, LogSink};

/// Each line with the `traceparent` of the call it was logged in, when it has one.
static BUFFER: Mutex<Vec<(Level, String, Option<String>)>> = Mutex::new(Vec::new());
static DEBUG_ON: AtomicBool = AtomicBool::new(false);
/// Lines kept between two flushes; past it the oldest debug lines are dropped.
const CAP: usize = 20_000;

/// The sink given to every core client.
pub fn sink() -> LogSink {
    Arc::new(|level, line| {
        if level == Level::Debug && !DEBUG_ON.load(Ordering::Relaxed) {
            return;
        }
        let mut b = BUFFER.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() < CAP || level == Level::Warning {
            b.push((level, line, crate::client::scope::traceparent()));
        }
    })
}

/// Re-reads whether the `surveillance` logger wants DEBUG lines.
pub fn refresh(py: Python<'_>) {
    let on = logger(py)
        .and_then(|l| l.call_method1("isEnabledFor", (10,)))
        .and_then(|v| v.extract::<bool>())
        .unwrap_or(false);
    DEBUG_ON.store(on, Ordering::Relaxed);
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
    for (level, line, trace) in lines {
        let n = match level {
            Level::Debug => 10,
            Level::Warning => 30,
        };
        // The trace and span of the call, as `extra` fields (`00-TRACE-SPAN-FLAGS`).
        let extra = trace.as_deref().and_then(|t| {
            let mut parts = t.split('-').skip(1);
            let (trace_id, span_id) = (parts.next()?, parts.next()?);
            [("trace_id", trace_id), ("span_id", span_id)]
                .into_py_dict(py)
                .ok()
        });
        let kwargs = extra.and_then(|e| [("extra", e)].into_py_dict(py).ok());
        // A failing handler is the application's business; never let it break a fetch.
        let _ = logger.call_method("log", (n, "%s", line), kwargs.as_ref());
    }
}
