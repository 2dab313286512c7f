"""The cache of settled events, against an emulator in its own process (``DRIVER``) with a
daily quota set, as a user's service is: a re-read costs no request and returns what a fresh
read does, in every output and path; overlapping reads fetch only their new part; events that
change within the settle period are read again, those that change after it only on a refresh;
damaged files; two processes filling one cache; accounts kept apart; no secret on disk; the
size cap; the requests saved; ``cache_info``, ``clear_cache``, ``plan_events`` and the CLI."""

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
from typing import Any

import pyarrow as pa
import pytest
import surveillance as sv

from conftest import emulator_command, service_env

DAY = dt.timedelta(days=1)
D0 = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
EVENTS = "GET /v2/events"
#: The daily quota the emulators enforce and their clients know.
QUOTA = 100_000

DRIVER = textwrap.dedent(
    """
    import json, sys, surveillance as sv
    options = json.loads(sys.argv[1])
    quota = options.pop("daily_requests")
    calls = {"truth", "stats", "reset_stats", "add_events", "update_event", "advance_clock"}
    with sv.Emulator(**options) as emu:
        emu.set_limits(daily_requests=quota)
        names = ("url", "eu_url", "api_key", "client_id", "client_secret", "audience")
        print(json.dumps({name: getattr(emu, name) for name in names}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            if command["call"] == "quit":
                break
            try:
                if command["call"] not in calls:
                    raise ValueError(f"no call {command['call']!r}")
                method = getattr(emu, command["call"])
                answer = {"result": method(*command["args"], **command["kwargs"])}
            except Exception as e:
                answer = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(answer, default=str), flush=True)
    """
)


class Remote:
    """An emulator in a child process (``DRIVER``) that enforces a daily quota of ``quota``:
    its settings, clients of it that know the quota, and its methods called over a pipe, one
    JSON line each way."""

    def __init__(self, quota: int = QUOTA, **options: Any) -> None:
        self.quota = quota
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps({**options, "daily_requests": quota})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=service_env(),
        )
        self.settings = self._read()

    def _read(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the emulator process ended ({self.proc.wait()})"
        return json.loads(line)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The emulator's method ``name`` (times as ISO strings), run in its process."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"call": name, "args": args, "kwargs": kwargs}) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        assert "error" not in answer, answer["error"]
        return answer["result"]

    def truth(self, start: dt.datetime, end: dt.datetime) -> list:
        return self.call("truth", start.isoformat(), end.isoformat())

    def served(self) -> int:
        """``GET /v2/events`` answered 200 so far."""
        return self.call("stats")["requests"].get(EVENTS, {}).get("200", 0)

    def account(self) -> dict:
        """The arguments of a client of it (its credentials and URLs)."""
        x = self.settings
        return dict(
            api_key=x["api_key"],
            client_id=x["client_id"],
            client_secret=x["client_secret"],
            base_url=x["url"],
            eu_base_url=x["eu_url"],
            audience=x["audience"],
        )

    def limits(self) -> sv.Limits:
        """No rate limit, and its daily quota."""
        return sv.Limits(None, None, None, None, self.quota)

    def client(self, **kwargs: Any) -> sv.Client:
        return sv.Client(**self.account(), limits=self.limits(), **kwargs)

    def async_client(self, **kwargs: Any) -> sv.AsyncClient:
        return sv.AsyncClient(**self.account(), limits=self.limits(), **kwargs)

    def env(self, **extra: str) -> dict:
        """A child's environment for the CLI: its service, its daily quota, and ``extra``."""
        x = self.settings
        return service_env(
            SURVEILLANCE_BASE_URL=x["url"],
            SURVEILLANCE_EU_BASE_URL=x["eu_url"],
            SURVEILLANCE_API_KEY=x["api_key"],
            SURVEILLANCE_CLIENT_ID=x["client_id"],
            SURVEILLANCE_CLIENT_SECRET=x["client_secret"],
            SURVEILLANCE_AUDIENCE=x["audience"],
            SURVEILLANCE_DAILY_REQUESTS=str(self.quota),
            **extra,
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"call": "quit"}) + "\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@pytest.fixture(scope="module")
def remote():
    with Remote(sites=5, days=10, events_per_day=2000) as r:
        yield r


def event_requests(client) -> int:
    return client.stats()["requests"].get(EVENTS, 0)


def ids(events) -> list:
    return [e["id"] for e in events]


