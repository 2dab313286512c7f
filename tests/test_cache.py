"""The cache of settled events: a re-read costs no request and returns what a fresh read does,
in every output and path; overlapping reads fetch only their new part; the settle period; a
refresh; damaged files; two processes filling one cache; accounts kept apart; no secret on
disk; the size cap; ``cache_info``, ``clear_cache``, ``plan_events`` and the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest
import surveillance as sv

from conftest import emulator_command, service_env

DAY = dt.timedelta(days=1)
D0 = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
EVENTS = "GET /v2/events"


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(sites=5, days=10, events_per_day=2000) as e:
        yield e


@pytest.fixture()
def quota(emu):
    """A daily quota, enforced by the emulator and known to its clients."""
    emu.set_limits(daily_requests=100_000)
    yield
    emu.set_limits()


def event_requests(client) -> int:
    return client.stats()["requests"].get(EVENTS, 0)


def ids(events) -> list:
    return [e["id"] for e in events]


def test_the_same_range_twice_costs_no_request_in_every_output(emu, quota, tmp_path):
    first = emu.client(cache=tmp_path)
    want = first.events(D0, D0 + 7 * DAY, progress=False)
    assert ids(want) == emu.truth(D0, D0 + 7 * DAY)
    assert event_requests(first) > 0
    table = first.events(D0, D0 + 7 * DAY, output="arrow", refresh=True, progress=False)
    again = emu.client(cache=tmp_path)
    assert again.events(D0, D0 + 7 * DAY, progress=False) == want
    assert again.events(D0, D0 + 7 * DAY, output="arrow", progress=False).equals(table)
    import pandas.testing

    fresh = emu.client(cache=False)
    pandas.testing.assert_frame_equal(
        again.events(D0, D0 + 7 * DAY, output="pandas", progress=False),
        fresh.events(D0, D0 + 7 * DAY, output="pandas", progress=False),
    )
    pytest.importorskip("polars")
    got = again.events(D0, D0 + 7 * DAY, output="polars", progress=False)
    assert got.equals(fresh.events(D0, D0 + 7 * DAY, output="polars", progress=False))
    assert list(again.iter_events(D0, D0 + 7 * DAY)) == want
    batches = pa.RecordBatchReader.from_stream(again.event_batches(D0, D0 + 7 * DAY))
    assert pa.Table.from_batches(list(batches)).to_pylist() == table.to_pylist()

    async def read_async():
        client = emu.async_client(cache=tmp_path)
        dicts = await client.events(D0, D0 + 7 * DAY, progress=False)
        arrow = await client.events(D0, D0 + 7 * DAY, output="arrow")
        one_by_one = [e async for e in client.iter_events(D0, D0 + 7 * DAY)]
        rows = 0
        async for batch in client.event_batches(D0, D0 + 7 * DAY):
            rows += pa.record_batch(batch).num_rows
        return client, dicts, arrow, one_by_one, rows

    client, dicts, arrow, one_by_one, rows = asyncio.run(read_async())
    assert dicts == want and one_by_one == want and rows == len(want)
    assert arrow.equals(table)
    assert event_requests(again) == 0 and event_requests(client) == 0
    assert again.stats()["requests_saved"] >= len(want) // 100
    assert again.last_cost is not None


def test_an_overlapping_range_costs_only_its_new_part(emu, quota, tmp_path):
    alone = emu.client(cache=False)
    alone.events(D0 + 7 * DAY, D0 + 10 * DAY, progress=False)
    new_part = event_requests(alone)
    client = emu.client(cache=tmp_path)
    client.events(D0, D0 + 7 * DAY, progress=False)
    before = event_requests(client)
    got = client.events(D0 + 3 * DAY, D0 + 10 * DAY, progress=False)
    assert ids(got) == emu.truth(D0 + 3 * DAY, D0 + 10 * DAY)
    assert event_requests(client) - before <= new_part + 1
    # A range inside what is held costs nothing.
    before = event_requests(client)
    inside = client.events(D0 + 4 * DAY + dt.timedelta(hours=5), D0 + 9 * DAY, progress=False)
    assert ids(inside) == emu.truth(D0 + 4 * DAY + dt.timedelta(hours=5), D0 + 9 * DAY)
    assert event_requests(client) == before


def test_plan_events_counts_cached_windows_as_free(emu, tmp_path):
    client = emu.client(cache=tmp_path)
    n = len(client.events(D0, D0 + 3 * DAY, progress=False))
    plan = client.plan_events(D0, D0 + 3 * DAY, progress=False)
    assert plan.events == n and plan.probes == 0 and plan.requests <= 1


def test_the_settle_period_is_fetched_again_and_a_refresh_replaces_the_rest(tmp_path):
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    start = (now - 2 * DAY).date()
    with sv.Emulator(sites=3, days=3, events_per_day=500, start=start) as emu:
        client = emu.client(cache=tmp_path, settle="1h")
        lo = dt.datetime.combine(start, dt.time(), dt.timezone.utc)
        first = client.events(lo, now, progress=False)
        assert ids(first) == emu.truth(lo, now)
        late = emu.add_events(now - dt.timedelta(minutes=20), 2, created_at=now)
        settled = emu.add_events(now - dt.timedelta(hours=3), 1, created_at=now)
        before = event_requests(client)
        second = ids(client.events(lo, now, progress=False))
        assert set(late) <= set(second)
        assert not set(settled) & set(second)
        assert event_requests(client) - before <= 3  # the last hour alone
        refreshed = ids(client.events(lo, now, progress=False, refresh=True))
        assert refreshed == emu.truth(lo, now)
        assert ids(client.events(lo, now, progress=False)) == refreshed


def test_a_damaged_file_is_warned_about_and_fetched_again(emu, tmp_path, caplog):
    client = emu.client(cache=tmp_path)
    want = client.events(D0, D0 + 2 * DAY, progress=False)
    files = sorted(tmp_path.rglob("*_*_*.json"))
    assert files
    data = files[0].read_bytes()
    files[0].write_bytes(data[: len(data) // 2])
    again = emu.client(cache=tmp_path)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        got = again.events(D0, D0 + 2 * DAY, progress=False)
    assert got == want
    assert event_requests(again) > 0
    assert any("truncated" in r.getMessage() for r in caplog.records), caplog.records
    # Fetched again, and kept whole this time.
    third = emu.client(cache=tmp_path)
    assert third.events(D0, D0 + 2 * DAY, progress=False) == want
    assert event_requests(third) == 0


def test_accounts_on_one_base_url_are_kept_apart_and_no_secret_is_on_disk(tmp_path):
    secrets = []
    with sv.Emulator(seed=1, sites=3, days=2, events_per_day=300) as one:
        port = int(one.url.rsplit(":", 1)[1])
        a = one.client(cache=tmp_path)
        got_one = ids(a.events(one.start, one.end, progress=False))
        assert got_one == one.truth(one.start, one.end)
        secrets += [one.api_key, one.client_secret, one.client_id]
    with sv.Emulator(seed=2, sites=3, days=2, events_per_day=300, port=port) as two:
        assert two.url.endswith(f":{port}")
        b = two.client(cache=tmp_path)
        got_two = ids(b.events(two.start, two.end, progress=False))
        assert got_two == two.truth(two.start, two.end)
        assert event_requests(b) > 0
        assert not set(got_one) & set(got_two)
        secrets += [two.api_key, two.client_secret, two.client_id]
        info = b.cache_info()
    assert len({e["account"] for e in info["entries"]}) == 2
    for path in tmp_path.rglob("*"):
        text = str(path) + (path.read_text(errors="replace") if path.is_file() else "")
        for secret in secrets:
            assert secret not in text, path
    if os.name == "posix":
        for path in [tmp_path, *tmp_path.rglob("*")]:
            if path.is_dir() and path != tmp_path:
                assert path.stat().st_mode & 0o777 == 0o700, path


def test_loopback_clients_have_no_cache_unless_asked(emu, tmp_path, monkeypatch):
    monkeypatch.delenv("SURVEILLANCE_CACHE", raising=False)
    assert emu.client().cache_info() is None
    assert emu.client().clear_cache() == 0
    assert emu.client(cache=tmp_path).cache_info()["path"] == str(tmp_path)
    monkeypatch.setenv("SURVEILLANCE_CACHE", str(tmp_path / "env"))
    assert emu.client().cache_info()["path"] == str(tmp_path / "env")
    assert emu.client(cache=False).cache_info() is None
    monkeypatch.setenv("SURVEILLANCE_CACHE", "0")
    remote = dict(api_key="k", client_id="i", client_secret="s", base_url="https://api.test")
    assert sv.Client(**remote).cache_info() is None
    monkeypatch.delenv("SURVEILLANCE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        path = sv.Client(**remote).cache_info()["path"]
        assert path == str(tmp_path / "xdg" / "surveillance" / "events")
    with pytest.raises(TypeError, match="cache"):
        sv.Client(**remote, cache=3)
    with pytest.raises(ValueError, match="settle"):
        sv.Client(**remote, settle="soon")


def test_a_client_pickles_with_its_cache(emu, tmp_path):
    import pickle

    client = pickle.loads(pickle.dumps(emu.client(cache=tmp_path, settle="2h")))
    assert client.cache_info()["path"] == str(tmp_path)
    assert client._inner.config()["settle"] == 7200.0


def test_the_cap_evicts_the_least_recently_used_windows(emu, tmp_path):
    client = emu.client(cache=tmp_path, cache_max_bytes=2_000_000)
    for day in range(6):
        want = client.events(D0 + day * DAY, D0 + (day + 1) * DAY, progress=False)
        assert ids(want) == emu.truth(D0 + day * DAY, D0 + (day + 1) * DAY)
    info = client.cache_info()
    assert 0 < info["bytes"] <= 2_000_000
    held = info["entries"][0]["ranges"]
    assert held[-1][1] == D0 + 6 * DAY  # the most recent read is kept
    assert held[0][0] > D0  # the oldest went
    assert client.clear_cache() > 0
    assert client.cache_info()["files"] == 0


def test_progress_shows_the_requests_saved(emu, tmp_path):
    client = emu.client(cache=tmp_path)
    client.events(D0, D0 + 2 * DAY, progress=False)
    updates: list = []
    client.events(D0, D0 + 2 * DAY, progress=updates.append)
    assert updates and updates[-1]["saved"] >= 1 and updates[-1]["requests"] == 0


READER = textwrap.dedent(
    """
    import json, sys, surveillance as sv
    lo, hi, cache = sys.argv[1], sys.argv[2], sys.argv[3]
    client = sv.Client(cache=cache, limits=sv.Limits.unlimited())
    print(json.dumps([e["id"] for e in client.events(lo, hi, progress=False)]))
    """
)


def test_two_processes_fill_one_cache_at_once(tmp_path):
    ranges = [("2026-01-05", "2026-01-09"), ("2026-01-07", "2026-01-11")]
    with emulator_command("--sites", "4", "--days", "7", "--events-per-day", "2000") as emulator:
        env = service_env(**emulator.exports)
        fresh = sv.Client(cache=False, limits=sv.Limits.unlimited(), **_settings(emulator))
        want = [ids(fresh.events(lo, hi, progress=False)) for lo, hi in ranges]
        cache = tmp_path / "cache"
        for _ in range(10):
            sv.Client(cache=cache, **_settings(emulator)).clear_cache()
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", READER, lo, hi, str(cache)],
                    stdout=subprocess.PIPE,
                    env=env,
                    text=True,
                )
                for lo, hi in ranges
            ]
            for proc, expected in zip(procs, want):
                out, _ = proc.communicate(timeout=60)
                assert proc.returncode == 0
                assert json.loads(out) == expected
            assert not [p for p in cache.rglob(".tmp-*")]
            # Every file is whole: served again with no request, exactly.
            client = sv.Client(cache=cache, **_settings(emulator))
            for (lo, hi), expected in zip(ranges, want):
                assert ids(client.events(lo, hi, progress=False)) == expected
            assert event_requests(client) == 0


def _settings(emulator) -> dict:
    x = emulator.exports
    return dict(
        api_key=x["SURVEILLANCE_API_KEY"],
        client_id=x["SURVEILLANCE_CLIENT_ID"],
        client_secret=x["SURVEILLANCE_CLIENT_SECRET"],
        base_url=x["SURVEILLANCE_BASE_URL"],
        audience=x["SURVEILLANCE_AUDIENCE"],
    )


def test_the_cli_exports_from_the_cache_and_shows_and_clears_it(tmp_path):
    options = ("--sites", "3", "--days", "3", "--events-per-day", "400", "--daily-requests", "900")
    with emulator_command(*options) as emulator:
        cache = tmp_path / "cache"
        env = service_env(**emulator.exports, SURVEILLANCE_CACHE=str(cache))

        def cli(*args: str) -> str:
            run = subprocess.run(
                [sys.executable, "-m", "surveillance.cli", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert run.returncode == 0, run.stderr
            return run.stdout

        outputs = []
        for n in (1, 2):
            out = tmp_path / f"events{n}.jsonl"
            said = cli("events", "--start", "2026-01-05", "--end", "2026-01-08", "-o", str(out))
            outputs.append(out.read_text())
            requests = int(re.search(r": ([\d,]+) requests?", said).group(1).replace(",", ""))
            assert (requests > 0) if n == 1 else (requests == 0), said
        assert outputs[0] == outputs[1] and outputs[0].count("\n") == 1200
        info = json.loads(cli("cache", "info", "--json"))
        assert info["files"] >= 1 and info["entries"][0]["events"] == outputs[0].count("\n")
        assert "2026-01-05 00:00:00 to 2026-01-08 00:00:00 UTC" in cli("cache", "info")
        assert "removed" in cli("cache", "clear")
        assert json.loads(cli("cache", "info", "--json"))["files"] == 0
        assert not any(p.is_file() for p in pathlib.Path(cache).rglob("*"))
