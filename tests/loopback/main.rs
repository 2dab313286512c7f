//! The pure Rust client against the emulator over loopback, with no Python: event round trips
//! exactly once past the offset ceiling (`roundtrip`), publishing under faults (`publish`), and
//! a stopped call that sends nothing more (`stop`).
//! One test binary, so the crate is linked once; `common` starts emulators and clients.

mod common;
mod publish;
mod roundtrip;
mod stop;
mod tokens;
