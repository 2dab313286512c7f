//! The emulator's data as the binding asks for it: sites and reports named by id, resource
//! lists by kind, events added and changed. Called with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::emulator::{data::Data, Change, State};

/// The index in `data.site_info` of the site `id`, when one is given.
fn site_number(data: &Data, id: Option<String>) -> PyResult<Option<usize>> {
    id.map(|id| {
        data.site_info
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| PyValueError::new_err(format!("no site `{id}`")))
    })
    .transpose()
}

/// Inserts `count` events starting at `at_ms` (created at `created_ms` when given); their ids.
pub fn add_events(
    state: &State,
    at_ms: i64,
    count: u32,
    site_id: Option<String>,
    created_ms: Option<i64>,
) -> PyResult<Vec<String>> {
    if created_ms.is_some_and(|c| c < at_ms) {
        return Err(PyValueError::new_err(
            "`created_at` must not be before `at`: an event is created after it starts",
        ));
    }
    let mut data = state.data_mut();
    let site = site_number(&data, site_id)?;
    Ok(data.add_events_created(at_ms, count, site, created_ms))
}

/// Changes the event `event_id` (each field when given); its JSON text as now served.
pub fn update_event(
    state: &State,
    event_id: &str,
    end_ms: Option<i64>,
    confirmed: Option<bool>,
    site_id: Option<String>,
) -> PyResult<String> {
    let mut data = state.data_mut();
    let site = site_number(&data, site_id)?;
    let change = Change {
        end_ms,
        confirmed,
        site,
    };
    data.update_event(event_id, change)
        .map_err(PyValueError::new_err)
}

/// Ids of the events with `start <= startTime < end` (of the report `report_id`, when given),
/// sorted by (startTime, id).
pub fn truth(
    state: &State,
    start_ms: i64,
    end_ms: i64,
    report_id: Option<String>,
) -> PyResult<Vec<String>> {
    let data = state.data();
    let report = match report_id {
        None => None,
        Some(id) => Some(
            data.report_by_id(&id)
                .ok_or_else(|| PyValueError::new_err(format!("no report `{id}`")))?,
        ),
    };
    Ok(data.truth(start_ms, end_ms, report))
}

/// Every record of the resource list `kind`, as Python objects.
pub fn resources<'py>(py: Python<'py>, state: &State, kind: &str) -> PyResult<Bound<'py, PyAny>> {
    use crate::emulator::data::{listing, LISTINGS};
    use crate::python::conversions::values::to_py;
    let Some(listing) = listing(kind) else {
        let names: Vec<&str> = LISTINGS.iter().map(|l| l.name).collect();
        return Err(PyValueError::new_err(format!(
            "`kind` must be one of {}, got `{kind}`",
            names.join(", ")
        )));
    };
    to_py(py, &(listing.records)(&state.data()))
}
