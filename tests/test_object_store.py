"""Object-store destinations of ``client.sync_events``, ``surveillance sync`` and
``surveillance events -o``, against an S3-compatible server on loopback (moto's): incremental
runs equal to the emulator's truth, a run stopped between its data files and its state, the
lock object, exports that appear whole or not at all, refusals before any request, ``file://``
as a local path, and no credential of a URI in what is printed."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import logging
import os
import tempfile
import threading
import time
import uuid

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import surveillance as sv
from surveillance import _store, cli
from surveillance import sync as svsync

from conftest import emulator_fixture, interrupt_after, service_env

moto_server = pytest.importorskip("moto.server", reason="the tests' S3 server is moto's")

UTC = dt.timezone.utc
H = dt.timedelta(hours=1)
START = dt.datetime(2026, 1, 5, tzinfo=UTC)
#: The command line reads as fast as the emulator answers.
FAST = ["--read-per-second", "0", "--read-concurrency", "0"]
DAY = ["--start", "2026-01-05", "--end", "2026-01-06"]

#: Three days of events, 2,500 a day.
emu = emulator_fixture(seed=7, sites=6, days=3, events_per_day=2500)


@pytest.fixture(scope="module")
def endpoint():
    """The address of an S3 server on loopback (moto's, in a thread of this process)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint, monkeypatch, tmp_path):
    """pyarrow's S3 filesystem on the server, with pyarrow's environment pointed at it (dummy
    credentials, its endpoint, no AWS configuration file, no instance metadata), and the
    client's on the emulator: nothing leaves loopback."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )


@pytest.fixture
def s3uri(endpoint):
    """``s3://PATH`` with the server's endpoint in its query string, which pyarrow reads in
    every version (``AWS_ENDPOINT_URL`` only in its recent ones)."""
    host = endpoint.split("://", 1)[1]
    return lambda path: f"s3://{path}?endpoint_override={host}&scheme=http&region=us-east-1"


@pytest.fixture
def bucket(s3) -> str:
    """A new, empty bucket."""
    name = f"events-{uuid.uuid4().hex[:12]}"
    s3.create_dir(name)
    return name


@pytest.fixture
def client(emu):
    with emu.client() as c:
        yield c


@pytest.fixture
def local_tmp(tmp_path, monkeypatch):
    """The directory of this process's temporary files (an export's, before its upload)."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def expected(client, start, end) -> pa.Table:
    return pa.table(client.events(start, end, output="arrow", progress=False))


def read_live(uri: str) -> pa.Table:
    """The dataset at ``uri`` as its state names it, without the partition column, in
    (startTime, id) order."""
    filesystem, base = pafs.FileSystem.from_uri(uri)
    files = svsync.sync_files(uri)
    dataset = ds.dataset(files, filesystem=filesystem, partitioning="hive", partition_base_dir=base)
    table = dataset.to_table()
    assert table.column_names[-1] == "date"
    return table.drop(["date"]).sort_by([("startTime", "ascending"), ("id", "ascending")])


def listing(s3, prefix: str) -> set:
    """The objects under ``prefix``, relative to it."""
    infos = s3.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return {i.path[len(prefix) + 1 :] for i in infos if i.type == pafs.FileType.File}


def get(s3, path: str) -> bytes:
    with s3.open_input_stream(path) as f:
        return f.read()


def assert_no_duplicates(table: pa.Table) -> None:
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicated ids"


@pytest.fixture
def service(emu, monkeypatch):
    """The emulator's settings in this process's ``SURVEILLANCE_*`` variables, for
    ``cli.main``."""
    for name, value in service_env(emu).items():
        if name.startswith("SURVEILLANCE_"):
            monkeypatch.setenv(name, value)


def requests(emu) -> int:
    return sum(sum(by_status.values()) for by_status in emu.stats()["requests"].values())


