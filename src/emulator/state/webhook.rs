//! The webhook's store: records upserted by key, by region, and whether it takes arrays.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::{lock, State};

/// Webhook records, upserted by key, in order of first arrival.
#[derive(Debug, Default)]
pub struct Published {
    /// (region, record as JSON text).
    pub records: Vec<(&'static str, String)>,
    /// (region, upsert key) -> index in `records`.
    pub index: HashMap<(&'static str, String), usize>,
}

impl State {
    /// Whether the webhook accepts a JSON array of records as a body (the default), or answers
    /// it 400 `array_not_supported`, storing nothing.
    pub fn set_webhook_arrays(&self, accept: bool) {
        self.webhook_arrays.store(accept, Ordering::SeqCst);
    }

    /// See [`State::set_webhook_arrays`].
    pub fn webhook_arrays(&self) -> bool {
        self.webhook_arrays.load(Ordering::SeqCst)
    }

    /// Stores webhook records; returns how many replaced an existing one.
    pub fn store_published(&self, region: &'static str, records: Vec<(String, String)>) {
        let mut published = lock(&self.published);
        let mut upserts = 0;
        let n = records.len() as u64;
        let Published {
            records: stored,
            index,
        } = &mut *published;
        for (key, text) in records {
            match index.entry((region, key)) {
                std::collections::hash_map::Entry::Occupied(at) => {
                    stored[*at.get()].1 = text;
                    upserts += 1;
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(stored.len());
                    stored.push((region, text));
                }
            }
        }
        let mut stats = lock(&self.stats);
        stats.published_stored += n;
        stats.published_upserts += upserts;
    }

    /// The stored webhook records of `region` (or all), as JSON texts.
    pub fn published(&self, region: Option<&str>) -> Vec<String> {
        lock(&self.published)
            .records
            .iter()
            .filter(|(r, _)| region.is_none_or(|want| want == *r))
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// Number of stored webhook records.
    pub fn published_len(&self) -> usize {
        lock(&self.published).records.len()
    }

    /// Forgets the stored webhook records.
    pub fn clear_published(&self) {
        *lock(&self.published) = Published::default();
    }
}
