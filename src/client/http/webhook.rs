//! What a client learned of the webhook (whether it takes JSON arrays), for all its publishes.

use std::sync::atomic::Ordering;

/// Whether the webhook takes JSON arrays, as far as a client has found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrays {
    /// Not tried yet, or only successes.
    Unknown,
    /// An array of one was accepted.
    Accepted,
    /// An array of one was refused where the same record alone was accepted.
    Refused,
}

/// What a client learned of the webhook, for all its publishes.
#[derive(Debug, Default)]
pub struct Webhook {
    arrays: std::sync::atomic::AtomicU8,
}

impl Webhook {
    /// Whether arrays are taken.
    pub fn arrays(&self) -> Arrays {
        match self.arrays.load(Ordering::Relaxed) {
            1 => Arrays::Accepted,
            2 => Arrays::Refused,
            _ => Arrays::Unknown,
        }
    }

    pub(crate) fn accept_arrays(&self) {
        let _ = self
            .arrays
            .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// True for the call that found it out first (which says so in the log).
    pub(crate) fn refuse_arrays(&self) -> bool {
        self.arrays.swap(2, Ordering::Relaxed) != 2
    }
}
