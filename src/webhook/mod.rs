//! The webhook's standard object models and their checks, read by the client's publishing
//! paths and by the emulator alike (neither imports the other):
//! - `models`: the tables (fields, types, required sets, legacy names, published values);
//! - `problems`: the detailed validator (paths, messages, severities);
//! - `suggest`: did-you-mean for unknown names; `messages`: how values show in a message;
//! - `fast`: the verdict a writer reaches while it writes a record, from the same tables;
//! - `scan`: that verdict for JSON text, without building a tree.

pub mod fast;
mod messages;
pub mod models;
mod problems;
pub mod scan;
mod suggest;
#[cfg(test)]
mod tests;

pub use problems::{has_errors, key_hash, upsert_fields, upsert_key, validate, Problem, Severity};
