//! Rust tests of the emulator's HTTP rules, through `router(state)` without a socket.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

use super::data::Zone;
use super::dialect::{
    ErrorBody, ExpiredToken, RetryAfter, TokenAnswer, WebhookAnswer, WebhookErrors,
};
use super::{router, Bounds, DataConfig, Dialect, Faults, Limits, Order, State};

const HOUR: i64 = 3_600_000;
const NO_UUID: &str = "00000000-0000-4000-8000-000000000000";
const JSON: (&str, &str) = ("content-type", "application/json");
const LISTS: [&str; 4] = ["sites", "devices", "cameras", "reports"];

struct Resp {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        let text = String::from_utf8_lossy(&self.body);
        let parsed = serde_json::from_slice(&self.body);
        parsed.unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// Asserts a 200 whose body is an array; returns the array.
    fn list(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status, 200, "body: {text}");
        match self.json() {
            Value::Array(a) => a,
            other => panic!("expected an array, got {other}"),
        }
    }

    /// Asserts the status and the `{"error", "message"}` body; returns the message.
    fn error(&self, status: u16) -> String {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status, status, "body: {text}");
        let v = self.json();
        assert!(v["error"].is_string(), "no `error` in {v}");
        v["message"].as_str().expect("message").to_string()
    }

    fn retry_after(&self) -> u64 {
        let h = self.headers.get("retry-after").expect("Retry-After");
        let n = h.to_str().ok().and_then(|s| s.parse().ok());
        n.expect("integer Retry-After")
    }

    fn is_5xx(&self) -> bool {
        matches!(self.status.as_u16(), 500 | 503)
    }
}

fn state_with(seed: u64, sites: usize, days: u32, per_day: u64) -> Arc<State> {
    let mut cfg = DataConfig::default();
    (cfg.seed, cfg.sites, cfg.days, cfg.events_per_day) = (seed, sites, days, per_day);
    Arc::new(State::new(&cfg))
}

fn small() -> Arc<State> {
    state_with(1, 6, 2, 2500)
}

async fn call(s: &Arc<State>, m: Method, uri: &str, h: &[(&str, &str)], body: Body) -> Resp {
    let mut req = Request::builder().method(m).uri(uri);
    for (k, v) in h {
        req = req.header(*k, *v);
    }
    let res = router(s.clone()).oneshot(req.body(body).expect("request"));
    let (parts, body) = res.await.expect("infallible").into_parts();
    let body = body.collect().await.expect("body").to_bytes().to_vec();
    let (status, headers) = (parts.status, parts.headers);
    Resp {
        status,
        headers,
        body,
    }
}

fn token_body(s: &State) -> Value {
    let c = &s.creds;
    json!({"audience": c.audience, "client_id": c.client_id, "client_secret": c.client_secret})
}

async fn post_token(s: &Arc<State>, body: impl ToString) -> Resp {
    let h = [("x-api-key", &*s.creds.api_key), JSON];
    let body = Body::from(body.to_string());
    call(s, Method::POST, "/v2/oauth/token", &h, body).await
}

async fn token(s: &Arc<State>) -> String {
    let v = post_token(s, token_body(s)).await.json();
    let t = v["access_token"].as_str();
    t.expect("access_token").to_string()
}

/// A state with a token: the usual subject of a test.
struct Emu {
    s: Arc<State>,
    tok: String,
}

async fn emu_of(s: Arc<State>) -> Emu {
    let tok = token(&s).await;
    Emu { s, tok }
}

async fn emu() -> Emu {
    emu_of(small()).await
}

impl Emu {
    async fn send(&self, m: Method, uri: &str, tok: &str, body: Body) -> Resp {
        let bearer = format!("Bearer {tok}");
        let mut h = vec![("x-api-key", self.s.creds.api_key.as_str())];
        h.extend([("authorization", &*bearer), JSON]);
        call(&self.s, m, uri, &h, body).await
    }

    async fn get(&self, uri: impl AsRef<str>) -> Resp {
        self.get_with(uri.as_ref(), &self.tok).await
    }

    async fn get_with(&self, uri: &str, tok: &str) -> Resp {
        self.send(Method::GET, uri, tok, Body::empty()).await
    }

    async fn post(&self, uri: &str, body: impl ToString) -> Resp {
        let body = Body::from(body.to_string());
        self.send(Method::POST, uri, &self.tok, body).await
    }

    async fn new_token(&self) -> Resp {
        post_token(&self.s, token_body(&self.s)).await
    }

    /// Every page of a list query, checking that each holds at most 100 records.
    async fn pages(&self, path_query: &str) -> Vec<Value> {
        let sep = if path_query.contains('?') { '&' } else { '?' };
        let mut out = Vec::new();
        loop {
            let page = self.get(format!("{path_query}{sep}offset={}", out.len()));
            let page = page.await.list();
            assert!(page.len() <= 100, "page of {}", page.len());
            let n = page.len();
            out.extend(page);
            if n < 100 {
                return out;
            }
        }
    }

    /// `/v2/events?startTime=..&endTime=..` for `[start + from, start + to)` of the data.
    fn events(&self, from: i64, to: i64) -> String {
        let start = self.s.data().start_ms;
        format!("/v2/events?{}", window(start + from, start + to))
    }

    fn restricted(&self) -> String {
        let d = self.s.data();
        let r = d.reports.iter().find(|r| !r.visible);
        r.map(|r| r.id.clone()).expect("restricted")
    }

    fn stored(&self) -> Vec<Value> {
        let texts = self.s.published(None);
        let parse = |t: &String| serde_json::from_str(t).expect("json");
        texts.iter().map(parse).collect()
    }
}

/// `startTime=..&endTime=..` in the API's format, URL-encoded.
fn window(start: i64, end: i64) -> String {
    let q = |ms| {
        let t = chrono::DateTime::from_timestamp_millis(ms).expect("time");
        let text = t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string();
        text.replace(':', "%3A")
    };
    format!("startTime={}&endTime={}", q(start), q(end))
}

fn ms_of(event: &Value) -> i64 {
    let s = event["startTime"].as_str().expect("startTime");
    let t = chrono::DateTime::parse_from_rfc3339(s).expect("rfc3339");
    t.timestamp_millis()
}