def test_the_same_range_twice_costs_no_request_in_every_output(remote, tmp_path):
    first = remote.client(cache=tmp_path)
    want = first.events(D0, D0 + 7 * DAY, progress=False)
    assert ids(want) == remote.truth(D0, D0 + 7 * DAY)
    assert event_requests(first) > 0
    table = first.events(D0, D0 + 7 * DAY, output="arrow", refresh=True, progress=False)
    again = remote.client(cache=tmp_path)
    assert again.events(D0, D0 + 7 * DAY, progress=False) == want
    assert again.events(D0, D0 + 7 * DAY, output="arrow", progress=False).equals(table)
    import pandas.testing

    fresh = remote.client(cache=False)
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
        client = remote.async_client(cache=tmp_path)
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


def test_an_overlapping_range_costs_only_its_new_part(remote, tmp_path):
    alone = remote.client(cache=False)
    alone.events(D0 + 7 * DAY, D0 + 10 * DAY, progress=False)
    new_part = event_requests(alone)
    client = remote.client(cache=tmp_path)
    client.events(D0, D0 + 7 * DAY, progress=False)
    before = event_requests(client)
    got = client.events(D0 + 3 * DAY, D0 + 10 * DAY, progress=False)
    assert ids(got) == remote.truth(D0 + 3 * DAY, D0 + 10 * DAY)
    assert event_requests(client) - before <= new_part + 1
    # A range inside what is held costs nothing.
    before = event_requests(client)
    inside = client.events(D0 + 4 * DAY + dt.timedelta(hours=5), D0 + 9 * DAY, progress=False)
    assert ids(inside) == remote.truth(D0 + 4 * DAY + dt.timedelta(hours=5), D0 + 9 * DAY)
    assert event_requests(client) == before


def test_plan_events_counts_cached_windows_as_free(remote, tmp_path):
    client = remote.client(cache=tmp_path)
    n = len(client.events(D0, D0 + 3 * DAY, progress=False))
    plan = client.plan_events(D0, D0 + 3 * DAY, progress=False)
    assert plan.events == n and plan.probes == 0 and plan.requests <= 1


def test_the_settle_period_is_fetched_again_and_a_refresh_replaces_the_rest(tmp_path):
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    start = (now - 2 * DAY).date()
    lo = dt.datetime.combine(start, dt.time(), dt.timezone.utc)
    with Remote(sites=3, days=3, events_per_day=500, start=str(start)) as remote:
        at = dt.datetime.isoformat
        # An event within the settle period and one long settled, whatever the hour (the
        # generated events follow the sites' opening hours).
        [recent_id] = remote.call("add_events", at(now - 30 * MINUTE), 1)
        [old_id] = remote.call("add_events", at(now - 5 * HOUR), 1)
        client = remote.client(cache=tmp_path, settle="1h")
        first = client.events(lo, now, progress=False)
        assert ids(first) == remote.truth(lo, now)
        late = remote.call("add_events", at(now - 20 * MINUTE), 2, created_at=at(now))
        settled = remote.call("add_events", at(now - 3 * HOUR), 1, created_at=at(now))
        # One event changes within the settle period, one after it had settled.
        recent = next(e for e in first if e["id"] == recent_id)
        old = next(e for e in first if e["id"] == old_id)
        recent_now = remote.call("update_event", recent["id"], confirmed=not confirmed(recent))
        old_now = remote.call("update_event", old["id"], confirmed=not confirmed(old))
        assert recent_now != recent and old_now != old
        before = event_requests(client)
        second = {e["id"]: e for e in client.events(lo, now, progress=False)}
        assert set(late) <= set(second)
        assert not set(settled) & set(second)
        assert second[recent["id"]] == recent_now  # read again: the change shows
        assert second[old["id"]] == old  # served from the cache: it does not, yet
        assert event_requests(client) - before <= 3  # the last hour alone
        refreshed = client.events(lo, now, progress=False, refresh=True)
        assert ids(refreshed) == remote.truth(lo, now)
        assert {e["id"]: e for e in refreshed}[old["id"]] == old_now
        assert client.events(lo, now, progress=False) == refreshed


MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)


def confirmed(event: dict) -> bool:
    return bool(event["details"].get("confirmed"))