# --- sync ------------------------------------------------------------------------------------
def test_two_runs_to_s3_hold_the_emulators_truth_and_read_back_through_the_state(
    emu, client, s3, s3uri, bucket
):
    uri = s3uri(f"{bucket}/events")
    first = client.sync_events(uri, START, until=START + 30 * H)
    second = client.sync_events(uri, START, until=emu.end)
    # The second run is incremental: from the synced instant minus the settle hour.
    assert second.ranges == [(START + 29 * H, emu.end)]
    assert second.replaced == len(emu.truth(START + 29 * H, START + 30 * H)) > 0
    assert first.added + second.added == 7500
    assert first.path == second.path == f"s3://{bucket}/events"  # no query string
    got = read_live(uri)
    assert_no_duplicates(got)
    assert got.column("id").to_pylist() == emu.truth(START, emu.end)
    assert got.equals(expected(client, START, emu.end))
    # The state names one file a date, and the prefix holds those and the state only: the
    # files the second run replaced are deleted, and no lock is left.
    state = svsync.read_state(uri)
    assert sorted(state["files"]) == ["2026-01-05", "2026-01-06", "2026-01-07"]
    assert state["synced_until"] == "2026-01-08T00:00:00.000Z"
    assert listing(s3, f"{bucket}/events") == {svsync.STATE_FILE, *state["files"].values()}
    assert json.loads(get(s3, f"{bucket}/events/{svsync.STATE_FILE}")) == state
    for file in state["files"].values():
        assert pq.read_schema(s3.open_input_file(f"{bucket}/events/{file}")) == got.schema
    # Between runs, a reader of the whole prefix sees the same.
    whole = ds.dataset(f"{bucket}/events", filesystem=s3, partitioning="hive").to_table()
    assert whole.num_rows == 7500
    assert svsync.sync_files(uri) == [f"{bucket}/events/{f}" for f in state["files"].values()]


class StateUploadFails:
    """A pyarrow filesystem whose uploads of the sync state fail (and nothing else): a run
    stopped between its data files and its state."""

    def __init__(self, filesystem) -> None:
        self._filesystem = filesystem

    def __getattr__(self, name):
        return getattr(self._filesystem, name)

    def open_output_stream(self, path, *args, **kwargs):
        if path.endswith(f"/{svsync.STATE_FILE}"):
            raise OSError("the upload of the state failed")
        return self._filesystem.open_output_stream(path, *args, **kwargs)


def test_a_run_stopped_before_its_state_leaves_the_previous_one_and_the_next_completes(
    emu, client, s3, s3uri, bucket, monkeypatch
):
    uri = s3uri(f"{bucket}/events")
    prefix = f"{bucket}/events"
    client.sync_events(uri, START, until=START + 30 * H)
    state = get(s3, f"{prefix}/{svsync.STATE_FILE}")
    before = listing(s3, prefix)
    resolve = _store.resolve

    def failing(path, name):
        location = resolve(path, name)
        return location._replace(filesystem=StateUploadFails(location.filesystem))

    with monkeypatch.context() as patched:
        patched.setattr(_store, "resolve", failing)
        with pytest.raises(OSError, match="upload of the state failed"):
            client.sync_events(uri, START, until=emu.end)
    # The previous state and its files as they were; the stopped run's files beside them.
    assert get(s3, f"{prefix}/{svsync.STATE_FILE}") == state
    leftovers = listing(s3, prefix) - before
    assert before < listing(s3, prefix)
    assert {f.split("/")[0] for f in leftovers} == {"date=2026-01-06", "date=2026-01-07"}
    assert svsync.LOCK_FILE not in listing(s3, prefix)
    previous = read_live(uri)
    assert_no_duplicates(previous)
    assert previous.equals(expected(client, START, START + 30 * H))
    # The next run deletes the leftovers and fetches the same range again.
    again = client.sync_events(uri, START, until=emu.end)
    assert again.ranges == [(START + 29 * H, emu.end)]
    got = read_live(uri)
    assert_no_duplicates(got)
    assert got.equals(expected(client, START, emu.end))
    files = svsync.read_state(uri)["files"].values()
    assert listing(s3, prefix) == {svsync.STATE_FILE, *files}
    assert not leftovers & set(files)


