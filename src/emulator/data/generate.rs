//! The generation of a data set from its seed: sites in cities and time zones, their devices,
//! cameras and reports, and each day's events following local opening hours.

use chrono_tz::Tz;
use serde_json::{json, Value};

use super::{offset_minutes, CamInfo, Data, DataConfig, Ev, ReportInfo, SiteInfo, Zone, MARKERS};
use crate::rng::Rng;
use crate::time::DAY_MS;

const BRANDS: [&str; 6] = [
    "Northwind Coffee",
    "Bluebird Burgers",
    "Summit Fuel",
    "Harbor Pharmacy",
    "Maple Market",
    "Comet Tacos",
];

const CITIES: [(&str, &str); 16] = [
    ("New York", "America/New_York"),
    ("Chicago", "America/Chicago"),
    ("Denver", "America/Denver"),
    ("Phoenix", "America/Phoenix"),
    ("Los Angeles", "America/Los_Angeles"),
    ("Anchorage", "America/Anchorage"),
    ("Honolulu", "Pacific/Honolulu"),
    ("Toronto", "America/Toronto"),
    ("St. John's", "America/St_Johns"),
    ("London", "Europe/London"),
    ("Berlin", "Europe/Berlin"),
    ("Madrid", "Europe/Madrid"),
    ("Kolkata", "Asia/Kolkata"),
    ("Kathmandu", "Asia/Kathmandu"),
    ("Sydney", "Australia/Sydney"),
    ("Auckland", "Pacific/Auckland"),
];

const RETENTIONS: [u32; 4] = [7, 14, 30, 90];

/// How busy a local hour is, relative to the peak (lunch and dinner).
fn hour_weight(hour: u32) -> f64 {
    match hour {
        11..=13 => 1.0,
        17..=19 => 0.9,
        7..=10 | 14..=16 => 0.55,
        20..=21 => 0.45,
        _ => 0.15,
    }
}

