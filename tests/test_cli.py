"""The ``surveillance`` command line: ``--version``, ``emulator`` and ``demo``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request

import surveillance as sv

CLI = [sys.executable, "-m", "surveillance.cli"]


def test_version():
    out = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip() == f"surveillance {sv.__version__}"


def test_emulator_command_prints_credentials_and_serves_until_ctrl_c():
    proc = subprocess.Popen(
        [*CLI, "emulator", "--port", "0", "--seed", "3", "--sites", "4", "--days", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = {}
        assert proc.stdout is not None
        for _ in range(20):
            line = proc.stdout.readline()
            if "=" in line:
                key, value = line.strip().split("=", 1)
                lines[key] = value
            if line.startswith("events from"):
                break
        assert lines["SURVEILLANCE_BASE_URL"].startswith("http://127.0.0.1:")
        body = json.dumps(
            {
                "audience": lines["SURVEILLANCE_AUDIENCE"],
                "client_id": lines["SURVEILLANCE_CLIENT_ID"],
                "client_secret": lines["SURVEILLANCE_CLIENT_SECRET"],
            }
        ).encode()
        req = urllib.request.Request(
            lines["SURVEILLANCE_BASE_URL"] + "/v2/oauth/token",
            data=body,
            headers={
                "x-api-key": lines["SURVEILLANCE_API_KEY"],
                "content-type": "application/json",
            },
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=10) as resp:
            assert json.load(resp)["expires_in"] == 14399
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_demo_prints_the_dwell_summary_and_writes_the_export(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [*CLI, "demo", "--sites", "5", "--events-per-day", "500"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "fetched 3,500 events" in out.stdout
    assert "median s" in out.stdout and "busiest hour" in out.stdout
    assert (tmp_path / "events.parquet").exists() or (tmp_path / "events.jsonl").exists()
    assert out.stderr == ""  # no progress bar when stderr is not a terminal