def test_a_run_interrupted_on_s3_keeps_its_pages_there_for_the_next(emu, s3, s3uri, bucket):
    """Ctrl-C part-way through a sync to S3: the pages read past the windows stored wait in an
    object beside the dataset; the next run takes them (both runs together ask what one run
    asks, and a token), ends equal to the truth, and deletes that object."""
    uri, prefix = s3uri(f"{bucket}/events"), f"{bucket}/events"
    limits = sv.Limits(read_per_second=100.0)
    before = events_requests(emu)
    emu.client(limits=limits).sync_events(s3uri(f"{bucket}/whole"), START, until=emu.end)
    once = events_requests(emu) - before
    fired = []

    def ctrl_c(update: dict) -> None:
        if not fired and update.get("requests", 0) >= once // 2:
            fired.append(True)
            raise KeyboardInterrupt

    before = events_requests(emu)
    with pytest.raises(svsync.SyncInterrupted):
        emu.client(limits=limits).sync_events(uri, START, until=emu.end, progress=ctrl_c)
    assert "_sync_carried.bin" in listing(s3, prefix)
    with emu.client(limits=limits) as client:
        client.sync_events(uri, START, until=emu.end)
        both = events_requests(emu) - before
        got = read_live(uri)
        assert_no_duplicates(got)
        assert got.equals(expected(client, START, emu.end))
    assert "_sync_carried.bin" not in listing(s3, prefix)
    assert both <= once + 2, (both, once)


def events_requests(emu) -> int:
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def test_a_lock_of_another_run_refuses_a_run_until_its_lease_ends(emu, s3, s3uri, bucket):
    uri = s3uri(f"{bucket}/events")
    lock = f"{bucket}/events/{svsync.LOCK_FILE}"
    now = dt.datetime.now(UTC)

    def put_lock(expires: dt.datetime) -> None:
        holder = {
            "run": "20260105T000000Z-0badc0de",
            "host": "etl-7",
            "pid": 4242,
            "started_at": "2026-01-05T00:00:00.000Z",
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        }
        with s3.open_output_stream(lock) as f:
            f.write(json.dumps(holder).encode())

    put_lock(now + dt.timedelta(minutes=4))
    emu.reset_stats()
    with emu.client() as fresh:
        with pytest.raises(sv.SyncLockedError) as refused:
            fresh.sync_events(uri, START, until=START + 6 * H)
        assert fresh._sent() == 0
    assert requests(emu) == 0
    message = str(refused.value)
    assert refused.value.path == f"s3://{bucket}/events"
    assert "another sync is running" in message and "etl-7" in message and "4242" in message
    assert "until" in message and svsync.LOCK_FILE in message
    assert listing(s3, f"{bucket}/events") == {svsync.LOCK_FILE}
    # The lease of a run that was killed ends: the next run goes on, and leaves no lock.
    put_lock(now - dt.timedelta(seconds=1))
    with emu.client() as fresh:
        result = fresh.sync_events(uri, START, until=START + 6 * H)
    assert result.added == len(emu.truth(START, START + 6 * H)) > 0
    assert svsync.LOCK_FILE not in listing(s3, f"{bucket}/events")


def test_a_run_whose_lock_was_taken_over_records_nothing(
    emu, client, s3, s3uri, bucket, monkeypatch
):
    uri = s3uri(f"{bucket}/events")
    lock = f"{bucket}/events/{svsync.LOCK_FILE}"
    finish = svsync._PartitionWriter.finish

    def finish_then_lose_the_lock(writer) -> None:
        finish(writer)
        # Another run takes the lock (this run's lease ran out) once the data is written.
        with s3.open_output_stream(lock) as f:
            f.write(json.dumps({"run": "20260105T000000Z-0badc0de", "host": "etl-7"}).encode())

    with monkeypatch.context() as patched:
        patched.setattr(svsync._PartitionWriter, "finish", finish_then_lose_the_lock)
        with pytest.raises(sv.SyncLockedError, match="another sync took the lock") as lost:
            client.sync_events(uri, START, until=START + 6 * H)
    assert "etl-7" in str(lost.value) and "recorded nothing" in str(lost.value)
    assert svsync.read_state(uri) is None
    assert svsync.LOCK_FILE in listing(s3, f"{bucket}/events")  # the other run's, kept
    s3.delete_file(lock)
    result = client.sync_events(uri, START, until=START + 6 * H)
    assert result.added == len(emu.truth(START, START + 6 * H))
    assert listing(s3, f"{bucket}/events") == {
        svsync.STATE_FILE,
        *svsync.read_state(uri)["files"].values(),
    }


