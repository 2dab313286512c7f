//! The thin PyO3 binding layer: `surveillance._core`, registered here. One folder per concept
//! (`client`, `events`, `publish`, `emulator`, `conversions`), and `runtime`, which runs the
//! core's work for them; the logic lives in the pure Rust client and emulator.

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

mod client;
mod conversions;
mod emulator;
mod events;
mod publish;
mod results;
mod runtime;

use pyo3::prelude::*;

/// The native module `surveillance._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    tune_allocator();
    // No debug line until a call finds the `surveillance` logger enabled for DEBUG.
    crate::client::want_debug(false);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The core's defaults and bounds that the Python layer shows in its signatures.
    use crate::client::config;
    m.add("DAY_MS", crate::time::DAY_MS)?;
    m.add("DEFAULT_TIMEOUT_S", config::DEFAULT_TIMEOUT.as_secs_f64())?;
    m.add("DEFAULT_MAX_RETRIES", config::DEFAULT_MAX_RETRIES)?;
    m.add("DEFAULT_MAX_WAIT_S", config::DEFAULT_MAX_WAIT.as_secs_f64())?;
    m.add(
        "DEFAULT_MAX_OUTAGE_S",
        config::DEFAULT_MAX_OUTAGE.as_secs_f64(),
    )?;
    m.add("MAX_SETTLE_S", config::MAX_SETTLE_SECS)?;
    m.add(
        "DEFAULT_SETTLE_S",
        config::DEFAULT_SETTLE_MS as f64 / 1000.0,
    )?;
    let switches = pyo3::types::PyDict::new(m.py());
    for (word, on) in config::CACHE_SWITCHES {
        switches.set_item(word, on)?;
    }
    m.add("CACHE_SWITCHES", switches)?;
    m.add("LISTS", client::lists(m.py())?)?;
    m.add("REGIONS", config::Region::NAMES.to_vec())?;
    m.add(
        "PUBLISHED_LIMITS",
        conversions::keywords::limits_dict(m.py(), &crate::limits::Limits::PUBLISHED)?,
    )?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<emulator::PyEmulator>()?;
    m.add_class::<events::query::PyEventQuery>()?;
    m.add_class::<events::stream::EventStream>()?;
    m.add_class::<events::batches::BatchStream>()?;
    m.add_class::<runtime::sigint::InterruptWatch>()?;
    // The call running now, per thread and per asyncio task (`runtime::call`).
    m.add_class::<runtime::call::PyCallScope>()?;
    m.add("CALL", runtime::call::variable(m.py())?.clone_ref(m.py()))?;
    // The results' classes are also the module `surveillance._core_results`, whose stub
    // (`_core_results.pyi`) holds theirs apart from the rest of the module's.
    let results = PyModule::new(m.py(), "surveillance._core_results")?;
    results::register(&results)?;
    results.add_class::<publish::report::PyPublishReport>()?;
    results.add_class::<publish::report::PyFailure>()?;
    for name in results.index()? {
        let name = name.extract::<String>()?;
        m.add(&name, results.getattr(&name)?)?;
    }
    let modules = m.py().import("sys")?.getattr("modules")?;
    modules.set_item("surveillance._core_results", results)?;
    // The runtime stops before the interpreter finalizes (see `runtime::stop_at_exit`).
    let stop = wrap_pyfunction!(runtime::stop_at_exit, m)?;
    m.py().import("atexit")?.call_method1("register", (stop,))?;
    m.add_function(wrap_pyfunction!(runtime::telemetry::scrub, m)?)?;
    m.add_function(wrap_pyfunction!(client::cache_location, m)?)?;
    m.add_function(wrap_pyfunction!(client::cache_info_at, m)?)?;
    m.add_function(wrap_pyfunction!(client::clear_cache_at, m)?)?;
    m.add_function(wrap_pyfunction!(conversions::arrow::write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(events::events_schema, m)?)?;
    m.add_function(wrap_pyfunction!(conversions::arrow::columns, m)?)?;
    #[cfg(feature = "test-seams")]
    {
        m.add_function(wrap_pyfunction!(conversions::from_json::loads, m)?)?;
        m.add_function(wrap_pyfunction!(publish::check::check_record, m)?)?;
    }
    m.add_function(wrap_pyfunction!(conversions::keywords::check_limits, m)?)?;
    m.add_function(wrap_pyfunction!(client::check_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(conversions::time::py_to_datetime, m)?)?;
    m.add_function(wrap_pyfunction!(conversions::time::py_to_ms, m)?)?;
    m.add_function(wrap_pyfunction!(conversions::time::py_from_ms, m)?)?;
    m.add_function(wrap_pyfunction!(results::shown::html_table, m)?)?;
    m.add_function(wrap_pyfunction!(publish::publish, m)?)?;
    m.add_class::<publish::lines::JsonLines>()?;
    m.add_function(wrap_pyfunction!(publish::lines::columns_json, m)?)?;
    m.add_function(wrap_pyfunction!(publish::columns::json_column, m)?)?;
    m.add_function(wrap_pyfunction!(publish::structs::struct_list_column, m)?)?;
    m.add_function(wrap_pyfunction!(publish::lines::jsonl_rest, m)?)?;
    m.add_function(wrap_pyfunction!(publish::check::validate_record, m)?)?;
    m.add_function(wrap_pyfunction!(publish::check::record_json, m)?)?;
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
