"""The Python API of `surveillance.Emulator`: its constructor's arguments, the data it generates (as
`resources()`, `truth()` and the served events show it), its settings (`set_faults`, `set_limits`,
`set_webhook`, `set_dialect`, `set_token_lifetime`, `advance_clock`, ...), `add_events`,
`update_event`, `published()`, `stats()`, its lifecycle and HTTPS. Also the parts of the wire
contract that the Rust tests of `src/emulator/tests.rs` (where the HTTP rules are tested) leave out:
the shape of sites, devices, cameras and events, the webhook's record models (WEBHOOK-MODELS.md),
the body size limit over a socket. Requests go over plain HTTP with the standard library."""

from __future__ import annotations

import email.utils
import inspect
import json
import os
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from http.client import HTTPConnection, HTTPException
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import surveillance as sv

from conftest import PAGE, Http, Resp, parse_ts

UTC = timezone.utc
MS = timedelta(milliseconds=1)
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$")
KINDS = ["sites", "devices", "cameras", "reports"]


# ------------------------------------------------------------------------------------------------
# helpers


def is_uuid(v: Any) -> bool:
    if not isinstance(v, str) or len(v) != 36:
        return False
    try:
        uuid.UUID(v)
    except ValueError:
        return False
    return True


def conforms(v: Any, t: str) -> bool:
    """`v` has type `t` (uuid, str, int, bool, number, strs, dict, list); `t?` allows null."""
    if t.endswith("?"):
        if v is None:
            return True
        t = t[:-1]
    return {
        "uuid": is_uuid,
        "str": lambda x: isinstance(x, str),
        "int": lambda x: type(x) is int,
        "bool": lambda x: type(x) is bool,
        "number": lambda x: type(x) in (int, float),
        "strs": lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x),
        "dict": lambda x: isinstance(x, dict),
        "list": lambda x: isinstance(x, list),
    }[t](v)


def check_fields(rec: dict, spec: dict[str, str]) -> None:
    missing = spec.keys() - rec.keys()
    assert not missing, f"missing fields {sorted(missing)} in {rec}"
    for k, t in spec.items():
        assert conforms(rec[k], t), f"field {k}={rec[k]!r} is not {t}"


def assert_error(r: Any, status: int, *names: str) -> None:
    """`r` is an error answer with `status` and a JSON body {error, message} naming `names`."""
    assert r.status == status, r
    assert isinstance(r.body, dict), f"error body is not a JSON object: {r.body!r}"
    assert isinstance(r.body.get("error"), str) and r.body["error"], r.body
    assert isinstance(r.body.get("message"), str), r.body
    for n in names:
        assert n in r.body["message"], f"message does not name {n!r}: {r.body}"


def inst(e: dict, key: str = "startTime") -> datetime:
    """An event's timestamp as a UTC instant."""
    return parse_ts(e[key]).astimezone(UTC)


def ids(events: list[dict]) -> list[str]:
    return [e["id"] for e in events]


def retry_after(r: Any) -> int:
    value = r.headers.get("Retry-After")
    assert value is not None, f"429 without Retry-After: {r}"
    assert int(value) >= 0, value
    return int(value)


def refuses(url: str) -> bool:
    u = urllib.parse.urlsplit(url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def call(h: Http, name: str) -> Any:
    """One ordinary call of `name`: the token endpoint, the webhook or a list."""
    if name == "token":
        return h.token_request()
    if name == "webhook":
        return h.post("/v2/webhook", json=retail())
    return h.get(f"/v2/{name}")


def nz(counts: dict) -> dict:
    """A status count map without its zero entries."""
    return {k: v for k, v in counts.items() if v}


def total(stats: dict, status: str) -> int:
    return sum(v.get(status, 0) for v in stats["requests"].values())


# -- webhook records -----------------------------------------------------------------------------

T0 = int(datetime(2026, 1, 5, 15, tzinfo=UTC).timestamp() * 1000)


def tid(prefix: str = "tx") -> str:
    """A unique id made of letters only (so an index in an error message is unambiguous)."""
    return prefix + "-" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))


def item(**over: Any) -> dict:
    it = {"time": T0 + 1000, "quantity": 1, "description": "coffee", "unitPrice": 2.5}
    return {**it, "type": "SALE", **over}


def retail(**over: Any) -> dict:
    rec = {
        "dataType": "retail",
        "schemaVersion": "1",
        "startTime": T0,
        "endTime": T0 + 60_000,
        "locationId": "store-north",
        "dataSourceId": "register-a",
        "transactionId": tid(),
        "status": "sale",
        "items": [item(), item(description="bagel", unitPrice=3, quantity=2)],
    }
    return {**rec, **over}


def restaurant(**over: Any) -> dict:
    return retail(dataType="restaurant", tableNumber="twelve", guestCount=2, **over)


def other(**over: Any) -> dict:
    rec = {
        "dataType": "other",
        "schemaVersion": "1",
        "startTime": T0,
        "locationId": "store-north",
        "dataSourceId": "door-a",
        "eventUniqueId": tid("ev"),
        "eventType": "door-open",
    }
    return {**rec, **over}


BUILDERS = {"retail": retail, "restaurant": restaurant, "other": other}


