"""The daily request quota as a budget: counted by every client of the machine in a shared
ledger, never exceeded (nothing is sent past it), read from the service's own clock, and
spent well by publishing (arrays of 100 by default)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import time

import pytest
import surveillance as sv

from conftest import emulator_fixture, other


@pytest.fixture
def emu():
    with sv.Emulator(seed=11, sites=4, days=2, events_per_day=3000) as emu:
        yield emu


def webhook_requests(emu) -> int:
    return sum(emu.stats()["requests"].get("POST /v2/webhook", {}).values())


# --- never past the budget ---------------------------------------------------------------------
def test_a_request_past_the_budget_is_refused_before_it_is_sent(emu):
    emu.set_limits(daily_requests=5)
    client = emu.client()  # takes the emulator's daily limit
    assert client.quota()["limit"] == 5
    with pytest.raises(sv.QuotaExhaustedError) as err:
        for _ in range(10):
            client.sites()
    e = err.value
    assert e.used == 5 and e.limit == 5
    assert e.resets_at.tzinfo is not None and e.resets_at.hour == 0
    assert "comes back at" in str(e) and "daily_requests" in str(e)
    daily = emu.stats()["daily"]
    assert daily["used"] == 5  # nothing went past the budget...
    assert emu.stats()["rate_limited"] == 0  # ...so the service never had to refuse
    q = client.quota()
    assert (q["used"], q["remaining"], q["resets_at"]) == (5, 0, e.resets_at)


def test_a_long_retry_after_raises_at_once_instead_of_sleeping(emu):
    """A client that does not know the quota: the service's 429 asks to wait until midnight,
    longer than `max_wait`, so the client raises rather than sleeping for hours; once a second
    such answer confirms it, every client of the machine with that key waits too."""
    # The emulator's clock at noon of a coming day, whatever the time of the run: its answer
    # then asks for about 12 hours, never the few seconds left before a midnight.
    now = dt.datetime.now(dt.timezone.utc)
    noon = now.replace(hour=12, minute=0, second=0, microsecond=0) + dt.timedelta(days=1)
    emu.advance_clock((noon - now).total_seconds())
    emu.set_limits(daily_requests=3)
    client = emu.client(limits=sv.Limits.unlimited())
    started = time.monotonic()
    with pytest.raises(sv.QuotaExhaustedError, match="longer than `max_wait`") as err:
        for _ in range(10):
            client.sites()
    assert time.monotonic() - started < 5
    assert err.value.resets_at > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)
    with pytest.raises(sv.QuotaExhaustedError):
        emu.client(limits=sv.Limits.unlimited()).devices()  # the second answer
    before = emu.stats()["daily"]["used"]
    with pytest.raises(sv.QuotaExhaustedError):
        emu.client(limits=sv.Limits.unlimited()).devices()  # another client: refused here
    with pytest.raises(sv.QuotaExhaustedError):
        client.sites()
    assert emu.stats()["daily"]["used"] == before


def sent(emu) -> int:
    return sum(sum(by_status.values()) for by_status in emu.stats()["requests"].values())


@pytest.mark.parametrize("path", ["/v2/sites", "/v2/oauth/token"])
def test_one_long_retry_after_stops_its_call_and_a_second_one_every_client(
    emu, tmp_path, monkeypatch, path
):
    """One 429 asking for an hour (a proxy's, a node's) stops the call that got it, and no other
    client of the machine sharing the ledger; a second one, to either client, confirms it: from
    then on no client sends."""
    monkeypatch.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path))
    token = path == "/v2/oauth/token"
    a = emu.client(limits=sv.Limits.unlimited())
    b = emu.client(limits=sv.Limits.unlimited())
    if not token:
        a.sites(), b.sites()  # their tokens, before the 429s
    emu.set_faults(rate_limit_rate=1.0, retry_after=3600, token_endpoint=token)
    with pytest.raises(sv.QuotaExhaustedError, match="second such answer") as err:
        a.sites()
    assert err.value.resets_at > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=50)
    emu.set_faults()
    assert len(b.sites()) == 4  # the other client goes on...
    assert len(a.sites()) == 4  # ...and so does the next call of the one that got it
    assert b.quota()["remaining"] is None
    emu.set_faults(rate_limit_rate=1.0, retry_after=3600, token_endpoint=token)
    if token:
        b = emu.client(limits=sv.Limits.unlimited())  # a client that asks for a token
    with pytest.raises(sv.QuotaExhaustedError):
        b.sites()
    emu.set_faults()
    before = sent(emu)
    for client in (a, b, emu.client(limits=sv.Limits.unlimited())):
        with pytest.raises(sv.QuotaExhaustedError):
            client.devices()
    assert sent(emu) == before


def test_a_short_retry_after_is_waited_for(emu):
    emu.set_faults(rate_limit_rate=0.3, retry_after=1)
    client = emu.client(limits=sv.Limits.unlimited(), max_retries=10, max_wait=5)
    assert len(client.sites()) == 4


def test_the_day_is_the_services(emu):
    emu.set_limits(daily_requests=4)
    client = emu.client()
    with pytest.raises(sv.QuotaExhaustedError):
        for _ in range(10):
            client.sites()
    emu.advance_clock(86_400)  # the service's next day: a new budget
    client.reports()  # the refused request never went: this one learns the new date
    assert client.quota()["used"] >= 1
    assert len(client.sites()) == 4


def test_the_ledger_holds_no_secret(emu, tmp_path, monkeypatch):
    monkeypatch.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path))
    client = emu.client()
    client.sites()
    (ledger,) = list(tmp_path.iterdir())
    text = ledger.read_text()
    for secret in (emu.api_key, emu.client_secret, client.access_token()):
        assert secret not in text and secret not in ledger.name
    assert json.loads(text)["used"] >= 2


def test_quota_in_stats_and_diagnose(emu, capsys):
    emu.set_limits(daily_requests=100)
    client = emu.client()
    client.sites()
    assert client.stats()["quota"]["used"] == 2
    client.diagnose()
    out = capsys.readouterr().out
    assert "quota:" in out and "of 100 requests a day used" in out


# --- shared by the processes of the machine --------------------------------------------------
CHILD = textwrap.dedent(
    """
    import sys, surveillance as sv
    url, key, cid, secret, audience = sys.argv[1:6]
    client = sv.Client(key, cid, secret, base_url=url, audience=audience,
                       limits=sv.Limits(None, None, None, None, daily_requests=40))
    sent = 0
    try:
        while True:
            client.events("2026-01-05", "2026-01-07", progress=False)
    except sv.QuotaExhaustedError as e:
        print("quota", e.used)
    """
)


def test_two_processes_with_one_key_never_exceed_the_budget_together(emu, tmp_path):
    emu.set_limits(daily_requests=40)
    emu.reset_stats()
    args = [emu.url, emu.api_key, emu.client_id, emu.client_secret, emu.audience]
    env = {**os.environ, "SURVEILLANCE_QUOTA_DIR": str(tmp_path)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [c.communicate(timeout=120)[0] for c in children]
    assert all(c.returncode == 0 for c in children), outs
    assert all(out.startswith("quota") for out in outs), outs
    stats = emu.stats()
    sent = sum(sum(by_status.values()) for by_status in stats["requests"].values())
    assert sent <= 40 and stats["daily"]["used"] <= 40
    assert all("429" not in by_status for by_status in stats["requests"].values()), stats


# --- publishing spends the quota well ---------------------------------------------------------
def test_1000_records_with_the_defaults_take_at_most_10_requests(emu):
    report = emu.client().publish([other(i) for i in range(1000)], progress=False)
    assert report.ok and report.accepted == 1000
    assert webhook_requests(emu) <= 10 and report.requests <= 10


def test_a_service_that_refuses_arrays_gets_one_record_per_request(emu, caplog):
    emu.set_webhook(arrays=False)
    client = emu.client()
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        report = client.publish([other(i) for i in range(250)], progress=False)
        again = client.publish([other(i) for i in range(250, 270)], progress=False)
    assert report.ok and report.accepted == 250
    assert report.requests <= 250 + 3 * 2  # each array refused once, then one per record
    assert again.ok and again.requests == 20  # one per record from the start
    assert len(emu.published()) == 270
    said = [r.getMessage() for r in caplog.records if "refuses JSON arrays" in r.getMessage()]
    assert len(said) == 1, said


def test_batch_size_one_stays_available(emu):
    report = emu.client().publish([other(i) for i in range(30)], batch_size=1, progress=False)
    assert report.ok and report.requests == 30 == webhook_requests(emu)


# --- planning ---------------------------------------------------------------------------------
dense = emulator_fixture(seed=5, sites=30, days=3, events_per_day=40_000)


def event_requests(client) -> int:
    return client.stats()["requests"].get("GET /v2/events", 0)


def fetched(emu, limits, start, end, report_id):
    """Events and requests of a fetch by a fresh client, checked exact."""
    client = emu.client(limits=limits)
    got = client.events(start, end, report_id, progress=False)
    assert [e["id"] for e in got] == emu.truth(start, end, report_id=report_id)
    return len(got), event_requests(client)


#: A daily quota (the fetch walks), and none (the fetch pages ahead).
PLAN_LIMITS = {
    "quota": sv.Limits(None, 3, None, None, 10**8),
    "no quota": sv.Limits(None, 8, None, None, None),
}


@pytest.mark.parametrize("limits", PLAN_LIMITS)
@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
@pytest.mark.parametrize("hours, report", [(0.5, False), (3, False), (24, False), (48, True)])
def test_a_plan_is_within_a_tenth_of_its_fetch_and_its_pages_are_not_asked_twice(
    dense, order, limits, hours, report
):
    dense.set_semantics(order)
    try:
        limits = PLAN_LIMITS[limits]
        client = dense.client(limits=limits)
        report_id = client.reports()[0]["id"] if report else None
        start = dense.start
        end = start + dt.timedelta(hours=hours)
        n, alone = fetched(dense, limits, start, end, report_id)
        before = event_requests(client)
        plan = client.plan_events(start, end, report_id)
        probes = event_requests(client) - before
        assert plan.probes == probes
        assert abs(plan.events - n) <= 0.1 * n, (plan, n)
        # Without a quota the fetch's pages in flight past a window's end vary run to run.
        slack = 0 if limits.daily_requests else 2
        assert abs(plan.requests - alone) <= 0.1 * alone + slack, (plan, alone)
        # The fetch that follows takes the pages the plan read instead of asking them again:
        # what the plan cost is the pages the fetch does not use, at most 2% of the fetch.
        # Under a quota, on a sorted service, none: the plan searches each window's end from
        # below and asks no page past it. On one that does not sort, a page past an end only
        # where the fetch is 50 requests or more; a smaller one is walked. Without a quota the
        # fresh fetch's own pages in flight past an end vary run to run (a page on a sorted
        # service, whose density bounds them; up to three on one that does not sort).
        got = client.events(start, end, report_id, progress=False)
        assert [e["id"] for e in got] == dense.truth(start, end, report_id=report_id)
        spent = event_requests(client) - before
        if limits.daily_requests:
            slack = 0
        elif order == "shuffled":
            slack = 3
        else:
            slack = 1
        assert spent - alone <= math.floor(0.02 * alone) + slack, (plan, spent, alone)
        assert "events" in str(plan) and "requests" in str(plan)
    finally:
        dense.set_semantics()


@pytest.mark.parametrize("limits", PLAN_LIMITS)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_a_plan_of_a_long_sorted_range_asks_at_most_a_fiftieth_of_its_fetch(dense, order, limits):
    """On a service that sorts, a plan asks each window's ceiling page and a few pages at the
    last window's end: for three days of 120,000 events, at most 2% of ``ceil(N / 100)``."""
    dense.set_semantics(order)
    try:
        client = dense.client(limits=PLAN_LIMITS[limits])
        start, end = dense.start, dense.start + dt.timedelta(days=3)
        n = len(dense.truth(start, end))
        plan = client.plan_events(start, end)
        assert plan.probes == event_requests(client)
        assert abs(plan.events - n) <= 0.1 * n, (plan, n)
        assert plan.probes <= 0.02 * math.ceil(n / 100), (plan, n)
    finally:
        dense.set_semantics()


