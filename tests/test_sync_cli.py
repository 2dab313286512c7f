"""`surveillance sync` as a user of the command line meets it, against an emulator in a process
of its own: a progress bar, and Ctrl-C that keeps every request the run paid for."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from conftest import console_script, emulator_command, run_in_pty, service_env, sigint_default

#: The emulator's days: 2026-01-05 to 2026-01-08.
RANGE = ["--start", "2026-01-05", "--until", "2026-01-08"]


@pytest.fixture(scope="module")
def service():
    """An emulator of 3 days of 3,000 events (about 100 pages) in a process of its own."""
    with emulator_command(
        "--seed", "7", "--sites", "6", "--days", "3", "--events-per-day", "3000"
    ) as e:
        yield e


def _env(service, tmp_path, name: str, cache: bool = True, **extra: str) -> dict:
    """The environment of a run set `name`: its own ledger of requests and cache (or none)."""
    quota = tmp_path / name / "quota"
    quota.mkdir(parents=True, exist_ok=True)
    return service_env(
        **service.exports,
        SURVEILLANCE_QUOTA_DIR=str(quota),
        SURVEILLANCE_CACHE=str(tmp_path / name / "cache") if cache else "0",
        PYTHONUNBUFFERED="1",
        **extra,
    )


def _used(env: dict) -> int:
    """Requests counted in the ledger of the environment's key and service."""
    out = subprocess.run(
        [*console_script(), "quota", "--json"], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["used"])


def _rows(path: Path) -> list:
    table = ds.dataset(str(path), partitioning="hive").to_table(columns=["id", "startTime"])
    return sorted(zip(table.column("id").to_pylist(), table.column("startTime").to_pylist()))


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
@pytest.mark.parametrize("daily", ["2400", "0"], ids=["daily-budget", "no-budget"])
def test_ctrl_c_keeps_what_the_sync_fetched_and_the_next_run_asks_none_of_it_again(
    service, tmp_path, daily, cache
):
    # The provider's 3 requests in flight: those in flight at the signal are answered before
    # the run ends, and kept; the bound's 2 requests: the second process's token, and one
    # spare.
    rate = ["--read-per-second", "25", "--read-concurrency", "3", "--daily-requests", daily]
    # One uninterrupted run: the requests it takes, and the dataset.
    whole_env = _env(service, tmp_path, "whole", cache)
    whole = tmp_path / "whole" / "data"
    out = subprocess.run(
        [*console_script(), "sync", str(whole), *RANGE, *rate],
        capture_output=True,
        text=True,
        timeout=120,
        env=whole_env,
    )
    assert out.returncode == 0, out.stderr
    once = _used(whole_env)
    assert once > 40, out.stdout  # long enough to be interrupted in the middle

    # A run interrupted with Ctrl-C (SIGINT to a child that takes it, whatever this process
    # inherited) in the middle of a window, then a run that goes on.
    env = _env(service, tmp_path, "parts", cache)
    data = tmp_path / "parts" / "data"
    proc = subprocess.Popen(
        [*console_script(), "sync", str(data), *RANGE, *rate],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=sigint_default,
    )
    # About a third of the way: the ledger counts its requests as they are sent.
    deadline = time.monotonic() + 60
    while _used(env) < once // 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("the sync ended before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "surveillance: interrupted: " in stderr, stderr
    [said] = [line for line in stderr.splitlines() if "interrupted" in line]
    assert "the next run goes on from there" in said, said
    interrupted = _used(env)
    assert 0 < interrupted < once
    # What was kept: the windows received, stored (a fetch without a daily budget reads the
    # range as one large window, which may not be done); what was read past them, beside the
    # dataset (the resumed run's requests say it).
    if "no window whole" not in said:
        assert "events added" in said, said
        assert list(data.glob("date=*/part-0.parquet")), "the windows received are stored"
    out = subprocess.run(
        [*console_script(), "sync", str(data), *RANGE, *rate],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    both = _used(env)
    assert both <= once + 2, (interrupted, both - interrupted, once)
    assert _rows(data) == _rows(whole)
    print(f"requests: {interrupted} interrupted + {both - interrupted} resumed, {once} at once")


def test_the_sync_draws_the_events_bar(service, tmp_path):
    env = _env(service, tmp_path, "bar", COLUMNS="160")
    argv = [*console_script(), "sync", str(tmp_path / "data"), *RANGE, "--read-per-second", "50"]
    status, out = run_in_pty(argv, env, tmp_path)
    assert status == 0, out
    # The bar of `events`: events, requests beside those expected, time left.
    assert "sync:" in out, out
    assert " events, " in out and " requests" in out, out
    assert "~" in out and " left" in out, out
