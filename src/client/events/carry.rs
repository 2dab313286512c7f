//! The pages a sync's fetch read of the windows it did not hand out whole, carried to its next
//! run: gathered when the fetch stops early (Ctrl-C, the daily quota, an error), written as one
//! checked blob that the sync keeps beside its dataset, and held for the next run's fetches,
//! which then ask none of them again.
//!
//! A blob is `svpages 3 <header>\n` (the header one JSON object: the account, as a hash, the
//! report, the queries' span, the count of pages, the body's length and SHA-256), then each
//! page as `<qs> <qe> <offset> <length>\n` and its body: the page at `offset` of the window
//! queried `[qs, qe)`.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

pub use super::held::CarriedPage;
use super::held::{CarriedKey, CARRIED_FOR};
use super::page::page_url;
use crate::client::Client;

/// The first word of a blob of carried pages, and its format's version after it.
const MAGIC: &str = "svpages 3";
/// The longest header a blob may have, bytes.
const HEADER_MAX: usize = 1024;

/// Where a sync's fetch puts the pages it carries when it stops (see
/// [`super::stream_carrying`]).
pub type CarrySlot = std::sync::Arc<std::sync::Mutex<Vec<CarriedPage>>>;

/// What a blob says it holds, checked when it is read.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct BlobHeader {
    account: String,
    report: Option<String>,
    start: i64,
    end: i64,
    count: u64,
    bytes: u64,
    sha256: String,
}

/// The account's name in a blob: a hash of the base URL, the key and the client id (never a
/// secret; the cache of settled events names its account's folder the same way).
pub fn account(client: &Client) -> String {
    let config = client.config();
    let mut data = Vec::new();
    for part in [
        config.base_url.as_str().trim_end_matches('/'),
        config.api_key.expose(),
        &config.client_id,
    ] {
        data.extend_from_slice(part.as_bytes());
        data.push(0);
    }
    hex(&data, 16)
}

fn hex(data: &[u8], bytes: usize) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref()[..bytes.min(32)]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The blob of `pages` of `report`'s events; None when there is no page.
pub fn encode(account: &str, report: Option<&str>, pages: &[CarriedPage]) -> Option<Vec<u8>> {
    let start = pages.iter().map(|p| p.qs).min()?;
    let end = pages.iter().map(|p| p.qe).max()?;
    let mut body = Vec::new();
    for p in pages {
        body.extend_from_slice(
            format!("{} {} {} {}\n", p.qs, p.qe, p.offset, p.body.len()).as_bytes(),
        );
        body.extend_from_slice(&p.body);
    }
    let header = BlobHeader {
        account: account.to_string(),
        report: report.map(String::from),
        start,
        end,
        count: pages.len() as u64,
        bytes: body.len() as u64,
        sha256: hex(&body, 32),
    };
    let mut out = format!("{MAGIC} ").into_bytes();
    out.extend(serde_json::to_vec(&header).unwrap_or_default());
    out.push(b'\n');
    out.extend(body);
    Some(out)
}

/// The pages of a blob of `report`'s events carried for `account` (see [`account`]), once its
/// header, length and checksum hold; else why not (a sentence to complete: "the pages ...
/// {why}").
pub fn decode(
    account: &str,
    report: Option<&str>,
    data: &[u8],
) -> std::result::Result<Vec<CarriedPage>, String> {
    let garbled = || "hold garbled pages".to_string();
    let end = data
        .iter()
        .take(HEADER_MAX)
        .position(|b| *b == b'\n')
        .ok_or("have no header")?;
    let line = std::str::from_utf8(&data[..end]).map_err(|_| "have a garbled header")?;
    let json = line
        .strip_prefix(MAGIC)
        .and_then(|r| r.strip_prefix(' '))
        .ok_or("are of another format or version")?;
    let header: BlobHeader = serde_json::from_str(json).map_err(|_| "have a garbled header")?;
    let body = Bytes::copy_from_slice(&data[end + 1..]);
    if header.account != account {
        return Err("were read with another account or service".into());
    }
    if header.report.as_deref() != report {
        return Err("are of another report".into());
    }
    if body.len() as u64 != header.bytes {
        return Err(format!(
            "are truncated or padded ({} bytes of {})",
            body.len(),
            header.bytes
        ));
    }
    if hex(&body, 32) != header.sha256 {
        return Err("fail their checksum".into());
    }
    let mut pages = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let nl = at
            + body[at..]
                .iter()
                .position(|b| *b == b'\n')
                .ok_or_else(garbled)?;
        let line = std::str::from_utf8(&body[at..nl]).map_err(|_| garbled())?;
        let fields: Vec<&str> = line.split(' ').collect();
        let [qs, qe, offset, size] = fields[..] else {
            return Err(garbled());
        };
        let (Ok(qs), Ok(qe), Ok(offset), Ok(size)) = (
            qs.parse::<i64>(),
            qe.parse::<i64>(),
            offset.parse::<usize>(),
            size.parse::<usize>(),
        ) else {
            return Err(garbled());
        };
        let page = body.get(nl + 1..nl + 1 + size).ok_or_else(garbled)?;
        if qe <= qs || qs < header.start || qe > header.end {
            return Err(garbled());
        }
        pages.push(CarriedPage {
            qs,
            qe,
            offset,
            body: body.slice_ref(page),
        });
        at = nl + 1 + size;
    }
    if pages.len() as u64 != header.count {
        return Err(garbled());
    }
    Ok(pages)
}

/// Holds carried `pages` of `report`'s events for the client's fetches (each taken once, by the
/// fetch that asks its query and offset), marked as carried so that their window is checked to
/// hold together with the pages asked now.
pub fn hold(client: &Client, report: Option<&str>, pages: Vec<CarriedPage>) {
    let keyed: Vec<(String, Bytes, CarriedKey)> = pages
        .into_iter()
        .map(|p| {
            let url = page_url(client, p.qs, p.qe, report, p.offset).to_string();
            let key = CarriedKey {
                report: report.map(String::from),
                qs: p.qs,
                qe: p.qe,
                offset: p.offset,
            };
            (url, p.body, key)
        })
        .collect();
    let mut held = client.held();
    for (url, body, key) in keyed {
        held.put(url, body, CARRIED_FOR, Some(key));
    }
}

/// The carried pages the client holds of `report`'s events that no fetch took, removed.
pub fn left(client: &Client, report: Option<&str>) -> Vec<CarriedPage> {
    client.held().take_carried(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_reads_back_and_damage_is_named() {
        let account = "0123";
        let pages = vec![
            CarriedPage {
                qs: 10,
                qe: 50,
                offset: 0,
                body: Bytes::from_static(b"[1]"),
            },
            CarriedPage {
                qs: 20,
                qe: 50,
                offset: 9900,
                body: Bytes::from_static(b"[]"),
            },
        ];
        let blob = encode(account, Some("r"), &pages).expect("pages");
        assert_eq!(decode(account, Some("r"), &blob), Ok(pages));
        assert!(decode(account, None, &blob).is_err_and(|e| e.contains("another report")));
        let mut bad = blob.clone();
        let last = bad.len() - 2;
        bad[last] ^= 1;
        assert!(decode(account, Some("r"), &bad).is_err_and(|e| e.contains("checksum")));
        assert!(decode(account, Some("r"), &blob[..blob.len() - 1]).is_err());
        assert!(decode(account, Some("r"), b"svpages 2 {}\n").is_err());
        assert!(decode("4567", Some("r"), &blob).is_err_and(|e| e.contains("another account")));
        assert_eq!(encode(account, None, &[]), None);
    }
}
