"""The synchronous client's contract (DESIGN.md "Client", "Errors", "Tokens, retries, limits"),
tested against the emulator over real loopback HTTP: nothing here mocks the HTTP layer. Each test
fails if the point it names were false."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest
import surveillance as sv

from conftest import OFFSET_CEILING, PAGE, emulator_fixture, interrupt_after

KINDS = ["sites", "devices", "cameras", "reports"]
FOUR_HOURS = 4 * 3600


# ------------------------------------------------------------------------------------------------
# helpers and fixtures


#: An emulator whose sites, devices and cameras span several pages (150, ~200, ~1,700).
paged = emulator_fixture(seed=0, sites=150, days=1, events_per_day=100)


@pytest.fixture(scope="module")
def truth(paged) -> dict:
    """`paged`'s records of every kind, as the list endpoints serve them."""
    return {kind: paged.resources(kind) for kind in KINDS}


def served(emu: Any, route: str) -> dict:
    """What the emulator answered on `route` ("GET /v2/sites"): status -> count."""
    return emu.stats()["requests"].get(route, {})


def get_statuses(emu: Any) -> dict:
    """Status -> count over every GET route of the emulator."""
    out: dict = {}
    for route, by_status in emu.stats()["requests"].items():
        if route.startswith("GET "):
            for status, n in by_status.items():
                out[status] = out.get(status, 0) + n
    return out


def ids(records: list) -> list:
    return [r["id"] for r in records]


def assert_clean(text: str, secrets: list) -> None:
    """`text` holds none of `secrets` (api key, client secret, tokens ...)."""
    for s in secrets:
        assert s and s not in text, f"a secret leaked into {text!r}"


def assert_clean_error(exc: BaseException, secrets: list) -> None:
    """Neither the message, the repr, the args nor the attributes of `exc` hold a secret."""
    parts = [str(exc), repr(exc), *map(str, exc.args)]
    parts += [str(getattr(exc, a, "")) for a in ("body", "url", "problems", "timestamp")]
    for part in parts:
        assert_clean(part, secrets)


def emu_secrets(emu: Any) -> list:
    return [emu.api_key, emu.client_secret]


def multi_device_sites(records: dict) -> list:
    """Ids of the sites whose cameras hang on more than one device."""
    devices_of: dict = {}
    for cam in records["cameras"]:
        devices_of.setdefault(cam["siteId"], set()).add(cam["deviceId"])
    return [s["id"] for s in records["sites"] if len(devices_of.get(s["id"], ())) > 1]


