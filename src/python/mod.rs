//! The thin PyO3 binding layer: `surveillance._core`. Converts arguments and results and maps
//! errors; the logic lives in the pure Rust client and emulator.

/// The extension's allocator (the core leaves the choice to its host): mimalloc serves the many
/// small allocations of JSON parsing and validation at about half glibc's cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod aio;
mod arrow;
mod client;
mod convert;
mod emulator;
mod errors;
mod events;
mod log;
mod publish;
mod runtime;
mod wait;

use pyo3::prelude::*;

/// The native module `surveillance._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<emulator::PyEmulator>()?;
    m.add_class::<events::EventStream>()?;
    m.add_class::<arrow::BatchStream>()?;
    m.add_function(wrap_pyfunction!(arrow::write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::events_table, m)?)?;
    m.add_function(wrap_pyfunction!(convert::loads, m)?)?;
    m.add_function(wrap_pyfunction!(publish::publish_records, m)?)?;
    m.add_function(wrap_pyfunction!(publish::validate_record, m)?)?;
    m.add_function(wrap_pyfunction!(publish::record_json, m)?)?;
    Ok(())
}