def key_of(rec: dict) -> tuple[str, str]:
    return (
        ("eventUniqueId", rec["eventUniqueId"])
        if rec["dataType"] == "other"
        else (
            "transactionId",
            rec["transactionId"],
        )
    )


def stored(emu: Any, rec: dict, region: str | None = None) -> list[dict]:
    """Records of published() that carry `rec`'s upsert key."""
    k, v = key_of(rec)
    pub = emu.published() if region is None else emu.published(region=region)
    return [p for p in pub if p.get(k) == v]


def set_path(rec: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    node: Any = rec
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[leaf] = value


def del_path(rec: dict, path: str) -> None:
    *parents, leaf = path.split(".")
    node: Any = rec
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    del node[leaf]


def post_raw(emu: Any, token: str, body: bytes, timeout: float = 30) -> Resp:
    """POST a large body to the webhook with http.client, tolerating a server that answers and
    closes before reading it all."""
    u = urllib.parse.urlsplit(emu.url)
    conn = HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.putrequest("POST", "/v2/webhook")
        conn.putheader("x-api-key", emu.api_key)
        conn.putheader("authorization", f"Bearer {token}")
        conn.putheader("content-type", "application/json")
        conn.putheader("content-length", str(len(body)))
        conn.endheaders()
        view = memoryview(body)
        chunk = 1 << 16
        try:
            for i in range(0, len(body), chunk):
                conn.send(view[i : i + chunk])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may refuse early; its answer is still to be read
        r = conn.getresponse()
        raw = r.read()
        try:
            return Resp(r.status, r.headers, json.loads(raw))
        except ValueError:
            return Resp(r.status, r.headers, raw)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------
# module data


@pytest.fixture(scope="module")
def res(emu) -> dict[str, list[dict]]:
    """Ground truth of every resource kind."""
    return {k: emu.resources(k) for k in KINDS}


@pytest.fixture(scope="module")
def all_events(emu) -> list[dict]:
    """Every event of [emu.start, emu.end) as served (default semantics), in 6-hour windows."""
    emu.set_faults()
    emu.set_semantics()
    emu.set_limits()
    return Http(emu).events(emu.start, emu.end)


@pytest.fixture(scope="module")
def burst(all_events) -> tuple[datetime, int]:
    """The densest millisecond of the data and its number of events."""
    return Counter(inst(e) for e in all_events).most_common(1)[0]


@pytest.fixture(scope="module")
def window(all_events, burst) -> tuple[datetime, datetime]:
    """A window whose start and end fall exactly on event timestamps (the start on the densest
    millisecond when it can), holding a few hundred events."""
    t0, n = burst
    ts = sorted(inst(e) for e in all_events)
    k = ts.index(t0)
    if k + n + 250 < len(ts):
        return t0, ts[k + n + 250]
    return ts[max(0, k - 250)], t0


# ------------------------------------------------------------------------------------------------
# construction, addresses, data range


def test_addresses_and_credentials(emu):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", emu.url), emu.url
    assert emu.eu_url == emu.url + "/eu"
    for v in (emu.api_key, emu.client_id, emu.client_secret, emu.audience):
        assert isinstance(v, str) and v


def test_data_range_defaults(emu):
    assert emu.start == datetime(2026, 1, 5, tzinfo=UTC)
    assert emu.start.utcoffset() == timedelta(0) and emu.end.utcoffset() == timedelta(0)
    assert emu.end - emu.start == timedelta(days=3)


def test_start_parameter(make_emu):
    e = make_emu(start="2026-03-01", days=2)
    assert e.start == datetime(2026, 3, 1, tzinfo=UTC)
    assert e.end == datetime(2026, 3, 3, tzinfo=UTC)
    assert e.truth(e.start, e.end)
    assert e.truth(e.start - timedelta(days=1), e.start) == []
    assert e.truth(e.end, e.end + timedelta(days=1)) == []


# ------------------------------------------------------------------------------------------------
# tokens


def test_set_token_lifetime_and_revoke_tokens(make_emu):
    e = make_emu()
    h = Http(e)
    e.set_token_lifetime(60)
    r = h.token_request()
    assert r.status == 200 and r.body["expires_in"] == 60, r
    auth = {"authorization": f"Bearer {r.body['access_token']}"}
    assert h.get("/v2/sites", headers=auth).status == 200
    e.revoke_tokens()
    assert_error(h.get("/v2/sites", headers=auth), 401)


# ------------------------------------------------------------------------------------------------
# sites, devices, cameras, reports

SITE = {
    "id": "uuid",
    "customerId": "uuid",
    "primaryDeviceId": "uuid",
    "motionAlarmScheduleId": "uuid",
    "cloudStoragePackageId": "uuid?",
    "name": "str",
    "address": "str",
    "timezone": "str",
    "type": "str",
    "externalId": "str?",
    "status": "str",
    "visibilityStatus": "str",
    "updatedAt": "int",
    "deletedAt": "int",
    "tags": "strs",
    "locationTags": "strs",
    "deviceCount": "int",
    "cameraCount": "int",
    "onlineCameraCount": "int",
    "offlineCameraCount": "int",
}
DEVICE = {
    "id": "uuid",
    "customerId": "uuid",
    "name": "str",
    "status": "str",
    "address": "str",
    "timezoneId": "str",
    "totalCameras": "int",
    "offlineCameras": "int",
    "siteId": "uuid",
}
CAMERA = {
    "id": "uuid",
    "deviceId": "uuid",
    "name": "str",
    "status": "str",
    "siteId": "uuid",
    "streams": "list",
    "ip": "str",
    "manufacturer": "str?",
    "model": "str?",
    "serialNumber": "str?",
}
STREAM = {
    "id": "uuid",
    "name": "str",
    "retention": "int",
    "dimensions": "dict",
    "fps": "number",
    "average_bps": "int",
    "earliestSegmentDate": "str",
}
REPORT = {"id": "uuid", "name": "dict", "description": "dict"}


def test_site_fields(res):
    assert res["sites"]
    for s in res["sites"]:
        check_fields(s, SITE)
    assert len({s["id"] for s in res["sites"]}) == len(res["sites"])
    assert any("data-integration:pos" in s["tags"] for s in res["sites"])


def test_device_fields(res):
    site_ids = {s["id"] for s in res["sites"]}
    for d in res["devices"]:
        check_fields(d, DEVICE)
        assert d["siteId"] in site_ids
        ZoneInfo(d["timezoneId"])


def test_camera_fields(res):
    devices = {d["id"]: d for d in res["devices"]}
    assert any(c["streams"] for c in res["cameras"]), "no camera has a stream"
    for c in res["cameras"]:
        check_fields(c, CAMERA)
        assert devices[c["deviceId"]]["siteId"] == c["siteId"], c
        for st in c["streams"]:
            check_fields(st, STREAM)
            assert type(st["dimensions"].get("width")) is int, st
            assert type(st["dimensions"].get("height")) is int, st
            assert st["earliestSegmentDate"].isdigit(), st


def test_report_fields(res):
    assert res["reports"]
    for r in res["reports"]:
        check_fields(r, REPORT)
        for m in (r["name"], r["description"]):
            assert m and all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()), r