def in_threads(n: int, fn: Callable[[int], Any]) -> list:
    """`fn(0..n-1)` in `n` threads released together by a barrier; results in order."""
    barrier = threading.Barrier(n)

    def run(i: int) -> Any:
        barrier.wait(timeout=30)
        return fn(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


# ------------------------------------------------------------------------------------------------
# lists


@pytest.mark.parametrize("kind", KINDS)
def test_list_equals_resources_across_pages(paged, truth, kind):
    client = paged.client()
    paged.reset_stats()
    got = getattr(client, kind)()
    assert got == truth[kind]
    pages = len(truth[kind]) // PAGE + 1
    if kind != "reports":
        assert pages >= 2, "the emulator is too small to prove paging"
    # Every page went over the wire, once, and the client counted what it sent.
    route = f"GET /v2/{kind}"
    assert client.stats()["requests"][route] == pages
    assert served(paged, route) == {"200": pages}


def test_stats_count_requests_tokens_and_bytes(paged, truth):
    client = paged.client()
    assert client.stats()["requests"] == {}
    client.sites()
    client.devices()
    s = client.stats()
    assert s["requests"] == {
        "POST /v2/oauth/token": 1,
        "GET /v2/sites": len(truth["sites"]) // PAGE + 1,
        "GET /v2/devices": len(truth["devices"]) // PAGE + 1,
    }
    assert s["tokens"] == 1 and s["retries"] == 0 and s["rate_limited"] == 0
    bodies = sum(
        len(json.dumps(truth[k], separators=(",", ":"), ensure_ascii=False).encode())
        for k in ("sites", "devices")
    )
    assert 0.9 * bodies < s["bytes_received"] < 1.1 * bodies + 10_000


def test_cameras_of_a_multi_device_site(paged, truth):
    client = paged.client()
    sites = multi_device_sites(truth)
    assert sites, "the emulator has no multi-device site"
    for site in sites[:5]:
        expected = [c for c in truth["cameras"] if c["siteId"] == site]
        got = client.cameras(site_id=site)
        assert got == expected
        assert len({c["deviceId"] for c in got}) > 1


def test_cameras_of_a_device(paged, truth):
    client = paged.client()
    site = multi_device_sites(truth)[0]
    devices = [d["id"] for d in truth["devices"] if d["siteId"] == site]
    assert len(devices) > 1
    for device in devices:
        expected = [c for c in truth["cameras"] if c["deviceId"] == device]
        assert expected
        assert client.cameras(device_id=device) == expected
        assert client.cameras(site_id=site, device_id=device) == expected


@pytest.mark.parametrize("arg", ["site_id", "device_id"])
@pytest.mark.parametrize(
    "value",
    [
        "not-a-uuid",
        "",
        "3f2b8c1e5d4a4e6b9c7d2a1b0c9d8e7f",
        "3f2b8c1e-5d4a-4e6b-9c7d-2a1b0c9d8e7f0",
        "3f2b8c1e-5d4a-4e6b-9c7d-2a1b0c9d8e7g",
    ],
)
def test_cameras_malformed_id_is_a_value_error(emu, arg, value):
    client = emu.client()
    with pytest.raises(ValueError, match=arg) as info:
        client.cameras(**{arg: value})
    assert_clean_error(info.value, emu_secrets(emu))
    # Refused before anything was sent.
    assert "GET /v2/cameras" not in client.stats()["requests"]
    assert served(emu, "GET /v2/cameras") == {}


def test_an_error_names_what_it_is_about_apart_from_its_text(emu, tmp_path):
    """A refused setting, argument or quota keeps the names it is about apart from its text
    (``wording``), whichever layer refused it, so that another surface (the command line)
    names them in its own words; ``str()`` is the library's words."""
    from surveillance.errors import Name, wording

    def named(error: BaseException) -> list:
        said = wording(error)
        assert str(error) == said.say(), error  # the library's words
        return [n.key for n in said.names]

    client = emu.client()
    cases = [
        # the core's checks
        (lambda: client.cameras(site_id="end"), ValueError, ["site_id"]),
        (lambda: client.events("2026-01-06", "2026-01-05"), ValueError, ["end", "start"]),
        (lambda: sv.Client("k", "i", "s", base_url="ftp://h"), sv.ConfigError, ["base_url"]),
        (lambda: sv.Client("k", "i", "s", base_url=emu.url, timeout=0), ValueError, ["timeout"]),
        # the package's
        (lambda: sv.Client("k", "", "s", base_url=emu.url), sv.ConfigError, ["client_id"]),
        (lambda: client.events("soon", "2026-01-05"), ValueError, ["start"]),
        (lambda: sv.sync.parse_settle("soon"), ValueError, ["settle"]),
        (lambda: client.events(1, "2026-01-05"), TypeError, ["start"]),
    ]
    for call, error, keys in cases:
        with pytest.raises(error) as caught:
            call()
        assert named(caught.value) == keys, caught.value
    with pytest.raises(sv.ConfigError) as caught:
        sv.Client("k", "i", "s", base_url="ftp://base_url")
    again = pickle.loads(pickle.dumps(caught.value))
    assert again.wording == caught.value.wording and str(again) == str(caught.value)
    # A value in backticks is the user's, not a name: it is never said in other words.
    said = wording(caught.value).say({"base_url": "`--base-url`"}.get)
    assert said == "`--base-url` must be an https URL, got scheme `ftp`", said
    with sv.Emulator(seed=1, sites=1, days=1, events_per_day=10) as quota_emu:
        tight = quota_emu.client(limits=sv.Limits(read_per_second=None, daily_requests=2))
        tight.sites()  # a token and a page
        with pytest.raises(sv.QuotaExhaustedError) as caught:
            tight.sites()
    assert wording(caught.value).names == (Name("daily_requests", "`Limits(daily_requests=...)`"),)
    assert "`Limits(daily_requests=...)`" in str(caught.value)


def test_cameras_past_the_offset_ceiling(make_emu):
    e = make_emu(seed=0, sites=1300, days=1, events_per_day=100)
    expected = e.resources("cameras")
    n_sites = len(e.resources("sites"))
    assert len(expected) > OFFSET_CEILING, "too few cameras to reach the offset ceiling"
    client = e.client()
    got = client.cameras()
    assert len(got) == len(expected), "cameras lost or duplicated"
    assert set(ids(got)) == set(ids(expected))
    # Split per site: at least one request per site, and never an offset the service refuses.
    sent = client.stats()["requests"]["GET /v2/cameras"]
    assert sent >= n_sites
    answered = served(e, "GET /v2/cameras")
    assert answered == {"200": sent}, answered


# ------------------------------------------------------------------------------------------------
# retries and errors


def test_lists_complete_under_faults(make_emu):
    e = make_emu(seed=0, sites=150)
    expected = {kind: e.resources(kind) for kind in KINDS}
    # More retries than the default so the test does not rest on luck: with these rates about
    # 4 requests in 10 fail, so 6 failures in a row (the default's limit) happen now and then.
    client = e.client(max_retries=10)
    e.set_faults(error_rate=0.2, rate_limit_rate=0.2, drop_rate=0.05)
    for kind in KINDS:
        assert getattr(client, kind)() == expected[kind], kind
    s = client.stats()
    assert s["retries"] > 0 and s["rate_limited"] > 0
    faults = get_statuses(e)
    assert faults.get("500", 0) + faults.get("503", 0) > 0
    assert faults.get("429", 0) > 0 and faults.get("dropped", 0) > 0


@pytest.mark.parametrize(
    "faults, error, statuses",
    [
        ({"error_rate": 1.0}, sv.ServerError, (500, 503)),
        ({"rate_limit_rate": 1.0}, sv.RateLimitError, (429,)),
        ({"drop_rate": 1.0}, sv.TransportError, None),
    ],
    ids=["5xx", "429", "drop"],
)
def test_give_up_raises_the_right_error(emu, faults, error, statuses):
    client = emu.client(max_retries=0, max_outage=0)
    secrets = [*emu_secrets(emu), client.access_token()]
    emu.set_faults(**faults)
    with pytest.raises(error) as info:
        client.sites()
    exc = info.value
    assert isinstance(exc, sv.SurveillanceError)
    if statuses is not None:
        assert isinstance(exc, sv.ApiError)
        assert exc.status in statuses
        assert "/v2/sites" in exc.url
        copy = pickle.loads(pickle.dumps(exc))
        assert type(copy) is type(exc) and (copy.status, copy.url) == (exc.status, exc.url)
    assert_clean_error(exc, secrets)
    # max_retries=0: one request, no retry.
    assert sum(served(emu, "GET /v2/sites").values()) == 1
    assert client.stats()["retries"] == 0


def test_max_retries_is_per_request(emu):
    client = emu.client(max_retries=2)
    client.access_token()
    emu.set_hostile("status", path="/v2/reports", status=500)  # a 503 is max_outage's
    with pytest.raises(sv.ServerError):
        client.reports()
    assert sum(served(emu, "GET /v2/reports").values()) == 3
    assert client.stats()["retries"] == 2


def test_timeout_is_a_transport_error(make_emu):
    e = make_emu(latency_ms=2000)
    client = e.client(timeout=0.3, max_retries=0, max_outage=0)
    t = time.monotonic()
    with pytest.raises(sv.TransportError) as info:
        client.sites()
    assert time.monotonic() - t < 1.5
    assert_clean_error(info.value, emu_secrets(e))


def test_connection_refused_is_a_transport_error(make_emu):
    e = make_emu()
    client = e.client(max_retries=0, max_outage=0)
    e.stop()
    with pytest.raises(sv.TransportError) as info:
        client.sites()
    assert_clean_error(info.value, emu_secrets(e))
    # What happened, once: where, and the cause, without reqwest's and hyper's wrappers.
    message = str(info.value)
    assert f"cannot reach {e.url}/v2/" in message and "refused" in message.lower(), message
    assert message.count(e.url) == 1, message
    assert "error sending request" not in message and "tcp connect error" not in message


# ------------------------------------------------------------------------------------------------
# limits


def test_published_limits_cause_no_429(make_emu):
    e = make_emu()
    e.set_limits(read_per_second=20, read_concurrency=3)
    expected = e.resources("reports")
    client = e.client(limits=sv.Limits(read_per_second=20, read_concurrency=3))
    results = in_threads(8, lambda i: [client.reports() == expected for _ in range(25)])
    assert all(all(r) for r in results)
    assert client.stats()["rate_limited"] == 0
    assert client.stats()["requests"]["GET /v2/reports"] == 200
    statuses = get_statuses(e)
    assert "429" not in statuses and statuses == {"200": 200}, statuses


def test_unlimited_client_recovers_from_429(make_emu):
    e = make_emu(sites=150)
    e.set_limits(read_per_second=20, read_concurrency=3)
    reports, devices = e.resources("reports"), e.resources("devices")
    client = e.client(limits=sv.Limits.unlimited())

    def work(i: int) -> bool:
        ok = [client.reports() == reports for _ in range(3)]
        return all(ok) and client.devices() == devices

    assert all(in_threads(8, work))
    assert client.stats()["rate_limited"] > 0
    assert get_statuses(e).get("429", 0) > 0


# ------------------------------------------------------------------------------------------------
# tokens


def test_one_token_for_many_calls(make_emu):
    e = make_emu()
    expected = e.resources("reports")
    client = e.client()
    for _ in range(1000):
        assert client.reports() == expected
    assert e.stats()["tokens_issued"] == 1
    assert client.stats()["tokens"] == 1
    assert client.stats()["requests"]["POST /v2/oauth/token"] == 1
    assert client.access_token() == client.access_token()


def test_expired_token_renewed_once(make_emu):
    e = make_emu()
    expected = e.resources("reports")
    client = e.client()
    assert client.reports() == expected
    first = client.access_token()
    e.advance_clock(FOUR_HOURS)
    for _ in range(20):
        assert client.reports() == expected
    assert client.stats()["tokens"] == 2
    assert e.stats()["tokens_issued"] == 2
    assert client.access_token() != first
    assert served(e, "GET /v2/reports").get("401", 0) <= 1


def test_concurrent_calls_after_expiry_renew_once(make_emu):
    e = make_emu()
    expected = e.resources("reports")
    client = e.client()
    client.reports()
    e.advance_clock(FOUR_HOURS)
    assert all(r == expected for r in in_threads(32, lambda i: client.reports()))
    assert client.stats()["tokens"] == 2
    assert e.stats()["tokens_issued"] == 2


def test_first_use_from_many_threads_fetches_one_token(paged, truth):
    client = paged.client()
    got = in_threads(16, lambda i: client.reports())
    assert all(g == truth["reports"] for g in got)
    assert client.stats()["tokens"] == 1


def test_revoked_token_renewed_once(make_emu):
    e = make_emu()
    expected = e.resources("sites")
    client = e.client()
    client.sites()
    e.revoke_tokens()
    assert client.sites() == expected
    assert client.sites() == expected
    assert client.stats()["tokens"] == 2
    assert e.stats()["tokens_issued"] == 2
    assert served(e, "GET /v2/sites").get("401") == 1


def test_renewal_margin_in_real_time(make_emu):
    e = make_emu()
    # A margin of 0.3 s: renewed from 2.7 s on (a fifth would be 2.4 s); refused from 4 s on.
    e.set_token_lifetime(3)
    client = e.client()
    t0 = time.monotonic()
    client.reports()
    time.sleep(max(0.0, t0 + 2.45 - time.monotonic()))
    client.reports()
    assert client.stats()["tokens"] == 1, "renewed long before the margin"
    time.sleep(max(0.0, t0 + 2.95 - time.monotonic()))
    client.reports()
    assert client.stats()["tokens"] == 2, "not renewed inside the margin"
    assert "401" not in served(e, "GET /v2/reports"), "renewed only after a refusal"


# ------------------------------------------------------------------------------------------------
# credentials and configuration

WRONG = "wr0ng-Cr3dential-7f3a9c1d5e"


@pytest.mark.parametrize("field", ["client_secret", "client_id", "api_key"])
def test_wrong_credentials_raise_auth_error(emu, field, capsys):
    client = emu.client(**{field: WRONG})
    with pytest.raises(sv.AuthError) as info:
        client.sites()
    # A client id is not a secret (diagnose shows it); a wrong key or secret still is one.
    secrets = [*emu_secrets(emu), *([WRONG] if field != "client_id" else [])]
    assert_clean_error(info.value, secrets)
    assert_clean(repr(client), secrets)
    # A refusal is not retried, and no data call follows it.
    assert sum(served(emu, "POST /v2/oauth/token").values()) == 1
    assert "GET /v2/sites" not in emu.stats()["requests"]
    client.diagnose()
    out = capsys.readouterr().out
    assert "token" in out
    assert_clean(out, secrets)


@pytest.mark.parametrize(
    "arg, var",
    [
        ("api_key", "SURVEILLANCE_API_KEY"),
        ("client_id", "SURVEILLANCE_CLIENT_ID"),
        ("client_secret", "SURVEILLANCE_CLIENT_SECRET"),
        ("base_url", "SURVEILLANCE_BASE_URL"),
    ],
)
def test_missing_setting_names_argument_and_variable(clean_env, emu, arg, var):
    values = {
        "SURVEILLANCE_API_KEY": emu.api_key,
        "SURVEILLANCE_CLIENT_ID": emu.client_id,
        "SURVEILLANCE_CLIENT_SECRET": emu.client_secret,
        "SURVEILLANCE_BASE_URL": emu.url,
    }
    for name, value in values.items():
        if name != var:
            clean_env.setenv(name, value)
    with pytest.raises(sv.ConfigError) as info:
        sv.Client()
    msg = str(info.value)
    assert arg in msg and var in msg, msg
    assert_clean_error(info.value, emu_secrets(emu))


def test_nothing_configured_names_api_key(clean_env):
    with pytest.raises(sv.ConfigError) as info:
        sv.Client()
    assert "api_key" in str(info.value) and "SURVEILLANCE_API_KEY" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_blank_variable_counts_as_missing(clean_env, emu):
    clean_env.setenv("SURVEILLANCE_API_KEY", "  ")
    with pytest.raises(sv.ConfigError, match="SURVEILLANCE_API_KEY"):
        sv.Client(client_id=emu.client_id, client_secret=emu.client_secret, base_url=emu.url)


def test_configuration_from_environment_alone(clean_env, emu):
    clean_env.setenv("SURVEILLANCE_API_KEY", emu.api_key)
    clean_env.setenv("SURVEILLANCE_CLIENT_ID", emu.client_id)
    clean_env.setenv("SURVEILLANCE_CLIENT_SECRET", emu.client_secret)
    clean_env.setenv("SURVEILLANCE_BASE_URL", emu.url)
    clean_env.setenv("SURVEILLANCE_EU_BASE_URL", emu.eu_url)
    clean_env.setenv("SURVEILLANCE_REGION", "eu")
    # The emulator's audience is not the default (the base URL): a token proves it was read.
    clean_env.setenv("SURVEILLANCE_AUDIENCE", emu.audience)
    client = sv.Client()
    assert client.sites() == emu.resources("sites")
    assert "region='eu'" in repr(client)
    assert emu.url in repr(client)
    assert_clean(repr(client), emu_secrets(emu))


def test_argument_wins_over_environment(clean_env, emu):
    clean_env.setenv("SURVEILLANCE_CLIENT_SECRET", WRONG)
    client = emu.client()  # passes client_secret= explicitly
    assert client.reports() == emu.resources("reports")


@pytest.mark.parametrize(
    "url",
    [
        "http://example.invalid",
        "http://example.invalid/v2",
        "http://10.0.0.1:8080",
        "http://[2001:db8::1]:8080",
    ],
)
def test_plain_http_refused_off_loopback(clean_env, emu, url):
    with pytest.raises(sv.ConfigError, match="base_url"):
        emu.client(base_url=url)
    with pytest.raises(sv.ConfigError, match="eu_base_url"):
        emu.client(eu_base_url=url)
    clean_env.setenv("SURVEILLANCE_BASE_URL", url)
    with pytest.raises(sv.ConfigError, match="base_url"):
        sv.Client(emu.api_key, emu.client_id, emu.client_secret)


def test_https_and_loopback_accepted(emu):
    port = emu.url.rsplit(":", 1)[1]
    for url in ["https://example.invalid", f"http://localhost:{port}", f"http://[::1]:{port}"]:
        client = emu.client(base_url=url)
        assert url.split("://")[1] in repr(client)


def test_url_credentials_not_echoed(emu):
    for url in ["http://user:hunter2-Pa55@example.invalid", "https://user:hunter2-Pa55@x.test"]:
        with pytest.raises(sv.ConfigError) as info:
            emu.client(base_url=url)
        assert_clean_error(info.value, ["hunter2-Pa55"])


@pytest.mark.parametrize("suffix", ["/", "/v2", "/v2/"])
def test_base_url_suffix_tolerated(emu, suffix):
    client = emu.client(base_url=emu.url + suffix)
    assert client.reports() == emu.resources("reports")
    # Requests reached the real routes: no /v2/v2, no //v2.
    assert set(emu.stats()["requests"]) == {"POST /v2/oauth/token", "GET /v2/reports"}
    assert get_statuses(emu) == {"200": 1}


# ------------------------------------------------------------------------------------------------
# secrets in repr, errors, diagnose and logs


def test_repr_and_diagnose_hold_no_secret(emu, capsys):
    client = emu.client()
    token = client.access_token()
    assert token
    secrets = [*emu_secrets(emu), token]
    assert_clean(repr(client), secrets)
    assert_clean(str(client), secrets)
    client.diagnose()
    out = capsys.readouterr().out
    assert emu.url in out  # the effective base URL
    assert "ok" in [line.split()[-1] for line in out.splitlines() if line.startswith("token")]
    assert_clean(out, secrets)


def test_debug_log_has_requests_and_retries_and_no_secret(make_emu, caplog):
    caplog.set_level(logging.DEBUG, logger="surveillance")
    e = make_emu(seed=0, sites=40)
    client = e.client(max_retries=10)
    first = client.access_token()
    e.set_faults(error_rate=0.4, rate_limit_rate=0.1, drop_rate=0.05)
    for kind in KINDS:
        assert getattr(client, kind)() == e.resources(kind)
    e.revoke_tokens()
    e.set_faults()
    client.reports()
    second = client.access_token()
    assert client.stats()["retries"] > 0 and first != second
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("surveillance")]
    debug = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("surveillance") and r.levelno == logging.DEBUG
    ]
    assert any("/v2/cameras" in m and "200" in m for m in debug), "no request line"
    assert any("retry" in m.lower() for m in debug), "no retry line"
    assert any("renew" in m.lower() for m in debug), "no renewal line"
    secrets = [*emu_secrets(e), first, second]
    for line in lines:
        assert_clean(line, secrets)
    assert_clean(caplog.text, secrets)


