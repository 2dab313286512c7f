"""The command line as a user meets it, against an emulator over loopback: destinations checked
before the first request, times in UTC in CSV and the table, one reader of record files for
every command, and its words (flags in errors, one line per failure, help, ``-v``, Ctrl-C)."""

from __future__ import annotations

import csv
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import surveillance as sv
from surveillance._time import to_ms
from surveillance.publish import Failure, PublishReport
from test_cli import _env, _run, _run_in_pty

from conftest import emulator_command, emulator_fixture, reset, retail, sigint_default

DAY = ["--start", "2026-01-05", "--end", "2026-01-07"]

words_emu = emulator_fixture(seed=7, sites=3, days=2, events_per_day=300)


@pytest.fixture(autouse=True)
def _fresh(words_emu):
    """Each test starts with the module's emulator reset, its counts and webhook store empty."""
    reset(words_emu)
    words_emu.clear_published()
    yield
    reset(words_emu)
    words_emu.clear_published()


def _requests(emu) -> int:
    return sum(n for answers in emu.stats()["requests"].values() for n in answers.values())


def _one_error_line(out) -> str:
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("surveillance: error: "), out.stderr
    return lines[0]


# --- destinations are checked before the first request ------------------------------------
@pytest.mark.parametrize(
    "args, named",
    [
        (["events", *DAY, "-o", "{tmp}/missing/dir/x.parquet"], "{tmp}/missing/dir/x.parquet"),
        (["events", *DAY, "-o", "{tmp}/missing/x.csv"], "{tmp}/missing/x.csv"),
        (["events", *DAY, "-o", "{tmp}/a-file/x.jsonl"], "{tmp}/a-file/x.jsonl"),
        (["events", *DAY, "--format", "csv", "-o", "{tmp}"], "{tmp}"),
        (["sites", "-o", "{tmp}/missing/sites.parquet"], "{tmp}/missing/sites.parquet"),
        (["cameras", "-o", "{tmp}/missing/cameras.csv"], "{tmp}/missing/cameras.csv"),
        (["sync", "{tmp}/a-file/ds", "--start", "2026-01-05"], "{tmp}/a-file/ds"),
        (
            ["publish", "{tmp}/good.jsonl", "--failures", "{tmp}/missing/failed.jsonl"],
            "{tmp}/missing/failed.jsonl",
        ),
    ],
)
def test_a_destination_that_cannot_be_written_fails_before_any_request(
    tmp_path, words_emu, args, named
):
    (tmp_path / "a-file").write_text("not a directory")
    (tmp_path / "good.jsonl").write_text(json.dumps(retail(0)) + "\n")
    args = [a.format(tmp=tmp_path) for a in args]
    words_emu.reset_stats()
    started = time.monotonic()
    out = _run(args, _env(words_emu))
    assert out.returncode == 1, out.stderr
    line = _one_error_line(out)
    assert repr(named.format(tmp=tmp_path)) in line  # the user's path ...
    assert ".partial" not in line  # ... never the writer's temporary one
    assert _requests(words_emu) == 0
    assert time.monotonic() - started < 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "good.jsonl"]