def test_one_customer_owns_everything(res):
    owners = {s["customerId"] for s in res["sites"]} | {d["customerId"] for d in res["devices"]}
    assert len(owners) == 1


def test_site_counts_consistent(res):
    for s in res["sites"]:
        devs = [d for d in res["devices"] if d["siteId"] == s["id"]]
        cams = [c for c in res["cameras"] if c["siteId"] == s["id"]]
        assert s["deviceCount"] == len(devs) >= 1, s
        assert s["primaryDeviceId"] in {d["id"] for d in devs}, s
        assert s["cameraCount"] == len(cams) == sum(d["totalCameras"] for d in devs), s
        assert s["onlineCameraCount"] + s["offlineCameraCount"] == s["cameraCount"], s
        assert s["offlineCameraCount"] == sum(d["offlineCameras"] for d in devs), s
        offline = sum(c["status"] != "online" for c in cams)
        assert s["offlineCameraCount"] == offline, s
    for d in res["devices"]:
        cams = [c for c in res["cameras"] if c["deviceId"] == d["id"]]
        assert d["totalCameras"] == len(cams), d


def test_multi_device_sites_exist(res):
    assert any(s["deviceCount"] >= 2 for s in res["sites"])


def test_location_tags(res):
    for s in res["sites"]:
        tags = s["locationTags"]
        assert all(re.fullmatch(r"[A-Za-z]+:.+", t) for t in tags), tags
        assert any(t.startswith("Brand:") for t in tags), tags
        assert any(t.startswith("City:") for t in tags), tags


def test_timezones_are_iana(res):
    zones = {s["timezone"] for s in res["sites"]}
    for z in zones:
        assert "/" in z or z == "UTC", z
        ZoneInfo(z)
    assert len(zones) >= 2, zones


def test_restricted_report_id(http, emu, res):
    rid = emu.restricted_report_id
    assert is_uuid(rid) and rid not in {r["id"] for r in res["reports"]}
    r = http.get("/v2/events", {"startTime": emu.start, "endTime": emu.end, "reportId": rid})
    assert_error(r, 403)


def test_report_events_equal_truth(http, emu, res, all_events):
    everything = set(ids(all_events))
    sizes = []
    for rep in res["reports"]:
        expected = emu.truth(emu.start, emu.end, report_id=rep["id"])
        got = ids(http.events(emu.start, emu.end, report_id=rep["id"]))
        assert len(got) == len(set(got)), "duplicates"
        assert set(got) == set(expected), rep["id"]
        assert set(expected) <= everything, rep["id"]
        sizes.append(len(expected))
    # the filter filters: some report holds some but not all events
    assert any(0 < n < len(everything) for n in sizes), sizes


# ------------------------------------------------------------------------------------------------
# events: exactness, shape, realism

EVENT = {
    "id": "str",
    "startTime": "str",
    "endTime": "str",
    "type": "str",
    "subtype": "str",
    "siteId": "uuid",
    "deviceId": "uuid",
    "title": "str",
    "subtitle": "str",
    "locationTags": "strs",
    "createTime": "str",
    "details": "dict",
    "cameras": "list",
}
DETAILS = {
    "duration_sec": "int",
    "origin": "str",
    "localTime": "int",
    "generatedByEventStandard": "bool",
    "marker": "str",
}