def test_giving_up_is_logged_at_warning(emu, caplog):
    caplog.set_level(logging.WARNING, logger="surveillance")
    client = emu.client(max_retries=1)
    token = client.access_token()
    emu.set_faults(error_rate=1.0)
    with pytest.raises(sv.ServerError):
        client.devices()
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("surveillance") and r.levelno == logging.WARNING
    ]
    assert any("/v2/devices" in m for m in warnings), warnings
    assert not any(r.levelno < logging.WARNING for r in caplog.records)
    assert_clean(caplog.text, [*emu_secrets(emu), token])


# ------------------------------------------------------------------------------------------------
# interrupts, GIL, threads, pickling, fork


def test_sigint_interrupts_a_call(make_emu):
    e = make_emu(latency_ms=5000)
    client = e.client()
    started = time.monotonic()
    with interrupt_after(0.3, kill=True) as sent:
        with pytest.raises(KeyboardInterrupt):
            client.sites()
        caught = time.monotonic()
    assert "at" in sent
    assert caught - sent["at"] < 0.5, f"interrupted {caught - sent['at']:.2f} s after SIGINT"
    assert caught - started < 2.0
    e.set_faults()  # latency lifted
    assert client.sites() == e.resources("sites")


def test_gil_released_while_waiting(make_emu):
    e = make_emu()
    expected = e.resources("sites")
    client = e.client()
    client.access_token()
    e.set_faults(latency_ms=500)
    done = threading.Event()
    result: dict = {}

    def call() -> None:
        t = time.monotonic()
        try:
            result["sites"] = client.sites()
        finally:
            result["elapsed"] = time.monotonic() - t
            done.set()

    worker = threading.Thread(target=call)
    count, longest = 0, 0.0
    last = time.perf_counter()
    worker.start()
    while not done.is_set():
        count += 1
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    worker.join(10)
    assert result.get("sites") == expected
    assert result["elapsed"] >= 0.45, "the call did not wait on the latency"
    assert count > 10_000, count
    assert longest < 0.25, f"the counting thread stalled {longest:.2f} s"