fn ids(events: &[Value]) -> Vec<String> {
    let id = |e: &Value| e["id"].as_str().expect("id").to_string();
    events.iter().map(id).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn retail(tx: &str) -> Value {
    json!({
        "dataType": "retail", "schemaVersion": "1",
        "startTime": 1_763_355_600_000i64, "endTime": "2026-11-17T05:03:00.000Z",
        "locationId": "store-17", "dataSourceId": "register-2", "transactionId": tx,
        "status": "sale", "items": [{"time": 1_763_355_601_000i64, "quantity": 1,
            "description": "coffee", "unitPrice": 2.5, "type": "SALE"}]
    })
}

fn without(mut v: Value, field: &str) -> Value {
    v.as_object_mut().map(|m| m.remove(field));
    v
}

/// `T::default()` changed by `f`: `with(|f: &mut Faults| f.drop_rate = 1.0)`.
fn with<T: Default>(f: impl FnOnce(&mut T)) -> T {
    let mut out = T::default();
    f(&mut out);
    out
}

// Credentials and tokens.
#[tokio::test]
async fn api_key_missing_or_wrong_is_403_on_every_endpoint() {
    let e = emu().await;
    let bearer = format!("Bearer {}", e.tok);
    let (events, tb) = (e.events(0, HOUR), token_body(&e.s).to_string());
    let (get, post) = (Method::GET, Method::POST);
    let endpoints = [
        (&post, "/v2/oauth/token", tb),
        (&get, "/v2/sites", String::new()),
        (&get, "/v2/devices", String::new()),
        (&get, "/v2/cameras", String::new()),
        (&get, "/v2/reports", String::new()),
        (&get, events.as_str(), String::new()),
        (&post, "/v2/webhook", retail("t-1").to_string()),
        (&post, "/eu/v2/webhook", retail("t-2").to_string()),
    ];
    for (m, uri, body) in endpoints {
        for key in [None, Some("wrong-key"), Some("")] {
            let mut h = vec![("authorization", &*bearer), JSON];
            h.extend(key.map(|k| ("x-api-key", k)));
            let r = call(&e.s, m.clone(), uri, &h, Body::from(body.clone())).await;
            let msg = r.error(403);
            assert!(msg.contains("x-api-key"), "{m} {uri} {key:?}: {msg}");
        }
    }
    assert_eq!(e.s.published_len(), 0);
    assert_eq!(e.s.stats_json()["tokens_issued"], 1);
}

#[tokio::test]
async fn token_creation_good_bad_secret_bad_audience_bad_body() {
    let s = small();
    let good = token_body(&s);
    let v = post_token(&s, &good).await.json();
    assert!(v["access_token"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(v["expires_in"], 14_399);
    assert_eq!(v["token_type"], "Bearer");
    for field in ["client_secret", "client_id", "audience"] {
        let mut bad = good.clone();
        bad[field] = json!("https://wrong/");
        post_token(&s, bad).await.error(401);
    }
    for body in ["", "not json", "{", "[]", "\"text\""] {
        post_token(&s, body).await.error(400);
    }
    for field in ["audience", "client_id", "client_secret"] {
        let bad = without(good.clone(), field);
        let msg = post_token(&s, bad).await.error(400);
        assert!(msg.contains(field), "{msg}");
    }
    assert_eq!(s.stats_json()["tokens_issued"], 1);
}

#[tokio::test]
async fn bearer_missing_or_unknown_is_401() {
    let e = emu().await;
    let key = e.s.creds.api_key.as_str();
    let (basic, events) = (format!("Basic {}", e.tok), e.events(0, HOUR));
    let (get, post) = (Method::GET, Method::POST);
    let endpoints = [
        (&get, "/v2/sites"),
        (&get, "/v2/devices"),
        (&get, "/v2/cameras"),
        (&get, "/v2/reports"),
        (&get, events.as_str()),
        (&post, "/v2/webhook"),
        (&post, "/eu/v2/webhook"),
    ];
    for auth in [
        None,
        Some("Bearer emu.unknown"),
        Some("Bearer "),
        Some(&*basic),
    ] {
        for (m, uri) in endpoints {
            let mut h = vec![("x-api-key", key), JSON];
            h.extend(auth.map(|a| ("authorization", a)));
            let body = Body::from(retail("t").to_string());
            call(&e.s, m.clone(), uri, &h, body).await.error(401);
        }
    }
    assert_eq!(e.s.published_len(), 0);
}

#[tokio::test]
async fn token_expires_on_the_emulator_clock_and_a_new_one_works() {
    let e = emu().await;
    e.s.advance_clock(14_000.0);
    assert_eq!(e.get("/v2/sites").await.status, 200);
    e.s.advance_clock(401.0);
    e.get("/v2/sites").await.error(401);
    let fresh = token(&e.s).await;
    assert_eq!(e.get_with("/v2/sites", &fresh).await.status, 200);
}

#[tokio::test]
async fn revoke_tokens_refuses_every_issued_token() {
    let e = emu().await;
    let other = token(&e.s).await;
    e.s.revoke_tokens();
    e.get("/v2/sites").await.error(401);
    e.get_with("/v2/devices", &other).await.error(401);
    let fresh = token(&e.s).await;
    assert_eq!(e.get_with("/v2/sites", &fresh).await.status, 200);
}

#[tokio::test]
async fn token_lifetime_applies_to_tokens_issued_afterwards() {
    let e = emu().await;
    e.s.set_token_lifetime(60);
    let v = e.new_token().await.json();
    assert_eq!(v["expires_in"], 60);
    let short = v["access_token"].as_str().expect("token");
    assert_eq!(e.get_with("/v2/sites", short).await.status, 200);
    e.s.advance_clock(62.0);
    e.get_with("/v2/sites", short).await.error(401);
    // The token issued before the change keeps its 4 hours.
    assert_eq!(e.get("/v2/sites").await.status, 200);
}

// Lists.
#[tokio::test]
async fn list_pages_hold_at_most_100_and_offsets_walk_the_data() {
    let e = emu_of(state_with(5, 150, 1, 50)).await;
    let lists = {
        let d = e.s.data();
        let visible = d.reports.iter().filter(|r| r.visible);
        let reports: Vec<Value> = visible.map(|r| r.json.clone()).collect();
        let mut lists = [&d.sites, &d.devices, &d.cameras].map(Vec::clone).to_vec();
        lists.push(reports);
        lists
    };
    let sizes: Vec<usize> = lists.iter().map(Vec::len).collect();
    assert!(sizes[0] > 100 && sizes[1] > 150 && sizes[2] > 1000 && sizes[3] == 3);
    for (name, expected) in LISTS.iter().zip(&lists) {
        let path = format!("/v2/{name}");
        assert_eq!(&e.pages(&path).await, expected, "{path}");
        let n = expected.len();
        let first = e.get(&path).await.list();
        assert_eq!(
            first,
            expected[..100.min(n)],
            "{path}: no offset is offset 0"
        );
        let page = e.get(format!("{path}?offset=37")).await.list();
        assert_eq!(page, expected[37.min(n)..137.min(n)], "{path}");
    }
    let restricted = e.restricted();
    assert!(lists[3].iter().all(|r| r["id"] != *restricted));
}

#[tokio::test]
async fn offset_ceiling_and_bad_offsets_are_400_naming_offset() {
    let e = emu().await;
    let events = e.events(0, 24 * HOUR);
    let mut paths = LISTS.map(|name| format!("/v2/{name}?")).to_vec();
    paths.push(events);
    for path in paths {
        for bad in ["10000", "25000", "-1", "abc", "1.5", "0x10", "1e3"] {
            let msg = e.get(format!("{path}&offset={bad}")).await.error(400);
            assert!(msg.contains("offset"), "{path} offset={bad}: {msg}");
        }
        let last = e.get(format!("{path}&offset=9999")).await;
        assert_eq!(last.list(), Vec::<Value>::new(), "{path}");
    }
}

#[tokio::test]
async fn cameras_by_site_span_every_device_of_a_multi_device_site() {
    let e = emu().await;
    let sites = e.s.data().sites.clone();
    let site = sites.iter().find(|x| x["deviceCount"].as_u64() >= Some(2));
    let site = site.expect("a multi-device site");
    let id = site["id"].as_str().expect("id");
    let cams = e.pages(&format!("/v2/cameras?siteId={id}")).await;
    let all = e.s.data().cameras.clone();
    let expected: Vec<Value> = all.into_iter().filter(|c| c["siteId"] == id).collect();
    assert_eq!(cams, expected);
    assert_eq!(Some(cams.len() as u64), site["cameraCount"].as_u64());
    let devices: HashSet<&str> = cams.iter().filter_map(|c| c["deviceId"].as_str()).collect();
    assert_eq!(Some(devices.len() as u64), site["deviceCount"].as_u64());
    let one = devices.iter().next().expect("device");
    let of_one = e.get(format!("/v2/cameras?deviceId={one}")).await.list();
    let want: Vec<Value> = cams
        .iter()
        .filter(|c| c["deviceId"] == *one)
        .cloned()
        .collect();
    assert!(!of_one.is_empty() && of_one.len() < cams.len());
    assert_eq!(of_one, want);
    // Both filters: the cameras of that device at that site, none at another site.
    let both = e.get(format!("/v2/cameras?siteId={id}&deviceId={one}"));
    assert_eq!(both.await.list(), want);
    let elsewhere = sites.iter().find(|x| x["id"] != id).expect("another site")["id"].clone();
    let elsewhere = elsewhere.as_str().expect("id");
    let none = e.get(format!("/v2/cameras?siteId={elsewhere}&deviceId={one}"));
    assert_eq!(none.await.list(), Vec::<Value>::new());
}

#[tokio::test]
async fn malformed_uuids_are_400_and_unknown_ones_empty() {
    let e = emu().await;
    let (ev, c) = (format!("{}&", e.events(0, HOUR)), "/v2/cameras?");
    let params = [("reportId", &*ev), ("siteId", c), ("deviceId", c)];
    let (letters, long) = (NO_UUID.replace('0', "z"), format!("{NO_UUID}0"));
    for bad in ["not-a-uuid", "123", &letters, &long, &NO_UUID[1..]] {
        for (param, path) in params {
            let msg = e.get(format!("{path}{param}={bad}")).await.error(400);
            assert!(msg.contains(param), "{param}={bad}: {msg}");
        }
    }
    for param in ["siteId", "deviceId"] {
        let r = e.get(format!("/v2/cameras?{param}={NO_UUID}")).await;
        assert_eq!(r.list(), Vec::<Value>::new());
    }
}

// Events.
#[tokio::test]
async fn events_time_parameters_are_validated() {
    let e = emu().await;
    let start = e.s.data().start_ms;
    let w = window(start, start + HOUR);
    let (a, b) = w.split_once('&').expect("two parameters");
    let no_z = "2026-01-05T00%3A00%3A00.000";
    let offset = "2026-01-05T01%3A00%3A00.000%2B00%3A00";
    let bad_day = "2026-13-45T00%3A00%3A00.000Z";
    let bad_hour = "2026-01-05T25%3A00%3A00.000Z";
    let cases = [
        (format!("startTime=&{b}"), "startTime"),
        (format!("startTime={bad_hour}&{b}"), "startTime"),
        (format!("{a}&endTime=1767571200000"), "endTime"),
        (b.to_string(), "startTime"),
        (a.to_string(), "endTime"),
        (format!("startTime=yesterday&{b}"), "startTime"),
        (format!("{a}&endTime={bad_day}"), "endTime"),
        (format!("startTime={no_z}&{b}"), "startTime"),
        (format!("{a}&endTime={offset}"), "endTime"),
    ];
    for (query, name) in cases {
        let msg = e.get(format!("/v2/events?{query}")).await.error(400);
        assert!(msg.contains(name), "{query}: {msg}");
    }
    e.get(e.events(HOUR, 0)).await.error(400);
    assert_eq!(e.get(e.events(HOUR, HOUR)).await.status, 200);
}

#[tokio::test]
async fn report_access_unknown_404_restricted_403() {
    let e = emu().await;
    let w = e.events(0, HOUR);
    e.get(format!("{w}&reportId={NO_UUID}")).await.error(404);
    let restricted = e.restricted();
    e.get(format!("{w}&reportId={restricted}")).await.error(403);
}

#[tokio::test]
async fn report_filter_returns_only_that_reports_events() {
    let e = emu().await;
    let (from, to) = (15 * HOUR, 19 * HOUR);
    let (rid, expected, all) = {
        let d = e.s.data();
        let (start, end) = (d.start_ms + from, d.start_ms + to);
        let checkout = Some(Zone::Checkout);
        let r = d.reports.iter().position(|r| r.zone == checkout);
        let r = r.expect("the checkout report");
        let truth = d.truth(start, end, Some(r));
        (d.reports[r].id.clone(), truth, d.truth(start, end, None))
    };
    assert!(!expected.is_empty() && expected.len() < all.len());
    let path = format!("{}&reportId={rid}", e.events(from, to));
    let got = e.pages(&path).await;
    assert_eq!(sorted(ids(&got)), sorted(expected));
    assert!(got.iter().all(|ev| ev["title"] == "Dwell time: Checkout"));
}

#[tokio::test]
async fn bounds_on_exact_event_times_give_the_expected_ids() {
    let e = emu().await;
    // Start on the first dense burst (> 100 events in one millisecond), end on a later event.
    let (start, end) = {
        let ev = &e.s.data().events;
        let same = |i: usize, j: usize| ev.get(j).is_some_and(|x| x.start_ms == ev[i].start_ms);
        let i = (0..ev.len()).find(|&i| same(i, i + 100)).expect("burst");
        let j = (i..ev.len()).find(|&j| !same(i, j)).expect("end");
        (ev[i].start_ms, ev[j + 40].start_ms)
    };
    let truth = |a: i64, b: i64| sorted(e.s.data().truth(a, b, None));
    let (half_open, closed) = (truth(start, end), truth(start, end + 1));
    let (open, open_closed) = (truth(start + 1, end), truth(start + 1, end + 1));
    assert!(closed.len() > half_open.len() && half_open.len() > open.len() + 100);
    assert!(open_closed.len() > open.len() && open_closed != half_open);
    let path = format!("/v2/events?{}", window(start, end));
    let cases = [
        ("[)", half_open),
        ("[]", closed),
        ("()", open),
        ("(]", open_closed),
    ];
    for (bounds, expected) in cases {
        e.s.set_semantics(Order::Asc, Bounds::parse(bounds).expect("bounds"));
        let got = e.pages(&path).await;
        assert_eq!(sorted(ids(&got)), expected, "bounds {bounds}");
    }
}

#[tokio::test]
async fn orders_asc_desc_and_shuffled() {
    let e = emu().await;
    let (start, end) = {
        let d = e.s.data();
        (d.events[1000].start_ms, d.events[1250].start_ms)
    };
    let expected = sorted(e.s.data().truth(start, end, None));
    assert!(expected.len() > 200);
    let bounds = Bounds::parse("[)").expect("bounds");
    let path = format!("/v2/events?{}", window(start, end));
    let times = |events: &[Value]| events.iter().map(ms_of).collect::<Vec<_>>();
    for order in [Order::Asc, Order::Desc] {
        e.s.set_semantics(order, bounds);
        let got = e.pages(&path).await;
        let mut want = times(&got);
        want.sort_unstable();
        if order == Order::Desc {
            want.reverse();
        }
        assert_eq!(times(&got), want, "{order:?}");
        assert_eq!(sorted(ids(&got)), expected, "{order:?}");
    }
    e.s.set_semantics(Order::Shuffled, bounds);
    let one = e.pages(&path).await;
    assert_eq!(ids(&one), ids(&e.pages(&path).await), "shuffled is stable");
    let t = times(&one);
    assert!(t.windows(2).any(|w| w[0] > w[1]) && t.windows(2).any(|w| w[0] < w[1]));
    let mut seen = HashSet::new();
    for page in one.chunks(100) {
        assert!(ids(page).into_iter().all(|id| seen.insert(id)), "overlap");
    }
    assert_eq!(sorted(seen.into_iter().collect()), expected);
}

// Webhook.
#[tokio::test]
async fn webhook_valid_retail_record_is_stored() {
    let e = emu().await;
    let r = e.post("/v2/webhook", retail("t-1")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"accepted": 1}));
    assert_eq!(e.stored(), vec![retail("t-1")]);
    assert_eq!(e.s.published(Some("us")).len(), 1);
    assert_eq!(e.s.published(Some("eu")).len(), 0);
}

#[tokio::test]
async fn webhook_unknown_or_missing_fields_are_400_naming_them() {
    let e = emu().await;
    let (mut unknown, mut mistyped) = (retail("a"), retail("c"));
    unknown["storeId"] = json!("s-1");
    let missing = without(retail("b"), "locationId");
    mistyped["dataSourceId"] = json!(17);
    let names = ["storeId", "locationId", "dataSourceId"];
    for (record, name) in [unknown, missing, mistyped].into_iter().zip(names) {
        let msg = e.post("/v2/webhook", record).await.error(400);
        assert!(msg.contains(name), "{name}: {msg}");
    }
    assert_eq!(e.s.published_len(), 0);
}

#[tokio::test]
async fn webhook_body_not_json_or_not_a_record_is_400() {
    let e = emu().await;
    for body in ["", "not json", "{", "42", "\"text\""] {
        e.post("/v2/webhook", body).await.error(400);
    }
    assert_eq!(e.s.published_len(), 0);
}

#[tokio::test]
async fn webhook_batch_of_100_accepted_101_refused() {
    let e = emu().await;
    let batch = |n: usize| Value::Array((0..n).map(|i| retail(&format!("t-{i}"))).collect());
    let r = e.post("/v2/webhook", batch(100)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"accepted": 100}));
    assert_eq!(e.s.published_len(), 100);
    e.s.clear_published();
    e.post("/v2/webhook", batch(101)).await.error(400);
    assert_eq!(e.s.published_len(), 0);
}

