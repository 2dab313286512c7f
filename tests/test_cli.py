"""The ``surveillance`` command line, run as a subprocess against an emulator over loopback:
every subcommand, its outputs, progress on a terminal only, and one-line errors."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import struct
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import surveillance as sv
from surveillance import cli

from conftest import emulator_command, emulator_fixture, run_in_pty, service_env

CLI = [sys.executable, "-m", "surveillance.cli"]
PROGRESS = re.compile(r"events: *\d+%")


def test_version():
    out = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip() == f"surveillance {sv.__version__}"


def test_emulator_command_prints_credentials_and_serves_until_ctrl_c():
    with emulator_command("--seed", "3", "--sites", "4", "--days", "1") as emulator:
        lines = emulator.exports
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
        emulator.proc.send_signal(signal.SIGINT)
        assert emulator.proc.wait(timeout=10) == 0


def _script() -> list:
    """The installed ``surveillance`` console script, else its entry point loaded from the
    package metadata (the same ``surveillance.cli:main``)."""
    script = Path(sys.executable).parent / "surveillance"
    if script.exists():
        return [str(script)]
    code = (
        "import sys; from importlib.metadata import entry_points; "
        "sys.exit(entry_points(group='console_scripts', name='surveillance')"
        "[0].load()())"
    )
    return [sys.executable, "-c", code]


def _env(emu=None, **extra) -> dict:
    return service_env(emu, PYTHONUNBUFFERED="1", **extra)


#: Client commands read as fast as the emulator answers (the default is the published limit,
#: one request a second).
FAST = ["--read-per-second", "0", "--read-concurrency", "0"]
CLIENT_COMMANDS = {"events", "sites", "devices", "cameras", "reports"}


def _fast(args) -> list:
    """``args`` with :data:`FAST` after a client command's (one named after global flags such as
    ``-v`` too)."""
    command = next((a for a in args if not a.startswith("-")), None)
    return [*args, *FAST] if command in CLIENT_COMMANDS and "--help" not in args else list(args)


def _run(args, env, cwd=None):
    args = _fast(args)
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


def _run_in_pty(args, env, cwd) -> tuple:
    """Runs the CLI on a pseudo-terminal; its exit status and everything it wrote."""
    return run_in_pty([*CLI, *_fast(args)], env, cwd)


cli_emu = emulator_fixture(seed=5, sites=4, days=2, events_per_day=300)


DAY = ["--start", "2026-01-05", "--end", "2026-01-07"]


def test_demo_entry_point_prints_the_summary_and_writes_parquet_and_chart(tmp_path):
    out = subprocess.run(
        [*_script(), "demo", "--sites", "5", "--events-per-day", "500"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    assert "fetched 3,500 events" in out.stdout
    header = next(line for line in out.stdout.splitlines() if "median s" in line)
    assert header.split() == ["site", "events", "median", "s", "p90", "s", "busiest", "hour"]
    rows = out.stdout.split(header, 1)[1].strip().splitlines()[:5]
    assert sum(int(r.split()[-4].replace(",", "")) for r in rows) == 3500
    assert all(re.search(r" \d+:00$", r) for r in rows)
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_metadata(tmp_path / "events.parquet").num_rows == 3500
    assert not PROGRESS.search(out.stderr)  # stderr is not a terminal: no progress bar
    assert "wrote dwell.png" in out.stdout  # by matplotlib, or without it
    assert (tmp_path / "dwell.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("command", [c.name for c in cli.COMMANDS])
def test_help_of_each_command(command):
    out = _run([command, "--help"], _env())
    assert out.returncode == 0
    assert out.stdout.startswith(f"usage: surveillance {command}")
    if command in CLIENT_COMMANDS:
        # The connection options are the top-level parser's: the help points there.
        assert "SURVEILLANCE_API_KEY" not in out.stdout and "surveillance --help" in out.stdout


@pytest.mark.parametrize(
    "present, missing",
    [
        ((), "SURVEILLANCE_BASE_URL"),
        (("BASE_URL", "CLIENT_ID", "CLIENT_SECRET"), "SURVEILLANCE_API_KEY"),
        (("BASE_URL", "API_KEY", "CLIENT_ID"), "SURVEILLANCE_CLIENT_SECRET"),
    ],
)
def test_a_missing_credential_is_one_line_naming_the_variable_and_exit_2(
    tmp_path, cli_emu, present, missing
):
    env = _env()
    full = _env(cli_emu)
    env.update({f"SURVEILLANCE_{k}": full[f"SURVEILLANCE_{k}"] for k in present})
    out = _run(["events", *DAY, "-o", "e.parquet"], env, cwd=tmp_path)
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("surveillance: error: ")
    assert missing in out.stderr
    assert not list(tmp_path.iterdir())


def test_credentials_from_options(cli_emu):
    env = _env()
    out = _run(
        [
            "sites",
            "--format",
            "jsonl",
            "--base-url",
            cli_emu.url,
            "--api-key",
            cli_emu.api_key,
            "--client-id",
            cli_emu.client_id,
            "--client-secret",
            cli_emu.client_secret,
            "--audience",
            cli_emu.audience,
        ],
        env,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 4


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["--start", "2026-01-07", "--end", "2026-01-05"], 2, "after"),
        (["--start", "last week", "--end", "2026-01-05"], 2, "ISO-8601"),
        ([*DAY, "-o", "events.txt"], 2, ".parquet, .csv or .jsonl"),
        ([*DAY, "--report", "not-a-uuid"], 2, "report"),
    ],
)
def test_bad_arguments_are_one_line_without_traceback(tmp_path, cli_emu, args, status, message):
    out = _run(["events", *args], _env(cli_emu), cwd=tmp_path)
    assert out.returncode == status
    assert "Traceback" not in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("surveillance: error: ")
    assert message in out.stderr


def test_a_refused_request_is_one_line_exit_1_and_leaves_no_file(tmp_path, cli_emu):
    args = ["events", *DAY, "--report", cli_emu.restricted_report_id, "-o", "r.parquet"]
    out = _run(args, _env(cli_emu), cwd=tmp_path)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("surveillance: error: ")
    assert not list(tmp_path.iterdir())  # neither r.parquet nor a partial file


def test_events_to_parquet_csv_and_jsonl_hold_every_event(tmp_path, cli_emu):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    truth = cli_emu.truth("2026-01-05", "2026-01-07")
    env = _env(cli_emu)
    for name in ("e.parquet", "e.csv", "e.jsonl"):
        out = _run(["events", *DAY, "-o", name], env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        # The summary line says what the fetch spent: requests, and the day's share of them.
        assert re.fullmatch(
            rf"wrote {len(truth):,} events to {re.escape(name)}: \d+ requests, "
            r"[\d.]+% of the day's 2,400 \([\d,]+ left\)\n",
            out.stdout,
        ), out.stdout
        assert out.stderr == ""  # piped: no progress bar
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.column("id").to_pylist() == truth
    schema = pa.RecordBatchReader.from_stream(
        cli_emu.client().event_batches("2026-01-05", "2026-01-06")
    ).schema
    assert table.schema.equals(schema)
    with open(tmp_path / "e.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == truth
    assert list(rows[0])[:3] == ["id", "startTime", "endTime"]
    assert "details.duration_sec" in rows[0] and json.loads(rows[0]["details"])
    lines = (tmp_path / "e.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == truth
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.csv", "e.jsonl", "e.parquet"]


def test_events_piped_without_a_file_are_json_lines(cli_emu):
    out = _run(["events", *DAY], _env(cli_emu))
    assert out.returncode == 0, out.stderr
    ids = [json.loads(line)["id"] for line in out.stdout.splitlines()]
    assert ids == cli_emu.truth("2026-01-05", "2026-01-07")
    assert out.stderr == ""


@pytest.mark.parametrize("name", ["e.parquet", "e.jsonl"])
def test_events_on_a_terminal_show_a_progress_bar(tmp_path, cli_emu, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    status, text = _run_in_pty(["events", *DAY, "-o", name], _env(cli_emu), tmp_path)
    assert status == 0, text
    assert PROGRESS.search(text), text
    assert (tmp_path / name).exists()
    status, text = _run_in_pty(
        ["events", *DAY, "-o", name, "--no-progress"], _env(cli_emu), tmp_path
    )
    assert status == 0, text
    assert not PROGRESS.search(text), text


def test_events_on_a_terminal_are_a_table(tmp_path, cli_emu):
    status, text = _run_in_pty(["events", *DAY], _env(cli_emu), tmp_path)
    assert status == 0, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("startTime"))
    assert lines[header].split() == ["startTime", "duration_sec", "title", "subtitle", "site"]
    assert set(lines[header + 1]) <= {"-", " "}
    assert len(lines) - header - 2 == len(cli_emu.truth("2026-01-05", "2026-01-07"))


@pytest.mark.parametrize("kind", ["sites", "devices", "cameras", "reports"])
def test_lists_in_every_format(tmp_path, cli_emu, kind):
    pq = pytest.importorskip("pyarrow.parquet")
    expected = [r["id"] for r in cli_emu.resources(kind)]
    env = _env(cli_emu)
    for name in (f"{kind}.parquet", f"{kind}.csv", f"{kind}.jsonl"):
        out = _run([kind, "-o", name], env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"wrote {len(expected):,} {kind} to {name}: "), out.stdout
    assert sorted(pq.read_table(tmp_path / f"{kind}.parquet").column("id").to_pylist()) == sorted(
        expected
    )
    with open(tmp_path / f"{kind}.csv", newline="", encoding="utf-8") as f:
        assert sorted(r["id"] for r in csv.DictReader(f)) == sorted(expected)
    jsonl = (tmp_path / f"{kind}.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["id"] for line in jsonl) == sorted(expected)
    status, text = _run_in_pty([kind], env, tmp_path)
    assert status == 0, text
    assert text.splitlines()[0].split()[:2] == ["id", "name"]
    assert all(any(i in line for line in text.splitlines()) for i in expected)


def test_cameras_of_one_site_and_one_device(cli_emu):
    cameras = cli_emu.resources("cameras")
    site = next(c["siteId"] for c in cameras)
    device = next(c["deviceId"] for c in cameras if c["siteId"] != site)
    env = _env(cli_emu)
    for option, value, key in (("--site", site, "siteId"), ("--device", device, "deviceId")):
        out = _run(["cameras", option, value, "--format", "jsonl"], env)
        assert out.returncode == 0, out.stderr
        got = sorted(json.loads(line)["id"] for line in out.stdout.splitlines())
        assert got == sorted(c["id"] for c in cameras if c[key] == value)


def test_demo_without_pyarrow_or_matplotlib_writes_parquet_and_draws_the_chart(tmp_path):
    """`pip install .` alone (no extras): the Parquet export is written in Rust, and the chart
    the README promises is drawn without matplotlib."""
    blocked = tmp_path / "blocked"  # shadows the installed packages: `pip install .` alone
    for name in ("pyarrow", "matplotlib", "pandas"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('no {name}')\n")
    work = tmp_path / "work"
    work.mkdir()
    # Before the package's own folder where that is on PYTHONPATH (a development checkout).
    env = _env(PYTHONPATH=os.pathsep.join(filter(None, [str(blocked), os.getenv("PYTHONPATH")])))
    out = subprocess.run(
        [*CLI, "demo", "--sites", "3", "--events-per-day", "200"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "fetched 1,400 events" in out.stdout
    assert "wrote events.parquet" in out.stdout
    assert "busiest hour" in out.stdout
    assert "wrote dwell.png (median dwell time by local hour" in out.stdout
    assert "pip install" not in out.stdout
    assert sorted(p.name for p in work.iterdir()) == ["dwell.png", "events.parquet"]
    png = (work / "dwell.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (900, 700)
    assert png.endswith(b"IEND\xaeB`\x82")
    pq = pytest.importorskip("pyarrow.parquet")  # read back here, where pyarrow is installed
    table = pq.read_table(work / "events.parquet")
    assert table.num_rows == 1400
    assert str(table.schema.field("startTime").type) == "timestamp[ms, tz=UTC]"


def test_events_to_parquet_without_pyarrow(tmp_path, cli_emu):
    blocked = tmp_path / "blocked"
    (blocked / "pyarrow").mkdir(parents=True)
    (blocked / "pyarrow" / "__init__.py").write_text("raise ImportError('no pyarrow')\n")
    env = _env(cli_emu, PYTHONPATH=str(blocked))
    out = _run(["events", *DAY, "-o", str(tmp_path / "e.parquet")], env)
    assert out.returncode == 0, out.stderr
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.read_table(tmp_path / "e.parquet").num_rows > 0


def test_the_emulator_command_takes_the_faults_limits_and_dialect_of_the_class(tmp_path):
    """A pipeline test starts the emulator as a process of its own with the faults, limits,
    clock and dialect that `sv.Emulator` sets; its printed variables are `emu.env()`'s, which
    a client process reads as they are."""
    options = ["--seed", "3", "--sites", "3", "--days", "2", "--events-per-day", "300"]
    faults = ["--rate-limit-rate", "0.3", "--retry-after", "0", "--daily-requests", "12"]
    dialect = ["--dialect", "webhook_answer=no_content", "--order", "desc", "--advance-clock", "60"]
    with emulator_command(*options, *faults, *dialect) as emulator:
        assert emulator.exports["SURVEILLANCE_DAILY_REQUESTS"] == "12"
        assert emulator.exports["SURVEILLANCE_READ_PER_SECOND"] == "0"
        env = service_env(**emulator.exports)
        sites = subprocess.run(
            [*CLI, "sites", "-o", str(tmp_path / "sites.jsonl")], env=env, capture_output=True
        )
        assert sites.returncode == 0, sites.stderr
        assert len((tmp_path / "sites.jsonl").read_text().splitlines()) == 3
        # The emulator's quota of 12 stops a sync of two days of 300 events: exit 75.
        sync = subprocess.run(
            [*CLI, "sync", str(tmp_path / "ds"), "--start", "2026-01-05", "--until", "2026-01-07"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert sync.returncode == 75, sync.stderr
    bad = subprocess.run(
        [*CLI, "emulator", "--port", "0", "--dialect", "nonsense=1"],
        env=service_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and "--dialect takes NAME=VALUE" in bad.stderr, bad.stderr


def test_emulator_env_is_what_a_client_process_needs():
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        env = emu.env()
        assert env["SURVEILLANCE_BASE_URL"] == emu.url
        assert env["SURVEILLANCE_DAILY_REQUESTS"] == "0"
        emu.set_limits(read_per_second=5, daily_requests=100)
        env = emu.env()
        assert env["SURVEILLANCE_READ_PER_SECOND"] == "5"
        assert env["SURVEILLANCE_DAILY_REQUESTS"] == "100"
        assert env["SURVEILLANCE_READ_CONCURRENCY"] == "0"
        code = "import surveillance as sv; c = sv.Client(); print(len(c.sites()), c.quota().limit)"
        out = subprocess.run(
            [sys.executable, "-c", code], env=service_env(**env), capture_output=True, text=True
        )
        assert out.stdout.split() == ["2", "100"], out.stderr
