"""Typed output: ``output="arrow" | "pandas" | "polars"`` for events and every list, and the
``event_batches`` stream, against the emulator over real HTTP. The events schema is DESIGN.md's,
field by field; the pandas frame holds what ``pandas.json_normalize`` of the dicts holds."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap

import pytest
import surveillance as sv

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

UTC_MS = pa.timestamp("ms", tz="UTC")
UTC_S = pa.timestamp("s", tz="UTC")

#: DESIGN.md "Arrow schema of events", in order.
EVENTS_SCHEMA = pa.schema(
    [
        ("id", pa.utf8()),
        ("startTime", UTC_MS),
        ("endTime", UTC_MS),
        ("createTime", UTC_MS),
        ("type", pa.utf8()),
        ("subtype", pa.utf8()),
        ("siteId", pa.utf8()),
        ("deviceId", pa.utf8()),
        ("title", pa.utf8()),
        ("subtitle", pa.utf8()),
        ("locationTags", pa.list_(pa.utf8())),
        ("cameras", pa.list_(pa.struct([("id", pa.utf8()), ("name", pa.utf8())]))),
        ("details.duration_sec", pa.int64()),
        ("details.confirmed", pa.bool_()),
        ("details.origin", pa.utf8()),
        ("details.localTime", pa.int64()),
        ("details.generatedByEventStandard", pa.bool_()),
        ("details.marker", pa.utf8()),
        ("details", pa.utf8()),
    ]
)
TIME_COLUMNS = ["startTime", "endTime", "createTime"]


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(seed=7, sites=6, days=2, events_per_day=6_000) as emu:
        # A burst sharing one millisecond, so windows and de-duplication are exercised too.
        emu.add_events(emu.start + dt.timedelta(hours=13, milliseconds=3), 120)
        yield emu


@pytest.fixture(scope="module")
def client(emu):
    return emu.client()


def test_events_schema_is_designs_field_by_field(emu, client):
    table = pa.table(client.events(emu.start, emu.end, output="arrow", progress=False))
    assert len(table.schema) == len(EVENTS_SCHEMA)
    for got, want in zip(table.schema, EVENTS_SCHEMA):
        assert (got.name, got.type) == (want.name, want.type), got
    assert table.schema.equals(EVENTS_SCHEMA)
    assert table.column("id").to_pylist() == emu.truth(emu.start, emu.end)


def test_arrow_values_equal_the_dicts(emu, client):
    start, end = emu.start, emu.start + dt.timedelta(hours=20)
    dicts = client.events(start, end, progress=False)
    rows = pa.table(client.events(start, end, output="arrow", progress=False)).to_pylist()
    assert len(rows) == len(dicts) > 1000
    for row, d in zip(rows, dicts):
        assert row["id"] == d["id"]
        for col in TIME_COLUMNS:
            assert row[col] == dt.datetime.fromisoformat(d[col]), col
        for key in ("type", "subtype", "siteId", "deviceId", "title", "subtitle"):
            assert row[key] == d[key]
        assert row["locationTags"] == d["locationTags"]
        assert row["cameras"] == d["cameras"]
        assert json.loads(row["details"]) == d["details"]  # nothing of `details` is lost
        for key in ("duration_sec", "confirmed", "origin", "localTime", "marker"):
            assert row[f"details.{key}"] == d["details"].get(key), key


def _normalized(dicts: list) -> pd.DataFrame:
    """What a pandas user writes by hand: json_normalize, then the same typing as ours."""
    frame = pd.json_normalize(dicts)
    for col in TIME_COLUMNS:
        frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601").astype(
            "datetime64[ms, UTC]"
        )
    return frame


def test_pandas_output_equals_json_normalize(emu, client):
    start, end = emu.start + dt.timedelta(hours=6), emu.start + dt.timedelta(hours=30)
    ours = client.events(start, end, output="pandas", progress=False)
    for col in TIME_COLUMNS:
        assert str(ours[col].dtype) == "datetime64[ms, UTC]", col
    want = _normalized(client.events(start, end, progress=False))
    assert len(ours) == len(want) > 1000
    promoted = [c for c in EVENTS_SCHEMA.names if c not in ("details", "locationTags", "cameras")]
    # Ours has nullable booleans (a gap is <NA>); json_normalize leaves a gap as NaN in an
    # object column: the same typing for both.
    booleans = {"details.confirmed": "boolean", "details.generatedByEventStandard": "boolean"}
    assert all(str(ours[c].dtype) == "boolean" for c in booleans)
    pd.testing.assert_frame_equal(
        ours[promoted].reset_index(drop=True),
        want[promoted].astype(booleans).reset_index(drop=True),
    )
    # Nested columns stay in Arrow memory (pd.ArrowDtype); their values are the same lists.
    assert isinstance(ours["cameras"].dtype, pd.ArrowDtype)
    assert ours["locationTags"].tolist() == want["locationTags"].tolist()
    assert ours["cameras"].tolist() == want["cameras"].tolist()
    assert str(ours["details.duration_sec"].dtype) == "int64"


def test_polars_output_and_polars_reads_the_arrow_object(emu, client):
    pl = pytest.importorskip("polars")
    start, end = emu.start, emu.start + dt.timedelta(hours=8)
    frame = client.events(start, end, output="polars", progress=False)
    assert isinstance(frame, pl.DataFrame)
    assert frame.schema["startTime"] == pl.Datetime("ms", "UTC")
    assert frame["id"].to_list() == emu.truth(start, end)
    again = pl.DataFrame(client.events(start, end, output="arrow", progress=False))
    assert again.equals(frame)


def test_duckdb_reads_the_arrow_object(emu, client):
    duckdb = pytest.importorskip("duckdb")
    start, end = emu.start, emu.start + dt.timedelta(hours=8)
    events = client.events(start, end, output="arrow", progress=False)
    con = duckdb.connect()
    # The PyCapsule stream is read through pyarrow's reader, as duckdb documents it.
    con.register("events", pa.RecordBatchReader.from_stream(events))
    n, dur = con.execute(
        "select count(*), sum(\"details.duration_sec\") from events where type = 'bookmark'"
    ).fetchone()
    dicts = client.events(start, end, progress=False)
    assert n == len(dicts)
    assert dur == sum(e["details"]["duration_sec"] for e in dicts)


@pytest.mark.parametrize("output", ["arrow", "pandas", "polars"])
def test_empty_range_has_the_full_schema(emu, client, output):
    start = emu.end + dt.timedelta(days=30)
    result = client.events(start, start + dt.timedelta(hours=1), output=output, progress=False)
    if output == "arrow":
        table = pa.table(result)
        assert table.num_rows == 0 and table.schema.equals(EVENTS_SCHEMA)
    elif output == "pandas":
        assert len(result) == 0 and list(result.columns) == EVENTS_SCHEMA.names
        assert str(result["startTime"].dtype) == "datetime64[ms, UTC]"
    else:
        assert result.height == 0 and result.columns == EVENTS_SCHEMA.names


def test_malformed_event_is_a_clear_error(emu, client):
    emu.set_faults(corrupt_rate=1.0)
    with pytest.raises(sv.ApiError) as err:
        client.events(emu.start, emu.start + dt.timedelta(hours=3), output="arrow", progress=False)
    message = str(err.value)
    assert "details.duration_sec" in message and "expected an integer" in message
    assert "`n/a`" in message
    bad = [e for e in client.events(emu.start, emu.start + dt.timedelta(hours=3), progress=False)]
    corrupt = {e["id"] for e in bad if isinstance(e["details"]["duration_sec"], str)}
    assert corrupt and any(f"`{i}`" in message for i in corrupt)  # names the event


def test_malformed_event_in_event_batches_is_a_clear_error(emu, client):
    emu.set_faults(corrupt_rate=1.0)
    # In the first window: a typed error from the call itself. (Later in the stream, the
    # error can only cross the Arrow C stream interface as text: pyarrow's ArrowInvalid.)
    with pytest.raises(sv.ApiError, match="details.duration_sec"):
        client.event_batches(emu.start, emu.start + dt.timedelta(hours=3))


def test_event_batches_stream_equals_events(emu, client):
    reader = pa.RecordBatchReader.from_stream(client.event_batches(emu.start, emu.end))
    assert reader.schema.equals(EVENTS_SCHEMA)
    batches = list(reader)
    assert len(batches) > 1  # one per window, as they complete
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == emu.truth(emu.start, emu.end)


@pytest.mark.parametrize("order", ["desc", "shuffled"])
def test_arrow_is_sorted_and_exact_for_any_service_order(emu, client, order):
    emu.set_semantics(order, "[]")
    table = pa.table(client.events(emu.start, emu.end, output="arrow", progress=False))
    assert table.column("id").to_pylist() == emu.truth(emu.start, emu.end)


def test_event_batches_iterate_without_arro3(emu, client, monkeypatch):
    import sys

    import pyarrow as pa

    monkeypatch.setitem(sys.modules, "arro3", None)  # as where arro3-core is not installed
    want = client.events(emu.start, emu.end, output="arrow")
    batches = list(client.event_batches(emu.start, emu.end))
    assert batches and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert pa.Table.from_batches(batches).equals(want)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # neither: what to install
    with pytest.raises(ImportError, match=r"pip install 'surveillance\[pandas\]'"):
        iter(client.event_batches(emu.start, emu.end))


def test_event_batches_to_parquet(emu, client, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "events.parquet"
    reader = pa.RecordBatchReader.from_stream(client.event_batches(emu.start, emu.end))
    with pq.ParquetWriter(path, reader.schema) as writer:
        for batch in reader:
            writer.write_batch(batch)
    back = pq.read_table(path)
    assert back.schema.equals(EVENTS_SCHEMA)
    assert back.column("id").to_pylist() == emu.truth(emu.start, emu.end)


SITES_SCHEMA = {
    "id": pa.utf8(),
    "updatedAt": UTC_S,
    "deletedAt": UTC_S,
    "tags": pa.list_(pa.utf8()),
    "locationTags": pa.list_(pa.utf8()),
    "deviceCount": pa.int64(),
    "cloudStoragePackageId": pa.utf8(),
}
STREAM = pa.struct(
    [
        ("id", pa.utf8()),
        ("name", pa.utf8()),
        ("retention", pa.int64()),
        ("dimensions", pa.struct([("width", pa.int64()), ("height", pa.int64())])),
        ("fps", pa.float64()),
        ("average_bps", pa.int64()),
        ("earliestSegmentDate", pa.utf8()),
    ]
)
LOCALE_MAP = pa.map_(pa.utf8(), pa.utf8())


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("sites", SITES_SCHEMA),
        ("devices", {"id": pa.utf8(), "totalCameras": pa.int64(), "siteId": pa.utf8()}),
        ("cameras", {"id": pa.utf8(), "streams": pa.list_(STREAM), "model": pa.utf8()}),
        ("reports", {"id": pa.utf8(), "name": LOCALE_MAP, "description": LOCALE_MAP}),
    ],
)
def test_lists_are_typed_and_equal_the_dicts(client, kind, expected):
    dicts = getattr(client, kind)()
    table = pa.table(getattr(client, kind)(output="arrow"))
    for name, typ in expected.items():
        assert table.schema.field(name).type == typ, name
    assert table.num_rows == len(dicts) > 0
    assert set(table.schema.names) == set().union(*(d.keys() for d in dicts))
    rows = table.to_pylist()
    for row, d in zip(rows, dicts):
        for key, value in d.items():
            if key == "deletedAt" and value == 0:  # "0 normally means not deleted"
                assert row[key] is None
            elif key in ("updatedAt", "deletedAt"):
                assert row[key] == dt.datetime.fromtimestamp(value, dt.timezone.utc)
            elif key in ("name", "description") and kind == "reports":
                assert dict(row[key]) == value
            else:
                assert row[key] == value, key


def test_lists_as_pandas_and_polars(client):
    pl = pytest.importorskip("polars")
    sites = client.sites(output="pandas")
    assert str(sites["updatedAt"].dtype) == "datetime64[s, UTC]"
    cams = client.cameras(output="polars")
    assert isinstance(cams, pl.DataFrame) and cams.height == len(client.cameras())


def test_a_site_not_deleted_has_no_deletion_time_in_any_typed_output(client, tmp_path):
    """The service's `deletedAt: 0` means "not deleted": null in Arrow, pandas (NaT), Parquet
    and DuckDB, never 1970-01-01; the dicts keep the service's 0."""
    duckdb = pytest.importorskip("duckdb")
    pq = pytest.importorskip("pyarrow.parquet")
    assert {site["deletedAt"] for site in client.sites()} == {0}
    table = pa.table(client.sites(output="arrow"))
    assert table.column("deletedAt").null_count == table.num_rows
    frame = client.sites(output="pandas")
    assert frame["deletedAt"].isna().all()
    assert str(frame["deletedAt"].dtype) == "datetime64[s, UTC]"
    path = tmp_path / "sites.parquet"
    pq.write_table(table, path)
    assert pq.read_table(path).column("deletedAt").null_count == table.num_rows
    found = duckdb.sql(f"SELECT count(*) FROM '{path}' WHERE deletedAt IS NULL").fetchall()
    assert found == [(table.num_rows,)]


