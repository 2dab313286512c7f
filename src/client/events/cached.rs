//! The cache of settled events in the planner: the parts of a range the cache holds, planned
//! as windows complete without a request (their files read by the driver when they reach the
//! frontier, see [`Planner::wants_file`]), and whether completed windows' settled parts are
//! kept for it.

use super::{CacheWrites, Planner};
use crate::client::cache::Segment;

impl Planner {
    /// Adds the part `[lo, hi)` of a cached segment, complete without a request.
    pub(super) fn add_cached(&mut self, segment: Segment, lo: i64, hi: i64) {
        let mut w = self.new_window(lo, hi);
        w.serve(segment);
        self.put(w);
    }

    /// The cache could not be written: the planner keeps nothing more for it (nor its pages'
    /// bodies, unless it carries them).
    pub(super) fn skip_cache_writes(&mut self) {
        self.cache_writes = CacheWrites::Skip;
    }
}