#[tokio::test]
async fn webhook_body_over_10_mb_is_413() {
    let e = emu().await;
    let mut record = retail("t-big");
    record["employeeName"] = json!("x".repeat(10 * 1024 * 1024));
    e.post("/v2/webhook", record).await.error(413);
    assert_eq!(e.s.published_len(), 0);
}

#[tokio::test]
async fn webhook_upserts_on_transaction_id() {
    let e = emu().await;
    let mut second = retail("t-1");
    second["status"] = json!("void");
    for record in [retail("t-1"), second.clone(), retail("t-2")] {
        assert_eq!(e.post("/v2/webhook", record).await.status, 200);
    }
    assert_eq!(e.stored(), vec![second, retail("t-2")]);
    // "other" records are keyed on (locationId, eventUniqueId).
    let other = |loc: &str, status: &str| {
        json!({"dataType": "other", "schemaVersion": "1", "startTime": 1_763_355_600_000i64,
            "locationId": loc, "dataSourceId": "door", "eventUniqueId": "ev-1",
            "eventType": "alarm", "status": status})
    };
    for record in [other("a", "open"), other("b", "open"), other("a", "closed")] {
        assert_eq!(e.post("/v2/webhook", record).await.status, 200);
    }
    assert_eq!(e.stored()[2..], [other("a", "closed"), other("b", "open")]);
    assert_eq!(e.s.stats_json()["published_upserts"], 2);
}

#[tokio::test]
async fn webhook_stores_each_record_as_it_was_sent_keyed_as_its_tree_keys_it() {
    let e = emu().await;
    let spaced = retail("t-1").to_string().replace(",", " ,\n ");
    let escaped = retail("t-2")
        .to_string()
        .replace("\"t-2\"", "\"t-\\u0032\"");
    let other = json!({"dataType": "other", "schemaVersion": "1", "locationId": "a",
        "startTime": 1_763_355_600_000i64, "dataSourceId": "door", "eventUniqueId": "ev-1",
        "eventType": "alarm", "status": "open"})
    .to_string();
    let body = format!("[{spaced},{escaped}, {other}]");
    let r = e.post("/v2/webhook", body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"accepted": 3}));
    // The texts as sent, whitespace, key order and escapes kept.
    assert_eq!(e.s.published(None), [spaced, escaped, other.clone()]);
    // The keys are those of the records' trees: the escaped id is `t-2`, and an `other`
    // record's key is its location and id.
    let mut second = retail("t-2");
    second["status"] = json!("void");
    let first_other: Value = serde_json::from_str(&other).expect("json");
    let mut moved = first_other.clone();
    moved["locationId"] = json!("b");
    for record in [second.clone(), moved.clone()] {
        assert_eq!(e.post("/v2/webhook", record).await.status, 200);
    }
    assert_eq!(e.s.stats_json()["published_upserts"], 1);
    assert_eq!(e.stored(), vec![retail("t-1"), second, first_other, moved]);
}

#[tokio::test]
async fn webhook_eu_route_stores_under_eu() {
    let e = emu().await;
    let r = e.post("/eu/v2/webhook", retail("t-eu")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"accepted": 1}));
    assert_eq!(e.s.published(Some("eu")).len(), 1);
    assert_eq!(e.s.published(Some("us")).len(), 0);
    assert_eq!(e.stored(), vec![retail("t-eu")], "all regions hold it");
}

#[tokio::test]
async fn webhook_mixed_array_stores_valid_records_and_names_the_bad_index() {
    let e = emu().await;
    let mut bad = retail("t-1");
    bad["registerId"] = json!("r-1");
    let body = json!([retail("t-0"), bad, retail("t-2")]);
    let r = e.post("/v2/webhook", body).await;
    let msg = r.error(400);
    assert!(msg.contains("registerId") && msg.contains('1'), "{msg}");
    let errors = r.json()["errors"].as_array().cloned().expect("errors");
    let only_1 = errors.iter().all(|x| x["index"] == 1);
    assert!(!errors.is_empty() && only_1, "{errors:?}");
    assert_eq!(e.stored(), vec![retail("t-0"), retail("t-2")]);
}