def test_unknown_output_is_a_value_error(emu, client):
    with pytest.raises(ValueError, match="`output` must be one of"):
        client.events(emu.start, emu.end, output="numpy")
    with pytest.raises(ValueError, match="`output` must be one of"):
        client.sites(output="csv")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_arrow_output_needs_no_pyarrow():
    """With pyarrow and pandas unimportable, ``output="arrow"`` still works (the object is
    pyo3-arrow's), and ``output="pandas"`` says which extra to install."""
    result = _run(
        """
        import sys
        sys.modules["pyarrow"] = None
        sys.modules["pandas"] = None
        import surveillance as sv
        with sv.Emulator(sites=2, days=1, events_per_day=200) as emu:
            c = emu.client()
            t = c.events(emu.start, emu.end, output="arrow", progress=False)
            assert hasattr(t, "__arrow_c_stream__")
            assert t.num_rows == 200, t.num_rows
            try:
                c.events(emu.start, emu.end, output="pandas", progress=False)
            except ImportError as e:
                print("IMPORT-ERROR:", e)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORT-ERROR:" in result.stdout
    assert "pip install 'surveillance[pandas]'" in result.stdout


def test_event_batches_raises_typed_errors_from_the_call(emu, client):
    """What fails at once (an unknown report, refused credentials) raises its own exception
    from ``event_batches`` itself, before any reader is handed out."""
    with pytest.raises(sv.NotFoundError):
        client.event_batches(emu.start, emu.end, report_id="00000000-0000-4000-8000-000000000000")
    bad = sv.Client(emu.api_key, emu.client_id, "wrong-secret", base_url=emu.url, max_retries=0)
    with pytest.raises(sv.AuthError):
        bad.event_batches(emu.start, emu.end)


def test_write_parquet_in_rust_from_any_arrow_data(emu, client, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    pl = pytest.importorskip("polars")
    truth = emu.truth(emu.start, emu.end)
    stream_path = tmp_path / "stream.parquet"
    assert sv.write_parquet(client.event_batches(emu.start, emu.end), stream_path) == len(truth)
    back = pq.read_table(stream_path)
    assert back.schema.equals(EVENTS_SCHEMA) and back.column("id").to_pylist() == truth
    # Our table, a pyarrow table and a polars frame are all Arrow data.
    table = client.events(emu.start, emu.end, output="arrow", progress=False)
    for i, data in enumerate([table, back, pl.DataFrame(table)]):
        assert sv.write_parquet(data, tmp_path / f"{i}.parquet") == len(truth)
        assert pq.read_table(tmp_path / f"{i}.parquet").column("id").to_pylist() == truth


def test_write_parquet_failure_leaves_nothing(emu, client, tmp_path):
    target = tmp_path / "events.parquet"
    target.write_bytes(b"an older file")
    table = pa.table({"x": [1, 2]})
    with pytest.raises(OSError, match="cannot create"):
        sv.write_parquet(table, tmp_path / "missing-dir" / "x.parquet")
    with pytest.raises(TypeError, match="must be Arrow data"):
        sv.write_parquet([1, 2], target)
    assert target.read_bytes() == b"an older file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet"]
