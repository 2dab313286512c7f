"""A call rides out the service being unreachable (a restart, a deploy behind a load balancer):
connections refused, reset or timed out, and 502/503/504, are retried for ``max_outage``
seconds (default 60; 0 fails at once), and a request that never reached the service is not
counted in the daily quota. The emulator's ``outage`` closes its port mid-call."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
import surveillance as sv

from conftest import other, sigint_default

#: The outage of each test: the client must wait it out, with no user action.
OUTAGE_S = 10.0
#: Reads in flight: a bound on the requests the outage cut (sent, so maybe counted).
IN_FLIGHT = 6


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def counted(emu) -> int:
    """Requests the emulator counted today (every answer, and those it dropped)."""
    return emu.stats()["daily"]["used"]


def test_events_ride_out_an_outage_exact(make_emu):
    e = make_emu(seed=5, sites=6, days=2, events_per_day=6000)
    client = e.client(limits=sv.Limits(None, IN_FLIGHT, None, None, None))
    truth = e.truth(e.start, e.end)
    assert len(truth) >= 10_000
    e.outage(OUTAGE_S, after=40)  # about a third of the pages
    t = time.monotonic()
    got = client.events(e.start, e.end, progress=False)
    took = time.monotonic() - t
    assert [x["id"] for x in got] == truth  # no event lost or twice
    assert OUTAGE_S <= took < OUTAGE_S + 20
    assert e.stats()["requests"]["GET /v2/events"]["dropped"] == 1
    stats = client.stats()
    # Every refused connection was a retry, none counted: the ledger holds the requests that
    # reached the emulator, and at most those the outage cut in flight (sent, maybe read).
    assert stats["retries"] >= 2 * IN_FLIGHT
    used = client.quota()["used"]
    assert counted(e) <= used <= counted(e) + IN_FLIGHT, (used, counted(e), stats)


def test_publish_rides_out_an_outage_exact(make_emu):
    e = make_emu()
    records = [other(i) for i in range(1000)]
    client = e.client(limits=sv.Limits(None, None, None, 4, None))
    e.outage(OUTAGE_S, after=4)
    t = time.monotonic()
    report = client.publish(records, batch_size=50, progress=False)
    assert time.monotonic() - t >= OUTAGE_S
    assert report.accepted == 1000 and not report.rejected and not report.unconfirmed, report
    stored = e.published()
    keys = [r["eventUniqueId"] for r in stored]
    assert len(keys) == len(set(keys)) == 1000  # stored once each: no loss, no duplicate
    assert e.stats()["published_stored"] == report.accepted
    assert e.stats()["requests"]["POST /v2/webhook"]["dropped"] == 1


def test_sync_rides_out_an_outage_exact(make_emu, tmp_path):
    e = make_emu(seed=11, sites=8, days=3, events_per_day=2500)
    client = e.client(limits=sv.Limits(None, IN_FLIGHT, None, None, None))
    e.outage(OUTAGE_S, after=30)
    t = time.monotonic()
    result = client.sync_events(tmp_path / "events", e.start, until=e.end, settle="1h")
    assert time.monotonic() - t >= OUTAGE_S
    table = ds.dataset(str(tmp_path / "events"), partitioning="hive").to_table()
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == result.added == 7500
    assert sorted(ids) == sorted(e.truth(e.start, e.end))
    assert pa.table(table).num_rows == 7500
    assert e.stats()["requests"]["GET /v2/events"]["dropped"] == 1


def test_max_outage_zero_fails_at_once_and_counts_nothing(make_emu):
    e = make_emu()
    client = e.client(max_outage=0)
    client.access_token()
    before = client.quota()["used"]
    e.stop()
    t = time.monotonic()
    with pytest.raises(sv.TransportError, match="refused"):
        client.sites()
    assert time.monotonic() - t < 0.5
    assert client.stats()["retries"] == 0
    # The connection was refused: nothing reached the service, so nothing more is counted (the
    # emulator's stop removed its ledger, which a client then opens anew, so it may read less).
    assert client.quota()["used"] <= before


def test_a_call_gives_up_when_max_outage_has_passed_without_spending_the_quota(caplog):
    port = closed_port()
    client = sv.Client("k", "i", "s", base_url=f"http://127.0.0.1:{port}", max_outage=3)
    t = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="surveillance"):
        with pytest.raises(sv.TransportError, match=r"unreachable for 3 s \(`max_outage`\)"):
            client.sites()
    took = time.monotonic() - t
    assert 3.0 <= took < 3.5, took
    stats = client.stats()
    assert stats["retries"] >= 4 and stats["requests"] == {}
    assert client.quota()["used"] == 0
    waits = [r.getMessage() for r in caplog.records if "; waiting: " in r.getMessage()]
    assert waits and all("the service is unreachable (connection refused)" in w for w in waits)
    assert "of the 3 s `max_outage` left" in waits[0]
    assert any(
        r.levelno == logging.WARNING and "giving up" in r.getMessage() for r in caplog.records
    )


def test_503_and_resets_ride_out_max_outage_not_max_retries(make_emu):
    e = make_emu()
    client = e.client(max_retries=0)
    client.access_token()
    e.set_hostile("status", path="/v2/sites", status=503, count=4)
    assert len(client.sites()) == 3  # four 503s in a row, max_retries=0: within max_outage
    e.set_hostile("status", path="/v2/sites", status=500, count=1)
    with pytest.raises(sv.ServerError):  # a 500 is the service's answer: max_retries
        client.sites()
    e.set_hostile(None)
    e.set_faults(drop_rate=0.5)
    assert len(client.sites()) == 3


def test_the_default_max_outage_is_a_minute_from_the_environment_or_the_argument(
    make_emu, monkeypatch
):
    e = make_emu()
    assert sv._core.DEFAULT_MAX_OUTAGE_S == 60.0
    assert e.client()._inner.config()["max_outage"] == 60.0
    monkeypatch.setenv("SURVEILLANCE_MAX_OUTAGE", "300")
    assert e.client()._inner.config()["max_outage"] == 300.0
    assert e.client(max_outage=0)._inner.config()["max_outage"] == 0.0
    monkeypatch.setenv("SURVEILLANCE_MAX_OUTAGE", "soon")
    with pytest.raises(sv.ConfigError, match="SURVEILLANCE_MAX_OUTAGE"):
        e.client()
    monkeypatch.delenv("SURVEILLANCE_MAX_OUTAGE")
    for bad in (-1, float("nan"), 86_401):
        with pytest.raises(sv.ConfigError, match="`max_outage`"):
            e.client(max_outage=bad)


#: A client with the default budget against a closed port: prints when its call starts, and
#: how it ended.
CHILD = textwrap.dedent(
    """
    import sys, time, surveillance as sv
    client = sv.Client("k", "i", "s", base_url="http://127.0.0.1:%d")
    print("calling", flush=True)
    try:
        client.sites()
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
    except Exception as e:
        print("failed", type(e).__name__, e, flush=True)
    """
)


def test_the_default_budget_outlasts_seconds_and_ctrl_c_stops_its_wait_at_once():
    """With the default ``max_outage`` a call to a closed port still waits after 5 s (it gave
    up after 0.7 s before), and Ctrl-C during the wait stops it within 100 ms. The child takes
    SIGINT as a terminal's foreground job does, whatever this process inherited."""
    env = {**os.environ}
    env.pop("SURVEILLANCE_MAX_OUTAGE", None)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD % closed_port()],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_default,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "calling"
        time.sleep(5.0)
        assert child.poll() is None, child.stdout.read()  # still riding out the outage
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline().split()
        assert line[:1] == ["interrupted"], line
        assert float(line[1]) - sent < 0.1 + 0.05, f"{float(line[1]) - sent:.3f} s after SIGINT"
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_a_dropped_request_of_the_outage_is_counted_by_both_sides(make_emu):
    """The request the outage cut reached the emulator (it counted it): the client counts it
    too, and the refused ones that follow in neither."""
    e = make_emu()
    client = e.client()
    client.access_token()
    e.outage(1.0)
    assert len(client.sites()) == 3
    assert client.quota()["used"] == counted(e) == 3  # token, the dropped one, the answer
    assert client.stats()["requests"]["GET /v2/sites"] == 2