// Limits.
#[tokio::test]
async fn read_per_second_limit_gives_429_with_retry_after() {
    let e = emu().await;
    e.s.set_limits(Limits {
        read_per_second: Some(2.0),
        ..Limits::NONE
    });
    for _ in 0..2 {
        assert_eq!(e.get("/v2/sites").await.status, 200);
    }
    let r = e.get("/v2/sites").await;
    r.error(429);
    assert!(r.retry_after() >= 1);
    assert_eq!(e.s.stats_json()["rate_limited"], 1);
}

#[tokio::test]
async fn daily_quota_counts_every_endpoint() {
    let e = emu().await;
    e.s.set_limits(Limits {
        daily_requests: Some(3),
        ..Limits::NONE
    });
    assert_eq!(e.get("/v2/sites").await.status, 200);
    assert_eq!(e.new_token().await.status, 200);
    assert_eq!(e.post("/v2/webhook", retail("t")).await.status, 200);
    let r = e.get("/v2/devices").await;
    r.error(429);
    assert!(r.retry_after() >= 1);
    e.new_token().await.error(429);
}

#[tokio::test]
async fn read_concurrency_limit_refuses_the_second_request_in_flight() {
    let e = emu().await;
    e.s.set_limits(Limits {
        read_concurrency: Some(1),
        ..Limits::NONE
    });
    e.s.set_faults(with(|f: &mut Faults| f.latency_ms = 300));
    let (a, b) = tokio::join!(e.get("/v2/sites"), e.get("/v2/devices"));
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 429]);
    let limited = if a.status == 429 { a } else { b };
    assert!(limited.retry_after() >= 1);
}

#[tokio::test]
async fn publish_limits_give_429_on_both_webhook_routes_apart_from_reads() {
    let e = emu().await;
    e.s.set_limits(Limits {
        publish_per_second: Some(3.0),
        ..Limits::NONE
    });
    for i in 0..3 {
        let r = e.post("/v2/webhook", retail(&format!("t-{i}"))).await;
        assert_eq!(r.status, 200);
    }
    let r = e.post("/eu/v2/webhook", retail("t-3")).await;
    r.error(429);
    assert!(r.retry_after() >= 1);
    let read = e.get("/v2/sites").await;
    assert_eq!(read.status, 200, "reads have their own limits");
    assert_eq!(e.s.published_len(), 3);
    e.s.set_limits(Limits {
        publish_concurrency: Some(1),
        ..Limits::NONE
    });
    e.s.set_faults(with(|f: &mut Faults| f.latency_ms = 300));
    let (a, b) = tokio::join!(
        e.post("/v2/webhook", retail("c-1")),
        e.post("/eu/v2/webhook", retail("c-2"))
    );
    let mut statuses = [a.status.as_u16(), b.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 429]);
    assert_eq!(e.s.published_len(), 4);
}

#[tokio::test]
async fn latency_is_added_to_every_answer() {
    let e = emu().await;
    e.s.set_faults(with(|f: &mut Faults| f.latency_ms = 150));
    let slow = |t: Instant| t.elapsed() >= Duration::from_millis(150);
    let t = Instant::now();
    assert_eq!(e.get(e.events(0, HOUR)).await.status, 200);
    assert!(slow(t), "200 without latency");
    let t = Instant::now();
    assert_eq!(e.post("/eu/v2/webhook", retail("t")).await.status, 200);
    assert!(slow(t), "webhook without latency");
    e.s.set_limits(Limits {
        daily_requests: Some(0),
        ..Limits::NONE
    });
    let (t0, bad_key) = (Instant::now(), [("x-api-key", "bad")]);
    let r = call(&e.s, Method::GET, "/v2/sites", &bad_key, Body::empty());
    r.await.error(403);
    assert!(slow(t0), "403 without latency");
    let t1 = Instant::now();
    e.get("/v2/sites").await.error(429);
    assert!(slow(t1), "429 (set_limits) without latency");
}

// Faults and statistics.
#[tokio::test]
async fn error_rate_gives_500_or_503_but_not_on_the_token_endpoint() {
    let e = emu().await;
    e.s.set_faults(with(|f: &mut Faults| f.error_rate = 1.0));
    let events = e.events(0, HOUR);
    for uri in ["/v2/sites", "/v2/cameras", "/v2/reports", &events] {
        let r = e.get(uri).await;
        assert!(r.is_5xx(), "{uri}: {}", r.status);
        r.error(r.status.as_u16());
    }
    for path in ["/v2/webhook", "/eu/v2/webhook"] {
        let r = e.post(path, retail("t")).await;
        assert!(r.is_5xx(), "{path}: {}", r.status);
        r.error(r.status.as_u16());
    }
    assert_eq!(e.s.published_len(), 0);
    assert_eq!(e.new_token().await.status, 200);
}

#[tokio::test]
async fn rate_limit_fault_gives_429_with_configured_retry_after() {
    let e = emu().await;
    for seconds in [0, 7] {
        e.s.set_faults(with(|f: &mut Faults| {
            f.rate_limit_rate = 1.0;
            f.retry_after = seconds;
        }));
        let r = e.get("/v2/sites").await;
        r.error(429);
        assert_eq!(r.retry_after(), seconds);
        let r = e.post("/v2/webhook", retail("t")).await;
        r.error(429);
        assert_eq!(r.retry_after(), seconds);
    }
    assert_eq!(e.s.published_len(), 0);
    // Only the limits of set_limits count as rate_limited.
    assert_eq!(e.s.stats_json()["rate_limited"], 0);
}

#[tokio::test]
async fn drop_fault_without_a_connection_is_a_502() {
    let e = emu().await;
    e.s.set_faults(with(|f: &mut Faults| f.drop_rate = 1.0));
    assert_eq!(e.get("/v2/sites").await.status, 502);
    assert_eq!(e.s.stats_json()["requests"]["GET /v2/sites"]["dropped"], 1);
    assert_eq!(
        e.new_token().await.status,
        200,
        "the token endpoint is spared"
    );
}

#[tokio::test]
async fn faults_are_reproducible_under_the_seed() {
    let mut runs = Vec::new();
    for e in [emu().await, emu().await] {
        e.s.set_faults(with(|f: &mut Faults| f.error_rate = 0.5));
        let mut statuses = Vec::new();
        for _ in 0..30 {
            statuses.push(e.get("/v2/reports").await.status.as_u16());
        }
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1]);
    let (ok, failed) = (runs[0].contains(&200), runs[0].iter().any(|&c| c >= 500));
    assert!(ok && failed, "{:?}", runs[0]);
}

#[tokio::test]
async fn stats_count_requests_by_route_and_status() {
    let e = emu().await;
    e.get("/v2/sites").await;
    e.get("/v2/sites?offset=0").await;
    e.get_with("/v2/sites", "unknown").await;
    let bad_key = [("x-api-key", "bad")];
    call(&e.s, Method::GET, "/v2/devices", &bad_key, Body::empty()).await;
    e.get(e.events(0, 60_000)).await;
    let stats = e.s.stats_json();
    let req = &stats["requests"];
    assert_eq!(req["POST /v2/oauth/token"], json!({"200": 1}));
    assert_eq!(req["GET /v2/sites"], json!({"200": 2, "401": 1}));
    assert_eq!(req["GET /v2/devices"], json!({"403": 1}));
    assert_eq!(req["GET /v2/events"], json!({"200": 1}));
    assert_eq!(stats["tokens_issued"], 1);
}

