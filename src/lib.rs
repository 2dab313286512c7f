//! `surveillance`: a client for a video-surveillance cloud API, and a local emulator of it.
//! The client and emulator are pure Rust; the Python bindings live behind the `python` feature.

pub mod client;
pub mod emulator;
pub mod limits;
pub mod rng;
pub mod text;
pub mod time;
pub mod webhook;
pub mod wording;

#[cfg(feature = "python")]
mod python;