def check_event(e: dict, sites: dict, devices: dict) -> None:
    check_fields(e, EVENT)
    assert e["id"]
    assert e["type"] == "bookmark" and e["subtype"] == "ai-dwellTime", e
    assert devices[e["deviceId"]]["siteId"] == e["siteId"] and e["siteId"] in sites, e
    tz = ZoneInfo(sites[e["siteId"]]["timezone"])
    for k in ("startTime", "endTime", "createTime"):
        assert TS_RE.match(e[k]), (k, e[k])
        t = parse_ts(e[k])
        assert t.utcoffset() == t.astimezone(tz).utcoffset(), (k, e[k], str(tz))
    assert inst(e, "endTime") >= inst(e), e
    assert all(re.fullmatch(r"[A-Za-z]+:.+", t) for t in e["locationTags"]), e
    d = e["details"]
    check_fields(d, DETAILS)
    if "confirmed" in d:
        assert type(d["confirmed"]) is bool, d
    for k, v in d.items():
        if k not in DETAILS and k != "confirmed":
            assert type(v) in (str, int), (k, v)
    for c in e["cameras"]:
        assert is_uuid(c.get("id")) and isinstance(c.get("name"), str), c


def test_events_full_range_exact(emu, all_events):
    got = ids(all_events)
    assert len(got) == len(set(got)), "duplicates"
    truth = emu.truth(emu.start, emu.end)
    assert set(got) == set(truth)
    by_key = sorted(all_events, key=lambda e: (inst(e), e["id"]))
    assert truth == ids(by_key), "truth is not sorted by (startTime, id)"
    assert all(emu.start <= inst(e) < emu.end for e in all_events)


def test_events_per_day(emu, all_events):
    expected = 3 * 3000
    assert 0.5 * expected <= len(all_events) <= 1.5 * expected, len(all_events)


def test_event_fields(res, all_events):
    sites = {s["id"]: s for s in res["sites"]}
    devices = {d["id"]: d for d in res["devices"]}
    for e in all_events:
        check_event(e, sites, devices)
    assert len({parse_ts(e["startTime"]).utcoffset() for e in all_events}) >= 2


def test_events_follow_opening_hours(all_events):
    night = sum(1 <= parse_ts(e["startTime"]).hour < 5 for e in all_events)
    assert night < 0.10 * len(all_events), f"{night} of {len(all_events)} events at 01-05 local"


def test_truth_independent_of_semantics(emu, window):
    a, b = window
    before = emu.truth(a, b)
    emu.set_semantics(order="desc", bounds="()")
    assert emu.truth(a, b) == before
    emu.set_semantics(order="shuffled", bounds="[]")
    assert emu.truth(a, b) == before


# ------------------------------------------------------------------------------------------------
# add_events, determinism


def test_add_events(make_emu):
    e = make_emu()
    h = Http(e)
    at = e.start + timedelta(hours=15, milliseconds=123)
    before_all = e.truth(e.start, e.end)
    before = e.truth(at, at + MS)
    new = e.add_events(at, 150)
    assert len(new) == 150 == len(set(new)) and not set(new) & set(before_all)
    assert set(e.truth(at, at + MS)) == set(before) | set(new)
    assert len(e.truth(e.start, e.end)) == len(before_all) + 150
    served = h.get_all("/v2/events", {"startTime": at, "endTime": at + MS})
    mine = [ev for ev in served if ev["id"] in set(new)]
    assert len(mine) == 150
    assert all(inst(ev) == at for ev in mine)
    sites = {s["id"]: s for s in e.resources("sites")}
    devices = {d["id"]: d for d in e.resources("devices")}
    for ev in mine:
        check_event(ev, sites, devices)


def test_add_events_iso_string_and_site(make_emu):
    e = make_emu()
    sid = e.resources("sites")[-1]["id"]
    new = e.add_events("2026-01-05T16:00:00.250Z", site_id=sid)
    assert len(new) == 1
    at = datetime(2026, 1, 5, 16, 0, 0, 250_000, tzinfo=UTC)
    assert new[0] in e.truth(at, at + MS)
    served = Http(e).get_all("/v2/events", {"startTime": at, "endTime": at + MS})
    ev = next(x for x in served if x["id"] == new[0])
    assert ev["siteId"] == sid and inst(ev) == at