impl Data {
    /// Generates the data set for `cfg`, deterministically.
    pub fn generate(cfg: &DataConfig) -> Data {
        let mut rng = Rng::new(cfg.seed, 1);
        let customer = rng.uuid();
        let mut sites = Vec::with_capacity(cfg.sites);
        let mut devices = Vec::new();
        let mut cameras = Vec::new();
        let mut site_info = Vec::with_capacity(cfg.sites);
        let mut cams = Vec::new();
        for s in 0..cfg.sites {
            let brand = BRANDS[rng.below(BRANDS.len() as u64) as usize];
            let (city, tz_name) = CITIES[rng.below(CITIES.len() as u64) as usize];
            let tz: Tz = tz_name.parse().unwrap_or(Tz::UTC);
            let site_id = rng.uuid();
            let n_devices = match rng.below(10) {
                0..=6 => 1,
                7..=8 => 2,
                _ => 3,
            };
            let address = format!("{} Main Street, {city}", 10 + rng.below(9000));
            let twenty_four = brand == "Summit Fuel" || rng.chance(0.1);
            let (open_min, close_min) = if twenty_four {
                (0, 1440)
            } else {
                (
                    6 * 60 + 30 * rng.below(5) as u32,
                    20 * 60 + 30 * rng.below(7) as u32,
                )
            };
            let mut device_ids = Vec::new();
            let mut site_cams = Vec::new();
            let (mut cam_total, mut cam_offline) = (0u64, 0u64);
            for d in 0..n_devices {
                let device_id = rng.uuid();
                let n_cams = 4 + rng.below(9);
                let mut dev_offline = 0u64;
                for c in 0..n_cams {
                    let zone = if c == 0 {
                        Zone::Entrance
                    } else {
                        Zone::ALL[rng.below(Zone::ALL.len() as u64) as usize]
                    };
                    let cam_id = rng.uuid();
                    let name = format!("{} {}", zone.label(), c + 1 + d * 16);
                    let online = !rng.chance(0.05);
                    if !online {
                        dev_offline += 1;
                    }
                    let streams: Vec<Value> = [("HD", 1920, 1080, 15.0, 2_000_000), ("SD", 640, 360, 7.5, 400_000)]
                        .iter()
                        .take(1 + rng.below(2) as usize)
                        .map(|(sname, w, h, fps, bps)| {
                            json!({
                                "id": rng.uuid(),
                                "name": sname,
                                "retention": RETENTIONS[rng.below(4) as usize],
                                "dimensions": {"width": w, "height": h},
                                "fps": fps,
                                "average_bps": bps + rng.below(100_000),
                                "earliestSegmentDate": format!("{}", 1_735_689_600_000u64 + rng.below(30 * DAY_MS as u64)),
                            })
                        })
                        .collect();
                    let known = rng.chance(0.8);
                    cameras.push(json!({
                        "id": cam_id,
                        "deviceId": device_id,
                        "name": name,
                        "status": if online { "online" } else { "offline" },
                        "siteId": site_id,
                        "streams": streams,
                        "ip": format!("10.{}.{}.{}", s % 250, d * 16 + c / 250, 10 + c),
                        "manufacturer": if known { Value::from("Axis") } else { Value::Null },
                        "model": if known { Value::from(format!("P32{}", 10 + rng.below(80))) } else { Value::Null },
                        "serialNumber": if known { Value::from(format!("ACCC8E{:06X}", rng.below(1 << 24))) } else { Value::Null },
                    }));
                    site_cams.push(cams.len() as u32);
                    cams.push(CamInfo {
                        site: s as u32,
                        device_id: device_id.clone(),
                        json: json!({"id": cam_id, "name": name}).to_string(),
                        name_json: json_contents(&name),
                        name,
                        zone,
                    });
                }
                cam_total += n_cams;
                cam_offline += dev_offline;
                devices.push(json!({
                    "id": device_id,
                    "customerId": customer,
                    "name": format!("NVR-{}", d + 1),
                    "status": if dev_offline == n_cams { "offline" } else { "online" },
                    "address": address,
                    "timezoneId": tz_name,
                    "totalCameras": n_cams,
                    "offlineCameras": dev_offline,
                    "siteId": site_id,
                }));
                device_ids.push(device_id);
            }
            let tags = vec![format!("Brand:{brand}"), format!("City:{city}")];
            let external = match rng.below(10) {
                0 => Value::Null,
                1 => Value::from(""),
                _ => Value::from(format!("STORE-{:04}", s + 1)),
            };
            let mut site_tags = vec!["cameras:ai"];
            if rng.chance(0.6) {
                site_tags.push("data-integration:pos");
            }
            sites.push(json!({
                "id": site_id,
                "customerId": customer,
                "primaryDeviceId": device_ids[0],
                "motionAlarmScheduleId": rng.uuid(),
                "cloudStoragePackageId": if rng.chance(0.7) { Value::from(rng.uuid()) } else { Value::Null },
                "name": format!("{brand} {city} #{}", s + 1),
                "address": address,
                "timezone": tz_name,
                "type": "STANDARD",
                "externalId": external,
                "status": if rng.chance(0.95) { "ACTIVE" } else { "VIRTUAL" },
                "visibilityStatus": "VISIBLE",
                "updatedAt": 1_767_225_600 + rng.below(90 * DAY_MS as u64 / 1000),
                "deletedAt": 0,
                "tags": site_tags,
                "locationTags": tags,
                "deviceCount": n_devices,
                "cameraCount": cam_total,
                "onlineCameraCount": cam_total - cam_offline,
                "offlineCameraCount": cam_offline,
            }));
            site_info.push(SiteInfo {
                id: site_id,
                tz,
                tags_json: format!("\"locationTags\":{}", Value::from(tags)),
                open_min,
                close_min,
                cameras: site_cams,
                weight: 0.5 + rng.unit(),
            });
        }

        let report_defs: [(Option<Zone>, bool, &str, &str); 4] = [
            (
                None,
                true,
                "All dwell-time events",
                "Tous les temps d'attente",
            ),
            (
                Some(Zone::DriveThru),
                true,
                "Drive-thru dwell time",
                "Temps d'attente au drive",
            ),
            (
                Some(Zone::Checkout),
                true,
                "Checkout queue",
                "File d'attente en caisse",
            ),
            (
                Some(Zone::Parking),
                false,
                "Loss prevention (restricted)",
                "Prévention des pertes",
            ),
        ];
        let reports = report_defs
            .iter()
            .map(|(zone, visible, en, fr)| {
                let id = rng.uuid();
                ReportInfo {
                    json: json!({
                        "id": id,
                        "name": {"en-US": en, "fr-FR": fr},
                        "description": {"en-US": format!("{en}, all sites"), "fr-FR": format!("{fr}, tous les sites")},
                    }),
                    id,
                    zone: *zone,
                    visible: *visible,
                }
            })
            .collect();

        let start_ms = cfg
            .start
            .and_hms_opt(0, 0, 0)
            .map(|d| d.and_utc().timestamp_millis())
            .unwrap_or(0);
        let mut data = Data {
            seed: cfg.seed,
            sites,
            devices,
            cameras,
            reports,
            site_info,
            cams,
            events: Vec::new(),
            report_index: Vec::new(),
            next_seq: 0,
            start_ms,
            end_ms: start_ms + cfg.days as i64 * DAY_MS,
        };
        if !data.site_info.is_empty() {
            for day in 0..cfg.days {
                data.generate_day(cfg, day);
            }
        }
        data.rebuild_index();
        data
    }

