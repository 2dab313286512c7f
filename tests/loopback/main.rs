//! The pure Rust client against the emulator over loopback, with no Python: event round trips
//! exactly once past the offset ceiling (`roundtrip`), publishing under faults (`publish`), and
//! what a call's observer is told of each request sent again (`resends`), and a stopped call
//! that sends nothing more (`stop`).
//! One test binary, so the crate is linked once; `common` starts emulators and clients.

mod common;
mod publish;
mod resends;
mod roundtrip;
mod stop;
mod tokens;
