//! Running a core future from a sync binding: on the shared runtime, with the GIL released,
//! waking every 50 ms to check for signals (Ctrl-C drops the future, which cancels its requests)
//! and to hand buffered log lines to Python.

use std::future::Future;
use std::time::Duration;

use pyo3::prelude::*;

use super::{errors, log, runtime};
use crate::client::Result;

/// Runs `fut` to completion, or until a signal handler raises.
pub fn wait<T, F>(py: Python<'_>, fut: F) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    wait_with(py, fut, |_| Ok(()))
}

/// As `wait`, calling `tick` with the GIL between waits (progress updates).
pub fn wait_with<T, F>(
    py: Python<'_>,
    fut: F,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let rt = runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    let mut handle = rt.spawn(fut);
    loop {
        let step = py.detach(|| {
            rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(50), &mut handle).await
            })
        });
        log::flush(py);
        if let Err(e) = tick(py) {
            handle.abort();
            return Err(e);
        }
        match step {
            Ok(Ok(result)) => return result.map_err(errors::to_py),
            Ok(Err(join)) => return Err(errors::internal(join)),
            Err(_elapsed) => {
                if let Err(interrupt) = py.check_signals() {
                    handle.abort();
                    return Err(interrupt);
                }
            }
        }
    }
}
