//! The planner's book of windows: the open windows by start, the requests queued for them,
//! their ids, and the notes for the driver. Every other part of the planner changes these
//! through the calls here.

use super::carry::CarriedPage;
use super::page::widened;
use super::{Ask, Note, Planner, Window};

impl Planner {
    /// Window `id`, if it is still open.
    pub(super) fn window_mut(&mut self, id: u64) -> Option<&mut Window> {
        self.windows.values_mut().find(|w| w.id == id)
    }

    /// A window of `[ws, we)` with a fresh id, not yet planned.
    pub(super) fn new_window(&mut self, ws: i64, we: i64) -> Window {
        self.next_id += 1;
        Window::new(self.next_id - 1, ws, we)
    }

    /// Opens window `w` (at its start). One a fetch asks pages of (not one the cache serves) is
    /// noted for the driver to say how far the pages held for it reach.
    pub(super) fn put(&mut self, w: Window) {
        if self.goal.takes_held() && w.cached.is_none() {
            let (id, qs, qe) = (w.id, w.qs, w.qe);
            self.note(Note::Opened { id, qs, qe });
        }
        self.windows.insert(w.ws, w);
    }

    /// Closes the window that starts at `ws`, and drops the requests still queued for it.
    pub(super) fn take(&mut self, ws: i64) -> Option<Window> {
        let w = self.windows.remove(&ws)?;
        self.queue.retain(|(i, _)| *i != w.id);
        Some(w)
    }

    /// The window filed at `ws` now starts elsewhere: filed again at its start.
    pub(super) fn refile(&mut self, ws: i64) {
        if let Some(w) = self.windows.remove(&ws) {
            self.windows.insert(w.ws, w);
        }
    }

    /// Queues a request of window `id`, after those queued.
    pub(super) fn ask(&mut self, id: u64, kind: Ask) {
        self.queue.push_back((id, kind));
    }

    /// Queues a request of window `id`, before those queued.
    pub(super) fn ask_first(&mut self, id: u64, kind: Ask) {
        self.queue.push_front((id, kind));
    }

    /// The next request queued: probes first (they decide the plan), then pages of the
    /// earliest windows.
    pub(super) fn next_request(&mut self) -> Option<(u64, Ask)> {
        let pos = self
            .queue
            .iter()
            .position(|(_, k)| *k == Ask::Probe)
            .unwrap_or(0);
        self.queue.remove(pos)
    }

    /// Whether every window is done and handed out.
    pub(super) fn is_done(&self) -> bool {
        self.windows.is_empty()
    }

    /// Notes `note` for the driver.
    pub(super) fn note(&mut self, note: Note) {
        self.notes.push(note);
    }

    /// The notes for the driver since it last took them, oldest first (see [`Note`]).
    pub(super) fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// For a sync that the daily quota, an error or an interruption stops: the pages read of
    /// every window not handed out (the frontier window's, and those of the windows after it,
    /// whole or not), whose query has settled, taken from their windows (none for another
    /// goal). The next run starts at the frontier and plans the same windows from the same
    /// pages, so it asks none of them again; when a window completes, `holds_together`
    /// checks that the two runs' pages make one answer.
    pub(super) fn carried(&mut self) -> Vec<CarriedPage> {
        let mut pages = Vec::new();
        if !self.goal.carries() {
            return pages;
        }
        for w in self.windows.values_mut() {
            if w.cached.is_some() || widened(w.qs, w.qe).1 >= self.cutoff {
                continue;
            }
            for (offset, page) in w.take_pages() {
                if let Some(body) = page.body {
                    pages.push(CarriedPage {
                        qs: w.qs,
                        qe: w.qe,
                        offset,
                        body,
                    });
                }
            }
        }
        pages
    }
}