def test_update_event_changes_what_later_reads_serve(make_emu):
    e = make_emu()
    h = Http(e)
    served = h.get_all("/v2/events", {"startTime": e.start, "endTime": e.end})
    old = served[7]
    sites = {s["id"]: s for s in e.resources("sites")}
    devices = {d["id"]: d for d in e.resources("devices")}
    other = next(s for s in sites if s != old["siteId"])
    end = inst(old) + timedelta(minutes=42)
    new = e.update_event(old["id"], end_time=end, confirmed=False, site_id=other)
    assert new["id"] == old["id"] and inst(new) == inst(old)
    assert parse_ts(new["createTime"]) == parse_ts(old["createTime"])
    assert parse_ts(new["endTime"]) == end and new["details"]["duration_sec"] == 42 * 60
    assert new["details"]["confirmed"] is False and new["siteId"] == other
    check_event(new, sites, devices)
    again = h.get_all("/v2/events", {"startTime": e.start, "endTime": e.end})
    assert [x["id"] for x in again] == [x["id"] for x in served]
    assert next(x for x in again if x["id"] == old["id"]) == new
    with pytest.raises(ValueError, match="no event"):
        e.update_event("not-an-event", confirmed=True)
    with pytest.raises(ValueError, match="before the event's startTime"):
        e.update_event(old["id"], end_time=inst(old) - MS)
    with pytest.raises(ValueError, match="no site"):
        e.update_event(old["id"], site_id="nowhere")
    with pytest.raises(TypeError, match="confirmed"):
        e.update_event(old["id"], confirmed="yes")


def rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) / 1024


def test_scales_to_a_million_events(make_emu):
    before = rss_mb()
    t = time.monotonic()
    e = make_emu(sites=20, days=10, events_per_day=100_000)
    assert time.monotonic() - t < 10
    if before is not None:
        grown = rss_mb() - before
        assert grown < 250, f"{grown:.0f} MB for 1M events: their JSON is held in memory"
    mid = e.start + timedelta(days=5, hours=12)
    params = {"startTime": mid, "endTime": mid + timedelta(hours=1)}
    r = Http(e).get("/v2/events", params)
    assert r.status == 200 and len(r.body) == PAGE
    assert set(ids(r.body)) <= set(e.truth(mid, mid + timedelta(hours=1)))


def snapshot(e: Any) -> dict:
    h = Http(e)
    return {
        "resources": {k: e.resources(k) for k in KINDS},
        "truth": e.truth(e.start, e.end),
        "sites": h.get_all("/v2/sites"),
        "events": h.events(e.start, e.end),
    }


def test_deterministic_from_seed(make_emu):
    kw = {"sites": 5, "days": 1, "events_per_day": 500}
    a = snapshot(make_emu(seed=3, **kw))
    b = snapshot(make_emu(seed=3, **kw))
    c = snapshot(make_emu(seed=4, **kw))
    assert a == b
    assert {s["id"] for s in a["sites"]}.isdisjoint(s["id"] for s in c["sites"])
    assert set(a["truth"]) != set(c["truth"]) and a["events"] != c["events"]


# ------------------------------------------------------------------------------------------------
# webhook


@pytest.mark.parametrize("kind", ["restaurant", "other"])
def test_webhook_valid_record_stored(http, emu, kind):
    rec = BUILDERS[kind]()
    r = http.post("/v2/webhook", json=rec)
    assert r.status == 200 and r.body == {"accepted": 1}, r
    got = stored(emu, rec)
    assert len(got) == 1 and rec.items() <= got[0].items(), got
    assert len(stored(emu, rec, region="us")) == 1
    assert stored(emu, rec, region="eu") == []


@pytest.mark.parametrize(
    "value",
    [
        T0,
        T0 + 0.0,
        "2026-11-17T05:00:00.000Z",
        "2026-11-17T00:00:00.000-05:00",
        "2026-11-17T00:00:00.000-0500",
    ],
)
def test_webhook_time_formats(http, emu, value):
    rec = retail(startTime=value, endTime=value)
    rec["items"][0]["time"] = value
    assert http.post("/v2/webhook", json=rec).status == 200
    assert len(stored(emu, rec)) == 1


def test_webhook_optional_fields_and_unknown_item_type(http, emu):
    rec = retail(employeeId="e-1", employeeName="Ann", customerId="c-1", salesAssociateId="s-1")
    rec["items"].append(item(type="PAYMENT_GIFT_CARD"))  # unknown item type: a warning only
    assert http.post("/v2/webhook", json=rec).status == 200
    full = other(endTime=T0 + 5, eventDetails="door held", employeeId="e", employeeName="Bo")
    full.update(status="open", items=[{"type": "sensor", "description": "x", "quantity": 2}])
    assert http.post("/v2/webhook", json=full).status == 200
    assert len(stored(emu, rec)) == 1 and len(stored(emu, full)) == 1


UNKNOWN = [
    ("retail", "fooBar"),
    ("retail", "registerId"),
    ("restaurant", "waiterMood"),
    ("other", "unitPrice"),
    ("retail", "items.0.sku"),
    ("other", "items.0.unitPrice"),
]


@pytest.mark.parametrize(("kind", "path"), UNKNOWN)
def test_webhook_unknown_field(http, emu, kind, path):
    rec = BUILDERS[kind]()
    if path.startswith("items.") and "items" not in rec:
        rec["items"] = [{"type": "sensor", "description": "x"}]
    set_path(rec, path, "x")
    assert_error(http.post("/v2/webhook", json=rec), 400, path.split(".")[-1])
    assert stored(emu, rec) == []


REQUIRED = {
    "retail": [
        "dataType",
        "schemaVersion",
        "startTime",
        "endTime",
        "dataSourceId",
        "transactionId",
        "status",
        "items",
        "items.0.time",
        "items.0.quantity",
        "items.0.description",
        "items.0.unitPrice",
        "items.0.type",
    ],
    "restaurant": ["tableNumber", "guestCount"],
    "other": [
        "schemaVersion",
        "startTime",
        "locationId",
        "dataSourceId",
        "eventUniqueId",
        "eventType",
    ],
}


