"""Incremental sync (``client.sync_events``, ``surveillance sync``): a hive-partitioned Parquet
dataset equal to ``client.events()``, economical re-runs, late events, SIGKILL at random points,
and refusal of concurrent runs."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import surveillance as sv
from surveillance import sync as svsync

from conftest import emulator_fixture, service_env

UTC = dt.timezone.utc
H = dt.timedelta(hours=1)
#: The command line reads as fast as the emulator answers (its default is the published limit).
FAST = ["--read-per-second", "0", "--read-concurrency", "0"]
MIN = dt.timedelta(minutes=1)
START = dt.datetime(2026, 1, 5, tzinfo=UTC)


#: Three days of events, 2,500 a day (a dense burst each day); never changed by a test.
emu = emulator_fixture(seed=11, sites=8, days=3, events_per_day=2500)


@pytest.fixture(scope="module")
def client(emu):
    with emu.client() as c:
        yield c


def read(path) -> pa.Table:
    """The dataset as readers see it, without the partition column, in (startTime, id) order."""
    table = ds.dataset(str(path), partitioning="hive").to_table()
    return table.drop(["date"]).sort_by([("startTime", "ascending"), ("id", "ascending")])


def expected(client, start, end, report_id=None) -> pa.Table:
    return pa.table(client.events(start, end, report_id=report_id, output="arrow", progress=False))


def assert_no_duplicates(table: pa.Table) -> None:
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicated ids"


def events_requests(emu) -> int:
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def state_of(path) -> dict:
    return json.loads((path / svsync.STATE_FILE).read_text())


# --- the dataset -----------------------------------------------------------------------------
def test_three_runs_over_advancing_until_equal_one_fetch_of_the_whole_range(emu, client, tmp_path):
    path = tmp_path / "events"
    untils = [START + 20 * H, START + 44 * H, emu.end]
    results = [client.sync_events(path, START, until=u, settle="1h") for u in untils]
    want = expected(client, START, emu.end)
    got = read(path)
    assert_no_duplicates(got)
    assert got.schema == want.schema  # exactly the client's Arrow schema, in every file
    assert got.equals(want)
    assert got.num_rows == 7500
    assert sum(r.added for r in results) == 7500
    # Later runs fetch the settle hour again: those events replace themselves.
    assert results[0].replaced == 0
    for r, u in zip(results[1:], untils):
        assert r.ranges == [(u - H, r.synced_until)]
        assert r.replaced == len(emu.truth(u - H, u)) > 0
    assert [r.synced_until for r in results] == untils
    assert sorted(p.name for p in path.iterdir() if p.is_dir()) == [
        "date=2026-01-05",
        "date=2026-01-06",
        "date=2026-01-07",
    ]
    for part in path.glob("date=*/*"):
        assert part.name == "part-0.parquet"
        assert pq.read_schema(part) == want.schema
    state = state_of(path)
    assert state["synced_until"] == "2026-01-08T00:00:00.000Z"
    assert state["start"] == "2026-01-05T00:00:00.000Z" and state["report_id"] is None
    # pandas reads it as it is, the partition column included.
    frame = pd.read_parquet(path)
    assert len(frame) == 7500 and frame["id"].is_unique
    assert str(results[2]).startswith(
        "fetched 2026-01-06T19:00:00.000Z .. 2026-01-08T00:00:00.000Z"
    )
    assert "synced_until=2026-01-08T00:00:00.000Z" in repr(results[2])


@pytest.mark.parametrize("hours", [30, 42], ids=["quiet-hour", "busy-hour"])
def test_second_run_with_nothing_new_rechecks_only_the_settle_period(emu, client, tmp_path, hours):
    path = tmp_path / "events"
    until = START + hours * H
    first = client.sync_events(path, START, until=until)
    files = {p: p.read_bytes() for p in path.glob("date=*/*.parquet")}
    emu.reset_stats()
    before = client.stats()
    again = client.sync_events(path, START, until=until)
    rechecked = len(emu.truth(until - H, until))
    requests = events_requests(emu)
    assert again.ranges == [(until - H, until)]
    assert (again.added, again.replaced) == (0, rechecked)
    assert again.windows == 1
    # The economy of the event windows (DESIGN.md): the pages that hold the settle period's
    # events, the window's ceiling probe, and at most the pages in flight past the end.
    assert requests <= math.ceil((rechecked + 1) / 100) + 1 + 4, (rechecked, requests)
    assert requests < first.requests / 4
    assert again.requests == sum(client.stats()["requests"].values()) - sum(
        before["requests"].values()
    )
    after = client.stats()
    assert after["tokens"] == before["tokens"]  # the token was reused: events requests only
    assert set(after["requests"]) == set(before["requests"]) | {"GET /v2/events"}
    # The client counts a request when it sends it; a page still in flight when the window
    # completes is abandoned, and may never have reached the emulator's handler.
    assert requests <= again.requests <= requests + 4
    assert again.partitions == []  # nothing changed: no partition rewritten
    assert {p: p.read_bytes() for p in path.glob("date=*/*.parquet")} == files
    print(f"re-check of {rechecked} events in 1 window: {requests} requests")


def test_events_created_late_inside_the_settle_period_are_picked_up(make_emu, tmp_path):
    emu = make_emu(seed=4, sites=4, days=1, events_per_day=600)
    client = emu.client()
    until = START + 12 * H
    settled, unsettled = tmp_path / "settle-1h", tmp_path / "settle-0"
    client.sync_events(settled, START, until=until, settle="1h")
    client.sync_events(unsettled, START, until=until, settle=0)
    # Created after the first run read their range: 20 minutes before `until` (inside the
    # settle period), and 3 hours before (outside it: later than the job promised to wait).
    late = emu.add_events(until - 20 * MIN, 3, created_at=until + 10 * MIN)
    too_late = emu.add_events(until - 3 * H, 1, created_at=until + 10 * MIN)
    second = client.sync_events(settled, START, until=until + 2 * H, settle="1h")
    client.sync_events(unsettled, START, until=until + 2 * H, settle=0)
    got = read(settled)
    ids = set(got.column("id").to_pylist())
    assert set(late) <= ids
    assert not set(too_late) & ids
    assert not set(late) & set(read(unsettled).column("id").to_pylist())
    assert second.added == len(emu.truth(until, until + 2 * H)) + 3
    want = expected(client, START, until + 2 * H)
    assert got.equals(want.filter(pc.invert(pc.is_in(want["id"], pa.array(too_late)))))
    created = got.filter(pc.is_in(got["id"], pa.array(late))).column("createTime")
    assert all(t > until for t in created.to_pylist())


# --- killed runs -----------------------------------------------------------------------------
#: A sync run in its own process: imports and a token first, then "ready"; it waits for
#: `PATH START UNTIL` on stdin, syncs, and prints "done".
CHILD = """
import sys
import pyarrow.compute, pyarrow.parquet
import surveillance as sv
client = sv.Client(limits=sv.Limits.unlimited())
client.access_token()
print("ready", flush=True)
path, start, until = sys.stdin.readline().split()
client.sync_events(path, start, until=until, settle="1h")
print("done", flush=True)
"""


def child_env(emu) -> dict:
    return service_env(emu, NO_PROXY="127.0.0.1,localhost")


def partition_ids(path) -> dict:
    """``{"date=...": frozenset(ids)}`` of every data file, read one by one."""
    out = {}
    for part in sorted(path.glob("date=*/part-0.parquet")):
        ids = pq.read_table(part, columns=["id"]).column("id").to_pylist()
        assert len(ids) == len(set(ids))
        out[part.parent.name] = frozenset(ids)
    return out


def close(proc) -> None:
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except BrokenPipeError:  # the child was killed before reading
            pass


def iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@pytest.mark.slow
def test_runs_killed_at_random_points_leave_a_readable_dataset_that_the_next_run_completes(
    emu, client, tmp_path
):
    t0 = START + 30 * H
    template = tmp_path / "template"
    client.sync_events(template, START, until=t0)
    old = partition_ids(template)
    complete = tmp_path / "complete"
    shutil.copytree(template, complete)
    client.sync_events(complete, START, until=emu.end)
    new = partition_ids(complete)
    want = read(complete)
    env = child_env(emu)

    def spawn():
        return subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def go(proc, path) -> None:
        assert proc.stdout.readline() == "ready\n"
        proc.stdin.write(f"{path} {iso(START)} {iso(emu.end)}\n")
        proc.stdin.flush()

    # Each child imports while the previous one runs; the work of one run (after its imports)
    # is measured on two undisturbed runs under that same load.
    runs = 22
    upcoming = [spawn()]

    def next_child(i: int):
        proc = upcoming.pop(0)
        if i + 1 < runs:
            upcoming.append(spawn())
        return proc

    work = []
    for i in range(2):
        proc = next_child(i)
        path = tmp_path / f"calibration{i}"
        shutil.copytree(template, path)
        go(proc, path)
        began = time.perf_counter()
        assert proc.stdout.readline() == "done\n"
        work.append(time.perf_counter() - began)
        assert proc.wait(timeout=30) == 0
        close(proc)
        assert read(path).equals(want)
    work_time = min(work)

    rng = random.Random(20260105)
    outcomes = {"not started": 0, "partly written": 0, "written, state old": 0, "finished": 0}
    for trial in range(20):
        proc = next_child(trial + 2)
        path = tmp_path / f"trial{trial}"
        shutil.copytree(template, path)
        go(proc, path)
        time.sleep(work_time * 1.1 * (trial + rng.random()) / 20)  # spread over the run
        proc.kill()
        proc.wait(timeout=30)
        close(proc)
        # Readable, no id twice, every partition as before or complete.
        seen = read(path)
        assert_no_duplicates(seen)
        parts = partition_ids(path)
        for name, ids in parts.items():
            assert ids in (old.get(name), new[name]), f"trial {trial}: {name} is a mix"
        state = state_of(path)["synced_until"]
        assert state in (iso(t0), iso(emu.end))
        if state == iso(emu.end):
            assert parts == new
            outcomes["finished"] += 1
        elif parts == old:
            outcomes["not started"] += 1
        elif parts == new:
            outcomes["written, state old"] += 1
        else:
            outcomes["partly written"] += 1
        # The next run completes it and leaves no temporary file behind.
        client.sync_events(path, START, until=emu.end)
        assert read(path).equals(want)
        assert not [p for p in path.rglob(".*") if p.is_file()]
    print(f"one run's work: {work_time * 1000:.0f} ms; kills: {outcomes}")
    assert sum(outcomes.values()) == 20


# --- concurrent runs -------------------------------------------------------------------------
def test_a_second_concurrent_run_is_refused_and_the_first_completes(emu, client, tmp_path):
    path = tmp_path / "events"
    emu.set_faults(latency_ms=400)  # the first run holds the lock for a while
    results, errors = [], []

    def first() -> None:
        try:
            results.append(client.sync_events(path, START, until=START + 6 * H))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=first)
    thread.start()
    lock = path / svsync.LOCK_FILE
    deadline = time.monotonic() + 30
    while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.002)
    emu.reset_stats()
    with pytest.raises(sv.SyncLockedError) as refused:
        client.sync_events(path, START, until=START + 6 * H)
    thread.join(timeout=60)
    assert not errors and len(results) == 1
    assert refused.value.path == str(path)
    message = str(refused.value)
    assert "another sync is running" in message and f"pid {os.getpid()}" in message
    assert emu.stats()["requests"].get("GET /v2/events", {}).get("200", 0) <= results[0].requests
    emu.set_faults()
    assert read(path).equals(expected(client, START, START + 6 * H))
    # The lock is released: the next run goes ahead.
    assert client.sync_events(path, START, until=START + 7 * H).added > 0


def test_a_run_in_another_process_is_refused_while_the_lock_is_held(emu, tmp_path):
    path = tmp_path / "events"
    path.mkdir()
    with svsync._Lock(str(path)):
        out = subprocess.run(
            [sys.executable, "-m", "surveillance.cli", "sync", str(path), *FAST]
            + ["--start", "2026-01-05", "--until", "2026-01-05T06:00:00Z"],
            capture_output=True,
            text=True,
            env=child_env(emu),
            timeout=60,
        )
    assert out.returncode == 1, out
    assert "another sync is running" in out.stderr and f"pid {os.getpid()}" in out.stderr
    assert not (path / svsync.STATE_FILE).exists()
    assert not list(path.glob("date=*"))


# --- arguments, state, other readers ---------------------------------------------------------
@pytest.mark.parametrize(
    "value, seconds",
    [("1h", 3600), ("30m", 1800), ("2d", 172800), ("1h30m", 5400), (" 45 s ", 45), ("0", 0)]
    + [("1.5h", 5400), ("250ms", 0.25), (90, 90), (0.5, 0.5), (dt.timedelta(minutes=2), 120)],
)
def test_settle_takes_durations_timedeltas_and_seconds(value, seconds):
    assert svsync.parse_settle(value) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("value", ["", "1x", "h", "1h garbage", "-1h", -5, "1 hour"])
def test_a_bad_settle_is_refused_with_the_forms_it_takes(value):
    with pytest.raises(ValueError, match="settle"):
        svsync.parse_settle(value)
    with pytest.raises(TypeError, match="settle"):
        svsync.parse_settle(True)


def test_a_report_is_synced_alone_and_a_directory_keeps_its_report(emu, client, tmp_path):
    report = client.reports()[1]["id"]
    path = tmp_path / "events"
    client.sync_events(path, START, report_id=report, until=START + 20 * H)
    result = client.sync_events(path, START, report_id=report.upper(), until=emu.end)
    assert result.replaced > 0
    assert read(path).equals(expected(client, START, emu.end, report_id=report))
    assert state_of(path)["report_id"] == report
    with pytest.raises(sv.ConfigError, match="report_id.*another directory"):
        client.sync_events(path, START, until=emu.end)
    with pytest.raises(sv.ConfigError, match="report_id"):
        client.sync_events(path, START, report_id=emu.restricted_report_id, until=emu.end)


def test_an_earlier_start_fills_the_range_the_dataset_never_had(emu, client, tmp_path):
    path = tmp_path / "events"
    client.sync_events(path, START + 30 * H, until=START + 40 * H)
    result = client.sync_events(path, START, until=START + 50 * H)
    # The range before the old start, and the usual one from the synced instant minus settle.
    assert result.ranges == [(START, START + 30 * H), (START + 39 * H, START + 50 * H)]
    assert read(path).equals(expected(client, START, START + 50 * H))
    assert state_of(path)["start"] == "2026-01-05T00:00:00.000Z"
    # A later start than the dataset's changes nothing: the dataset keeps what it holds.
    later = client.sync_events(path, START + 45 * H, until=START + 50 * H)
    assert later.added == 0
    assert state_of(path)["start"] == "2026-01-05T00:00:00.000Z"


def test_until_in_the_future_records_the_time_of_the_run(emu, client, tmp_path):
    path = tmp_path / "events"
    began = dt.datetime.now(UTC).replace(microsecond=0)
    result = client.sync_events(path, emu.end - H, until=began + 24 * H)
    assert began <= result.synced_until <= dt.datetime.now(UTC)
    # Nothing to fetch after an end before the synced instant; the state is kept.
    again = client.sync_events(path, emu.end - H, until=emu.end)
    assert again.ranges == [] and again.windows == again.requests == 0
    assert again.synced_until == result.synced_until
    assert str(again).startswith("nothing to fetch; synced until ")
    with pytest.raises(ValueError, match="`until`.*after `start`"):
        client.sync_events(tmp_path / "other", START, until=START)


def test_leftovers_of_a_killed_run_are_invisible_to_readers_and_removed(emu, client, tmp_path):
    path = tmp_path / "events"
    client.sync_events(path, START, until=START + 6 * H)
    garbage = [
        path / "date=2026-01-05" / ".part-0.parquet.999-abcd.tmp",
        path / "date=2026-01-06" / ".part-0.parquet.999-abcd.tmp",
        path / "._sync_state.json.999-abcd.tmp",
    ]
    for g in garbage:
        g.parent.mkdir(exist_ok=True)
        g.write_bytes(b"PAR1 half a file")
    assert read(path).num_rows == len(emu.truth(START, START + 6 * H))
    assert len(pd.read_parquet(path)) == read(path).num_rows
    client.sync_events(path, START, until=START + 7 * H)
    assert not any(g.exists() for g in garbage)
    assert read(path).equals(expected(client, START, START + 7 * H))


def test_a_damaged_state_file_is_a_clear_error(client, tmp_path):
    path = tmp_path / "events"
    path.mkdir()
    (path / svsync.STATE_FILE).write_text("{not json")
    with pytest.raises(sv.ConfigError, match="not valid JSON.*new directory"):
        client.sync_events(path, START, until=START + H)


def test_the_cli_syncs_and_prints_what_it_did(emu, tmp_path):
    path = tmp_path / "events"
    argv = [sys.executable, "-m", "surveillance.cli", "sync", str(path), "--start", "2026-01-05"]
    argv += FAST
    run = [
        subprocess.run(
            argv + ["--until", until, "--settle", "30m"],
            capture_output=True,
            text=True,
            env=child_env(emu),
            timeout=60,
        )
        for until in ("2026-01-05T12:00:00Z", "2026-01-06T00:00:00Z")
    ]
    assert [r.returncode for r in run] == [0, 0], run
    out = run[1].stdout
    assert "fetched 2026-01-05T11:30:00.000Z .. 2026-01-06T00:00:00.000Z" in out
    assert "synced until 2026-01-06T00:00:00.000Z" in out
    for word in ("window", "requests", "added", "fetched again"):
        assert word in out
    assert read(path).num_rows == len(emu.truth(START, START + 24 * H))


def test_the_results_users_get_back_have_readable_reprs(emu, tmp_path):
    import pickle
    from collections.abc import Mapping

    client = emu.client(cache=str(tmp_path / "cache"))
    result = client.sync_events(tmp_path / "ds", START, until=START + 2 * H)
    # The sync's result: its figures, and a table in Jupyter.
    assert repr(result).startswith("SyncResult(path=") and "requests=" in repr(result)
    page = result._repr_html_()
    assert page.startswith("<b>SyncResult</b><table>") and "synced_until" in page
    assert f"{result.added:,}" in page
    # The client's mappings: named, times in ISO 8601 UTC, tables in Jupyter; read as dicts.
    quota, stats, info = client.quota(), client.stats(), client.cache_info()
    assert repr(quota).startswith("Quota(limit=") and "datetime" not in repr(quota)
    assert re.search(r"resets_at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", repr(quota)), repr(quota)
    assert repr(stats).startswith("Stats(requests={GET /v2/events: ")
    assert "quota=Quota(" in repr(stats) and "datetime" not in repr(stats)
    assert repr(info).startswith("CacheInfo(path=") and "datetime" not in repr(info)
    for shown in (quota, stats, info):
        assert "<table>" in shown._repr_html_()
        assert isinstance(shown, Mapping) and pickle.loads(pickle.dumps(shown)) == shown
    assert "<th>ranges</th>" in info._repr_html_()  # the entries, one row each
    assert json.loads(json.dumps(dict(quota), default=str))["used"] == quota["used"]
    assert repr(client.last_cost).startswith("Cost(requests=")


@pytest.mark.parametrize("daily", [None, 2400], ids=["no-budget", "daily-budget"])
def test_the_progress_of_a_sync_is_one_bar_over_all_it_fetches(emu, tmp_path, daily):
    client = emu.client(limits=sv.Limits(read_per_second=50, daily_requests=daily))
    updates: list = []
    result = client.sync_events(
        tmp_path / "ds", START, until=START + 30 * H, progress=updates.append
    )
    assert len(updates) >= 2
    total = 30 * 3_600_000
    assert {u["total_ms"] for u in updates} == {total}
    done = [u["done_ms"] for u in updates]
    assert done == sorted(done) and done[-1] <= total
    fetched = [u["fetched"] for u in updates]
    assert fetched == sorted(fetched) and fetched[-1] <= result.added
    requests = [u["requests"] for u in updates]
    assert requests == sorted(requests) and requests[-1] <= result.requests
    expected = [u for u in updates if "expected_requests" in u]
    assert expected and all(u["expected_requests"] >= u["requests"] for u in expected)


def _interrupt_after(requests: int):
    """A progress callback that raises ``KeyboardInterrupt`` (as Ctrl-C does in the call) once
    the run has sent ``requests``, once."""
    fired = []

    def bar(update: dict) -> None:
        if not fired and update.get("requests", 0) >= requests:
            fired.append(update["requests"])
            raise KeyboardInterrupt

    return bar


@pytest.mark.parametrize("lands", ["as-it-begins", "as-it-ends"])
def test_ctrl_c_while_a_window_is_stored_keeps_that_window(make_emu, tmp_path, monkeypatch, lands):
    """Ctrl-C lands while the first window the fetch handed out is being stored (the stream
    counts it as handed out, and carries none of its pages): the run stores it all the same,
    so that the next run, on the same client, asks none of it again."""
    from surveillance.sync import _partitions

    emu = make_emu(seed=5, sites=4, days=3, events_per_day=1500)
    client = emu.client(limits=sv.Limits(read_per_second=200.0, daily_requests=2400), cache=False)
    before = events_requests(emu)
    client.sync_events(tmp_path / "whole", emu.start, until=emu.end)
    once = events_requests(emu) - before
    assert once > 30

    consume = _partitions._PartitionWriter.consume
    fired: list = []

    def interrupted_once(self, table):
        if not fired:
            fired.append(table.num_rows)
            if lands == "as-it-ends":
                consume(self, table)
            raise KeyboardInterrupt
        consume(self, table)

    monkeypatch.setattr(_partitions._PartitionWriter, "consume", interrupted_once)
    before = events_requests(emu)
    with pytest.raises(svsync.SyncInterrupted) as stopped:
        client.sync_events(tmp_path / "parts", emu.start, until=emu.end)
    kept = stopped.value.result
    assert fired and kept.added >= fired[0] > 0 and kept.windows >= 1, (fired, kept)
    assert kept.synced_until > emu.start  # the next run goes on after that window
    monkeypatch.undo()
    resumed = client.sync_events(tmp_path / "parts", emu.start, until=emu.end)
    assert resumed.complete
    both = events_requests(emu) - before
    table = read(tmp_path / "parts")
    assert_no_duplicates(table)
    assert table.column("id").to_pylist() == emu.truth(emu.start, emu.end)
    assert both <= once + 2, (kept.requests, both - kept.requests, once)


@pytest.mark.parametrize("at", [0.3, 0.7])
@pytest.mark.parametrize("budget", [None, 2400], ids=["no-budget", "daily-budget"])
@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
def test_a_run_interrupted_part_way_and_resumed_costs_at_most_one_run_plus_two(
    make_emu, tmp_path, cache, budget, at
):
    """Ctrl-C stops a sync part-way, while several windows have pages in and requests are in
    flight (the default concurrency, 3), with a cache of settled events or without one. The
    next run, in a new client as a new process would be, takes the pages the first read:
    the dataset ends exact, and both runs together ask at most what one uninterrupted run
    asks, plus 2."""
    emu = make_emu(seed=3, sites=6, days=2, events_per_day=8000)
    # Quick, and slow enough that the progress callback sees the run part-way.
    limits = sv.Limits(read_per_second=200.0, daily_requests=budget)

    def client(name: str) -> sv.Client:
        return emu.client(limits=limits, cache=str(tmp_path / name) if cache else False)

    before = events_requests(emu)
    client("whole-cache").sync_events(tmp_path / "whole", emu.start, until=emu.end)
    once = events_requests(emu) - before
    assert once > 150

    before = events_requests(emu)
    with pytest.raises(svsync.SyncInterrupted) as stopped:
        client("parts-cache").sync_events(
            tmp_path / "parts", emu.start, until=emu.end, progress=_interrupt_after(int(once * at))
        )
    interrupted = events_requests(emu) - before
    assert stopped.value.result.interrupted and 0 < interrupted < once
    resumed = client("parts-cache").sync_events(tmp_path / "parts", emu.start, until=emu.end)
    assert resumed.complete
    both = events_requests(emu) - before
    table = read(tmp_path / "parts")
    assert_no_duplicates(table)
    assert table.column("id").to_pylist() == emu.truth(emu.start, emu.end)
    assert both <= once + 2, (interrupted, both - interrupted, once)