def test_plan_reports_time_and_days_at_the_limits(dense):
    client = dense.client(limits=sv.Limits(read_per_second=2.0, daily_requests=400))
    plan = client.plan_events(dense.start, dense.start + dt.timedelta(hours=24))
    assert plan.seconds == pytest.approx(plan.requests / 2.0)
    remaining = client.quota()["remaining"]
    assert plan.requests > remaining  # more than what is left of today's 400
    assert plan.days == pytest.approx(1 + (plan.requests - remaining) / 400)


def test_the_plan_command_prints_one_line(dense, capsys):
    from surveillance.cli import main

    env = {
        "--base-url": dense.url,
        "--api-key": dense.api_key,
        "--client-id": dense.client_id,
        "--client-secret": dense.client_secret,
        "--audience": dense.audience,
    }
    args = ["plan", "--start", "2026-01-05", "--end", "2026-01-06", "--read-per-second", "0"]
    for k, v in env.items():
        args += [k, v]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert "events" in out[0] and "requests" in out[0] and "days of quota" in out[0]
    assert out[1].startswith("quota today:")


# --- resumable backfills ----------------------------------------------------------------------
def test_a_backfill_past_the_budget_resumes_day_after_day(tmp_path):
    """A sync that needs about five days of a small budget, run once a day (cron), ends with
    exactly the range's events: no duplicate id, no 429, no day past its budget."""
    import pyarrow.dataset as ds

    budget = 120
    with sv.Emulator(seed=3, sites=6, days=5, events_per_day=10_000) as emu:
        emu.set_limits(daily_requests=budget)
        path = tmp_path / "events"
        runs = []
        while len(runs) < 12:
            result = emu.client().sync_events(path, emu.start, until=emu.end)
            runs.append(result)
            if result.complete:
                break
            assert result.remaining is not None and result.resets_at is not None
            assert "quota" in str(result)
            emu.advance_clock(86_400)  # the next day's run
        stats = emu.stats()
        truth = emu.truth(emu.start, emu.end)
    assert runs[-1].complete, runs[-1]
    assert 4 <= len(runs) <= 7, [str(r) for r in runs]
    assert all(used <= budget for used in stats["daily"]["days"].values()), stats["daily"]
    assert stats["rate_limited"] == 0
    assert not any("429" in by_status for by_status in stats["requests"].values())
    ids = ds.dataset(path, partitioning="hive").to_table(columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(truth)
    # Each day's run moved the synced instant forward.
    synced = [r.synced_until for r in runs]
    assert synced == sorted(synced) and len(set(synced)) == len(synced)


def test_the_sync_command_exits_75_when_the_quota_stops_it(tmp_path, capsys):
    from surveillance.cli import main

    with sv.Emulator(seed=3, sites=6, days=2, events_per_day=10_000) as emu:
        emu.set_limits(daily_requests=30)
        args = ["sync", str(tmp_path / "events"), "--start", "2026-01-05", "--until", "2026-01-07"]
        args += ["--base-url", emu.url, "--api-key", emu.api_key, "--client-id", emu.client_id]
        args += ["--client-secret", emu.client_secret, "--audience", emu.audience]
        args += ["--read-per-second", "0", "--daily-requests", "30"]
        # Its own status (EX_TEMPFAIL), so that a cron job tells "no progress" from "done".
        assert main(args) == 75
    out = capsys.readouterr().out
    assert "stopped: the day's request quota is used up" in out and "remains" in out


def test_iter_events_yields_what_it_fetched_before_the_quota_error():
    with sv.Emulator(seed=3, sites=6, days=3, events_per_day=10_000) as emu:
        # The service's quota: one window of 10,000 events, and half the next. The client
        # believes it has more (another machine spent the rest), so the fetch starts.
        emu.set_limits(daily_requests=150)
        client = emu.client(limits=sv.Limits(None, 3, None, None, 10**6))
        seen = []
        with pytest.raises(sv.QuotaExhaustedError):
            for event in client.iter_events(emu.start, emu.end):
                seen.append(event["id"])
        truth = emu.truth(emu.start, emu.end)
        assert 0 < len(seen) < len(truth)
        assert seen == truth[: len(seen)]  # the windows completed before the budget ran out
        with pytest.raises(sv.QuotaExhaustedError):
            client.events(emu.start, emu.end, progress=False)
        # The service's count includes the requests it refused: the first, believed by its call
        # alone, and a second that confirms it; the client sends none after.
        assert emu.stats()["daily"]["used"] <= 152
        with pytest.raises(sv.QuotaExhaustedError):
            client.events(emu.start, emu.end, progress=False)
        assert emu.stats()["daily"]["used"] <= 152


# --- a fetch that cannot fit is refused before it spends the quota ---------------------------
def event_reads(emu) -> int:
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
def test_a_fetch_larger_than_the_quota_left_is_refused_before_it_starts(emu, order):
    emu.set_semantics(order)
    try:
        emu.set_limits(daily_requests=40)
        client = emu.client()
        client.sites()  # a token and a request: the ledger is in use
        left = client.quota()["remaining"]
        emu.reset_stats()
        # 6,000 events: 61 requests, more than the 38 left.
        with pytest.raises(sv.QuotaExhaustedError) as refused:
            client.events(emu.start, emu.end, progress=False)
        text = str(refused.value)
        assert "needs at least" in text and "sync" in text and "nothing was fetched" in text, text
        spent = event_reads(emu)
        # Its first page and the page at the offset the 38 left reach: at most a tenth of them.
        assert spent <= 38 // 10, spent
        assert client.quota()["remaining"] == left - spent
        # The same client goes on with what fits, exactly.
        end = emu.start + dt.timedelta(hours=3)
        got = client.events(emu.start, end, progress=False)
        assert [e["id"] for e in got] == emu.truth(emu.start, end)
    finally:
        emu.set_semantics()


@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
@pytest.mark.parametrize("left", [5, 15, 30, 60])
def test_a_refusal_costs_at_most_a_tenth_of_what_is_left(emu, order, left):
    """6,000 events (61 requests) with ``left`` requests left: refused for at most a tenth of
    them (one request when fewer than 20 are left), in any order; the same client, which now
    holds the pages it read, is refused again for no more."""
    emu.set_semantics(order)
    try:
        emu.set_limits(daily_requests=1_000)
        used = emu.client().quota()["used"]
        emu.set_limits(daily_requests=used + left)
        client = emu.client()
        assert client.quota()["remaining"] == left
        for _ in range(2):
            before = event_reads(emu)
            with pytest.raises(sv.QuotaExhaustedError, match="nothing was fetched"):
                client.events(emu.start, emu.end, progress=False)
            assert event_reads(emu) - before <= max(1, left // 10), (order, left)
    finally:
        emu.set_semantics()


def test_a_refusal_costs_nothing_once_the_cache_kept_the_density(emu, tmp_path):
    """A fetch under a quota keeps the events' density in the cache (``shape.json``): a client
    that starts from it refuses a fetch that cannot fit without a request, and fetches one
    that surely fits with no request but the fetch's own."""
    emu.set_limits(daily_requests=1_000)
    cache = str(tmp_path / "cache")
    three_hours = emu.start + dt.timedelta(hours=3)
    emu.client(cache=cache).events(emu.start, three_hours, progress=False)
    used = emu.client().quota()["used"]
    emu.set_limits(daily_requests=used + 30)
    client = emu.client(cache=cache)
    before = event_reads(emu)
    with pytest.raises(sv.QuotaExhaustedError, match="needs about") as refused:
        client.events(three_hours, emu.end, progress=False)
    assert event_reads(emu) == before, str(refused.value)
    assert "(0 requests counted it)" in str(refused.value)
    # A fetch of a tenth of what is left asks only its own pages.
    end = three_hours + dt.timedelta(minutes=30)
    got = client.events(three_hours, end, progress=False)
    assert event_reads(emu) - before == math.ceil((len(got) + 1) / 100)


def test_a_fetch_that_fits_is_counted_first_only_near_the_quota_and_asks_no_page_twice(emu):
    # Far from the quota: no count, the fetch's pages only.
    emu.set_limits(daily_requests=10_000)
    n = len(emu.truth(emu.start, emu.end))
    client = emu.client()
    emu.reset_stats()
    client.events(emu.start, emu.end, progress=False)
    far = event_reads(emu)
    assert far <= math.ceil(n / 100) + 1, (far, n)
    # Near it (61 of the 70 left): counted first, and the fetch uses the pages the count read.
    emu.set_limits(daily_requests=client.quota()["used"] + 70)
    client = emu.client()
    emu.reset_stats()
    got = client.events(emu.start, emu.end, progress=False)
    assert [e["id"] for e in got] == emu.truth(emu.start, emu.end)
    assert event_reads(emu) <= 1.03 * far + 3, (event_reads(emu), far)


def test_sync_is_not_refused_up_front_and_keeps_what_the_quota_allows(emu, tmp_path):
    emu.set_limits(daily_requests=40)
    client = emu.client()
    try:
        client.sync_events(tmp_path / "ds", start=emu.start, until=emu.end)
    except sv.QuotaExhaustedError:
        pass
    # The windows fetched before the quota ran out are stored, for the next day's run.
    assert list((tmp_path / "ds").rglob("*.parquet"))
    until = sv.sync.read_state(tmp_path / "ds")["synced_until"]
    assert dt.datetime.fromisoformat(until.replace("Z", "+00:00")) < emu.end


def sync_day_after_day(emu, root, **client) -> list[int]:
    """Runs ``sync_events`` over the emulator's range once a (emulated) day, each run on a new
    client, until one completes; the events requests of each run. The dataset ends equal to
    the truth."""
    runs = []
    for _ in range(10):
        before = event_reads(emu)
        result = emu.client(**client).sync_events(root / "ds", start=emu.start, until=emu.end)
        runs.append(event_reads(emu) - before)
        if result.complete:
            break
        emu.advance_clock(86_400)  # the next day's run
    import pyarrow.dataset as ds

    table = ds.dataset(root / "ds", format="parquet").to_table(columns=["id", "startTime"])
    got = table.sort_by([("startTime", "ascending"), ("id", "ascending")])["id"].to_pylist()
    assert got == emu.truth(emu.start, emu.end)
    return runs


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
def test_a_sync_the_quota_stops_every_day_asks_no_page_twice(make_emu, tmp_path, order, cache):
    """Each day's run ends where the quota stops it, and the next day's run asks again at most
    two pages of what it read. In any order, with a cache or without one, the pages read of
    the windows the quota stopped are carried to the next run (beside the dataset), which
    plans those windows again and asks only the pages they lack."""
    emu = make_emu(seed=5, sites=4, days=2, events_per_day=4000)
    emu.set_semantics(order=order)
    emu.set_limits(daily_requests=30)
    runs = sync_day_after_day(emu, tmp_path, **({"cache": str(tmp_path / "c")} if cache else {}))
    least = math.ceil(len(emu.truth(emu.start, emu.end)) / 100)
    waste = sum(runs) - least
    assert len(runs) > 2 and waste <= 2 * len(runs), (runs, least)


@pytest.mark.parametrize("order", ["desc", "shuffled"])
def test_carried_pages_that_do_not_hold_together_are_read_again(make_emu, tmp_path, order, caplog):
    """The service's order of a window changed between two runs (an event came in): the pages
    carried from the first run and those of the second do not make one answer, so the window
    is read again whole, and the dataset still ends equal to the truth."""
    emu = make_emu(seed=5, sites=4, days=2, events_per_day=4000)
    emu.set_semantics(order=order)
    emu.set_limits(daily_requests=30)
    cache = tmp_path / "c"
    result = emu.client(cache=str(cache)).sync_events(tmp_path / "ds", emu.start, until=emu.end)
    assert not result.complete
    assert (tmp_path / "ds" / "_sync_carried.bin").exists()
    _, qe = sv.sync.read_state(tmp_path / "ds")["carried"]
    qe = int(dt.datetime.fromisoformat(qe.replace("Z", "+00:00")).timestamp() * 1000)
    # The window's latest event: every later page of either order moves by one.
    emu.add_events(dt.datetime.fromtimestamp((qe - 1) / 1000, dt.timezone.utc))
    emu.advance_clock(86_400)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        runs = sync_day_after_day(emu, tmp_path, cache=str(cache))
    assert "do not hold together" in caplog.text
    assert runs


def test_damaged_carried_pages_are_warned_about_and_asked_again(make_emu, tmp_path, caplog):
    """The file of the pages a run carried to the next (beside the dataset) is damaged: the
    next run says so, naming the file, asks those pages again, and ends equal to the truth."""
    emu = make_emu(seed=5, sites=4, days=2, events_per_day=4000)
    emu.set_semantics(order="shuffled")
    emu.set_limits(daily_requests=30)
    cache = tmp_path / "c"
    result = emu.client(cache=str(cache)).sync_events(tmp_path / "ds", emu.start, until=emu.end)
    assert not result.complete
    carried = tmp_path / "ds" / "_sync_carried.bin"
    data = bytearray(carried.read_bytes())
    data[-2] ^= 1
    carried.write_bytes(bytes(data))
    emu.advance_clock(86_400)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        sync_day_after_day(emu, tmp_path, cache=str(cache))
    damaged = [r.getMessage() for r in caplog.records if carried.name in r.getMessage()]
    assert damaged and "checksum" in damaged[0], caplog.text


def test_the_cli_refuses_a_fetch_larger_than_the_quota_and_writes_nothing(emu, tmp_path):
    from test_cli import _env, _run

    out = tmp_path / "big.parquet"
    args = ["events", "--start", emu.start.isoformat(), "--end", emu.end.isoformat()]
    r = _run([*args, "-o", str(out), "--daily-requests", "40"], _env(emu), cwd=tmp_path)
    assert r.returncode != 0
    assert "needs at least" in r.stderr and "sync" in r.stderr, r.stderr
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_a_plan_reads_well_in_a_repr_and_in_words():
    plan = sv.EventPlan(6_000, 61, 30.500001, 0.0004166666666666667, 3, exact=True)
    assert repr(plan) == (
        "EventPlan(events=6000, requests=61, seconds=30.5, days=0.000417, probes=3, exact=True)"
    )
    assert "0.0004 days of quota" in str(plan)
    assert "2.5 days of quota" in str(sv.EventPlan(6_000, 61, 0.0, 2.5, 3))


def test_an_incomplete_sync_raises_when_asked_and_a_complete_one_chains(emu, tmp_path):
    """A scheduler's task that syncs must not pass with part of the range missing:
    ``raise_if_incomplete`` turns the quota's stop into ``QuotaExhaustedError`` (with the
    reset and the result), and returns a complete result, so that it chains."""
    emu.set_limits(daily_requests=40)
    result = emu.client().sync_events(tmp_path / "ds", start=emu.start, until=emu.end)
    assert not result.complete
    with pytest.raises(sv.QuotaExhaustedError, match="incomplete") as stop:
        result.raise_if_incomplete()
    assert stop.value.resets_at == result.resets_at is not None
    assert stop.value.result is result
    assert "remains" in str(stop.value)
    emu.set_limits()
    done = emu.client().sync_events(tmp_path / "ds", start=emu.start, until=emu.end)
    assert done.raise_if_incomplete() is done
