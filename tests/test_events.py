"""``client.events`` and ``client.iter_events`` against the emulator over real HTTP: every event
of a range exactly once under every order and bound semantics, past the offset ceiling, with
dense milliseconds, faults, an expiring token, and in close to the fewest requests."""

from __future__ import annotations

import datetime as dt
import math
import threading

import pytest
import surveillance as sv

ORDERS = ["asc", "desc", "shuffled"]
BOUNDS = ["[)", "[]", "()"]


@pytest.fixture(scope="module")
def big():
    """About 60,000 events over two days (windows above 10,000), with bursts of 150 events
    sharing one millisecond added where they cross page boundaries."""
    with sv.Emulator(seed=11, sites=15, days=2, events_per_day=30_000) as emu:
        for hours in (3, 17, 29, 40):
            emu.add_events(emu.start + dt.timedelta(hours=hours, milliseconds=137), 150)
        yield emu


def ids(events):
    return [e["id"] for e in events]


@pytest.mark.parametrize("quota", [False, True], ids=["no-quota", "quota"])
@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_exact_for_every_order_and_bounds(big, order, bounds, quota):
    """Without a quota the windows are fetched fast; under one, a page at a time (walked,
    chained from the ceiling page, or split with what an unsorted window's pages sampled)."""
    big.set_semantics(order, bounds)
    limits = sv.Limits(read_per_second=None, daily_requests=10**8) if quota else None
    client = big.client() if limits is None else big.client(limits=limits)
    big.reset_stats()
    got = client.events(big.start, big.end, progress=False)
    want = big.truth(big.start, big.end)
    assert len(want) > 50_000
    assert len(got) == len(set(ids(got))), "duplicates"
    assert ids(got) == want
    requests = sum(big.stats()["requests"]["GET /v2/events"].values())
    assert requests <= (1.03 if quota else 1.25) * math.ceil(len(want) / 100) + 2


@pytest.mark.parametrize("order", ORDERS)
def test_sub_range_drops_events_outside(big, order):
    big.set_semantics(order, "[]")
    start = big.start + dt.timedelta(hours=3, milliseconds=137)  # a burst of 150 at the start
    end = big.start + dt.timedelta(hours=29, milliseconds=137)  # and one at the (excluded) end
    got = big.client().events(start, end, progress=False)
    assert ids(got) == big.truth(start, end)
    assert got[0]["startTime"] and all(
        start <= dt.datetime.fromisoformat(e["startTime"]) < end for e in got
    )


def test_iter_events_equals_events(big):
    client = big.client()
    streamed = list(client.iter_events(big.start, big.end))
    assert ids(streamed) == big.truth(big.start, big.end)


def test_iter_events_stops_when_abandoned(big):
    client = big.client()
    it = client.iter_events(big.start, big.end)
    first = [next(it) for _ in range(10)]
    it.close()
    assert len(first) == 10
    assert len(client.reports()) > 0  # the client is still usable


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_requests_close_to_the_minimum_when_sorted(order):
    with sv.Emulator(seed=5, sites=20, days=2, events_per_day=100_000) as emu:
        emu.set_semantics(order, "[)")
        client = emu.client()
        got = client.events(emu.start, emu.end, progress=False)
        n = len(got)
        assert ids(got) == emu.truth(emu.start, emu.end)
        requests = client.stats()["requests"]["GET /v2/events"]
        windows = n // 10_000 + 1
        bound = 1.02 * math.ceil(n / 100) + 2 * windows
        assert n >= 200_000
        assert requests <= bound, f"{requests} requests for {n} events (bound {bound:.0f})"


def test_requests_when_shuffled_are_bounded():
    with sv.Emulator(seed=5, sites=20, days=1, events_per_day=60_000) as emu:
        emu.set_semantics("shuffled", "[)")
        client = emu.client()
        got = client.events(emu.start, emu.end, progress=False)
        assert ids(got) == emu.truth(emu.start, emu.end)
        requests = client.stats()["requests"]["GET /v2/events"]
        # Bisection costs a probe per split and a little paging past each window's end.
        assert requests <= 1.25 * math.ceil(len(got) / 100) + 40


@pytest.mark.parametrize("extra, dense", [(9_999, False), (10_001, True)])
def test_dense_millisecond(extra, dense):
    with sv.Emulator(seed=2, sites=3, days=1, events_per_day=500) as emu:
        at = emu.start + dt.timedelta(hours=12, milliseconds=5)
        added = emu.add_events(at, extra)
        client = emu.client()
        if dense:
            with pytest.raises(sv.DenseWindowError) as err:
                client.events(emu.start, emu.end, progress=False)
            assert "2026-01-05T12:00:00.005Z" in str(err.value)
            assert err.value.timestamp == "2026-01-05T12:00:00.005Z"
        else:
            got = client.events(emu.start, emu.end, progress=False)
            assert ids(got) == emu.truth(emu.start, emu.end)
            assert set(added) <= set(ids(got))


