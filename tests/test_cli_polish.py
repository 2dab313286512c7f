"""The command line's finish, as a user meets it against an emulator in a process of its own:
relative times, ``--limit``, the figures it prints (plurals, separators, requests that agree),
its words (the command's, not the library's), the columns of a list's CSV, and the rule of the
folders it writes into."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess

import pyarrow.parquet as pq
import pytest
from surveillance import _core

from conftest import console_script, emulator_command, service_env

FAST = ["--read-per-second", "0", "--read-concurrency", "0"]


@pytest.fixture(scope="module")
def service():
    """3 days of 3,000 events (2026-01-05 to 2026-01-08) in a process of its own."""
    with emulator_command(
        "--seed", "3", "--sites", "4", "--days", "3", "--events-per-day", "3000"
    ) as e:
        yield e


@pytest.fixture
def run(service, tmp_path):
    """Runs the console script against the emulator, with a ledger of this test's own."""
    quota = tmp_path / "quota"
    quota.mkdir()
    env = service_env(**service.exports, SURVEILLANCE_QUOTA_DIR=str(quota))

    def run(*args: str, fast: bool = True) -> subprocess.CompletedProcess:
        argv = [*console_script(), *args, *(FAST if fast else [])]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
        )

    return run


@pytest.mark.parametrize(
    "start, end",
    [("yesterday", "now"), ("-7d", "today"), ("-2h", "now"), ("-30m", "now"), ("-1h30m", "now")],
)
def test_time_options_take_relative_times(run, start, end):
    out = run("events", "--start", start, "--end", end, "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""  # the emulator's events are of January 2026


def test_relative_times_are_utc_instants_before_now(run, tmp_path):
    out = run("sync", str(tmp_path / "data"), "--start", "-2d", "--until", "now", "--no-progress")
    assert out.returncode == 0, out.stderr
    state = json.loads((tmp_path / "data" / "_sync_state.json").read_text())
    start, until = state["start"], state["synced_until"]
    import datetime as dt

    t0 = dt.datetime.fromisoformat(start.replace("Z", "+00:00"))
    t1 = dt.datetime.fromisoformat(until.replace("Z", "+00:00"))
    assert abs((t1 - t0).total_seconds() - 2 * 86_400) < 120
    assert abs((dt.datetime.now(dt.timezone.utc) - t1).total_seconds()) < 120
    bad = run("events", "--start", "-7x", "--end", "now")
    assert bad.returncode == 2


@pytest.mark.parametrize("start", ["-" + "1" * 30 + "d", "-999999999d", "-1w999999999d"])
def test_a_relative_time_before_the_year_1_is_one_line_and_exit_2(run, start):
    """A relative time past the calendar is a usage error in one line (it was a 47-line
    `OverflowError` traceback, exit 1), in either form of the option."""
    for args in (["--start", start], [f"--start={start}"]):
        out = run("events", *args, "--end", "now")
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "before the year 1" in out.stderr, out.stderr


def test_limit_keeps_the_first_rows_of_lists_and_events(run, tmp_path):
    out = run("cameras", "--limit", "2", "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 2
    out = run("sites", "--limit", "1", "--format", "table")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 3  # the header, its rule, one row
    out = run(
        "events", "--start", "2026-01-05", "--end", "2026-01-08", "--limit", "5", "--format", "csv"
    )
    assert out.returncode == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert len(rows) == 6
    at = rows[0].index("startTime")
    assert [r[at] for r in rows[1:]] == sorted(r[at] for r in rows[1:])
    out = run(
        "events",
        "--start",
        "2026-01-05",
        "--end",
        "2026-01-08",
        "--limit",
        "150",
        "-o",
        "e.parquet",
    )
    assert out.returncode == 0, out.stderr
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 150
    assert run("sites", "--limit", "0").returncode == 2


def test_a_lists_csv_has_the_columns_of_its_table(run, tmp_path):
    for spec in _core.LISTS:
        kind = spec["name"]
        out = run(kind, "-o", f"{kind}.csv")
        assert out.returncode == 0, out.stderr
        with open(tmp_path / f"{kind}.csv", newline="") as f:
            header = next(csv.reader(f))
        assert run(kind, "-o", f"{kind}.parquet").returncode == 0
        names = pq.read_schema(tmp_path / f"{kind}.parquet").names
        assert header[: len(names)] == names, kind


def test_the_sync_says_its_figures_in_words_that_agree(run, tmp_path):
    # One window, one partition: singular.
    out = run("sync", "data", "--start", "2026-01-05T00:00Z", "--until", "2026-01-05T02:00Z")
    assert out.returncode == 0, out.stderr
    first, cost = out.stdout.splitlines()
    assert "1 window," in first and "1 partition written" in first, first
    assert not re.search(r"\b1 (windows|partitions|requests)\b", out.stdout), out.stdout
    # The requests of the run are those of its cost.
    said = re.search(r"([\d,]+) requests?, [\d,]+ partitions? written", first)
    assert said and cost.startswith(f"cost: {said.group(1)} request"), out.stdout
    # Again over what the dataset holds (fetched again, nothing changed), then where
    # there is nothing: no "replaced" beside "0 partitions written", no "0 windows".
    out = run("sync", "data", "--start", "2026-01-05T00:00Z", "--until", "2026-01-05T02:00Z")
    assert out.returncode == 0, out.stderr
    assert "fetched again" in out.stdout and "replaced" not in out.stdout, out.stdout
    out = run("sync", "empty", "--start", "2026-03-01", "--until", "2026-03-02")
    assert out.returncode == 0, out.stderr
    assert "0 windows" not in out.stdout and "no events" in out.stdout, out.stdout


def test_a_refusal_counts_with_separators_and_names_the_command(run):
    out = run("events", "--start", "2026-01-05", "--end", "2026-01-08", "--daily-requests", "30")
    assert out.returncode == 75, out.stderr
    assert "sync_events" not in out.stderr and "`surveillance sync`" in out.stderr, out.stderr
    # Counts of four figures or more are grouped: "9,000 events", not "9000 events".
    assert re.search(r"\d,\d{3} events", out.stderr), out.stderr
    assert not re.search(r"\d{4} (events|requests)", out.stderr), out.stderr


def test_a_missing_folder_is_refused_as_for_o_and_the_dataset_dir_alone_is_created(run, tmp_path):
    for args in (
        ["sync", "missing/deep/data", "--start", "2026-01-05", "--until", "2026-01-05T01:00Z"],
        ["sites", "-o", "missing/deep/sites.csv"],
    ):
        out = run(*args)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "missing/deep" in out.stderr and "does not exist" in out.stderr, out.stderr
    assert not (tmp_path / "missing").exists()
    out = run("sync", "data", "--start", "2026-01-05", "--until", "2026-01-05T01:00Z")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "data" / "_sync_state.json").exists()