    /// Appends the events of UTC day `day` (sorted), exactly `events_per_day` of them.
    fn generate_day(&mut self, cfg: &DataConfig, day: u32) {
        let mut rng = Rng::new(cfg.seed, 1000 + day as u64);
        let day_ms = self.start_ms + day as i64 * DAY_MS;
        let first = self.events.len();
        let mut budget = cfg.events_per_day;
        // A dense burst: a camera reconnects and uploads its backlog stamped with one millisecond.
        if cfg.events_per_day >= 2000 {
            let size = 101 + rng.below(100);
            let s = rng.below(self.site_info.len() as u64) as usize;
            let at = day_ms + rng.below(DAY_MS as u64) as i64;
            for _ in 0..size {
                self.push_event(&mut rng, s, at);
            }
            budget -= size;
        }
        let total_weight: f64 = self.site_info.iter().map(|s| s.weight).sum();
        // Largest remainder: shares that add up to the budget exactly.
        let mut counts: Vec<(u64, f64, usize)> = self
            .site_info
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let share = budget as f64 * s.weight / total_weight;
                (share.floor() as u64, share - share.floor(), i)
            })
            .collect();
        let assigned: u64 = counts.iter().map(|c| c.0).sum();
        counts.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
        for c in counts.iter_mut().take((budget - assigned) as usize) {
            c.0 += 1;
        }
        counts.sort_by_key(|c| c.2);
        for (n, _, s) in counts {
            let info = &self.site_info[s];
            let (tz, open, close) = (info.tz, info.open_min, info.close_min);
            let off0 = offset_minutes(tz, day_ms);
            let off1 = offset_minutes(tz, day_ms + DAY_MS - 1);
            for _ in 0..n {
                // Rejection sampling: uniform over the UTC day, kept in proportion to how busy
                // the site's local hour is, so events follow local opening hours.
                let at = loop {
                    let t = day_ms + rng.below(DAY_MS as u64) as i64;
                    let off = if off0 == off1 {
                        off0
                    } else {
                        offset_minutes(tz, t)
                    };
                    let local_min =
                        (((t + off as i64 * 60_000).rem_euclid(DAY_MS)) / 60_000) as u32;
                    let open_now = if open <= close {
                        local_min >= open && local_min < close
                    } else {
                        local_min >= open || local_min < close
                    };
                    if open_now && rng.chance(hour_weight(local_min / 60)) {
                        break t;
                    }
                };
                self.push_event(&mut rng, s, at);
            }
        }
        self.events[first..].sort_unstable_by_key(|e| (e.start_ms, e.seq));
    }

    /// Appends one event of site `s` starting at `at` (the caller keeps the order).
    pub(super) fn push_event(&mut self, rng: &mut Rng, s: usize, at: i64) {
        let info = &self.site_info[s];
        let cam = info.cameras[rng.below(info.cameras.len() as u64) as usize];
        let zone = self.cams[cam as usize].zone;
        let base_secs = match zone {
            Zone::DriveThru => 180.0,
            Zone::Checkout => 120.0,
            Zone::Entrance => 25.0,
            Zone::Lobby => 900.0,
            Zone::Parking => 300.0,
        };
        // Log-normal-ish dwell times: most short, a long tail.
        let factor = (-(1.0 - rng.unit()).ln()).powf(1.3) + 0.1;
        let dur_ms = ((base_secs * factor * 1000.0) as u32).clamp(1000, 4 * 3_600_000);
        let confirmed_present = rng.chance(0.9);
        let confirmed = rng.chance(0.8);
        let marker = rng.below(MARKERS.len() as u64) as u8;
        let flags = (confirmed_present as u8) | ((confirmed as u8) << 1) | (marker << 2);
        let ev = Ev {
            start_ms: at,
            seq: self.next_seq,
            dur_ms,
            create_delay_ms: 500 + rng.below(30_000) as i32,
            cam,
            offset_min: offset_minutes(info.tz, at),
            flags,
        };
        self.next_seq += 1;
        self.events.push(ev);
    }
}

/// `text` as the contents of a JSON string: escaped, without the enclosing quotes (which are
/// the first and last characters; a quote inside is escaped, so it stays).
pub(super) fn json_contents(text: &str) -> String {
    let quoted = Value::from(text).to_string();
    quoted[1..quoted.len() - 1].to_string()
}