def test_exact_under_faults(big):
    big.set_semantics("desc", "()")
    big.set_faults(error_rate=0.1, rate_limit_rate=0.1, drop_rate=0.05)
    client = big.client(max_retries=10)
    start, end = big.start, big.start + dt.timedelta(hours=20)
    got = client.events(start, end, progress=False)
    assert ids(got) == big.truth(start, end)
    assert client.stats()["retries"] > 0


def test_token_expiring_mid_fetch(big):
    client = big.client(limits=sv.Limits(read_per_second=None, read_concurrency=4))
    client.reports()
    tokens = big.stats()["tokens_issued"]
    big.set_faults(latency_ms=15)
    timer = threading.Timer(0.4, big.advance_clock, args=(4 * 3600 + 60,))
    timer.start()
    try:
        got = client.events(big.start, big.start + dt.timedelta(hours=12), progress=False)
    finally:
        timer.cancel()
    assert ids(got) == big.truth(big.start, big.start + dt.timedelta(hours=12))
    assert big.stats()["tokens_issued"] == tokens + 1
    assert client.stats()["tokens"] == 2


@pytest.mark.parametrize(
    "start, end",
    [
        (dt.datetime(2026, 1, 5, 6), dt.datetime(2026, 1, 5, 9)),  # naive = UTC
        (
            dt.datetime(2026, 1, 5, 1, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
            dt.datetime(2026, 1, 5, 4, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
        ),
        ("2026-01-05T06:00:00Z", "2026-01-05T09:00:00.000+00:00"),
        (dt.date(2026, 1, 5), dt.date(2026, 1, 6)),
    ],
)
def test_time_arguments(big, start, end):
    got = big.client().events(start, end, progress=False)
    assert ids(got) == big.truth(start, end)
    assert got


def test_pandas_timestamp_arguments(big):
    pd = pytest.importorskip("pandas")
    start, end = pd.Timestamp("2026-01-05 06:00", tz="UTC"), pd.Timestamp("2026-01-05 09:00")
    got = big.client().events(start, end, progress=False)
    assert ids(got) == big.truth(start.to_pydatetime(), end.to_pydatetime())


@pytest.mark.parametrize(
    "start, end", [("2026-01-05T09:00:00Z", "2026-01-05T09:00:00Z"), ("2026-01-06", "2026-01-05")]
)
def test_end_not_after_start_is_a_value_error(big, start, end):
    with pytest.raises(ValueError, match="must be after"):
        big.client().events(start, end)


def test_garbled_time_is_a_value_error(big):
    with pytest.raises(ValueError, match="ISO-8601"):
        big.client().events("yesterday", "2026-01-06")


def test_report_filter(big):
    client = big.client()
    reports = client.reports()
    report = next(r for r in reports if "Drive" in r["name"]["en-US"])
    start, end = big.start, big.start + dt.timedelta(hours=30)
    got = client.events(start, end, report_id=report["id"], progress=False)
    assert ids(got) == big.truth(start, end, report_id=report["id"])
    assert 0 < len(got) < len(big.truth(start, end))


def test_report_errors(big):
    client = big.client()
    with pytest.raises(sv.NotFoundError) as err:
        client.events(big.start, big.end, report_id="00000000-0000-4000-8000-000000000000")
    assert err.value.status == 404
    with pytest.raises(sv.AuthError, match="403"):
        client.events(big.start, big.end, report_id=big.restricted_report_id)
    with pytest.raises(ValueError, match="report_id"):
        client.events(big.start, big.end, report_id="drive-thru")


def test_progress_callable_receives_updates(big):
    updates = []
    big.client().events(big.start, big.start + dt.timedelta(hours=10), progress=updates.append)
    assert updates
    last = updates[-1]
    assert last["done_ms"] == last["total_ms"] == 10 * 3600 * 1000
    assert last["events"] == len(big.truth(big.start, big.start + dt.timedelta(hours=10)))
    assert set(last) >= {"events", "requests", "done_ms", "total_ms", "windows"}


def test_progress_auto_is_silent_when_stderr_is_not_a_terminal(big, capsys):
    big.client().events(big.start, big.start + dt.timedelta(hours=2))
    assert capsys.readouterr().err == ""


def test_progress_true_draws_something(big, capsys):
    big.client().events(big.start, big.start + dt.timedelta(hours=2), progress=True)
    assert "events" in capsys.readouterr().err