@pytest.mark.parametrize(("kind", "path"), [(k, p) for k, paths in REQUIRED.items() for p in paths])
def test_webhook_missing_required_field(http, kind, path):
    rec = BUILDERS[kind]()
    del_path(rec, path)
    assert_error(http.post("/v2/webhook", json=rec), 400, path.split(".")[-1])


MISTYPED = [
    ("restaurant", "tableNumber", 12),
    ("restaurant", "guestCount", "2"),
    ("retail", "transactionId", 123),
    ("retail", "schemaVersion", 1),
    ("retail", "startTime", True),
    ("retail", "startTime", "yesterday"),
    ("retail", "endTime", None),
    ("retail", "locationId", 42),
    ("retail", "status", 5),
    ("retail", "items", {"time": T0}),
    ("retail", "employeeName", 7),
    ("retail", "items.0.quantity", "1"),
    ("retail", "items.0.unitPrice", "2.50"),
    ("retail", "items.0.description", 7),
    ("other", "eventType", 3),
    ("other", "eventUniqueId", 3),
    ("other", "items", "door"),
]


@pytest.mark.parametrize(("kind", "path", "value"), MISTYPED)
def test_webhook_mistyped_field(http, emu, kind, path, value):
    rec = BUILDERS[kind]()
    set_path(rec, path, value)
    assert_error(http.post("/v2/webhook", json=rec), 400, path.split(".")[-1])


@pytest.mark.parametrize("data_type", ["pos", "", "Retail"])
def test_webhook_unknown_data_type(http, data_type):
    assert_error(http.post("/v2/webhook", json=retail(dataType=data_type)), 400, "dataType")


def test_webhook_body_size_limit(make_emu):
    e = make_emu()
    token = Http(e).token()
    for size, status in ((9_900_000, 200), (11_000_000, 413)):
        rec = retail(employeeName="")
        pad = size - len(json.dumps(rec, separators=(",", ":")).encode())
        rec["employeeName"] = "x" * pad
        body = json.dumps(rec, separators=(",", ":")).encode()
        assert len(body) == size
        r = post_raw(e, token, body)
        if status == 200:
            assert r.status == 200, (size, r)
        else:
            assert_error(r, status)
    assert len(e.published()) == 1


def test_set_webhook(http, emu):
    emu.set_webhook(arrays=False)
    r = http.post("/v2/webhook", json=[retail()])
    assert_error(r, 400)
    assert r.body["error"] == "array_not_supported", r
    emu.set_webhook()  # the default: arrays again
    batch = [retail(), other()]
    assert http.post("/v2/webhook", json=batch).status == 200
    assert all(len(stored(emu, rec)) == 1 for rec in batch)


# ------------------------------------------------------------------------------------------------
# limits


@pytest.mark.parametrize(
    ("limits", "names"),
    [
        ({"read_per_second": 1, "read_concurrency": 1}, ["webhook", "token"]),
        ({"publish_per_second": 1, "publish_concurrency": 1}, ["reports", "token"]),
    ],
)
def test_limits_apply_only_to_their_endpoints(http, emu, limits, names):
    http.token()
    emu.set_limits(**limits)
    for name in names:
        for _ in range(6):
            r = call(http, name)
            assert r.status == 200, (name, r)
    assert emu.stats()["rate_limited"] == 0


def test_limits_reset(http, emu):
    http.token()
    emu.set_limits(read_per_second=1)
    assert 429 in [http.get("/v2/reports").status for _ in range(5)]
    emu.set_limits()
    assert [http.get("/v2/reports").status for _ in range(10)] == [200] * 10


# ------------------------------------------------------------------------------------------------
# faults


def test_set_faults(http, emu):
    """Each keyword reaches its fault, and `set_faults()` lifts them all."""
    http.token()
    emu.set_faults(error_rate=1.0)
    assert http.get("/v2/sites").status in (500, 503)
    emu.set_faults(rate_limit_rate=1.0, retry_after=7)
    r = http.get("/v2/sites")
    assert r.status == 429 and retry_after(r) == 7, r
    emu.set_faults(drop_rate=1.0)
    with pytest.raises((urllib.error.URLError, ConnectionError, HTTPException)):
        http.get("/v2/sites", timeout=5)
    emu.set_faults(latency_ms=300)
    t = time.monotonic()
    assert http.get("/v2/sites").status == 200
    assert time.monotonic() - t >= 0.3
    emu.set_faults()
    assert [http.get("/v2/sites").status for _ in range(5)] == [200] * 5


def test_constructor_latency(make_emu):
    e = make_emu(latency_ms=300)
    h = Http(e)
    h.token()
    t = time.monotonic()
    assert h.get("/v2/sites").status == 200
    assert time.monotonic() - t >= 0.3


# ------------------------------------------------------------------------------------------------
# stats