// A real socket.
#[tokio::test]
async fn socket_drop_closes_the_connection_and_stop_is_idempotent() {
    let s = small();
    s.set_faults(with(|f: &mut Faults| f.drop_rate = 1.0));
    let handle = super::spawn(s.clone(), 0).await.expect("spawn");
    let mut stream = TcpStream::connect(handle.addr).await.expect("connect");
    let (addr, key) = (handle.addr, &s.creds.api_key);
    let request = format!(
        "GET /v2/sites HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {key}\r\n\
         authorization: Bearer x\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf));
    if let Ok(n) = read.await.expect("the connection is closed in time") {
        let text = String::from_utf8_lossy(&buf[..n]);
        assert_eq!(n, 0, "got an answer: {text}");
    }
    assert_eq!(s.stats_json()["requests"]["GET /v2/sites"]["dropped"], 1);
    handle.stop().await;
    handle.stop().await;
    let again = TcpStream::connect(handle.addr).await;
    assert!(again.is_err(), "the port still accepts connections");
}

// Events created late (`add_events_created`).
#[tokio::test]
async fn events_added_late_are_served_with_the_given_create_time() {
    let e = emu().await;
    let start = e.s.data().start_ms;
    let (at, created) = (start + 5 * HOUR + 250, start + 5 * HOUR + 40 * 60_000);
    let query = e.events(5 * HOUR, 5 * HOUR + 1000);
    let before = ids(&e.pages(&query).await);
    let new =
        e.s.data_mut()
            .add_events_created(at, 3, Some(0), Some(created));
    let served = e.pages(&query).await;
    assert_eq!(sorted(ids(&served)), sorted([before, new.clone()].concat()));
    let time = |v: &Value, k: &str| {
        let s = v[k].as_str().expect(k);
        chrono::DateTime::parse_from_rfc3339(s)
            .expect("rfc3339")
            .timestamp_millis()
    };
    let added: Vec<&Value> = served
        .iter()
        .filter(|v| new.iter().any(|id| v["id"] == id.as_str()))
        .collect();
    assert_eq!(added.len(), 3);
    for v in added {
        assert_eq!(time(v, "createTime"), created);
        assert!(time(v, "endTime") >= at && time(v, "endTime") <= created);
        assert_eq!(ms_of(v), at);
    }
    // A creation time before the start is taken as the start: a zero-length event.
    let odd =
        e.s.data_mut()
            .add_events_created(at + 1, 1, Some(0), Some(at - HOUR));
    let served = e.pages(&e.events(5 * HOUR + 251, 5 * HOUR + 252)).await;
    assert_eq!(ids(&served), odd);
    assert_eq!(time(&served[0], "createTime"), at + 1);
    assert_eq!(served[0]["details"]["duration_sec"], 0);
}

// Hostile answers (`set_hostile`) and HTTPS.
#[tokio::test]
async fn hostile_answers_count_down_and_keep_to_their_path() {
    use super::{Hostile, HostileRule};
    let e = emu().await;
    e.s.set_hostile(Some(HostileRule {
        mode: Hostile::NotArray,
        path: "/v2/sites".into(),
        remaining: Some(1),
    }));
    let other = e
        .send(Method::GET, "/v2/devices", &e.tok, Body::empty())
        .await;
    assert!(other.json().is_array(), "another path is untouched");
    let bad = e
        .send(Method::GET, "/v2/sites", &e.tok, Body::empty())
        .await;
    assert_eq!(bad.status, StatusCode::OK);
    assert!(bad.json().is_object());
    let healed = e
        .send(Method::GET, "/v2/sites", &e.tok, Body::empty())
        .await;
    assert!(
        healed.json().is_array(),
        "only `remaining` answers are hostile"
    );
    e.s.set_hostile(Some(HostileRule {
        mode: Hostile::Truncated,
        path: "/v2/sites".into(),
        remaining: None,
    }));
    let cut = e
        .send(Method::GET, "/v2/sites", &e.tok, Body::empty())
        .await;
    assert!(serde_json::from_slice::<Value>(&cut.body).is_err());
    e.s.set_hostile(Some(HostileRule {
        mode: Hostile::Status(500),
        path: "/v2/oauth/token".into(),
        remaining: Some(1),
    }));
    let refused = post_token(&e.s, token_body(&e.s)).await;
    assert_eq!(refused.status.as_u16(), 500);
    assert_eq!(
        post_token(&e.s, token_body(&e.s)).await.status.as_u16(),
        200
    );
}

#[test]
fn tls_certificate_is_made_for_loopback_names() {
    let (config, pem) = super::server::make_tls().expect("tls");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(config.alpn_protocols.is_empty());
}

#[test]
fn loopback_names_of_a_hosts_file() {
    let hosts = "127.0.0.1 localhost\n127.0.1.1 box box.lan # comment\n::1 ip6-localhost\n10.0.0.2 far\n# 127.0.0.1 hidden\n";
    assert_eq!(
        super::server::loopback_names(hosts),
        ["localhost", "box", "box.lan", "ip6-localhost"]
    );
}

// Sporadic 429s (`Faults::rate_limit_rate`).
#[tokio::test]
async fn sporadic_429s_are_reproducible_and_spare_the_token_endpoint() {
    let statuses = |seed: u64| async move {
        let e = emu_of(state_with(seed, 3, 1, 100)).await;
        e.s.set_faults(with(|f: &mut Faults| {
            f.rate_limit_rate = 0.3;
            f.retry_after = 2;
        }));
        let mut out = Vec::new();
        for i in 0..40 {
            let r = if i % 4 == 3 {
                e.post("/eu/v2/webhook", retail(&format!("t-{i}"))).await
            } else {
                e.get("/v2/reports").await
            };
            if r.status == 429 {
                let message = r.error(429);
                assert!(message.contains("rate limit"), "{message}");
                assert_eq!(r.retry_after(), 2);
            }
            out.push(r.status.as_u16());
            // Never on the token endpoint.
            assert_eq!(e.new_token().await.status, 200);
        }
        let stored = e.s.published_len();
        let posted_ok = (0..40).filter(|i| i % 4 == 3 && out[*i] == 200).count();
        assert_eq!(stored, posted_ok, "a refused record is not stored");
        assert_eq!(e.s.stats_json()["rate_limited"], 0);
        out
    };
    let a = statuses(5).await;
    assert_eq!(a, statuses(5).await, "same seed, same 429s");
    assert!(a.contains(&200) && a.contains(&429), "{a:?}");
    assert!(a.iter().all(|s| [200, 429].contains(s)), "{a:?}");
    assert_ne!(a, statuses(6).await, "another seed, other 429s");
}

#[tokio::test]
async fn faults_reach_the_token_endpoint_when_asked() {
    let e = emu().await;
    e.s.set_faults(with(|f: &mut Faults| {
        f.rate_limit_rate = 1.0;
        f.retry_after = 1;
        f.token_endpoint = true;
    }));
    let r = e.new_token().await;
    r.error(429);
    assert_eq!(r.retry_after(), 1);
    assert_eq!(e.get("/v2/sites").await.status, 429);
    assert_eq!(
        e.s.stats_json()["requests"]["POST /v2/oauth/token"]["429"],
        1
    );
    e.s.set_faults(with(|f: &mut Faults| f.error_rate = 1.0));
    assert_eq!(e.new_token().await.status, 200, "spared unless asked");
}

// The `Date` header, from the emulator's clock.
#[test]
fn http_date_is_imf_fixdate() {
    use super::routes::http_date;
    assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(http_date(784_111_777_999), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(
        http_date(1_795_305_600_000),
        "Sun, 22 Nov 2026 00:00:00 GMT"
    );
}

/// The instant of the one `Date` header of `headers`, epoch milliseconds.
fn date_of(headers: &HeaderMap) -> i64 {
    let dates: Vec<_> = headers.get_all("date").iter().collect();
    assert_eq!(dates.len(), 1, "Date headers: {dates:?}");
    let text = dates[0].to_str().expect("ascii");
    assert!(
        text.ends_with(" GMT") && text.len() == 29,
        "not IMF-fixdate: {text}"
    );
    let t = chrono::DateTime::parse_from_rfc2822(text).expect("an HTTP date");
    t.timestamp_millis()
}

#[tokio::test]
async fn every_answer_carries_one_date_from_the_emulators_clock() {
    use super::{Hostile, HostileRule};
    let e = emu().await;
    e.s.advance_clock(10.0 * 86_400.0 + 0.5);
    let tok = token(&e.s).await;
    let near = |r: &Resp| {
        let (date, now) = (date_of(&r.headers), e.s.now_ms());
        assert!((now - date).abs() < 5_000, "{}: {date} vs {now}", r.status);
    };
    near(&e.get_with("/v2/sites", &tok).await);
    near(&e.get_with("/v2/sites", "unknown").await);
    near(&e.get_with("/v2/nowhere", &tok).await);
    near(&call(&e.s, Method::GET, "/v2/sites", &[], Body::empty()).await);
    near(&post_token(&e.s, "{}").await);
    near(&e.post("/v2/webhook", json!({"dataType": "retail"})).await);
    e.s.set_faults(with(|f: &mut Faults| f.error_rate = 1.0));
    near(&e.get_with("/v2/sites", &tok).await);
    e.s.set_faults(with(|f: &mut Faults| f.rate_limit_rate = 1.0));
    near(&e.get_with("/v2/sites", &tok).await);
    e.s.set_faults(Faults::default());
    for mode in [
        Hostile::Status(503),
        Hostile::Echo(400),
        Hostile::Html,
        Hostile::Truncated,
    ] {
        let path = "/v2/sites".to_string();
        let remaining = Some(1);
        e.s.set_hostile(Some(HostileRule {
            mode,
            path,
            remaining,
        }));
        near(&e.get_with("/v2/sites", &tok).await);
    }
    e.s.set_limits(Limits {
        daily_requests: Some(0),
        ..Limits::NONE
    });
    let r = e.get_with("/v2/sites", &tok).await;
    r.error(429);
    near(&r);
}

/// One answer read from a raw socket: its head (status line and headers) and body.
async fn raw_exchange(addr: std::net::SocketAddr, request: String) -> (String, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf));
    read.await.expect("answered in time").expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    (head.to_string(), body.to_string())
}

#[tokio::test]
async fn over_a_socket_the_only_date_is_the_emulators() {
    let s = small();
    let handle = super::spawn(s.clone(), 0).await.expect("spawn");
    s.advance_clock(-400.0 * 86_400.0);
    let tok = token(&s).await;
    let key = s.creds.api_key.clone();
    for (path, bearer) in [("/v2/sites", tok.as_str()), ("/v2/sites", "unknown")] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {}\r\nx-api-key: {key}\r\n\
             authorization: Bearer {bearer}\r\nconnection: close\r\n\r\n",
            handle.addr
        );
        let (head, _) = raw_exchange(handle.addr, request).await;
        let dates: Vec<&str> = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(name, _)| name.eq_ignore_ascii_case("date"))
            .map(|(_, v)| v.trim())
            .collect();
        assert_eq!(dates.len(), 1, "{head}");
        let date = chrono::DateTime::parse_from_rfc2822(dates[0]).expect("an HTTP date");
        let off = (s.now_ms() - date.timestamp_millis()).abs();
        assert!(
            off < 5_000,
            "Date is {off} ms off the emulator's clock: {head}"
        );
    }
    handle.stop().await;
}

// The daily quota, per UTC day of the emulator's clock.
const DAY: i64 = 24 * HOUR;

