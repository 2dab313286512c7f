//! Values crossing between Python and the core, converted in one place each: JSON text to
//! Python objects (`from_json`), Python records to JSON text (`to_json`), the core's serde
//! results (`values`), Arrow data (`arrow`), keyword arguments to settings (`keywords`), times
//! to and from epoch milliseconds (`time`), and the core's errors to the Python exception
//! hierarchy (`errors`).

pub(super) mod arrow;
pub(super) mod errors;
pub(super) mod from_json;
pub(super) mod keywords;
pub(super) mod time;
pub(super) mod to_json;
pub(super) mod values;