def test_threads_share_one_client(paged, truth):
    client = paged.client()
    site = multi_device_sites(truth)[0]
    site_cams = [c for c in truth["cameras"] if c["siteId"] == site]

    def work(i: int) -> bool:
        if i % 5 == 4:
            return client.cameras(site_id=site) == site_cams
        kind = KINDS[i % 4]
        return getattr(client, kind)() == truth[kind]

    assert all(in_threads(16, work))
    assert client.stats()["tokens"] == 1


def test_pickled_client_fetches_and_holds_no_token(emu, capsys):
    client = emu.client(max_retries=3, timeout=12.5, limits=sv.Limits(50.0, 4, 20.0, 7))
    token = client.access_token()
    data = pickle.dumps(client)
    assert token.encode() not in data
    copy = pickle.loads(data)
    assert isinstance(copy, sv.Client)
    assert copy.sites() == emu.resources("sites")
    assert copy.stats()["tokens"] == 1  # its own
    assert copy.access_token() != token
    assert repr(copy) == repr(client)
    assert_clean(repr(copy), [*emu_secrets(emu), token])
    # Same effective settings (URLs, timeout, retries, limits).
    client.diagnose()
    mine = capsys.readouterr().out
    copy.diagnose()
    assert capsys.readouterr().out == mine