def test_a_damaged_file_is_warned_about_and_fetched_again(remote, tmp_path, caplog):
    client = remote.client(cache=tmp_path)
    want = client.events(D0, D0 + 2 * DAY, progress=False)
    files = sorted(tmp_path.rglob("*_*_*.json"))
    assert files
    data = files[0].read_bytes()
    files[0].write_bytes(data[: len(data) // 2])
    again = remote.client(cache=tmp_path)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        got = again.events(D0, D0 + 2 * DAY, progress=False)
    assert got == want
    assert event_requests(again) > 0
    assert any("truncated" in r.getMessage() for r in caplog.records), caplog.records
    # Fetched again, and kept whole this time.
    third = remote.client(cache=tmp_path)
    assert third.events(D0, D0 + 2 * DAY, progress=False) == want
    assert event_requests(third) == 0


def test_accounts_on_one_base_url_are_kept_apart_and_no_secret_is_on_disk(tmp_path):
    secrets = []
    span = (D0, D0 + 2 * DAY)
    with Remote(seed=1, sites=3, days=2, events_per_day=300) as one:
        port = int(one.settings["url"].rsplit(":", 1)[1])
        a = one.client(cache=tmp_path)
        got_one = ids(a.events(*span, progress=False))
        assert got_one == one.truth(*span)
        secrets += [one.settings[k] for k in ("api_key", "client_secret", "client_id")]
    with Remote(seed=2, sites=3, days=2, events_per_day=300, port=port) as two:
        assert two.settings["url"].endswith(f":{port}")
        b = two.client(cache=tmp_path)
        got_two = ids(b.events(*span, progress=False))
        assert got_two == two.truth(*span)
        assert event_requests(b) > 0
        assert not set(got_one) & set(got_two)
        secrets += [two.settings[k] for k in ("api_key", "client_secret", "client_id")]
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


def test_loopback_clients_have_no_cache_unless_asked(remote, tmp_path, monkeypatch):
    monkeypatch.delenv("SURVEILLANCE_CACHE", raising=False)
    assert remote.client().cache_info() is None
    assert remote.client().clear_cache() == 0
    # An existing directory is the user's: the cache keeps to a folder of its own in it.
    own = str(tmp_path / "surveillance-cache")
    assert remote.client(cache=tmp_path).cache_info()["path"] == own
    assert remote.client(cache=tmp_path)._inner.cache_dir == own
    monkeypatch.setenv("SURVEILLANCE_CACHE", str(tmp_path / "env"))
    assert remote.client().cache_info()["path"] == str(tmp_path / "env")
    assert remote.client(cache=False).cache_info() is None
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


def test_a_client_pickles_with_its_cache(remote, tmp_path):
    import pickle

    client = pickle.loads(pickle.dumps(remote.client(cache=tmp_path, settle="2h")))
    assert client.cache_info()["path"] == str(tmp_path / "surveillance-cache")
    assert client._inner.config()["settle"] == 7200.0


def test_the_cap_evicts_the_least_recently_used_windows(remote, tmp_path):
    client = remote.client(cache=tmp_path, cache_max_bytes=2_000_000)
    for day in range(6):
        want = client.events(D0 + day * DAY, D0 + (day + 1) * DAY, progress=False)
        assert ids(want) == remote.truth(D0 + day * DAY, D0 + (day + 1) * DAY)
    info = client.cache_info()
    assert 0 < info["bytes"] <= 2_000_000
    held = info["entries"][0]["ranges"]
    assert held[-1][1] == D0 + 6 * DAY  # the most recent read is kept
    assert held[0][0] > D0  # the oldest went
    assert client.clear_cache() > 0
    assert client.cache_info()["files"] == 0


def test_progress_and_stats_show_the_requests_saved(remote, tmp_path):
    first = remote.client(cache=tmp_path)
    first.events(D0, D0 + 2 * DAY, progress=False)
    spent = event_requests(first)
    client = remote.client(cache=tmp_path)
    updates: list = []
    client.events(D0, D0 + 2 * DAY, progress=updates.append)
    # Saved: exactly what the read that filled the cache spent.
    assert updates and updates[-1]["saved"] == spent and updates[-1]["requests"] == 0
    assert client.stats()["requests_saved"] == spent


READER = textwrap.dedent(
    """
    import json, sys, surveillance as sv
    lo, hi, cache = sys.argv[1], sys.argv[2], sys.argv[3]
    client = sv.Client(cache=cache, limits=sv.Limits(None, None, None, None, 100_000))
    print(json.dumps([e["id"] for e in client.events(lo, hi, progress=False)]))
    """
)


def test_two_processes_fill_one_cache_at_once(tmp_path):
    ranges = [("2026-01-05", "2026-01-09"), ("2026-01-07", "2026-01-11")]
    options = ("--sites", "4", "--days", "7", "--events-per-day", "2000")
    with emulator_command(*options, "--daily-requests", str(QUOTA)) as emulator:
        env = service_env(**emulator.exports)
        fresh = sv.Client(
            cache=False, limits=sv.Limits(None, None, None, None, QUOTA), **_settings(emulator)
        )
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
            client = sv.Client(
                cache=cache, limits=sv.Limits(daily_requests=QUOTA), **_settings(emulator)
            )
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
        # Only the mark of the cache's directory is left.
        assert [p.name for p in cache.rglob("*") if p.is_file()] == ["CACHEDIR.TAG"]


# --- what the cache may touch, and what it may serve -----------------------------------------

#: A user's files in a folder that the cache is pointed at (paths, contents): names that a cache
#: of the earlier format also used.
USERS_FILES = {
    "notes.txt": "mine",
    "123.json": "[1, 2, 3]",
    "orders.pages": "page one",
    ".tmp-build": "scratch",
    "project/account.json": '{"user": "me"}',
    "project/shape.json": '{"width": 3}',
    "project/events/10_20_1_1.json": "{}",
    "project/empty/.keep": "",
}


def users_folder(path: pathlib.Path, mode: int = 0o755) -> dict:
    """A folder of a user's own files (`USERS_FILES`, and an empty sub-folder) at ``path``, of
    ``mode``; what it holds (see `snapshot`)."""
    path.mkdir()
    for name, text in USERS_FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / "nothing").mkdir()
    os.chmod(path, mode)
    return snapshot(path)


def snapshot(path: pathlib.Path) -> dict:
    """Every file and folder under ``path`` (itself included): its mode, and a file's text."""
    out = {".": (stat_mode(path), None)}
    for p in sorted(path.rglob("*")):
        out[str(p.relative_to(path))] = (stat_mode(p), p.read_text() if p.is_file() else None)
    return out


def stat_mode(path: pathlib.Path) -> int:
    return path.stat().st_mode & 0o7777


def cache_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "surveillance.cli", "cache", *args],
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(os.name != "posix", reason="modes")
def test_cache_clear_refuses_a_folder_that_is_not_a_cache_and_deletes_nothing(tmp_path):
    folder = tmp_path / "work"
    before = users_folder(folder)
    for action in ("clear", "info"):
        run = cache_cli(action, "--dir", str(folder))
        if action == "clear":
            assert run.returncode == 2, (run.stdout, run.stderr)
            assert "CACHEDIR.TAG" in run.stderr and "nothing" in run.stderr, run.stderr
            assert run.stderr.count("\n") == 1 and not run.stdout, run.stderr
        else:
            assert run.returncode == 0 and " 0 files" in run.stdout, run.stderr
        assert snapshot(folder) == before
    # A file is no cache: one line, exit 2.
    for action in ("clear", "info"):
        run = cache_cli(action, "--dir", str(folder / "notes.txt"))
        assert run.returncode == 2 and not run.stdout, (run.stdout, run.stderr)
        assert run.stderr.count("\n") == 1 and "not a directory" in run.stderr, run.stderr
    assert snapshot(folder) == before