# --- saying that it waits, and why -------------------------------------------------------------


def _waits(updates: list) -> list:
    return [u["waiting"] for u in updates if u.get("waiting")]


def test_the_progress_says_the_client_waits_and_why(make_emu):
    """While the service is unreachable the progress updates say so (``waiting``: why, the
    next try, the ``max_outage`` left), though no page comes; once requests go through again
    they say nothing more of it."""
    e = make_emu(seed=5, sites=3, days=1, events_per_day=3000)
    client = e.client(limits=sv.Limits(None, 2, None, None, None))
    client.access_token()
    updates: list = []
    e.outage(3.0, after=5)
    got = client.events(e.start, e.end, progress=updates.append)
    assert [x["id"] for x in got] == e.truth(e.start, e.end)
    waits = _waits(updates)
    assert len(waits) >= 2, updates  # the words follow the wait (the countdown), page or not
    assert all("the service is unreachable" in w and "`max_outage` left" in w for w in waits)
    assert any("next try in" in w for w in waits), waits
    assert updates[-1]["waiting"] is None and updates[-1]["events"] == len(got)

    updates.clear()
    e.outage(2.0, after=10)
    report = client.publish([other(i) for i in range(300)], batch_size=10, progress=updates.append)
    assert report.accepted == 300
    assert _waits(updates) and updates[-1]["waiting"] is None, updates