def test_a_file_that_cannot_be_opened_is_named_as_the_user_gave_it(tmp_path, words_emu):
    """The writer's temporary file (``FILE.partial``, renamed when complete) is its own
    business: when it cannot be opened, the error names the user's file."""
    (tmp_path / "sites.csv.partial").mkdir()  # what the writer would open is taken
    out = _run(["sites", "-o", "sites.csv"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    line = _one_error_line(out)
    assert "'sites.csv'" in line and ".partial" not in line, line


def test_a_uri_pyarrow_does_not_open_for_o_is_refused_before_any_request(tmp_path, words_emu):
    # Object stores that pyarrow opens (s3://, gs://) are written to: tests/test_object_store.py.
    words_emu.reset_stats()
    out = _run(["events", *DAY, "-o", "foo://bucket/x.parquet"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 2
    assert "foo://bucket/x.parquet" in _one_error_line(out)
    assert _requests(words_emu) == 0
    assert not list(tmp_path.iterdir())


# --- times in UTC --------------------------------------------------------------------------
def test_csv_times_are_utc_and_pandas_parses_them(tmp_path, words_emu):
    pd = pytest.importorskip("pandas")
    out = _run(["events", *DAY, "-o", "e.csv"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    times = ["startTime", "endTime", "createTime"]
    df = pd.read_csv(tmp_path / "e.csv", parse_dates=times)
    expected = words_emu.client().events("2026-01-05", "2026-01-07", output="pandas")
    for column in times:
        assert isinstance(df[column].dtype, pd.DatetimeTZDtype), (column, df[column].dtype)
        assert str(df[column].dt.tz) == "UTC"
        assert (df[column] == expected[column]).all()
    with open(tmp_path / "e.csv", newline="", encoding="utf-8") as f:
        row = next(csv.DictReader(f))
    assert all(row[c].endswith("Z") for c in times), row
    assert "localStartTime" not in row


def test_local_time_adds_the_sites_wall_clock_as_its_own_column(tmp_path, words_emu):
    out = _run(["events", *DAY, "-o", "e.csv", "--local-time"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "e.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    events = words_emu.client().events("2026-01-05", "2026-01-07")
    assert [r["localStartTime"] for r in rows] == [e["startTime"] for e in events]
    assert all(r["startTime"].endswith("Z") for r in rows)
    assert all(not r["localStartTime"].endswith("Z") for r in rows)  # the sites are not in UTC
    help_text = _run(["events", "--help"], _env()).stdout
    assert "--local-time" in help_text and "localStartTime" in help_text
    out = _run(["events", *DAY, "-o", "e.parquet", "--local-time"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 2 and "--local-time" in _one_error_line(out)


def test_the_terminal_table_shows_utc_times(tmp_path, words_emu):
    status, text = _run_in_pty(["events", *DAY], _env(words_emu), tmp_path)
    assert status == 0, text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("startTime"))
    rows = lines[header + 2 :]
    starts = [e["startTime"] for e in words_emu.client().events("2026-01-05", "2026-01-07")]
    assert len(rows) == len(starts)
    for row, start in zip(rows, starts):
        shown = row.split()[0]
        assert shown.endswith("Z"), row
        assert to_ms(shown) == to_ms(start)  # the service's instant, in UTC


# --- one reader of record files -------------------------------------------------------------
def _record_files(tmp_path) -> dict:
    """The same records (two with problems) as JSON Lines, Parquet and CSV."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [retail(i) for i in range(6)]
    rows[2]["schemaVersion"] = "2"  # not the model's version: an error
    rows[4]["items"][0]["type"] = "GIFT"  # outside the published item types: a warning
    paths = {}
    paths["jsonl"] = tmp_path / "pos.jsonl"
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    paths["parquet"] = tmp_path / "pos.parquet"
    pq.write_table(pa.Table.from_pylist(rows), paths["parquet"])
    paths["csv"] = tmp_path / "pos.csv"
    with open(paths["csv"], "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "items": json.dumps(r["items"])})
    return paths


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_validate_reads_jsonl_parquet_and_csv_alike(tmp_path, words_emu, fmt):
    path = _record_files(tmp_path)[fmt]
    out = _run(["validate", str(path)], _env())
    assert out.returncode == 1, out.stderr
    assert out.stderr == ""
    assert out.stdout.splitlines()[-1] == "6 records: 5 valid, 1 not (1 errors, 1 warnings)"
    problems = out.stdout.splitlines()[:-1]
    assert len(problems) == 2
    where = {
        "jsonl": ("line 3", "line 5"),
        "parquet": ("row 3", "row 5"),
        "csv": ("line 4", "line 6"),
    }
    assert problems[0].startswith(f"{path}: {where[fmt][0]}: error: schemaVersion"), problems
    assert problems[1].startswith(f"{path}: {where[fmt][1]}: warning: items[0].type"), problems


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_publish_reads_jsonl_parquet_and_csv_alike(tmp_path, words_emu, fmt):
    path = _record_files(tmp_path)[fmt]
    out = _run(
        ["publish", str(path), "--failures", str(tmp_path / "failed.jsonl")], _env(words_emu)
    )
    assert out.returncode == 1, out.stderr
    assert "6 records, 5 accepted, 1 rejected (1 invalid)" in out.stdout, out.stdout
    stored = sorted(r["transactionId"] for r in words_emu.published())
    assert stored == ["t-0", "t-1", "t-3", "t-4", "t-5"]
    failed = [json.loads(line) for line in (tmp_path / "failed.jsonl").read_text().splitlines()]
    assert failed == [dict(retail(2), schemaVersion="2")]


def test_a_csv_written_by_pandas_is_published_as_typed_records(tmp_path, words_emu):
    pd = pytest.importorskip("pandas")
    rows = [retail(i, customerId="0042") for i in range(3)]
    pd.DataFrame(rows).to_csv(tmp_path / "pos.csv", index=False)  # items as Python reprs
    out = _run(["publish", str(tmp_path / "pos.csv")], _env(words_emu))
    assert out.returncode == 0, out.stdout + out.stderr
    stored = sorted(words_emu.published(), key=lambda r: r["startTime"])
    assert stored == rows  # numbers as numbers, ids (even of digits) as text, items as a list


@pytest.mark.parametrize("command", ["validate", "publish"])
def test_a_record_file_of_another_type_is_refused_naming_the_accepted_ones(
    tmp_path, words_emu, command
):
    path = tmp_path / "pos.txt"
    path.write_text(json.dumps(retail(0)) + "\n")
    words_emu.reset_stats()
    out = _run([command, str(path)], _env(words_emu))
    assert out.returncode == 2
    line = _one_error_line(out)
    assert str(path) in line and ".jsonl" in line and ".parquet" in line and ".csv" in line
    assert _requests(words_emu) == 0
    assert out.stdout == ""
    help_text = " ".join(_run([command, "--help"], _env()).stdout.split())
    assert ".jsonl (JSON Lines), .parquet or .csv" in help_text


# --- words -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, flag, python",
    [
        (["events", *DAY, "--report", "not-a-uuid"], "`--report`", "report_id"),
        (["cameras", "--site", "nope"], "`--site`", "site_id"),
        (["cameras", "--device", "nope"], "`--device`", "device_id"),
        (["sites", "--timeout", "0"], "`--timeout`", "`timeout`"),
        (["sites", "--client-id", ""], "`--client-id`", "client_id"),
        (["sync", "ds", "--start", "2026-01-05", "--settle", "soon"], "`--settle`", "`settle`"),
    ],
)
def test_errors_name_the_flags_not_the_python_arguments(tmp_path, words_emu, args, flag, python):
    out = _run(args, _env(words_emu), cwd=tmp_path)
    assert out.returncode == 2
    line = _one_error_line(out)
    assert flag in line and python not in line, line


@pytest.mark.parametrize(
    "args, flag, value",
    [
        (["cameras", "--site", "end"], "`--site`", "`end`"),
        (["events", *DAY, "--report", "timeout"], "`--report`", "`timeout`"),
        (["cameras", "--device", "records"], "`--device`", "`records`"),
    ],
)
def test_a_value_that_looks_like_an_argument_is_said_as_given(
    tmp_path, words_emu, args, flag, value
):
    """The CLI names what an error is about (its wording), never words of its text: a value
    that reads like a Python argument is the user's, and stays as they gave it."""
    out = _run(args, _env(words_emu), cwd=tmp_path)
    assert out.returncode == 2
    line = _one_error_line(out)
    assert flag in line and f"got {value}" in line, line


HUGE = "1" + "0" * 400


@pytest.mark.parametrize(
    "args, flag",
    [
        (["quota", "--daily-requests", HUGE], "--daily-requests"),
        (["quota", "--read-concurrency", HUGE], "--read-concurrency"),
        (["quota", "--read-concurrency", "-" + HUGE], "--read-concurrency"),
        (["quota", "--read-per-second", HUGE], "--read-per-second"),
        (["sync", "ds", "--start", "2026-01-05", "--daily-requests", HUGE], "--daily-requests"),
        (["plan", *DAY, "--daily-requests", HUGE], "--daily-requests"),
        (["events", *DAY, "--timeout", HUGE], "--timeout"),
        (["publish", "x.jsonl", "--publish-concurrency", HUGE], "--publish-concurrency"),
        (["publish", "x.jsonl", "--batch-size", HUGE], "--batch-size"),
        (["emulator", "--port", HUGE], "port"),
        (["emulator", "--daily-requests", HUGE], "daily"),
        (["demo", "--sites", HUGE], "sites"),
    ],
    ids=lambda v: " ".join(v).replace(HUGE, "HUGE")[:60] if isinstance(v, list) else None,
)
def test_a_huge_number_is_one_line_and_exit_2(tmp_path, words_emu, args, flag):
    (tmp_path / "x.jsonl").write_text("{}\n")
    out = _run(args, _env(words_emu), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-500:]
    line = _one_error_line(out)
    assert flag in line and len(line) < 200, line
    assert _requests(words_emu) == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_failed_connection_is_one_clean_prefixed_line(tmp_path, words_emu):
    url = f"http://127.0.0.1:{_closed_port()}"
    # --max-outage 0: the refusal is reported at once rather than ridden out for a minute.
    out = _run(["sites", "--base-url", url, "--max-outage", "0"], _env(words_emu), cwd=tmp_path)
    assert out.returncode == 1
    line = _one_error_line(out)  # no log line before it
    assert url in line and "refused" in line.lower(), line
    assert line.count(url) == 1 and "error sending request" not in line, line


def test_debug_logs_the_surveillance_logger_on_stderr(tmp_path, words_emu):
    quiet = _run(["sites", "--format", "jsonl"], _env(words_emu))
    assert quiet.returncode == 0 and quiet.stderr == ""
    for args in (["-v", "sites", "--format", "jsonl"], ["sites", "--format", "jsonl", "--debug"]):
        out = _run(args, _env(words_emu))
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == 3  # the data on stdout, untouched
        assert "surveillance: debug: GET /v2/sites -> 200" in out.stderr, out.stderr
        assert words_emu.client_secret not in out.stderr


def test_python_dash_m_surveillance_is_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "surveillance", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"surveillance {sv.__version__}"


def test_help_shows_defaults_choices_and_the_rates_of_the_command():
    env = _env()
    emulator = " ".join(_run(["emulator", "--help"], env).stdout.split())
    for option, default in [
        ("--port", "8080"),
        ("--seed", "0"),
        ("--sites", "20"),
        ("--days", "14"),
        ("--events-per-day", "5000"),
    ]:
        assert f"{option} " in emulator and f"(default {default}" in emulator, option
    # The connection options are the top-level parser's, the rates of both kinds with them.
    top = " ".join(_run(["--help"], env).stdout.split())
    assert "(default 30)" in top  # --timeout
    assert "--region {us,eu}" in top
    assert "--read-per-second VALUE" in top and "--publish-concurrency VALUE" in top
    assert "(default 100)" in top and "(default 200)" in top
    publish = " ".join(_run(["publish", "--help"], env).stdout.split())
    assert "--read-per-second" not in publish and "--read-concurrency" not in publish


def test_publish_takes_its_rate_flags(tmp_path, words_emu):
    path = tmp_path / "pos.jsonl"
    path.write_text("".join(json.dumps(retail(i)) + "\n" for i in range(20)))
    args = ["publish", str(path), "--batch-size", "1", "--publish-per-second", "0"]
    out = _run([*args, "--publish-concurrency", "0"], _env(words_emu))
    assert out.returncode == 0, out.stderr
    assert len(words_emu.published()) == 20
    out = _run([*args, "--publish-concurrency", "-1"], _env(words_emu))
    assert out.returncode == 2 and "--publish-concurrency" in _one_error_line(out)


def test_the_emulator_prints_exports_a_shell_can_run(tmp_path):
    with emulator_command("--sites", "2", env=_env()) as emulator:
        lines = emulator.lines
        assert all(line.startswith(("# ", "export SURVEILLANCE_")) for line in lines), lines
        assert set(emulator.exports) >= {
            "SURVEILLANCE_BASE_URL",
            "SURVEILLANCE_EU_BASE_URL",
            "SURVEILLANCE_API_KEY",
            "SURVEILLANCE_CLIENT_ID",
            "SURVEILLANCE_CLIENT_SECRET",
            "SURVEILLANCE_AUDIENCE",
        }
        # Pasted into a shell as printed, they configure the commands that follow.
        script = "".join(lines) + f'"{sys.executable}" -m surveillance sites --format jsonl\n'
        out = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=60, env=_env()
        )
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == 2


def test_ctrl_c_during_a_parquet_export_says_what_was_thrown_away_and_how_to_resume(
    tmp_path, words_emu
):
    pytest.importorskip("pyarrow")
    words_emu.set_faults(latency_ms=200)
    env = _env(words_emu)
    proc = subprocess.Popen(
        [sys.executable, "-m", "surveillance", "events", *DAY, "-o", "x.parquet"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    try:
        deadline = time.monotonic() + 30
        while _requests(words_emu) < 3 and time.monotonic() < deadline:  # token and pages
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("surveillance: interrupted: "), stderr
    assert "x.parquet not written" in lines[0]
    assert "thrown away" in lines[0] and "requests" in lines[0]
    assert "surveillance sync DIR --start 2026-01-05 --until 2026-01-07" in lines[0]
    assert "resumes" in lines[0]
    assert not list(tmp_path.iterdir())  # neither the file nor its partial


def test_interrupted_records_are_reported_apart_from_rejected():
    def failure(i, kind):
        return Failure(i, f"t-{i}", None, [], kind, None, json.dumps(retail(i)), kind)

    report = PublishReport(
        total=10,
        sent=8,
        accepted=5,
        requests=2,
        elapsed=1.0,
        interrupted=True,
        rejected=[failure(5, "invalid")] + [failure(i, "interrupted") for i in range(6, 10)],
    )
    summary = report.summary()
    assert summary.startswith("10 records, 5 accepted, 1 rejected (1 invalid), 4 interrupted,")
    assert "interrupted, " not in summary.split("4 interrupted, ", 1)[1]  # said once
    assert "<th style='text-align:left'>interrupted</th><td>4</td>" in report._repr_html_()
    assert "<th style='text-align:left'>rejected</th><td>1</td>" in report._repr_html_()


def test_the_command_line_guide_documents_the_cli_words():
    guide = Path(__file__).resolve().parent.parent / "docs" / "guide" / "command-line.md"
    text = " ".join(guide.read_text(encoding="utf-8").split())
    for words in (
        "python -m surveillance",
        "`-v`/`--debug`",
        "logger named `surveillance`",
        "in UTC",
        "--local-time",
        ".jsonl, .parquet or .csv",
    ):
        assert words in text, words


def test_client_publish_reads_a_csv_path_as_the_cli_does(tmp_path, words_emu):
    path = _record_files(tmp_path)["csv"]
    report = words_emu.client().publish(str(path), progress=False)
    assert (report.total, report.accepted, len(report.rejected)) == (6, 5, 1)
    assert report.rejected[0].transaction_id == "t-2"
    assert sorted(r["transactionId"] for r in words_emu.published()) == [
        "t-0",
        "t-1",
        "t-3",
        "t-4",
        "t-5",
    ]