@pytest.mark.skipif(os.name != "posix", reason="modes")
@pytest.mark.parametrize("mode", [0o1777, 0o755], ids=["shared-1777", "users-0755"])
def test_a_cache_in_a_users_folder_keeps_to_a_private_folder_of_its_own(remote, tmp_path, mode):
    folder = tmp_path / "work"
    before = users_folder(folder, mode)
    client = remote.client(cache=folder)
    want = client.events(D0, D0 + DAY, progress=False)
    assert ids(want) == remote.truth(D0, D0 + DAY)
    own = folder / "surveillance-cache"
    assert client.cache_info()["path"] == str(own)
    # The folder is as it was, but for the cache's own private, marked folder in it.
    after = snapshot(folder)
    assert {k: v for k, v in after.items() if not k.startswith("surveillance-cache")} == before
    assert stat_mode(folder) == mode
    assert (
        (own / "CACHEDIR.TAG")
        .read_text()
        .startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    )
    for path in [own, *own.rglob("*")]:
        assert stat_mode(path) == (0o700 if path.is_dir() else 0o600), path
    again = remote.client(cache=folder)
    assert again.events(D0, D0 + DAY, progress=False) == want and event_requests(again) == 0
    # Cleared: the cache's files go, the user's stay.
    assert cache_cli("clear", "--dir", str(folder)).returncode == 0
    assert again.cache_info()["files"] == 0
    after = snapshot(folder)
    assert {k: v for k, v in after.items() if not k.startswith("surveillance-cache")} == before


@pytest.mark.skipif(os.name != "posix", reason="modes")
def test_a_read_only_folder_is_refused_and_left_as_it_was(remote, tmp_path):
    folder = tmp_path / "work"
    before = users_folder(folder, 0o500)
    try:
        with pytest.raises(sv.ConfigError, match="read-only"):
            remote.client(cache=folder)
        with pytest.raises(sv.ConfigError, match="read-only"):
            remote.client(cache=folder / "cache")
        assert snapshot(folder) == before
    finally:
        os.chmod(folder, 0o755)


