//! The thin PyO3 binding layer: `surveillance._core`. Converts arguments and results and maps
//! errors; the logic lives in the pure Rust client and emulator.

/// The extension's allocator (the core leaves the choice to its host): mimalloc serves the many
/// small allocations of JSON parsing and validation at about half glibc's cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's option enum (`mimalloc.h`, the same in v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory is kept 5 s before it is returned to the OS (mimalloc's default is 1 s, as
/// jemalloc's is 10 s): a fetch frees and reuses a page body and a window's columns many times a
/// second, and memory returned too early comes back as page faults (a sixth of a 1,000,000-event
/// fetch's time). `MIMALLOC_PURGE_DELAY` in the environment still decides when it is set.
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set only stores a number in mimalloc's option table; any value is
        // valid for this option, and it may be changed at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 5000) };
    }
}

mod aio;
mod arrow;
mod client;
mod columns;
mod emulator;
mod errors;
mod events;
mod from_json;
mod kwargs;
mod log;
mod progress;
mod publish;
mod report;
mod runtime;
mod to_json;
mod values;
mod wait;

use pyo3::prelude::*;

/// The core's list table (`client::lists`) as the Python layer needs it: for each list, its
/// `name`, what it holds (`about`) and the keywords of its `filters`.
fn lists(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    #[derive(serde::Serialize)]
    struct Shown {
        name: &'static str,
        about: &'static str,
        filters: Vec<&'static str>,
    }
    let shown: Vec<Shown> = crate::client::lists::List::ALL
        .iter()
        .map(|l| Shown {
            name: l.name(),
            about: l.spec().about,
            filters: l.spec().filters.iter().map(|f| f.keyword).collect(),
        })
        .collect();
    values::to_py(py, &shown)
}

/// The native module `surveillance._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    tune_allocator();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The core's defaults and bounds that the Python layer shows in its signatures.
    use crate::client::config;
    m.add("DAY_MS", crate::time::DAY_MS)?;
    m.add("DEFAULT_TIMEOUT_S", config::DEFAULT_TIMEOUT.as_secs_f64())?;
    m.add("DEFAULT_MAX_RETRIES", config::DEFAULT_MAX_RETRIES)?;
    m.add("DEFAULT_MAX_WAIT_S", config::DEFAULT_MAX_WAIT.as_secs_f64())?;
    m.add("MAX_SETTLE_S", config::MAX_SETTLE_SECS)?;
    m.add("LISTS", lists(m.py())?)?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<emulator::PyEmulator>()?;
    m.add_class::<events::EventStream>()?;
    m.add_class::<arrow::BatchStream>()?;
    m.add_function(wrap_pyfunction!(client::cache_location, m)?)?;
    m.add_function(wrap_pyfunction!(client::cache_info_at, m)?)?;
    m.add_function(wrap_pyfunction!(client::clear_cache_at, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::events_schema, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::columns, m)?)?;
    #[cfg(feature = "test-seams")]
    {
        m.add_function(wrap_pyfunction!(from_json::loads, m)?)?;
        m.add_function(wrap_pyfunction!(publish::check_record, m)?)?;
    }
    m.add_function(wrap_pyfunction!(kwargs::check_limits, m)?)?;
    m.add_function(wrap_pyfunction!(publish::publish_records, m)?)?;
    m.add_class::<columns::JsonLines>()?;
    m.add_function(wrap_pyfunction!(columns::publish_columns, m)?)?;
    m.add_function(wrap_pyfunction!(columns::columns_json, m)?)?;
    m.add_function(wrap_pyfunction!(columns::jsonl_rest, m)?)?;
    m.add_function(wrap_pyfunction!(publish::validate_record, m)?)?;
    m.add_function(wrap_pyfunction!(publish::record_json, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn freed_memory_is_kept_five_seconds() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        super::tune_allocator();
        // SAFETY: reads a number from mimalloc's option table.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 5000);
    }
}
