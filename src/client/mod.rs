//! The pure Rust client of the service. Knows nothing of Python.

pub mod validate;
