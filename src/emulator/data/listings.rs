//! The lists the emulator serves: the one table a new list endpoint is added to.

use serde_json::Value;

use super::Data;

/// A list the emulator serves: the one table a new list endpoint is added to (with its
/// records in [`Data`]). Its path, the query parameters that narrow it (each matched, without
/// regard to case, against a key of the record) and its records, in the order served.
#[derive(Debug)]
pub struct Listing {
    /// `sites`, `devices`, ... (as `Emulator.resources` takes it).
    pub name: &'static str,
    /// Its path.
    pub path: &'static str,
    /// (query parameter, key of the record) for each filter.
    pub filters: &'static [(&'static str, &'static str)],
    /// Every record of the list.
    pub records: fn(&Data) -> Vec<&Value>,
}

/// The lists, in the order the documentation gives them.
pub const LISTINGS: [Listing; 4] = [
    Listing {
        name: "sites",
        path: "/v2/sites",
        filters: &[],
        records: |d| d.sites.iter().collect(),
    },
    Listing {
        name: "devices",
        path: "/v2/devices",
        filters: &[],
        records: |d| d.devices.iter().collect(),
    },
    Listing {
        name: "cameras",
        path: "/v2/cameras",
        filters: &[("siteId", "siteId"), ("deviceId", "deviceId")],
        records: |d| d.cameras.iter().collect(),
    },
    Listing {
        name: "reports",
        path: "/v2/reports",
        filters: &[],
        // A report the caller may not read is not listed.
        records: |d| {
            d.reports
                .iter()
                .filter(|r| r.visible)
                .map(|r| &r.json)
                .collect()
        },
    },
];

/// The list called `name`.
pub fn listing(name: &str) -> Option<&'static Listing> {
    LISTINGS.iter().find(|l| l.name == name)
}