/// Seconds from the emulator's clock to its next UTC midnight, and that midnight's date.
fn to_midnight(s: &State) -> (i64, chrono::NaiveDate) {
    let now = s.now_ms();
    let midnight = (now.div_euclid(DAY) + 1) * DAY;
    let date = chrono::DateTime::from_timestamp_millis(midnight).expect("date");
    ((midnight - now + 999) / 1000, date.date_naive())
}

/// Moves the emulator's clock to the next noon (UTC), far from a midnight that would split a
/// test's requests over two days.
fn to_noon(s: &State) {
    let ms = (DAY / 2 - s.now_ms().rem_euclid(DAY)).rem_euclid(DAY);
    s.advance_clock(ms as f64 / 1000.0);
}

#[tokio::test]
async fn daily_quota_is_per_utc_day_of_the_emulators_clock() {
    let s = small();
    to_noon(&s);
    let e = emu_of(s).await;
    e.s.set_limits(Limits {
        daily_requests: Some(3),
        ..Limits::NONE
    });
    for uri in ["/v2/sites", "/v2/devices", "/v2/reports"] {
        assert_eq!(e.get(uri).await.status, 200, "{uri}");
    }
    let (seconds, midnight) = to_midnight(&e.s);
    let r = e.get("/v2/sites").await;
    let message = r.error(429);
    assert!(
        (r.retry_after() as i64 - seconds).abs() <= 2,
        "Retry-After {} for {seconds} s to midnight",
        r.retry_after()
    );
    assert!(
        message.contains(&format!("resets at {midnight}T00:00:00Z")),
        "{message}"
    );
    let today = (midnight - chrono::Days::new(1)).to_string();
    let daily = &e.s.stats_json()["daily"];
    assert_eq!(daily["day"], today.as_str());
    assert_eq!(daily["used"], 4, "the refused request counts too");
    assert_eq!(daily["limit"], 3);
    // The next UTC day of the emulator's clock starts from zero (a new token: the old one
    // expired on the way).
    e.s.advance_clock(seconds as f64 + 1.0);
    let tok = token(&e.s).await;
    assert_eq!(e.get_with("/v2/sites", &tok).await.status, 200);
    let daily = &e.s.stats_json()["daily"];
    assert_eq!(daily["day"], midnight.to_string().as_str());
    assert_eq!(daily["used"], 2);
    assert_eq!(
        daily["days"],
        json!({today.as_str(): 4, midnight.to_string(): 2})
    );
    // Back to the spent day: still spent.
    e.s.advance_clock(-(seconds as f64) - 1.0);
    e.get_with("/v2/sites", &tok).await.error(429);
    assert_eq!(e.s.stats_json()["daily"]["used"], 5);
}

#[tokio::test]
async fn daily_counts_restart_when_the_quota_is_set_anew_or_lifted_not_when_changed() {
    let s = small();
    to_noon(&s);
    let e = emu_of(s).await;
    let quota = |n: Option<u64>| Limits {
        daily_requests: n,
        ..Limits::NONE
    };
    e.get("/v2/sites").await;
    assert_eq!(
        e.s.stats_json()["daily"]["used"],
        2,
        "counted without a quota"
    );
    assert_eq!(e.s.stats_json()["daily"]["limit"], Value::Null);
    e.s.set_limits(quota(Some(2)));
    assert_eq!(
        e.s.stats_json()["daily"]["used"],
        0,
        "a quota set anew starts at 0"
    );
    e.get("/v2/sites").await;
    e.get("/v2/sites").await;
    e.s.set_limits(quota(Some(3)));
    assert_eq!(
        e.s.stats_json()["daily"]["used"],
        2,
        "a changed quota keeps the count"
    );
    assert_eq!(e.get("/v2/sites").await.status, 200);
    e.get("/v2/sites").await.error(429);
    e.s.reset_stats();
    assert_eq!(
        e.s.stats_json()["daily"]["used"],
        4,
        "reset_stats keeps the quota's state"
    );
    e.s.set_limits(quota(None));
    assert_eq!(e.s.stats_json()["daily"]["days"], json!({}));
    assert_eq!(e.get("/v2/sites").await.status, 200);
}

// Hostile `echo`.
#[tokio::test]
async fn echo_returns_the_request_secrets_included_on_token_reads_and_webhooks() {
    use super::{Hostile, HostileRule};
    let e = emu().await;
    let echo = |path: &str, status: u16| HostileRule {
        mode: Hostile::Echo(status),
        path: path.into(),
        remaining: Some(1),
    };
    let (key, secret) = (e.s.creds.api_key.clone(), e.s.creds.client_secret.clone());
    let bearer = format!("Bearer {}", e.tok);
    // Token endpoint: the body holds the client secret.
    e.s.set_hostile(Some(echo("/v2/oauth/token", 401)));
    let r = e.new_token().await;
    let message = r.error(401);
    let v = r.json();
    assert_eq!(v["request"]["method"], "POST");
    assert_eq!(v["request"]["path"], "/v2/oauth/token");
    assert_eq!(v["request"]["headers"]["x-api-key"], key.as_str());
    assert!(v["request"]["body"]
        .as_str()
        .expect("body")
        .contains(&secret));
    assert!(message.contains(&format!("x-api-key: {key}")), "{message}");
    assert!(message.contains(&secret), "{message}");
    let raw = String::from_utf8_lossy(&r.body);
    assert!(
        raw.contains(&key) && raw.contains(&secret),
        "not verbatim: {raw}"
    );
    assert_eq!(
        e.new_token().await.status,
        200,
        "count=1: the next one is served"
    );
    // Reads: the path with its query, the bearer token.
    let uri = e.events(0, HOUR);
    for status in [400, 403, 500] {
        e.s.set_hostile(Some(echo("/v2/events", status)));
        let r = e.get(&uri).await;
        let message = r.error(status);
        let v = r.json();
        assert_eq!(v["request"]["path"], uri.as_str());
        assert_eq!(v["request"]["headers"]["authorization"], bearer.as_str());
        assert!(
            message.contains(&format!("authorization: {bearer}")),
            "{message}"
        );
        assert!(message.contains(&format!("GET {uri}")), "{message}");
        assert!(
            r.headers.get("retry-after").is_none(),
            "Retry-After on a {status}"
        );
    }
    // Webhooks: the record as sent; a 429 says to retry at once.
    for (path, status) in [("/v2/webhook", 400), ("/eu/v2/webhook", 429)] {
        e.s.set_hostile(Some(echo(path, status)));
        let record = retail("echoed-tx");
        let r = e.post(path, &record).await;
        let message = r.error(status);
        assert_eq!(r.json()["request"]["body"], record.to_string());
        assert!(message.contains(&format!("body: {record}")), "{message}");
        assert!(message.contains(&format!("x-api-key: {key}")), "{message}");
        if status == 429 {
            assert_eq!(r.retry_after(), 0);
        }
    }
    assert_eq!(e.s.published_len(), 0, "an echoed record is not stored");
}

// A webhook that refuses arrays (`set_webhook_arrays`).
#[tokio::test]
async fn webhook_without_arrays_refuses_every_array_and_stores_nothing() {
    let e = emu().await;
    assert!(e.s.webhook_arrays(), "arrays are accepted by default");
    e.s.set_webhook_arrays(false);
    for path in ["/v2/webhook", "/eu/v2/webhook"] {
        for body in [
            json!([retail("a-1"), retail("a-2")]),
            json!([retail("a-3")]),
            json!([]),
        ] {
            let r = e.post(path, &body).await;
            let message = r.error(400);
            assert_eq!(r.json()["error"], "array_not_supported");
            assert_eq!(
                message,
                "the body must be one JSON object; arrays are not accepted"
            );
        }
    }
    assert_eq!(e.s.published_len(), 0);
    assert_eq!(e.post("/v2/webhook", retail("one")).await.status, 200);
    e.s.set_webhook_arrays(true);
    let both = json!([retail("b-1"), retail("b-2")]);
    assert_eq!(e.post("/v2/webhook", both).await.status, 200);
    assert_eq!(e.s.published_len(), 3);
}

// Dialects: the answers API.md leaves "not shown" (`set_dialect`).

fn speak(s: &State, f: impl FnOnce(&mut Dialect)) {
    s.set_dialect(with(f));
}

fn content_type(r: &Resp) -> &str {
    let kind = r.headers.get("content-type");
    kind.map_or("", |v| v.to_str().expect("ascii"))
}

fn other(location: &str, event: &str) -> Value {
    json!({"dataType": "other", "schemaVersion": "1", "startTime": 1_763_355_600_000i64,
        "locationId": location, "dataSourceId": "door", "eventUniqueId": event,
        "eventType": "alarm"})
}