def test_the_native_calls_take_their_settings_by_name_and_refuse_unknown_ones(emu):
    # The Python layer hands its checked arguments on as keywords (limits by field name): a
    # name the native side does not know is an error, never silently dropped.
    from surveillance import _core

    with pytest.raises(TypeError, match="unexpected keyword argument `bogus`"):
        _core.Client(api_key="k", bogus=1)
    with pytest.raises(TypeError, match="Limits.*unexpected keyword argument `reads`"):
        _core.Client(limits={"reads": 1})
    with pytest.raises(TypeError, match="unexpected keyword argument `bogus`"):
        emu._inner.set_limits(bogus=1)
    client = emu.client()
    with pytest.raises(TypeError, match="unexpected keyword argument `bogus`"):
        _core.publish(client._inner, iter([]), bogus=1)
    assert emu.stats()["requests"] == {}
    # Limits given by name come back by name.
    limits = sv.Limits(50.0, 4, 20.0, 7, 100)
    assert client._inner.config()["limits"] == {
        "read_per_second": None,
        "read_concurrency": None,
        "publish_per_second": None,
        "publish_concurrency": None,
        "daily_requests": None,
    }
    assert emu.client(limits=limits)._inner.config()["limits"] == dataclasses.asdict(limits)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_client_works_in_forked_child(emu):
    client = emu.client()
    expected = len(emu.resources("sites"))
    assert len(client.sites()) == expected  # the parent's runtime, pool and token exist
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            os.close(r)
            os.write(w, f"{len(client.sites())}\n".encode())
            code = 0
        except BaseException as exc:  # noqa: B036 - report anything, then leave
            try:
                os.write(w, f"error {type(exc).__name__}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(w)
    out = b""
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(r, 256)
            if not chunk:
                break
            out += chunk
    finally:
        os.close(r)
        status = None
        while time.monotonic() < deadline + 5:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert out.decode().strip() == str(expected), out
    assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert len(client.sites()) == expected  # the parent is unharmed


#: A child held to one CPU: the runtime there has one worker, and every kind of call still runs
#: to its end on it (pages fetched concurrently, a publish fed from a thread of its own, calls
#: from several threads, an async call), with the embedded emulator on the same runtime.
ONE_CPU_CHILD = """
import asyncio, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import surveillance as sv

def io_threads():
    # A thread names itself once it runs: wait until every thread but this one has.
    for _ in range(200):
        names = []
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    names.append(f.read().strip())
            except OSError:
                pass
        if names.count("surveillance-io") == len(names) - 1:
            break
        time.sleep(0.01)
    return names.count("surveillance-io")

out = {}
with sv.Emulator(seed=5, sites=3, days=1, events_per_day=3000) as emu:
    emu.set_semantics(order="shuffled")
    out["workers"] = io_threads()  # the runtime is built with its workers; nothing blocking yet
    c = emu.client()
    got = [e["id"] for e in c.events(emu.start, emu.end)]
    out["events_exact"] = got == emu.truth(emu.start, emu.end)
    records = [
        {"dataType": "retail", "schemaVersion": "1", "startTime": 1794891600000 + i,
         "endTime": 1794891660000 + i, "locationId": "s", "dataSourceId": "p",
         "transactionId": f"t-{i}", "status": "sale",
         "items": [{"time": 1794891600000 + i, "quantity": 1, "description": "tea",
                    "unitPrice": 2.5, "type": "SALE"}]}
        for i in range(2000)
    ]
    report = c.publish(records, batch_size=100, progress=False)
    out["published"] = [report.accepted, len(emu.published())]
    with ThreadPoolExecutor(4) as pool:
        lists = list(pool.map(lambda kind: getattr(c, kind)(), ["sites", "devices"] * 4))
    out["lists_exact"] = lists[:2] * 4 == lists and lists[0] == emu.resources("sites")

    async def main():
        async with emu.async_client() as a:
            return await a.sites()

    out["async_exact"] = asyncio.run(main()) == emu.resources("sites")
print(json.dumps(out))
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"),
    reason="needs Linux CPU affinity and /proc",
)
def test_a_process_held_to_one_cpu_runs_one_worker_and_every_call_ends():
    done = subprocess.run(
        [sys.executable, "-c", ONE_CPU_CHILD], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "workers": 1,
        "events_exact": True,
        "published": [2000, 2000],
        "lists_exact": True,
        "async_exact": True,
    }


# ------------------------------------------------------------------------------------------------
# closing


def test_context_manager_closes(emu):
    expected = emu.resources("sites")
    with emu.client() as client:
        assert isinstance(client, sv.Client)
        assert client.sites() == expected
    for call in (client.sites, client.devices, client.cameras, client.reports):
        with pytest.raises(sv.TransportError) as info:
            call()
        assert_clean_error(info.value, emu_secrets(emu))


def test_access_token_after_close_raises(emu):
    with emu.client() as client:
        client.sites()
    with pytest.raises(sv.TransportError):
        client.access_token()


def test_closed_client_sends_nothing(emu):
    client = emu.client()
    client.close()
    with pytest.raises(sv.TransportError):
        client.sites()
    assert emu.stats()["requests"] == {}, "a closed client sent a request"


def test_close_stops_a_call_in_flight(make_emu):
    e = make_emu()
    client = e.client()
    client.access_token()
    e.set_faults(latency_ms=3000)
    outcome: dict = {}

    def call() -> None:
        t = time.monotonic()
        try:
            client.sites()
            outcome["error"] = None
        except sv.SurveillanceError as exc:
            outcome["error"] = exc
        outcome["elapsed"] = time.monotonic() - t

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.3)
    client.close()
    worker.join(10)
    assert isinstance(outcome.get("error"), sv.TransportError), outcome
    assert outcome["elapsed"] < 1.5, outcome


@pytest.mark.parametrize(
    "field, value",
    [
        ("read_per_second", 1 / 7200),
        ("publish_per_second", 2e6),
        ("read_concurrency", 0),
        ("publish_concurrency", 10_001),
        ("daily_requests", 0),
        ("daily_requests", 10**9 + 1),
    ],
)
def test_a_limit_has_one_bound_for_a_client_and_the_emulator(emu, field, value):
    """The bounds are the core's: ``Limits`` and ``Emulator.set_limits`` refuse the same
    values in the same words, and take the same edges."""
    with pytest.raises(sv.ConfigError) as client_side:
        sv.Limits(**{field: value})
    with pytest.raises(ValueError) as emulator_side:
        emu.set_limits(**{field: value})
    assert str(client_side.value) == str(emulator_side.value)
    assert f"`{field}`" in str(client_side.value)
    edges = {"per_second": (1 / 3600, 1e6), "concurrency": (1, 10_000), "daily": (1, 10**9)}
    for edge in next(v for k, v in edges.items() if k in field):
        sv.Limits(**{field: edge})
        emu.set_limits(**{field: edge})
    emu.set_limits()
