"""The daily quota as a user of the command line meets it: a local emulator that never makes
the published 2,400 bite, no ledger left behind by an emulator, one line (and its own exit
status) when the quota stops a command, and ``surveillance quota``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import surveillance as sv
from surveillance import cli

from conftest import emulator_command, emulator_fixture, other, service_env

CLI = [sys.executable, "-m", "surveillance.cli"]
FAST = ["--read-per-second", "0", "--read-concurrency", "0"]

quota_emu = emulator_fixture(seed=11, sites=3, days=1, events_per_day=300)


@pytest.fixture
def ledgers(tmp_path, monkeypatch):
    """This test's own ledger directory, for this process and its children."""
    path = tmp_path / "quota"
    path.mkdir()
    monkeypatch.setenv("SURVEILLANCE_QUOTA_DIR", str(path))
    return path


def _run(args, env, timeout=60):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_the_emulator_command_gives_its_clients_no_quota_and_leaves_no_ledger(ledgers):
    with emulator_command("--sites", "2", "--days", "1") as emulator:
        variables = emulator.exports
        assert variables["SURVEILLANCE_DAILY_REQUESTS"] == "0"
        env = service_env(**variables)
        for _ in range(3):
            assert _run(["sites", "--format", "jsonl", *FAST], env).returncode == 0
        out = _run(["quota", "--json"], env)
        assert out.returncode == 0, out.stderr
        q = json.loads(out.stdout)
        assert q["limit"] is None and q["remaining"] is None and q["used"] >= 3
        assert list(ledgers.iterdir()), "the clients count their requests in a ledger"
        emulator.proc.send_signal(signal.SIGINT)
        assert emulator.proc.wait(timeout=10) == 0
    assert not list(ledgers.iterdir()), "the emulator's ledger is removed when it stops"


def test_the_emulator_command_can_enforce_a_quota_and_tells_its_clients(ledgers):
    with emulator_command("--sites", "2", "--days", "1", "--daily-requests", "3") as emulator:
        variables = emulator.exports
        assert variables["SURVEILLANCE_DAILY_REQUESTS"] == "3"
        env = service_env(**variables)
        assert _run(["sites", "--format", "jsonl", *FAST], env).returncode == 0  # token + 1
        out = _run(["devices", "--format", "jsonl", *FAST], env)  # one request left: 2 needed
        assert out.returncode == cli.EXIT_QUOTA, out.stderr
        assert "--daily-requests" in out.stderr


def test_an_emulator_leaves_no_ledger_behind(ledgers):
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        emu.client().sites()
        emu.client(base_url=emu.url + "/v2/").sites()  # the same service
        assert len(list(ledgers.iterdir())) == 1  # one ledger per service and key
    assert not list(ledgers.iterdir())
    # Nor when it is dropped without being stopped.
    emu = sv.Emulator(sites=2, days=1, events_per_day=10)
    emu.client().sites()
    assert list(ledgers.iterdir())
    del emu
    import gc

    gc.collect()
    assert not list(ledgers.iterdir())


def test_a_publish_stopped_by_the_quota_says_so_once(quota_emu, ledgers, tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(other(i)) + "\n" for i in range(40)))
    failures = tmp_path / "failed.jsonl"
    env = service_env(quota_emu)
    out = _run(
        [
            "publish",
            str(records),
            "--batch-size",
            "1",
            "--no-progress",
            "--daily-requests",
            "10",
            "--failures",
            str(failures),
        ],
        env,
    )
    assert out.returncode == cli.EXIT_QUOTA, out.stdout + out.stderr
    # The records not sent are counted, not listed one line each.
    lines = out.stdout.splitlines()
    assert len(lines) <= 3, out.stdout
    assert "9 accepted" in lines[0] and "31 not sent" in lines[0]
    assert "quota" not in out.stdout.lower().replace("of the day", "")
    [error] = out.stderr.splitlines()
    assert error.startswith("surveillance: error: the daily quota of 10 requests")
    assert "--daily-requests" in error and "Limits(" not in error
    # ... and are written, ready to publish again.
    assert len(failures.read_text().splitlines()) == 31
    assert len(quota_emu.published()) == 9


def test_the_quota_error_names_the_flag(quota_emu, ledgers):
    env = service_env(quota_emu)
    assert _run(["sites", "--format", "jsonl", "--daily-requests", "2", *FAST], env).returncode == 0
    out = _run(["devices", "--format", "jsonl", "--daily-requests", "2", *FAST], env)
    assert out.returncode == cli.EXIT_QUOTA
    [error] = out.stderr.splitlines()
    assert "`--daily-requests`" in error and "Limits(" not in error


def test_a_sync_stopped_by_the_quota_exits_75_and_help_says_so(quota_emu, ledgers, tmp_path):
    env = service_env(quota_emu)
    args = ["sync", str(tmp_path / "ds"), "--start", "2026-01-05", *FAST]
    out = _run([*args, "--daily-requests", "3"], env)
    assert out.returncode == cli.EXIT_QUOTA == 75, out.stdout + out.stderr
    assert "stopped" in out.stdout and "quota" in out.stderr
    done = _run([*args, "--daily-requests", "0"], env)  # the next run catches up
    assert done.returncode == 0, done.stdout + done.stderr
    for command in (["sync", "--help"], ["--help"]):
        text = _run(command, env).stdout
        assert "75" in text and "quota" in text.split("exit status", 1)[1]


def test_quota_command_shows_the_day_without_spending_a_request(quota_emu, ledgers):
    env = service_env(quota_emu)
    client = quota_emu.client(limits=sv.Limits(daily_requests=100))
    client.sites()
    q = client.quota()
    before = quota_emu.stats()["daily"]["used"]
    out = _run(["quota", "--daily-requests", "100"], env)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert quota_emu.url in text
    assert "100 requests a day" in text
    assert f"used       {q['used']:,} today" in text
    assert f"remaining  {q['remaining']:,}" in text
    assert f"{q['resets_at']:%Y-%m-%d %H:%M} UTC" in text
    as_json = json.loads(_run(["quota", "--json", "--daily-requests", "100"], env).stdout)
    assert as_json["used"] == q["used"] and as_json["limit"] == 100
    assert quota_emu.stats()["daily"]["used"] == before  # nothing was sent


def test_daily_requests_defaults_to_its_variable(quota_emu, ledgers):
    env = service_env(quota_emu, SURVEILLANCE_DAILY_REQUESTS="7")
    assert json.loads(_run(["quota", "--json"], env).stdout)["limit"] == 7
    assert json.loads(_run(["quota", "--json", "--daily-requests", "5"], env).stdout)["limit"] == 5
    bad = _run(["quota"], service_env(quota_emu, SURVEILLANCE_DAILY_REQUESTS="many"))
    assert bad.returncode == 2 and "--daily-requests" in bad.stderr
    assert os.environ.get("SURVEILLANCE_DAILY_REQUESTS") is None
