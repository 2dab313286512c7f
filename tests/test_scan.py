"""``sv.scan_events``: a polars LazyFrame whose filters on startTime, projection and head(n)
reach the fetch; the result equals ``client.events(..., output="polars")``."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import time

import pytest
import surveillance as sv

pl = pytest.importorskip("polars")
pytest.importorskip("polars.io.plugins")

from conftest import emulator_fixture, interrupt_after  # noqa: E402

UTC = dt.timezone.utc
DAY = dt.timedelta(days=1)
A = dt.datetime(2026, 1, 5, tzinfo=UTC)
B = dt.datetime(2026, 1, 7, tzinfo=UTC)
START = pl.col("startTime")

#: Three days, 3,000 events a day on 12 sites (about 2 a minute, a burst each day).
emu = emulator_fixture(seed=0, sites=12, days=3, events_per_day=3000)


def client_of(emu):
    """A client under a daily budget: it walks each window a page at a time, so that its
    requests are the same from run to run (without one it pages ahead, and the pages in flight
    past a window's end vary)."""
    client = emu.client(limits=sv.Limits(None, 3, None, None, 10**6))
    client.access_token()
    return client


def event_requests(client) -> int:
    return client.stats()["requests"].get("GET /v2/events", 0)


def spent(client, run):
    before = event_requests(client)
    result = run()
    return result, event_requests(client) - before


@pytest.mark.parametrize(
    "where",
    [
        (START >= A) & (START < B),
        START.is_between(A, B, closed="left"),
        (START < B) & (pl.lit(A) <= START),  # the literal on the left
    ],
    ids=["ge-and-lt", "is_between", "flipped"],
)
def test_a_filtered_collect_equals_events_and_costs_the_same_requests(emu, where):
    client = client_of(emu)
    want, direct = spent(client, lambda: client.events(A, B, output="polars", progress=False))
    client = client_of(emu)
    got, scanned = spent(client, lambda: sv.scan_events(client).filter(where).collect())
    assert got.equals(want) and got.height == 6000
    # The fetch's first page, asked first (for head(n)), is the fetch's: not asked twice.
    assert scanned == direct == 61, (scanned, direct)
    assert client.last_cost is not None and client.last_cost.requests == scanned


NAIVE_A, NAIVE_B = A.replace(tzinfo=None), B.replace(tzinfo=None)


@pytest.mark.parametrize(
    "where",
    [
        (START >= pl.datetime(2026, 1, 5, time_zone="UTC"))
        & (START < pl.datetime(2026, 1, 7, time_zone="UTC")),
        (START >= NAIVE_A) & (START < NAIVE_B),
        START.is_between(NAIVE_A, NAIVE_B, closed="left"),
        (START >= pl.lit(NAIVE_A)) & (START < pl.lit(NAIVE_B)),
        (START >= A.date()) & (START < B.date()),
        START.is_between(
            pl.lit("2026-01-05").str.to_datetime(time_zone="UTC"),
            pl.lit("2026-01-07 00:00:00").str.to_datetime("%Y-%m-%d %H:%M:%S", time_zone="UTC"),
            closed="left",
        ),
        (START >= pl.datetime(2026, 1, 5)) & (START < pl.datetime(2026, 1, 7)),
    ],
    ids=[
        "pl.datetime-utc",
        "naive",
        "is_between-naive",
        "pl.lit",
        "date",
        "to_datetime",
        "pl.datetime",
    ],
)
def test_filters_as_polars_users_write_them_narrow_the_fetch(emu, where):
    client = client_of(emu)
    want, direct = spent(client, lambda: client.events(A, B, output="polars", progress=False))
    client = client_of(emu)
    site = want["siteId"][0]
    got, scanned = spent(client, lambda: sv.scan_events(client).filter(where).collect())
    assert got.equals(want) and scanned == direct
    # With a filter the service cannot apply, the range is still the bound's, and the rows
    # are those of the filter.
    mine = where & (pl.col("siteId") == site)
    got, scanned = spent(client, lambda: sv.scan_events(client).filter(mine).collect())
    assert got.equals(want.filter(pl.col("siteId") == site)) and scanned == direct


def test_a_filter_that_bounds_nothing_is_named_with_why(emu):
    client = client_of(emu)
    where = (pl.col("siteId") == "x") & (pl.col("deviceId") == "y") & (START.dt.hour() == 3)
    with pytest.raises(ValueError, match=r"lower bound on `startTime`") as raised:
        sv.scan_events(client).filter(where).collect()
    told = str(raised.value)
    assert 'col("siteId")' in told and "not by site" in told
    assert 'col("deviceId")' in told and "not by device" in told
    assert "dt.hour" in told and "not a comparison" in told
    either = (START >= A) | (pl.col("siteId") == "x")
    with pytest.raises(ValueError, match=r"an `\|` of filters"):
        sv.scan_events(client).filter(either).collect()
    not_a_time = START >= pl.col("endTime")
    with pytest.raises(ValueError, match=r"not a constant time"):
        sv.scan_events(client).filter(not_a_time).collect()
    assert event_requests(client) == 0


@pytest.mark.parametrize("bounds", ["[)", "[]", "()", "(]"])
def test_a_range_off_the_day_costs_what_events_costs(emu, bounds):
    emu.set_semantics(bounds=bounds)
    a, b = A + dt.timedelta(hours=3), B + dt.timedelta(hours=5, minutes=30)
    client = client_of(emu)
    want, direct = spent(client, lambda: client.events(a, b, output="polars", progress=False))
    client = client_of(emu)
    got, scanned = spent(client, lambda: sv.scan_events(client, start=a, end=b).collect())
    assert got.equals(want)
    assert scanned == direct, (scanned, direct)
    first, requests = spent(client, lambda: sv.scan_events(client, a, b).head(10).collect())
    assert requests == 1 and first.equals(want.head(10))


@pytest.mark.parametrize("order", ["desc", "shuffled"])
def test_a_service_that_does_not_sort_ascending_costs_a_request_more(emu, order):
    """Its first page does not tell which events come first: a first part is fetched alone
    (for head(n)), a request more than `events`; on a client's first scan the page asked to
    find that out is the rest's own, not a request more."""
    emu.set_semantics(order=order)
    a, b = A + dt.timedelta(hours=3), B + dt.timedelta(hours=5, minutes=30)
    client = client_of(emu)
    want, direct = spent(client, lambda: client.events(a, b, output="polars", progress=False))
    fresh = client_of(emu)
    got, first_scan = spent(fresh, lambda: sv.scan_events(fresh, start=a, end=b).collect())
    assert got.equals(want) and first_scan == direct + 1, (first_scan, direct)
    got, scanned = spent(fresh, lambda: sv.scan_events(fresh, start=a, end=b).collect())
    assert got.equals(want) and scanned <= direct + 1, (scanned, direct)
    lf = sv.scan_events(fresh).filter(START.is_between(a, b)).head(10)
    head, requests = spent(fresh, lambda: lf.collect())
    assert requests == 1 and head.equals(want.head(10))


@pytest.mark.parametrize("order", ["desc", "shuffled"])
@pytest.mark.parametrize("per_day", [500, 46_667], ids=["sparse", "dense"])
def test_the_first_part_is_sized_by_the_density_seen(order, per_day):
    """Where the service does not sort ascending, the part fetched alone for head(n) holds
    about 30 events at the densest rate the client has seen: one request for head(10) whether
    10 minutes hold 3 events (a fixed 10 minutes cost 6 requests here) or 320 (2 requests)."""
    with sv.Emulator(seed=3, sites=20, days=2, events_per_day=per_day) as emu:
        emu.set_semantics(order=order)
        a = emu.start + dt.timedelta(hours=5, minutes=7)
        b = a + dt.timedelta(hours=20)
        client = client_of(emu)
        want = client.events(a, b, output="polars", progress=False)
        lf = sv.scan_events(client).filter(START.is_between(a, b, closed="left")).head(10)
        head, requests = spent(client, lambda: lf.collect())
        assert head.equals(want.head(10)) and requests == 1, requests
        if order == "desc":
            # A client's first scan: the page that shows the order (the range's last 100
            # events) tells their rate, then the part (before: 7 requests sparse, 3 dense).
            fresh = client_of(emu)
            lf = sv.scan_events(fresh).filter(START.is_between(a, b, closed="left")).head(10)
            head, requests = spent(fresh, lambda: lf.collect())
            assert head.equals(want.head(10)) and requests == 2, requests


@pytest.mark.parametrize("order", ["desc", "shuffled"])
@pytest.mark.parametrize("per_day", [500, 46_667], ids=["sparse", "dense"])
def test_a_new_client_starts_from_what_the_cache_kept_of_the_service(order, per_day, tmp_path):
    """A notebook's kernel started again, or the next run of a job: a new client with the
    account's cache knows the service's order and density from the earlier clients, so its
    first head(10) costs one request (a first client ever: 2 descending, 4 to 6 shuffled), and
    a whole collect at most what `events` costs with the same knowledge."""
    with sv.Emulator(seed=3, sites=20, days=3, events_per_day=per_day) as emu:
        emu.set_semantics(order=order)
        limits = sv.Limits(None, 3, None, None, 10**6)
        a = emu.start + dt.timedelta(hours=5, minutes=7)
        b = a + dt.timedelta(hours=20)
        earlier = emu.client(cache=tmp_path / "cache", limits=limits)
        earlier.events(a, b, progress=False)
        kept = tmp_path / "cache"
        copy = shutil.copytree(kept, tmp_path / "copy")
        # The next day, not in the cache: every request below is the service's.
        a, b = a + DAY, b + DAY
        want = emu.truth(a, b)
        day = START.is_between(a, b, closed="left")

        later = emu.client(cache=kept, limits=limits)
        later.access_token()
        head, requests = spent(later, lambda: sv.scan_events(later).filter(day).head(10).collect())
        assert head["id"].to_list() == want[:10] and requests == 1, requests

        first_ever = client_of(emu)
        head, requests = spent(
            first_ever, lambda: sv.scan_events(first_ever).filter(day).head(10).collect()
        )
        assert head["id"].to_list() == want[:10] and requests > 1, requests

        later = emu.client(cache=kept, limits=limits)
        later.access_token()
        frame, requests = spent(later, lambda: sv.scan_events(later).filter(day).collect())
        alike = emu.client(cache=copy, limits=limits)
        alike.access_token()
        direct, cost = spent(alike, lambda: alike.events(a, b, output="polars", progress=False))
        assert frame["id"].to_list() == want and frame.equals(direct)
        assert requests <= cost, (requests, cost)


@pytest.mark.parametrize("order", ["desc", "shuffled"])
def test_a_head_that_takes_the_whole_first_part_starts_no_fetch_behind_it(order):
    """polars pulls a few frames past what head(n) needs: those must not start the fetch of
    the rest of the range, which would go on in the background for rows nobody reads (here a
    whole window, 34 requests, where head(n) needs 2)."""
    with sv.Emulator(seed=3, sites=20, days=2, events_per_day=4000) as emu:
        emu.set_semantics(order=order)
        a = emu.start + dt.timedelta(hours=5, minutes=7)
        b = a + dt.timedelta(hours=20)
        # A first scan: the page that shows the order, then the first 10 minutes alone.
        n = len(emu.truth(a, a + dt.timedelta(minutes=10)))
        assert 3 < n < 16
        client = client_of(emu)
        lf = sv.scan_events(client).filter(START.is_between(a, b, closed="left")).head(n)
        before = event_requests(client)
        head = lf.collect()
        assert head["id"].to_list() == emu.truth(a, b)[:n]
        time.sleep(0.5)
        assert event_requests(client) - before == 2


@pytest.mark.parametrize("engine", ["auto", "streaming"])
def test_head_10_costs_one_request(emu, engine):
    client = client_of(emu)
    lf = sv.scan_events(client).filter(START.is_between(A, B)).head(10)
    got, requests = spent(client, lambda: lf.collect(engine=engine))
    assert requests == 1
    assert got["id"].to_list() == emu.truth(A, B)[:10]
    # head(n) without a filter: polars hands the source n itself.
    got, requests = spent(client, lambda: sv.scan_events(client, A, B).head(10).collect())
    assert requests == 1 and got.height == 10
    # More rows than the first page holds: the fetch goes on from the page it had.
    lf = sv.scan_events(client).filter(START.is_between(A, B)).head(250)
    assert lf.collect(engine=engine)["id"].to_list() == emu.truth(A, B)[:250]


def test_projection_yields_only_the_columns_asked(emu):
    client = client_of(emu)
    # siteId is read only by the filter.
    lf = sv.scan_events(client, A, A + DAY).filter(pl.col("siteId") != "").select("id", "startTime")
    assert "PROJECT 3/19 COLUMNS" in lf.explain()
    got = lf.collect()
    assert got.columns == ["id", "startTime"]
    assert got.schema["startTime"] == pl.Datetime("ms", "UTC")
    assert got["id"].to_list() == emu.truth(A, A + DAY)


def test_the_schema_is_that_of_events_without_a_request(emu):
    client = client_of(emu)
    schema, requests = spent(client, lambda: sv.scan_events(client).collect_schema())
    assert requests == 0
    assert schema == client.events(A, A + dt.timedelta(minutes=5), output="polars").schema


def test_without_a_lower_bound_collect_says_how_to_give_one(emu):
    client = client_of(emu)
    for lf in (
        sv.scan_events(client),
        sv.scan_events(client).filter(START < B),
        sv.scan_events(client).filter((START >= A) | (pl.col("siteId") == "x")),
    ):
        with pytest.raises(ValueError, match=r"lower bound on `startTime`.*start="):
            lf.collect()
    assert event_requests(client) == 0


def test_filters_that_are_not_pushed_down_stay_exact(emu):
    client = client_of(emu)
    want = client.events(A, B, output="polars", progress=False)
    site = want["siteId"][0]
    cases = [
        (pl.col("siteId") == site, want.filter(pl.col("siteId") == site)),
        (START.dt.hour() == 3, want.filter(START.dt.hour() == 3)),
        (
            (START < A + DAY) | (pl.col("siteId") == site),
            want.filter((START < A + DAY) | (pl.col("siteId") == site)),
        ),
    ]
    for where, expected in cases:
        got = sv.scan_events(client, start=A, end=B).filter(where).collect()
        assert got.equals(expected) and 0 < got.height < want.height


def test_bounds_of_other_units_and_inclusivity_are_exact(emu):
    client = client_of(emu)
    times = client.events(A, A + DAY, output="polars", progress=False)["startTime"]
    t = times[100]
    at = sv.scan_events(client).filter(START == t).collect()
    assert at.height == (times == t).sum() > 0
    # A microsecond literal after t: `>` it starts at the next millisecond.
    after = pl.lit(t + dt.timedelta(microseconds=1)).cast(pl.Datetime("us", "UTC"))
    got = sv.scan_events(client, end=A + DAY).filter(START > after).collect()
    assert got["startTime"].min() > t and got.height == (times > t).sum()
    empty = sv.scan_events(client).filter((START >= B) & (START < A)).collect()
    assert empty.height == 0 and empty.schema == at.schema


def test_a_start_and_end_in_the_call_are_intersected_with_the_filter(emu):
    client = client_of(emu)
    lf = sv.scan_events(client, start=A, end=B).filter(START >= A + DAY)
    assert lf.collect()["id"].to_list() == emu.truth(A + DAY, B)
    with pytest.raises(ValueError, match="`end` must be after `start`"):
        sv.scan_events(client, start=B, end=A)
    with pytest.raises(TypeError, match="surveillance.Client"):
        sv.scan_events(object(), start=A)


def test_a_polars_before_2_is_refused_with_what_to_install(emu, monkeypatch):
    monkeypatch.setattr(pl, "__version__", "1.30.0")
    with pytest.raises(ImportError, match=r"polars 2\.0 or later.*got 1\.30\.0.*pip install"):
        sv.scan_events(client_of(emu), start=A, end=B)


def test_importing_the_package_does_not_import_polars():
    import subprocess

    code = "import surveillance, sys; print('polars' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- Ctrl-C -------------------------------------------------------------------------------------
@pytest.mark.parametrize("after_s", [0.08, 0.6], ids=["first-page", "mid-window"])
def test_ctrl_c_stops_a_collect_at_once_and_no_request_leaves_after_it(make_emu, after_s):
    # Three windows of 10,000 events, 16 requests in flight of 150 ms: about a second each.
    # Polars runs the source on a thread of its own, where Python sees no signal.
    slow = make_emu(sites=4, days=1, events_per_day=30_000, latency_ms=150)
    client = slow.client(limits=sv.Limits(None, 16, None, None, None))
    # A first collect: the token, and the imports of a first frame, are no part of the stop.
    sv.scan_events(client, slow.start, slow.start + dt.timedelta(minutes=1)).collect()

    def sent_out() -> int:
        # Counted by the client just before a request goes to its connection.
        return client.stats()["requests"].get("GET /v2/events", 0)

    # The requests of the collect below that reached the emulator (the first collect's token
    # request and page left aside).
    base = slow.stats()["daily"]["used"] - sent_out()

    def arrived() -> int:
        return slow.stats()["daily"]["used"] - base

    with interrupt_after(after_s, kill=True, count=sent_out) as sent:
        with pytest.raises(KeyboardInterrupt):
            sv.scan_events(client, slow.start, slow.end).collect()
        caught = time.monotonic()
    stop_ms = 1000 * (caught - sent["at"])
    assert stop_ms < 500, f"stopped {stop_ms:.0f} ms after SIGINT"  # 1-5 ms here, was 2-3 s
    time.sleep(0.5)
    # None leaves after the interrupt: the count just after it may hold one per runtime thread
    # that was past its last look at the stop; the requests that had gone before it arrive (the
    # emulator in this process may count them later), and none other.
    assert sent_out() - sent["after"] <= 2, (sent_out(), sent)
    assert arrived() <= sent_out(), (arrived(), sent_out())
    assert slow.stats()["in_flight"]["read"] == 0


def test_ctrl_c_in_the_in_memory_engine_raises_where_the_source_runs(make_emu):
    slow = make_emu(sites=4, days=1, events_per_day=30_000, latency_ms=150)
    client = slow.client(limits=sv.Limits(None, 16, None, None, None))
    with interrupt_after(0.6, kill=True) as sent:
        with pytest.raises(KeyboardInterrupt):
            sv.scan_events(client, slow.start, slow.end).collect(engine="in-memory")
        caught = time.monotonic()
    assert caught - sent["at"] < 0.5


def test_a_sigint_handler_that_does_not_raise_leaves_the_collect_whole(make_emu):
    import os
    import signal
    import threading

    e = make_emu(sites=4, days=1, events_per_day=3_000, latency_ms=50)
    client = e.client()
    want = client.events(e.start, e.end, output="polars", progress=False)
    seen: list = []
    previous = signal.signal(signal.SIGINT, lambda *_: seen.append(1))
    timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        got = sv.scan_events(client, e.start, e.end).collect()
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert seen == [1] and got.equals(want)
