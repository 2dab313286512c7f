//! The pure Rust client against the emulator over loopback, with no Python: event round trips
//! exactly once past the offset ceiling (`roundtrip`), and publishing under faults (`publish`).
//! One test binary, so the crate is linked once; `common` starts emulators and clients.

mod common;
mod publish;
mod roundtrip;
mod tokens;