def test_stats(http, emu):
    http.token()
    http.get("/v2/sites")
    http.post("/v2/webhook", json=retail())
    st = emu.stats()
    assert nz(st["requests"]["GET /v2/sites"]) == {"200": 1}
    assert nz(st["requests"]["POST /v2/webhook"]) == {"200": 1}
    assert st["tokens_issued"] == 1
    assert st["published_stored"] == 1 and st["published_upserts"] == 0
    assert st["rate_limited"] == 0
    assert type(st["connections_open"]) is int and st["connections_open"] >= 0
    assert type(st["connections_total"]) is int and st["connections_total"] >= 1


def test_stats_batch_is_one_request(http, emu):
    http.post("/v2/webhook", json=[retail() for _ in range(10)])
    st = emu.stats()
    assert nz(st["requests"]["POST /v2/webhook"]) == {"200": 1}
    assert st["published_stored"] == 10


def test_reset_stats(http, emu):
    http.get("/v2/sites")
    emu.reset_stats()
    st = emu.stats()
    assert total(st, "200") == 0 and st["tokens_issued"] == 0
    assert st["published_upserts"] == 0 and st["rate_limited"] == 0


# ------------------------------------------------------------------------------------------------
# the Date header


def emu_now(r: Any) -> datetime:
    """The emulator's clock as the one ``Date`` header of its answer `r` gives it."""
    dates = r.headers.get_all("Date") or []
    assert len(dates) == 1, f"Date headers: {dates}"
    imf_fixdate = r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT"
    assert re.fullmatch(imf_fixdate, dates[0]), dates[0]
    return email.utils.parsedate_to_datetime(dates[0])


def test_advance_clock_moves_the_date(make_emu):
    e = make_emu()
    e.advance_clock(-400 * 86_400)  # far from real time: a Date from real time would show
    h = Http(e)
    expected = datetime.now(UTC) - timedelta(days=400)
    assert abs((emu_now(h.get("/v2/sites")) - expected).total_seconds()) < 60
    e.advance_clock(10 * 86_400)
    r = h.get("/v2/sites")
    assert r.status == 401, "the token expired"
    assert abs((emu_now(r) - expected - timedelta(days=10)).total_seconds()) < 60, r


def test_date_on_a_body_that_never_ends(make_emu):
    e = make_emu()
    e.advance_clock(-400 * 86_400)
    token = Http(e).token()
    e.set_hostile("slow_body", path="/v2/sites")
    port = urllib.parse.urlsplit(e.url).port
    conn = HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "GET", "/v2/sites", headers={"x-api-key": e.api_key, "authorization": f"Bearer {token}"}
        )
        r = conn.getresponse()  # the head only: the body never ends
        expected = datetime.now(UTC) - timedelta(days=400)
        assert abs((emu_now(r) - expected).total_seconds()) < 60
    finally:
        conn.close()
        e.set_hostile()


# ------------------------------------------------------------------------------------------------
# lifecycle


def test_several_emulators_at_once(make_emu):
    a, b = make_emu(seed=1), make_emu(seed=2)
    assert urllib.parse.urlsplit(a.url).port != urllib.parse.urlsplit(b.url).port
    ha, hb = Http(a), Http(b)
    assert ha.get_all("/v2/sites") == a.resources("sites")
    assert hb.get_all("/v2/sites") == b.resources("sites")
    a.stop()
    assert refuses(a.url)
    assert hb.get("/v2/sites").status == 200


def test_stop_is_idempotent_and_closes_port(make_emu):
    e = make_emu()
    assert Http(e).get("/v2/sites").status == 200
    e.stop()
    e.stop()
    assert refuses(e.url)


def test_context_manager_stops(make_emu):
    e = make_emu(sites=2, events_per_day=10)
    with e as entered:
        assert entered is e
        assert Http(e).get("/v2/sites").status == 200
    assert refuses(e.url)
    e2 = make_emu(sites=2, events_per_day=10)
    with pytest.raises(KeyError), e2:
        raise KeyError("boom")
    assert refuses(e2.url)


def test_port_argument(make_emu):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    e = make_emu(port=port)
    assert e.url == f"http://127.0.0.1:{port}"
    assert Http(e).get("/v2/sites").status == 200


def test_tls(make_emu):
    e = make_emu(tls=True)
    assert re.fullmatch(r"https://127\.0\.0\.1:\d+", e.url), e.url
    assert os.path.isfile(e.ca_bundle)
    h = Http(e, cafile=e.ca_bundle)
    assert h.get_all("/v2/sites") == e.resources("sites")
    untrusted = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context()),
    )
    with pytest.raises(urllib.error.URLError) as info:
        untrusted.open(e.url + "/v2/sites", timeout=5).close()
    assert isinstance(info.value.reason, ssl.SSLCertVerificationError)


# ------------------------------------------------------------------------------------------------
# dialects (the answers of each are tested in src/emulator/tests.rs)

DIALECTS = {
    "webhook_answer": (
        "accepted_count",
        "status_object",
        "empty_object",
        "status_ok",
        "success_flag",
        "received_count",
        "no_content",
        "empty_200",
        "queued",
        "plain_ok",
        "proxy_html",
    ),
    "webhook_errors": (
        "indexed",
        "by_transaction_id",
        "failures_list",
        "message_only",
        "all_or_nothing",
    ),
    "error_body": (
        "error_message",
        "detail",
        "errors_list",
        "oauth",
        "plain_text",
        "html",
        "empty",
    ),
    "retry_after": ("seconds", "http_date", "absent"),
    "token_answer": (
        "standard",
        "no_expires_in",
        "string_expires_in",
        "zero_expires_in",
        "no_token_type",
    ),
    "expired_token": ("401", "403_message", "403_www_authenticate"),
    "token_requests": (None, int),
}
NAMED = [name for name in DIALECTS if name != "token_requests"]


