//! The events' store: ids, the per-report index, lookups by time, changes and additions, and
//! the JSON of one event, rendered when a page is served.

use super::{offset_minutes, Data, Zone, MARKERS};
use crate::rng::{mix, push_uuid, Rng};
use crate::time::push_time;

/// One event in 32 bytes; its JSON is rendered from this and the site/camera tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    /// startTime, Unix epoch milliseconds.
    pub start_ms: i64,
    /// Sequence number: the event id is derived from it and the seed.
    pub seq: u32,
    /// endTime - startTime.
    pub dur_ms: u32,
    /// createTime - endTime: negative once [`Data::update_event`] moved the end past the
    /// creation.
    pub create_delay_ms: i32,
    /// Index in `Data::cams`.
    pub cam: u32,
    /// UTC offset of the site at startTime, minutes.
    pub offset_min: i16,
    /// Bit 0: `confirmed` present; bit 1: its value; bits 2-3: marker kind.
    pub flags: u8,
}

/// What [`Data::update_event`] changes of an event; a field left None stays as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Change {
    /// The new endTime, epoch ms (not before its startTime).
    pub end_ms: Option<i64>,
    /// The new `details.confirmed`.
    pub confirmed: Option<bool>,
    /// The new site, an index in `Data::site_info`.
    pub site: Option<usize>,
}