#[tokio::test]
async fn webhook_answers_of_every_dialect_store_as_today_but_the_proxy() {
    let e = emu().await;
    assert_eq!(e.s.dialect(), Dialect::default());
    let text = "text/plain; charset=utf-8";
    let html = "text/html; charset=utf-8";
    let json_ = "application/json";
    let cases = [
        ("accepted_count", 200, json_, r#"{"accepted":2}"#),
        ("status_object", 200, json_, ""),
        ("empty_object", 200, json_, "{}"),
        ("status_ok", 200, json_, r#"{"status":"ok"}"#),
        ("success_flag", 200, json_, r#"{"success":true}"#),
        ("received_count", 200, json_, r#"{"received":2}"#),
        ("no_content", 204, "", ""),
        ("empty_200", 200, json_, ""),
        ("queued", 202, json_, r#"{"status":"queued"}"#),
        ("plain_ok", 200, text, "OK"),
        ("proxy_html", 200, html, ""),
    ];
    assert_eq!(cases.len(), WebhookAnswer::NAMES.len());
    for (n, (name, status, kind, body)) in cases.into_iter().enumerate() {
        let answer = WebhookAnswer::parse(name).expect(name);
        speak(&e.s, |d| d.webhook_answer = answer);
        let before = e.s.published_len();
        let (a, b) = (format!("{name}-a"), format!("{name}-b"));
        let path = ["/v2/webhook", "/eu/v2/webhook"][n % 2];
        let r = e.post(path, json!([retail(&a), retail(&b)])).await;
        let got = String::from_utf8_lossy(&r.body);
        assert_eq!(
            (r.status.as_u16(), content_type(&r)),
            (status, kind),
            "{name}"
        );
        match answer {
            WebhookAnswer::StatusObject => {
                let want = json!({"status": "accepted", "transactionId": a, "upserted": false});
                assert_eq!(r.json(), want);
            }
            WebhookAnswer::ProxyHtml => {
                assert!(got.contains("<form") && got.contains("password"), "{got}");
            }
            _ => assert_eq!(got, body, "{name}"),
        }
        let stored = if answer == WebhookAnswer::ProxyHtml {
            0
        } else {
            2
        };
        assert_eq!(e.s.published_len(), before + stored, "{name}");
    }
    // The key of an "other" record is its locationId and eventUniqueId; a single object is a
    // body too.
    speak(&e.s, |d| d.webhook_answer = WebhookAnswer::StatusObject);
    let r = e.post("/v2/webhook", other("loc-1", "ev-9")).await;
    let want = json!({"status": "accepted", "locationId": "loc-1", "eventUniqueId": "ev-9",
        "upserted": false});
    assert_eq!(r.json(), want);
    // The proxy answers whatever is sent, and stores nothing.
    speak(&e.s, |d| d.webhook_answer = WebhookAnswer::ProxyHtml);
    let before = e.s.published_len();
    for body in [json!({"dataType": "retail"}), json!("text"), retail("p-1")] {
        let r = e.post("/v2/webhook", body).await;
        assert_eq!((r.status.as_u16(), content_type(&r)), (200, html));
    }
    assert_eq!(e.s.published_len(), before);
    let counted = &e.s.stats_json()["requests"]["POST /v2/webhook"];
    assert_eq!(counted["204"], 1, "{counted}");
}

#[tokio::test]
async fn other_records_are_keyed_on_their_location_and_event_id() {
    // The upsert key is the one `Model::key` declares: an event id is unique per location only.
    let e = emu().await;
    let r = e
        .post(
            "/v2/webhook",
            json!([other("loc-1", "ev-1"), other("loc-2", "ev-1")]),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = e.post("/v2/webhook", other("loc-2", "ev-1")).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        e.stored(),
        vec![other("loc-1", "ev-1"), other("loc-2", "ev-1")]
    );
    // A refusal names such a record by both.
    speak(&e.s, |d| d.webhook_errors = WebhookErrors::ByTransactionId);
    let mut bad = other("loc-2", "ev-1");
    bad["eventType"] = json!(7);
    let v = e
        .post("/v2/webhook", json!([other("loc-1", "ev-1"), bad]))
        .await
        .json();
    let failed = &v["failed"][0];
    assert_eq!(
        (&failed["locationId"], &failed["eventUniqueId"]),
        (&json!("loc-2"), &json!("ev-1")),
        "{v}"
    );
}

#[tokio::test]
async fn webhook_errors_of_every_dialect() {
    let e = emu().await;
    let mut bad = retail("bad-1");
    bad["registerId"] = json!("r-1");
    let keyless = without(retail("x"), "transactionId");
    let mut bad_other = other("loc-1", "ev-1");
    bad_other["eventType"] = json!(7);
    let body = json!([retail("good-0"), bad, keyless, bad_other]);
    for name in WebhookErrors::NAMES {
        let how = WebhookErrors::parse(name).expect(name);
        speak(&e.s, |d| d.webhook_errors = how);
        e.s.clear_published();
        let r = e.post("/v2/webhook", &body).await;
        assert_eq!(r.status, 400, "{name}");
        assert_eq!(content_type(&r), "application/json");
        let v = r.json();
        let stored = if how == WebhookErrors::AllOrNothing {
            vec![]
        } else {
            vec![retail("good-0")]
        };
        assert_eq!(e.stored(), stored, "{name}");
        match how {
            WebhookErrors::Indexed | WebhookErrors::AllOrNothing => {
                assert_eq!(v["error"], "validation_failed");
                assert_eq!(v["accepted"], stored.len());
                let message = v["message"].as_str().expect("message");
                assert!(message.contains("record 1: registerId"), "{message}");
                let errors = v["errors"].as_array().expect("errors");
                let indexes: HashSet<_> = errors.iter().map(|x| x["index"].clone()).collect();
                assert_eq!(indexes, HashSet::from([json!(1), json!(2), json!(3)]));
                assert!(errors
                    .iter()
                    .all(|x| x["path"].is_string() && x["message"].is_string()));
            }
            WebhookErrors::ByTransactionId => {
                assert_eq!(v.as_object().map(|m| m.len()), Some(2), "{v}");
                assert_eq!(v["error"], "validation_failed");
                let failed = v["failed"].as_array().expect("failed");
                let find = |k: &str, want: Value| {
                    let hit = failed.iter().find(|x| x[k] == want);
                    hit.unwrap_or_else(|| panic!("no {k} {want} in {v}"))["reason"].clone()
                };
                let reason = find("transactionId", json!("bad-1"));
                assert!(reason.as_str().expect("reason").starts_with("registerId: "));
                let reason = find("eventUniqueId", json!("ev-1"));
                assert!(reason.as_str().expect("reason").starts_with("eventType: "));
                find("index", json!(2));
                assert!(failed
                    .iter()
                    .all(|x| x.get("index").is_none() || x["index"] == 2));
            }
            WebhookErrors::FailuresList => {
                assert_eq!(v.as_object().map(|m| m.len()), Some(2), "{v}");
                assert_eq!(v["error"], "validation_error");
                let failures = v["failures"].as_array().expect("failures");
                let first = failures
                    .iter()
                    .find(|x| x["record"] == 1)
                    .expect("record 1");
                assert_eq!(first["field"], "registerId");
                assert!(first["reason"].is_string());
                let records: HashSet<_> = failures.iter().map(|x| x["record"].clone()).collect();
                assert_eq!(records, HashSet::from([json!(1), json!(2), json!(3)]));
            }
            WebhookErrors::MessageOnly => {
                assert_eq!(
                    v,
                    json!({"message": "one or more records failed validation"})
                );
            }
        }
        // One invalid object alone: the same shapes, at index 0.
        let mut single = retail("single");
        single["storeId"] = json!("s");
        let v = e.post("/v2/webhook", single).await.json();
        match how {
            WebhookErrors::Indexed | WebhookErrors::AllOrNothing => {
                assert_eq!(v["errors"][0]["index"], 0)
            }
            WebhookErrors::ByTransactionId => {
                assert_eq!(v["failed"][0]["transactionId"], "single")
            }
            WebhookErrors::FailuresList => assert_eq!(v["failures"][0]["record"], 0),
            WebhookErrors::MessageOnly => assert!(v.get("message").is_some()),
        }
    }
    // The error body's dialect leaves the validation answer alone.
    speak(&e.s, |d| d.error_body = ErrorBody::Detail);
    let v = e.post("/v2/webhook", &body).await.json();
    assert_eq!(v["error"], "validation_failed");
    assert!(v["errors"].is_array());
}

#[tokio::test]
async fn error_bodies_of_every_dialect() {
    let e = emu().await;
    let good_token = token_body(&e.s);
    for name in ErrorBody::NAMES {
        let shape = ErrorBody::parse(name).expect(name);
        speak(&e.s, |d| d.error_body = shape);
        let bad_key = [("x-api-key", "wrong")];
        let answers = [
            (e.get("/v2/nowhere").await, 404, "not_found", "no route"),
            (
                e.get("/v2/sites?offset=10000").await,
                400,
                "bad_request",
                "offset",
            ),
            (
                call(&e.s, Method::GET, "/v2/sites", &bad_key, Body::empty()).await,
                403,
                "forbidden",
                "x-api-key",
            ),
            (post_token(&e.s, "{").await, 400, "bad_request", "not JSON"),
            (
                post_token(&e.s, without(good_token.clone(), "audience")).await,
                400,
                "bad_request",
                "audience",
            ),
            (
                e.post("/v2/webhook", "[]").await,
                400,
                "bad_request",
                "empty array",
            ),
        ];
        for (r, status, code, words) in answers {
            let text = String::from_utf8_lossy(&r.body).into_owned();
            assert_eq!(r.status, status, "{name}: {text}");
            let kind = content_type(&r);
            match shape {
                ErrorBody::ErrorMessage => {
                    assert_eq!(r.json()["error"], code);
                    assert!(r.error(status).contains(words), "{text}");
                }
                ErrorBody::Detail => {
                    let v = r.json();
                    assert_eq!(v.as_object().map(|m| m.len()), Some(1), "{v}");
                    assert!(v["detail"].as_str().expect("detail").contains(words));
                }
                ErrorBody::ErrorsList => {
                    let v = r.json();
                    assert_eq!(v["errors"][0]["code"], code);
                    let message = v["errors"][0]["message"].as_str().expect("message");
                    assert!(message.contains(words), "{v}");
                }
                ErrorBody::Oauth => {
                    let v = r.json();
                    assert_eq!(v.as_object().map(|m| m.len()), Some(2), "{v}");
                    assert_eq!(v["error"], code);
                    let description = v["error_description"].as_str().expect("description");
                    assert!(description.contains(words), "{v}");
                }
                ErrorBody::PlainText => {
                    assert_eq!(kind, "text/plain; charset=utf-8");
                    assert!(text.contains(words) && !text.starts_with('{'), "{text}");
                }
                ErrorBody::Html => {
                    assert_eq!(kind, "text/html; charset=utf-8");
                    let reason = r.status.canonical_reason().expect("reason");
                    let head = format!("{status} {reason}");
                    assert!(text.contains(&format!("<title>{head}</title>")), "{text}");
                    assert!(text.contains(&format!("<h1>{head}</h1>")), "{text}");
                    assert!(text.contains("<p>") && text.contains(words), "{text}");
                }
                ErrorBody::Empty => {
                    assert_eq!((kind, text.as_str()), ("", ""));
                }
            }
        }
    }
    // An echo's body is the echo, in every dialect.
    use super::{Hostile, HostileRule};
    e.s.set_hostile(Some(HostileRule {
        mode: Hostile::Echo(500),
        path: "/v2/sites".into(),
        remaining: Some(1),
    }));
    let r = e.get("/v2/sites").await;
    assert_eq!(r.json()["request"]["method"], "GET");
}

#[tokio::test]
async fn retry_after_in_seconds_as_a_date_or_absent() {
    let e = emu().await;
    e.s.advance_clock(3.0 * 86_400.0);
    let tok = token(&e.s).await;
    e.s.set_faults(with(|f: &mut Faults| {
        f.rate_limit_rate = 1.0;
        f.retry_after = 7;
    }));
    for name in RetryAfter::NAMES {
        let form = RetryAfter::parse(name).expect(name);
        speak(&e.s, |d| d.retry_after = form);
        let r = e.get_with("/v2/sites", &tok).await;
        r.error(429);
        let header = r
            .headers
            .get("retry-after")
            .map(|v| v.to_str().expect("ascii"));
        match form {
            RetryAfter::Seconds => assert_eq!(r.retry_after(), 7),
            RetryAfter::Absent => assert_eq!(header, None),
            RetryAfter::HttpDate => {
                let text = header.expect("Retry-After");
                assert!(text.ends_with(" GMT") && text.len() == 29, "{text}");
                let at = chrono::DateTime::parse_from_rfc2822(text).expect("an HTTP date");
                let wait = at.timestamp_millis() - date_of(&r.headers);
                // Read a moment apart, the two may name seconds that follow each other.
                assert!((6_000..=7_000).contains(&wait), "{text}: {wait} ms");
            }
        }
    }
    // The 429s of the limits, too; injected 503s stay without one.
    e.s.set_faults(Faults::default());
    e.s.set_limits(Limits {
        daily_requests: Some(0),
        ..Limits::NONE
    });
    speak(&e.s, |d| d.retry_after = RetryAfter::HttpDate);
    let r = e.get_with("/v2/sites", &tok).await;
    r.error(429);
    let text = r.headers.get("retry-after").expect("Retry-After");
    let at = chrono::DateTime::parse_from_rfc2822(text.to_str().expect("ascii"));
    let midnight = at.expect("an HTTP date").timestamp_millis();
    assert_eq!(
        midnight % crate::time::DAY_MS,
        0,
        "the quota's wait ends at midnight"
    );
    e.s.set_limits(Limits::NONE);
    e.s.set_faults(with(|f: &mut Faults| f.error_rate = 1.0));
    for _ in 0..4 {
        let r = e.get_with("/v2/sites", &tok).await;
        assert!(r.is_5xx() && r.headers.get("retry-after").is_none());
    }
}

#[tokio::test]
async fn token_answers_of_every_dialect() {
    let s = small();
    for name in TokenAnswer::NAMES {
        let answer = TokenAnswer::parse(name).expect(name);
        speak(&s, |d| d.token_answer = answer);
        let v = post_token(&s, token_body(&s)).await.json();
        let tok = v["access_token"]
            .as_str()
            .expect("access_token")
            .to_string();
        let keys = v.as_object().map(|m| m.len());
        match answer {
            TokenAnswer::Standard => {
                assert_eq!(v["expires_in"], 14_399);
                assert_eq!((v["token_type"].clone(), keys), (json!("Bearer"), Some(3)));
            }
            TokenAnswer::NoExpiresIn => {
                assert_eq!((v.get("expires_in"), keys), (None, Some(2)), "{v}")
            }
            TokenAnswer::StringExpiresIn => assert_eq!(v["expires_in"], "14399"),
            TokenAnswer::ZeroExpiresIn => assert_eq!(v["expires_in"], 0),
            TokenAnswer::NoTokenType => {
                assert_eq!((v.get("token_type"), keys), (None, Some(2)), "{v}");
                assert_eq!(v["expires_in"], 14_399);
            }
        }
        // Whatever it says, the token lives its real lifetime.
        let e = Emu { s: s.clone(), tok };
        assert_eq!(e.get("/v2/sites").await.status, 200);
        s.advance_clock(600.0);
        assert_eq!(e.get("/v2/sites").await.status, 200, "{name}");
    }
}

#[tokio::test]
async fn expired_revoked_or_unknown_tokens_in_every_dialect() {
    let e = emu().await;
    let key = e.s.creds.api_key.clone();
    for name in ExpiredToken::NAMES {
        let how = ExpiredToken::parse(name).expect(name);
        speak(&e.s, |d| d.expired_token = how);
        let revoked = token(&e.s).await;
        e.s.revoke_tokens();
        let expired = token(&e.s).await;
        e.s.advance_clock(14_401.0);
        for (tok, why) in [
            (expired.as_str(), "expired"),
            (revoked.as_str(), "revoked"),
            ("emu.unknown", ""),
        ] {
            let r = e.get_with("/v2/sites", tok).await;
            let message = match how {
                ExpiredToken::Status401 => r.error(401),
                _ => r.error(403),
            };
            let challenge = r.headers.get("www-authenticate");
            match how {
                ExpiredToken::Status401 => {
                    assert!(message.contains(why) && challenge.is_none(), "{message}")
                }
                ExpiredToken::Message403 => {
                    assert!(message.starts_with("the access token "), "{message}");
                    assert!(message.contains(why) && challenge.is_none(), "{message}");
                }
                ExpiredToken::WwwAuthenticate403 => {
                    assert_eq!(message, "forbidden");
                    let challenge = challenge.expect("WWW-Authenticate");
                    assert_eq!(challenge, r#"Bearer error="invalid_token""#);
                }
            }
        }
        // A bad key stays its own 403, a missing token a 401.
        let h = [("x-api-key", "wrong"), ("authorization", "Bearer x")];
        let r = call(&e.s, Method::GET, "/v2/sites", &h, Body::empty()).await;
        assert_eq!(r.error(403), "missing or invalid `x-api-key` header");
        assert!(r.headers.get("www-authenticate").is_none());
        let h = [("x-api-key", key.as_str())];
        call(&e.s, Method::GET, "/v2/sites", &h, Body::empty())
            .await
            .error(401);
    }
    let counted = &e.s.stats_json()["requests"]["GET /v2/sites"];
    assert_eq!(
        (counted["401"].clone(), counted["403"].clone()),
        (json!(6), json!(9))
    );
}

#[tokio::test]
async fn token_requests_count_each_tokens_data_requests() {
    let e = emu().await;
    speak(&e.s, |d| d.token_requests = Some(3));
    let other = token(&e.s).await;
    for uri in ["/v2/sites", "/v2/devices", "/v2/reports"] {
        assert_eq!(e.get(uri).await.status, 200);
    }
    assert!(e.get("/v2/sites").await.error(401).contains("expired"));
    // Per token: another one still has its three.
    assert_eq!(e.get_with("/v2/sites", &other).await.status, 200);
    // The webhook counts; refused and faulted requests do not.
    let post = |tok: &str| {
        let bearer = format!("Bearer {tok}");
        let key = e.s.creds.api_key.clone();
        let s = e.s.clone();
        async move {
            let h = [
                ("x-api-key", key.as_str()),
                ("authorization", &*bearer),
                JSON,
            ];
            let body = Body::from(retail("tr-1").to_string());
            call(&s, Method::POST, "/v2/webhook", &h, body).await
        }
    };
    assert_eq!(post(&other).await.status, 200);
    e.s.set_faults(with(|f: &mut Faults| f.error_rate = 1.0));
    assert!(e.get_with("/v2/sites", &other).await.is_5xx());
    e.s.set_faults(Faults::default());
    assert_eq!(e.get_with("/v2/sites", &other).await.status, 200);
    e.get_with("/v2/sites", &other).await.error(401);
    // Refused as the dialect refuses an expired token.
    speak(&e.s, |d| {
        d.token_requests = Some(1);
        d.expired_token = ExpiredToken::Message403;
    });
    let fresh = token(&e.s).await;
    assert_eq!(e.get_with("/v2/sites", &fresh).await.status, 200);
    let message = e.get_with("/v2/sites", &fresh).await.error(403);
    assert_eq!(message, "the access token has expired");
    // The token endpoint itself does not count.
    assert_eq!(e.new_token().await.status, 200);
    // Replacing the dialect lifts the limit: the uses counted so far stay, unlimited.
    e.s.set_dialect(Dialect::default());
    assert_eq!(e.get_with("/v2/sites", &fresh).await.status, 200);
    assert_eq!(e.get("/v2/sites").await.status, 200);
}