def test_dialects_list_every_setting_with_its_default_first():
    assert sv.Emulator.DIALECTS == DIALECTS
    params = inspect.signature(sv.Emulator.set_dialect).parameters
    assert list(params)[1:] == list(DIALECTS)
    for name, values in DIALECTS.items():
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].default == values[0], name
    sv.Emulator.DIALECTS["error_body"] = ("mine",)  # a copy: the checks keep their own
    try:
        assert sv.Emulator.DIALECTS != DIALECTS
    finally:
        sv.Emulator.DIALECTS["error_body"] = DIALECTS["error_body"]


@pytest.mark.parametrize("name", NAMED)
def test_set_dialect_refuses_an_unknown_value_naming_the_setting_and_its_values(make_emu, name):
    e = make_emu(sites=2, events_per_day=10)
    e.set_dialect(error_body="detail")
    with pytest.raises(ValueError) as info:
        e.set_dialect(**{name: "klingon"})
    message = str(info.value)
    assert f"`{name}`" in message and "'klingon'" in message, message
    assert all(repr(value) in message for value in DIALECTS[name]), message
    for wrong in (1, None, b"detail"):
        with pytest.raises(TypeError, match=name):
            e.set_dialect(**{name: wrong})
    r = Http(e).get("/v2/nowhere")
    assert r.status == 404 and r.body == {"detail": "no route for `GET /v2/nowhere`"}, r


def test_set_dialect_refuses_bad_token_requests_and_positional_or_unknown_arguments(make_emu):
    e = make_emu(sites=2, events_per_day=10)
    for wrong in (0, -1, 2**32 + 1):
        with pytest.raises(ValueError, match="token_requests"):
            e.set_dialect(token_requests=wrong)
    for wrong in (True, "3", 2.0):
        with pytest.raises(TypeError, match="token_requests"):
            e.set_dialect(token_requests=wrong)
    with pytest.raises(TypeError):
        e.set_dialect("no_content")  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword"):
        e.set_dialect(webhook_reply="no_content")  # type: ignore[call-arg]
    e.set_dialect(token_requests=1)
    e.set_dialect(token_requests=2**32)
    assert Http(e).get("/v2/sites").status == 200


def test_set_dialect_replaces_every_setting(make_emu):
    e = make_emu(sites=2, events_per_day=10)
    h = Http(e)
    e.set_dialect(error_body="detail", token_answer="string_expires_in", token_requests=1)
    assert h.get("/v2/nowhere").body == {"detail": "no route for `GET /v2/nowhere`"}
    assert h.token_request().body["expires_in"] == "14399"
    r = h.get("/v2/sites")
    assert r.status == 401 and r.body == {"detail": "access token expired"}, r
    e.set_dialect(token_answer="string_expires_in")  # the others back to their defaults
    assert_error(h.get("/v2/nowhere"), 404, "no route")
    assert h.get("/v2/sites").status == 200, "no limit on a token's requests"
    e.set_dialect()
    assert h.token_request().body["expires_in"] == 14_399
    assert_error(h.get("/v2/nowhere"), 404, "no route")


@pytest.mark.parametrize("name", list(DIALECTS))
def test_every_dialect_serves_reads_and_webhooks_over_a_socket(make_emu, name):
    e = make_emu(sites=2, events_per_day=10)
    for value in DIALECTS[name]:
        e.set_dialect(**{name: 10 if value is int else value})
        h = Http(e)
        assert h.token_request().status == 200, value
        assert h.get_all("/v2/sites") == e.resources("sites"), value
        r = h.post("/v2/webhook", json=retail())
        assert r.status in (200, 202, 204), (value, r)
        bad = h.post("/v2/webhook", json=retail(storeId="s"))
        want = 200 if value == "proxy_html" else 400
        assert bad.status == want, (value, bad)
        assert h.get("/v2/nowhere").status == 404, value
    stored = len(e.published())
    assert stored == len(DIALECTS[name]) - (name == "webhook_answer"), "proxy_html stores none"


def test_retry_after_as_an_http_date_over_a_socket(make_emu):
    e = make_emu(sites=2, events_per_day=10)
    h = Http(e)
    h.token()
    e.advance_clock(-40 * 86_400)
    e.set_faults(rate_limit_rate=1.0, retry_after=30)
    e.set_dialect(retry_after="http_date")
    r = h.get("/v2/sites")
    assert r.status == 429, r
    at = email.utils.parsedate_to_datetime(r.headers["Retry-After"])
    assert timedelta(seconds=29) <= at - emu_now(r) <= timedelta(seconds=30), r.headers
    e.set_dialect(retry_after="absent")
    r = h.get("/v2/sites")
    assert r.status == 429 and "Retry-After" not in r.headers, r.headers
