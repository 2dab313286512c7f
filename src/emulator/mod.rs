//! The local emulator of the service (axum on tokio, pure Rust): faithful to API.md, deterministic
//! from a seed, able to misbehave on purpose. `router(state)` for socket-less tests, `spawn` to serve.

pub mod data;
pub mod dialect;
pub mod routes;
pub mod server;
pub mod state;

pub use data::{Change, DataConfig};
pub use dialect::Dialect;
pub use routes::router;
pub use server::{spawn, spawn_with, Handle};
pub use state::{Bounds, Faults, Hostile, HostileRule, Limits, Order, State};

#[cfg(test)]
mod tests;