def test_a_second_run_while_one_holds_the_lock_is_refused(emu, client, s3, s3uri, bucket):
    uri = s3uri(f"{bucket}/events")
    lock = f"{bucket}/events/{svsync.LOCK_FILE}"
    emu.set_faults(latency_ms=300)  # the first run holds the lock for a while
    results, errors = [], []

    def first() -> None:
        try:
            results.append(client.sync_events(uri, START, until=START + 6 * H))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 30
    while s3.get_file_info(lock).type == pafs.FileType.NotFound:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with emu.client() as second:
        with pytest.raises(sv.SyncLockedError, match="another sync is running") as refused:
            second.sync_events(uri, START, until=START + 6 * H)
        assert second._sent() == 0
    assert f"pid {os.getpid()}" in str(refused.value)
    thread.join(timeout=60)
    assert not errors and len(results) == 1
    emu.set_faults()
    assert read_live(uri).equals(expected(client, START, START + 6 * H))
    assert svsync.LOCK_FILE not in listing(s3, f"{bucket}/events")


def test_the_cli_syncs_to_s3(emu, s3, s3uri, bucket, service, capsys):
    uri = s3uri(f"{bucket}/events")
    argv = ["sync", uri, "--start", "2026-01-05", "--settle", "30m", *FAST]
    assert cli.main([*argv, "--until", "2026-01-05T12:00:00Z"]) == 0
    assert cli.main([*argv, "--until", "2026-01-06T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    done = "fetched 2026-01-05T11:30:00.000Z .. 2026-01-06T00:00:00.000Z"
    assert f"s3://{bucket}/events: {done}" in out
    got = read_live(uri)
    assert got.column("id").to_pylist() == emu.truth(START, START + 24 * H)


# --- events -o -------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_events_o_s3_writes_the_object_of_the_local_export(
    emu, client, s3, s3uri, bucket, service, local_tmp, tmp_path, capsys, suffix
):
    uri = s3uri(f"{bucket}/exports/day{suffix}")
    local = tmp_path / f"day{suffix}"
    assert cli.main(["events", *DAY, "-o", uri, *FAST]) == 0
    assert f"to s3://{bucket}/exports/day{suffix}: " in capsys.readouterr().out
    assert cli.main(["events", *DAY, "-o", str(local), *FAST]) == 0
    assert list(local_tmp.iterdir()) == []  # the upload's temporary file is removed
    data = get(s3, f"{bucket}/exports/day{suffix}")
    if suffix == ".parquet":
        table = pq.read_table(pa.BufferReader(data))
        assert table.equals(expected(client, START, START + 24 * H))
        assert table.equals(pq.read_table(local))
    else:
        assert data == local.read_bytes()
        if suffix == ".csv":
            rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
            ids = [r["id"] for r in rows]
        else:
            ids = [json.loads(line)["id"] for line in data.decode("utf-8").splitlines()]
        assert ids == emu.truth(START, START + 24 * H)


def test_ctrl_c_or_a_failure_during_an_export_leaves_no_object(
    emu, s3, s3uri, bucket, service, local_tmp, capsys
):
    uri = s3uri(f"{bucket}/exports/all.parquet")
    argv = ["events", "--start", "2026-01-05", "--end", "2026-01-08", "-o", uri, *FAST]
    emu.set_faults(latency_ms=1000)
    with interrupt_after(0.8, kill=True):
        assert cli.main(argv) == 130
    assert "all.parquet not written" in capsys.readouterr().err
    assert s3.get_file_info(f"{bucket}/exports/all.parquet").type == pafs.FileType.NotFound
    emu.set_faults(error_rate=1.0)
    assert cli.main([*argv, "--timeout", "2", "--max-outage", "0"]) == 1
    assert s3.get_file_info(f"{bucket}/exports/all.parquet").type == pafs.FileType.NotFound
    assert listing(s3, bucket) == set()
    assert list(local_tmp.iterdir()) == []


# --- refusals, file://, credentials ----------------------------------------------------------
def test_an_unknown_scheme_or_a_missing_bucket_is_refused_before_any_request(
    emu, s3, s3uri, bucket, service, capsys
):
    missing = f"missing-{uuid.uuid4().hex[:12]}"
    emu.reset_stats()
    with emu.client() as fresh:
        with pytest.raises(sv.ConfigError, match="pyarrow does not know the scheme `foo`"):
            fresh.sync_events("foo://x/events", START, until=START + H)
        with pytest.raises(sv.ConfigError, match=f"the bucket `{missing}` does not exist"):
            fresh.sync_events(s3uri(f"{missing}/events"), START, until=START + H)
        assert fresh._sent() == 0
    assert cli.main(["events", *DAY, "-o", "foo://x/day.parquet", *FAST]) == 2
    assert "foo://x/day.parquet" in capsys.readouterr().err
    assert cli.main(["events", *DAY, "-o", s3uri(f"{missing}/day.csv"), *FAST]) == 1
    err = capsys.readouterr().err
    assert f"s3://{missing}/day.csv" in err and "does not exist" in err
    assert cli.main(["events", *DAY, "-o", s3uri(f"{bucket}/day.txt"), *FAST]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    with s3.open_output_stream(f"{bucket}/old.csv/part") as f:
        f.write(b"x")
    assert cli.main(["events", *DAY, "-o", s3uri(f"{bucket}/old.csv"), *FAST]) == 1
    assert f"s3://{bucket}/old.csv': it is a directory" in capsys.readouterr().err
    assert cli.main(["sync", s3uri(f"{missing}/ds"), "--start", "2026-01-05", *FAST]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert requests(emu) == 0
    assert s3.get_file_info(missing).type == pafs.FileType.NotFound
    assert listing(s3, bucket) == {"old.csv/part"}


@pytest.mark.parametrize("scheme", ["S3", "s3"])
def test_a_scheme_in_capitals_is_the_same_scheme(s3uri, bucket, scheme):
    uri = s3uri(f"{bucket}/events")
    place = _store.resolve(scheme + uri[len("s3") :], "path")
    assert isinstance(place.filesystem, pafs.S3FileSystem)
    assert place.path == f"{bucket}/events"


def test_a_file_uri_is_a_local_path(emu, client, tmp_path, service, capsys):
    path = tmp_path / "my events"
    uri = "file://" + str(path).replace(" ", "%20")
    result = client.sync_events(uri, START, until=START + 6 * H)
    assert result.path == str(path)
    assert sorted(p.name for p in path.iterdir()) == [
        svsync.LOCK_FILE,
        svsync.STATE_FILE,
        "date=2026-01-05",
    ]
    assert (path / "date=2026-01-05" / svsync.PART_FILE).is_file()
    assert svsync.read_state(uri) == svsync.read_state(path)
    assert svsync.sync_files(uri) == [str(path / "date=2026-01-05" / svsync.PART_FILE)]
    table = ds.dataset(str(path), partitioning="hive").to_table()
    assert table.num_rows == len(emu.truth(START, START + 6 * H))
    out = tmp_path / "day.csv"
    assert cli.main(["events", *DAY, "-o", f"file://{out}", *FAST]) == 0
    assert out.is_file() and not list(tmp_path.glob("*.partial"))


def test_a_uris_credentials_and_query_are_never_shown(
    emu, client, endpoint, s3, bucket, service, capsys
):
    secret = "s3cr3t-" + uuid.uuid4().hex
    host = endpoint.split("://", 1)[1]
    uri = (
        f"s3://testing:{secret}@{bucket}/events?endpoint_override={host}&scheme=http"
        "&region=us-east-1"
    )
    result = client.sync_events(uri, START, until=START + 6 * H)
    assert result.path == f"s3://{bucket}/events"
    assert read_live(uri).num_rows == result.added > 0
    with pytest.raises(sv.SyncLockedError) as refused:
        with svsync._open(uri).lock(), svsync._open(uri).lock():
            pass  # pragma: no cover
    with pytest.raises(sv.ConfigError) as damaged:
        with s3.open_output_stream(f"{bucket}/events/{svsync.STATE_FILE}") as f:
            f.write(b"{not json")
        client.sync_events(uri, START, until=START + 7 * H)
    export = uri.replace("/events?", "/day.jsonl?")
    assert cli.main(["events", *DAY, "-o", export, *FAST]) == 0
    assert get(s3, f"{bucket}/day.jsonl").count(b"\n") == len(emu.truth(START, START + 24 * H))
    assert cli.main(["sync", uri, "--start", "2026-01-05", "--until", "2026-01-06", *FAST]) == 2
    printed = capsys.readouterr()
    assert f"to s3://{bucket}/day.jsonl: " in printed.out
    shown = [str(result), repr(result), str(refused.value), str(damaged.value), *printed]
    for text in shown:
        assert secret not in text and "endpoint_override" not in text and host not in text
    assert f"s3://{bucket}/events" in str(damaged.value)