def test_the_bar_says_the_client_waits(make_emu, capsys, monkeypatch):
    """The bar (tqdm's, or the plain line on stderr without tqdm) shows the waiting words."""
    e = make_emu(seed=5, sites=3, days=1, events_per_day=3000)
    client = e.client(limits=sv.Limits(None, 2, None, None, None))
    client.access_token()
    for plain in (False, True):
        if plain:
            monkeypatch.setattr("surveillance._progress._tqdm", lambda notebook: None)
        e.outage(2.0, after=5)
        client.events(e.start, e.end, progress=True)
        err = capsys.readouterr().err
        # Right after the bar's name, where a narrow terminal does not cut it off.
        assert "events [waiting: retry in " in err, err
        assert " s of max_outage left (unreachable)]" in err


def test_the_cli_says_the_client_waits(make_emu, tmp_path):
    """``surveillance -v events`` logs each wait of an outage, and why; on a terminal its bar
    says it too."""
    from test_cli import _env, _run, _run_in_pty

    e = make_emu(seed=5, sites=3, days=1, events_per_day=3000)
    day = ["--start", "2026-01-05", "--end", "2026-01-06", "--read-concurrency", "2"]
    e.outage(2.0, after=5)
    out = _run(["-v", "events", *day, "--format", "jsonl"], _env(e), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == len(e.truth(e.start, e.end))
    assert "surveillance: debug: GET /v2/events?" in out.stderr, out.stderr
    assert "; waiting: the service is unreachable (connection refused), retrying in" in out.stderr
    assert "the service answered again after" in out.stderr
    e.outage(2.0, after=5)
    status, shown = _run_in_pty(["events", *day, "-o", "day.jsonl"], _env(e), tmp_path)
    assert status == 0, shown
    assert "[waiting: retry in " in shown and "of max_outage left (unreachable)]" in shown, shown
    # The end-of-call line says what the outage cost.
    assert re.search(
        r"wrote [\d,]+ events to day\.jsonl: .*; [\d,]+ retries, [\d.]+ s of outage", shown
    )


# --- a client that lives for days -------------------------------------------------------------


@contextlib.contextmanager
def revoking(emu, every: int):
    """The service revokes every token after each `every` requests it answers (of any kind),
    and forgets them all when it restarts after an outage, as a service that keeps its tokens
    in memory does."""
    stop = threading.Event()

    def answered() -> tuple:
        requests = emu.stats()["requests"]
        total = sum(sum(by_status.values()) for by_status in requests.values())
        dropped = sum(by_status.get("dropped", 0) for by_status in requests.values())
        return total, dropped

    def run() -> None:
        last, dropped = answered()
        while not stop.wait(0.005):
            total, now_dropped = answered()
            if total - last >= every or now_dropped != dropped:
                emu.revoke_tokens()
                last, dropped = total, now_dropped

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_one_client_publishes_through_days_of_outages_expiries_and_revocations(make_emu):
    """One client, as a job that runs for days meets the service: earlier calls, then an outage
    (the port closed, the service restarted on it, its tokens forgotten), then tokens that
    expire every two seconds and are all revoked every 150 requests, and 5% random 429s
    throughout. Its publishes end with every record stored once, and the 401s are the
    revocations' (the requests in flight when one came), never a storm of expired tokens.

    A request takes its token when its token's window lets it out, then waits for its turn at
    the client's rate: a queue longer than a token lives (its windows grown to the hundreds
    of requests a token carried before, then a lower rate, or shorter tokens) sent tokens
    expired while they waited, each refused, and the next token's too, until ``AuthError``
    (fresh tokens refused) ended the publish."""
    e = make_emu()
    client = e.client(
        limits=sv.Limits(publish_per_second=50.0, daily_requests=None), max_outage=10.0
    )
    e.set_faults(rate_limit_rate=0.05)
    with revoking(e, every=150):
        # Earlier calls: tokens live for hours, a publish carries a hundred requests on each.
        assert len(client.sites()) == 3
        assert len(client.events(e.start, e.end, progress=False)) == 200
        first = client.publish([other(i) for i in range(400)], batch_size=1, progress=False)
        assert first.accepted == 400, first
        # Then the outage, and tokens that live two seconds.
        e.set_token_lifetime(2)
        e.reset_stats()
        e.outage(2.0, after=50)
        t = time.monotonic()
        report = client.publish([other(i) for i in range(400, 800)], batch_size=1, progress=False)
        took = time.monotonic() - t
        assert report.accepted == 400 and not report.failures, report
        assert len(client.sites()) == 3
    stored = [r["eventUniqueId"] for r in e.published()]
    assert len(stored) == len(set(stored)) == 800
    webhook = e.stats()["requests"]["POST /v2/webhook"]
    assert webhook["dropped"] == 1
    # 400 records at 50 a second, and the outage: 10 s.
    assert took < 30, took
    refused = webhook.get("401", 0)
    assert refused < 150, (webhook, e.stats()["tokens_issued"])


# --- one call, one budget ---------------------------------------------------------------------

#: The budget of the tests below, and the slack of their bounds (a loaded machine's).
BUDGET_S = 2.0
SLACK_S = 1.5


def _gives_up(call) -> tuple:
    """Runs `call`, which must raise TransportError; the seconds it took and the error."""
    t = time.monotonic()
    with pytest.raises(sv.TransportError, match=r"unreachable for 2 s \(`max_outage`\)") as e:
        call()
    return time.monotonic() - t, e.value


@pytest.mark.parametrize("batch_size", [1, "auto"])
def test_a_publish_to_a_closed_port_gives_up_after_max_outage_with_every_record_not_sent(
    batch_size,
):
    """The token request, each batch, each round of a batch and each token request rode out
    `max_outage` of their own: a publish at batch size 1 took 11 times its budget (34 s for 3
    s) and "auto" 6 times, and reported records that never left the machine as "failed". One
    call has one budget: it ends within `max_outage` (no request's timeout here: the port
    refuses at once), and every record is reported not sent."""
    client = sv.Client("k", "i", "s", base_url=f"http://127.0.0.1:{closed_port()}", max_outage=2)
    records = [other(i) for i in range(300)]
    took, error = _gives_up(lambda: client.publish(records, batch_size=batch_size, progress=False))
    assert BUDGET_S <= took < BUDGET_S + SLACK_S, took
    report = error.report
    assert report.total == 300 and report.accepted == 0 and report.sent == 0
    assert report.counts() == {"not sent": 300}, report.counts()
    assert client.quota()["used"] == 0


@pytest.mark.parametrize("batch_size", [1, "auto"])
def test_a_publish_whose_service_went_away_gives_up_after_max_outage_and_loses_nothing(
    make_emu, batch_size
):
    """The service goes away in the middle of a publish (its token held, records accepted
    before): the publish ends within `max_outage` of it, and every record is accepted (and
    stored), or reported unconfirmed (its request left, no answer came) or not sent."""
    e = make_emu()
    client = e.client(limits=sv.Limits(publish_per_second=200.0), max_outage=BUDGET_S)
    client.access_token()
    e.outage(60.0, after=5)
    records = [other(i) for i in range(2000)]
    took, error = _gives_up(lambda: client.publish(records, batch_size=batch_size, progress=False))
    assert took < BUDGET_S + SLACK_S, took
    report = error.report
    kinds = report.counts()
    assert set(kinds) == {"not sent", "unconfirmed"}, kinds
    assert report.accepted + len(report.failures) == report.total == 2000
    key = [r["eventUniqueId"] for r in records]
    unconfirmed = {key[f.index] for f in report.unconfirmed}
    accepted = set(key) - {key[f.index] for f in report.failures}
    stored = {r["eventUniqueId"] for r in e.published()}
    # Nothing lost, nothing said to be stored that is not.
    assert accepted <= stored <= accepted | unconfirmed
    assert e.stats()["requests"]["POST /v2/webhook"]["dropped"] == 1


def test_reads_to_a_closed_port_give_up_after_max_outage(make_emu):
    """Reads have the same budget, with their token held or not: sites and events, each a
    call of its own on one client."""
    e = make_emu()
    client = e.client(max_outage=BUDGET_S)
    client.access_token()
    e.stop()
    for read in (client.sites, lambda: client.events(e.start, e.end, progress=False)):
        took, _ = _gives_up(read)
        assert BUDGET_S <= took < BUDGET_S + SLACK_S, took
    fresh = sv.Client("k", "i", "s", base_url=f"http://127.0.0.1:{closed_port()}", max_outage=2)
    took, _ = _gives_up(lambda: fresh.events(e.start, e.end, progress=False))
    assert BUDGET_S <= took < BUDGET_S + SLACK_S, took