@pytest.mark.skipif(os.name != "posix", reason="modes")
def test_the_cache_and_the_quota_ledger_are_private_whatever_the_umask(
    remote, tmp_path, monkeypatch
):
    quota = tmp_path / "quota" / "ledgers"
    monkeypatch.setenv("SURVEILLANCE_QUOTA_DIR", str(quota))
    cache = tmp_path / "made" / "cache"
    old = os.umask(0)
    try:
        client = remote.client(cache=cache)
        client.events(D0, D0 + DAY, progress=False)
        client.sync_events(tmp_path / "ds", start=D0, until=D0 + DAY)
    finally:
        os.umask(old)
    assert client.cache_info()["path"] == str(cache)
    made = [tmp_path / "made", *(tmp_path / "made").rglob("*"), tmp_path / "quota"]
    made += quota.rglob("*")
    assert any(p.name.startswith("quota-") for p in made)
    assert any(p.name == "shape.json" for p in made)
    for path in made:
        assert stat_mode(path) == (0o700 if path.is_dir() else 0o600), path


def test_a_file_of_another_window_is_warned_about_and_fetched_again(remote, tmp_path, caplog):
    client = remote.client(cache=tmp_path)
    want = client.events(D0, D0 + 6 * DAY, progress=False)
    files = sorted(tmp_path.rglob("*_*_*_*.json"), key=lambda p: int(p.name.split("_")[2]))
    assert len(files) >= 2
    # A whole, valid file of the smallest window, under the name of the largest.
    small, large = files[0], files[-1]
    large.write_bytes(small.read_bytes())
    again = remote.client(cache=tmp_path)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        got = again.events(D0, D0 + 6 * DAY, progress=False)
    assert len(got) == len(want) and got == want
    assert event_requests(again) > 0
    assert any("another window" in r.getMessage() for r in caplog.records), caplog.records


def test_a_report_id_is_cached_as_given(remote, tmp_path):
    report = remote.client(cache=False).reports()[0]["id"]
    client = remote.client(cache=tmp_path)
    lower = client.events(D0, D0 + 2 * DAY, report_id=report.lower(), progress=False)
    upper = remote.client(cache=tmp_path)
    # Asked of the service as given (which here matches ids whatever their case), never
    # served from what another id's read kept.
    assert upper.events(D0, D0 + 2 * DAY, report_id=report.upper(), progress=False) == lower
    assert event_requests(upper) > 0
    again = remote.client(cache=tmp_path)
    assert again.events(D0, D0 + 2 * DAY, report_id=report.upper(), progress=False) == lower
    assert event_requests(again) == 0


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
@pytest.mark.parametrize("link", ["account", "events"])
def test_a_link_in_the_cache_is_never_followed_to_write_or_clear(remote, tmp_path, caplog, link):
    cache = tmp_path / "cache"
    client = remote.client(cache=cache)
    want = client.events(D0, D0 + DAY, progress=False)
    [account] = [p for p in cache.iterdir() if p.is_dir()]
    # A folder of the user's, holding what an account of the cache holds, and the cache's
    # account folder (or its events folder) replaced by a link to it.
    mine = tmp_path / "mine"
    (mine / "events").mkdir(parents=True)
    (mine / "account.json").write_text('{"user": "me"}')
    (mine / "shape.json").write_text("{}")
    (mine / "events" / "10_20_1_1.json").write_text("{}")
    (mine / "events" / "notes.txt").write_text("mine")
    before = snapshot(mine)
    replaced = account if link == "account" else account / "events"
    target = mine if link == "account" else mine / "events"
    for path in sorted(replaced.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    replaced.rmdir()
    replaced.symlink_to(target, target_is_directory=True)

    again = remote.client(cache=cache)
    with caplog.at_level(logging.WARNING, logger="surveillance"):
        assert again.events(D0, D0 + DAY, progress=False) == want
    assert event_requests(again) > 0  # nothing served through the link
    said = [r.getMessage() for r in caplog.records]
    assert any("symbolic link" in m and str(replaced) in m for m in said), said
    assert snapshot(mine) == before
    # Cleared: the link goes (never what it points to), exit 0.
    run = cache_cli("clear", "--dir", str(cache))
    assert run.returncode == 0, run.stderr
    assert snapshot(mine) == before
    assert not os.path.lexists(replaced)