impl Data {
    /// Rebuilds the per-report positions after the events changed.
    pub fn rebuild_index(&mut self) {
        let zones: Vec<Option<Zone>> = self.reports.iter().map(|r| r.zone).collect();
        self.report_index = zones
            .iter()
            .map(|zone| match zone {
                None => Vec::new(),
                Some(z) => self
                    .events
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| self.cams[e.cam as usize].zone == *z)
                    .map(|(i, _)| i as u32)
                    .collect(),
            })
            .collect();
    }

    /// Inserts `count` events starting exactly at `at_ms` at site `site` (or a chosen one) and
    /// returns their ids. Used by tests for dense bursts and late-created events.
    pub fn add_events(&mut self, at_ms: i64, count: u32, site: Option<usize>) -> Vec<String> {
        self.add_events_created(at_ms, count, site, None)
    }

    /// As `add_events`; with `created_ms`, every new event has exactly that `createTime` (an
    /// event created late, e.g. inside an ETL job's settle period), its dwell time shortened
    /// when needed so that it ends by then. A `created_ms` before `at_ms` is taken as `at_ms`.
    pub fn add_events_created(
        &mut self,
        at_ms: i64,
        count: u32,
        site: Option<usize>,
        created_ms: Option<i64>,
    ) -> Vec<String> {
        if self.site_info.is_empty() {
            return Vec::new();
        }
        let mut rng = Rng::new(self.seed, 0xADD0_0000 + self.next_seq as u64);
        let s = site.unwrap_or_else(|| rng.below(self.site_info.len() as u64) as usize);
        let pos = self.events.partition_point(|e| e.start_ms <= at_ms);
        let mut tail = self.events.split_off(pos);
        let before = self.events.len();
        for _ in 0..count {
            self.push_event(&mut rng, s, at_ms);
        }
        if let Some(created) = created_ms {
            let span = u32::try_from(created.max(at_ms) - at_ms).unwrap_or(u32::MAX);
            for e in &mut self.events[before..] {
                e.dur_ms = e.dur_ms.min(span);
                e.create_delay_ms = i32::try_from(span - e.dur_ms).unwrap_or(i32::MAX);
            }
        }
        let ids = self.events[before..]
            .iter()
            .map(|e| self.event_id(e))
            .collect();
        self.events.append(&mut tail);
        self.rebuild_index();
        ids
    }

    /// Changes the event `id` as the service revises one (its dwell ended later, a person
    /// confirmed it, it was filed under another site): its id, startTime and createTime stay,
    /// the fields that follow from the change move with it (endTime, `details.duration_sec`
    /// and the subtitle with the end; deviceId, cameras, zone, tags and offsets with the
    /// site), and every later read serves the new version. The service's event has no update
    /// time, so nothing else tells the change. Returns the event's JSON as now served, or what
    /// is wrong with the change.
    pub fn update_event(&mut self, id: &str, change: Change) -> Result<String, String> {
        let pos = self
            .events
            .iter()
            .position(|e| self.event_id(e).eq_ignore_ascii_case(id))
            .ok_or_else(|| format!("no event `{id}`"))?;
        let e = self.events[pos];
        let mut new = e;
        if let Some(end) = change.end_ms {
            let dur = end
                .checked_sub(e.start_ms)
                .filter(|d| *d >= 0)
                .ok_or("`end_time` must not be before the event's startTime")?;
            new.dur_ms = u32::try_from(dur)
                .map_err(|_| "`end_time` must be within 49 days of the event's startTime")?;
            let created = e.start_ms + i64::from(e.dur_ms) + i64::from(e.create_delay_ms);
            new.create_delay_ms = (created - end).clamp(i32::MIN.into(), i32::MAX.into()) as i32;
        }
        if let Some(confirmed) = change.confirmed {
            new.flags = (new.flags & !3) | 1 | (u8::from(confirmed) << 1);
        }
        if let Some(s) = change.site {
            let info = self
                .site_info
                .get(s)
                .ok_or_else(|| format!("no site number {s}"))?;
            let zone = self.cams[e.cam as usize].zone;
            new.cam = info
                .cameras
                .iter()
                .copied()
                .find(|c| self.cams[*c as usize].zone == zone)
                .or_else(|| info.cameras.first().copied())
                .ok_or("that site has no camera")?;
            new.offset_min = offset_minutes(info.tz, e.start_ms);
        }
        let moved = self.cams[new.cam as usize].zone != self.cams[e.cam as usize].zone;
        self.events[pos] = new;
        if moved {
            self.rebuild_index();
        }
        let mut out = String::new();
        self.render_event(&new, &mut out);
        Ok(out)
    }

    /// The id of an event.
    pub fn event_id(&self, e: &Ev) -> String {
        let mut out = String::with_capacity(36);
        self.push_event_id(e, &mut out);
        out
    }

    fn push_event_id(&self, e: &Ev, out: &mut String) {
        let h = mix(self.seed ^ 0xE7E7_0000_0000 ^ e.seq as u64);
        push_uuid(out, h, mix(h ^ e.seq as u64));
    }

    /// Index of a report by id.
    pub fn report_by_id(&self, id: &str) -> Option<usize> {
        self.reports
            .iter()
            .position(|r| r.id.eq_ignore_ascii_case(id))
    }

    /// Number of events in the base sequence (all, or a report's).
    pub fn base_len(&self, report: Option<usize>) -> usize {
        match self.zone_index(report) {
            Some(ix) => ix.len(),
            None => self.events.len(),
        }
    }

    fn zone_index(&self, report: Option<usize>) -> Option<&Vec<u32>> {
        let r = report?;
        self.reports.get(r)?.zone?;
        self.report_index.get(r)
    }

    /// The event at position `i` of the base sequence.
    pub fn base_event(&self, report: Option<usize>, i: usize) -> &Ev {
        match self.zone_index(report) {
            Some(ix) => &self.events[ix[i] as usize],
            None => &self.events[i],
        }
    }

    /// First position in the base sequence whose start is `>= t` (or `> t` when `after`).
    pub fn lower_bound(&self, report: Option<usize>, t: i64, after: bool) -> usize {
        let key = |e: &Ev| {
            if after {
                e.start_ms <= t
            } else {
                e.start_ms < t
            }
        };
        match self.zone_index(report) {
            Some(ix) => ix.partition_point(|&p| key(&self.events[p as usize])),
            None => self.events.partition_point(key),
        }
    }

    /// Ids of events with `start <= startTime < end`, sorted by (startTime, id).
    pub fn truth(&self, start_ms: i64, end_ms: i64, report: Option<usize>) -> Vec<String> {
        let a = self.lower_bound(report, start_ms, false);
        let b = self.lower_bound(report, end_ms, false).max(a);
        let mut out: Vec<(i64, String)> = (a..b)
            .map(|i| {
                let e = self.base_event(report, i);
                (e.start_ms, self.event_id(e))
            })
            .collect();
        out.sort();
        out.into_iter().map(|(_, id)| id).collect()
    }

    /// Appends the JSON of one event to `out` (by pieces, without `format!`: every page served
    /// renders a hundred of them).
    pub fn render_event(&self, e: &Ev, out: &mut String) {
        let cam = &self.cams[e.cam as usize];
        let site = &self.site_info[cam.site as usize];
        let end = e.start_ms + e.dur_ms as i64;
        let created = end + e.create_delay_ms as i64;
        let dur_sec = e.dur_ms / 1000;
        let marker = MARKERS[((e.flags >> 2) & 3) as usize];
        let mut num = itoa::Buffer::new();
        out.push_str("{\"id\":\"");
        self.push_event_id(e, out);
        out.push_str("\",\"startTime\":\"");
        push_time(out, e.start_ms, e.offset_min);
        out.push_str("\",\"endTime\":\"");
        push_time(out, end, e.offset_min);
        out.push_str("\",\"type\":\"bookmark\",\"subtype\":\"ai-dwellTime\",\"siteId\":\"");
        out.push_str(&site.id);
        out.push_str("\",\"deviceId\":\"");
        out.push_str(&cam.device_id);
        out.push_str("\",\"title\":\"Dwell time: ");
        out.push_str(cam.zone.label());
        out.push_str("\",\"subtitle\":\"");
        out.push_str(&cam.name_json);
        out.push_str(" · ");
        out.push_str(num.format(dur_sec));
        out.push_str(" s\",");
        out.push_str(&site.tags_json);
        out.push_str(",\"createTime\":\"");
        push_time(out, created, e.offset_min);
        out.push_str("\",\"details\":{\"duration_sec\":");
        out.push_str(num.format(dur_sec));
        out.push(',');
        if e.flags & 1 != 0 {
            out.push_str(if e.flags & 2 != 0 {
                "\"confirmed\":true,"
            } else {
                "\"confirmed\":false,"
            });
        }
        out.push_str("\"origin\":\"ai-dwell-time\",\"localTime\":");
        out.push_str(num.format(e.start_ms + e.offset_min as i64 * 60_000));
        out.push_str(",\"generatedByEventStandard\":true,\"marker\":\"");
        out.push_str(marker);
        out.push_str("\",\"zone\":\"");
        out.push_str(cam.zone.label());
        out.push_str("\",\"visitors\":");
        out.push_str(num.format(1 + (e.seq % 3)));
        out.push_str("},\"cameras\":[");
        out.push_str(&cam.json);
        out.push_str("]}");
    }
}
