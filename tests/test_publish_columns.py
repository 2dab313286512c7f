"""``client.publish`` from columns (pandas DataFrames, pyarrow tables and streams, polars
DataFrames, Parquet files) against the emulator over real HTTP: the records stored are those
the dict path stores, the schema is checked once (nothing sent when it does not fit), values
per row with the dict path's problems and row numbers, and Ctrl-C leaves a report whose
``write_failures`` finishes the job."""

from __future__ import annotations

import datetime as dt
import json
import math
import pickle
from dataclasses import replace

import pytest
import surveillance as sv
from surveillance.publish import Problem

from conftest import T0, interrupt_after

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

UTC = dt.timezone.utc


def record(i: int) -> dict:
    """Retail, restaurant and other records with three items, optional fields in some rows
    only, and times as ISO strings, epoch milliseconds and timestamps."""
    kind = ("retail", "restaurant", "other")[i % 3]
    r: dict = {
        "dataType": kind,
        "schemaVersion": "1",
        "startTime": f"2026-11-17T05:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
        "endTime": T0 + i + 60_000,
        "locationId": f"store-{i % 7}",
        "dataSourceId": 'pos-"1"',
    }
    if kind == "other":
        r.update(eventUniqueId=f"e-{i}", eventType="door open")
    else:
        r.update(transactionId=f"t-{i}", status="sale")
    if kind == "restaurant":
        r.update(tableNumber=str(i % 20), guestCount=i % 5 + 1)
    r["items"] = [
        {
            "time": dt.datetime(2026, 11, 17, 5, 0, k, 1234, tzinfo=UTC) + dt.timedelta(seconds=i),
            "quantity": k + 1,
            "description": f"item {k} – é",
            "unitPrice": 2.5 + k / 4,
            "type": "SALE",
        }
        for k in range(3)
    ]
    if kind == "other":
        for item in r["items"]:
            del item["unitPrice"]  # not an item field of `other`
    if i % 4 == 0:
        r["employeeName"] = f"employee {i}"
    if i % 5 == 0 and kind != "other":
        r["customerId"] = f"c-{i}"
    return r


def key(r: dict) -> tuple:
    return (r.get("transactionId", ""), r.get("eventUniqueId", ""))


def webhook_requests(emu) -> int:
    return sum(sum(v.values()) for k, v in emu.stats()["requests"].items() if "webhook" in k)


def stored(emu) -> list:
    return sorted(emu.published(), key=key)


def test_every_kind_of_columns_stores_what_the_dict_path_stores(emu, client, tmp_path):
    pl = pytest.importorskip("polars")
    rows = [record(i) for i in range(600)]
    report = client.publish(rows, progress=False)
    assert report.ok, report
    expected = stored(emu)
    assert len(expected) == 600

    frame = pd.DataFrame(rows)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    path = tmp_path / "records.parquet"
    pq.write_table(table, path, row_group_size=250)
    sources = {
        "pandas": frame,
        "pyarrow": table,
        "polars": pl.from_arrow(table),
        "stream": table.to_reader(max_chunksize=97),
        "parquet": str(path),
    }
    for name, source in sources.items():
        emu.clear_published()
        report = client.publish(source, progress=False)
        assert (report.total, report.accepted, report.rejected) == (600, 600, []), name
        assert stored(emu) == expected, name


def test_times_of_every_kind_are_epoch_milliseconds(emu, client):
    table = pa.table(
        {
            "dataType": ["other"] * 3,
            "schemaVersion": ["1"] * 3,
            "startTime": pa.array(
                [T0 * 1000 + 999, T0 * 1000, T0 * 1000], pa.timestamp("us", tz="Europe/Paris")
            ),
            "endTime": pa.array([dt.date(2026, 11, 18)] * 3, pa.date32()),
            "locationId": ["l"] * 3,
            "dataSourceId": ["d"] * 3,
            "eventUniqueId": pa.array(["a", "b", "c"]).dictionary_encode(),
            "eventType": pa.array(["x"] * 3, pa.string_view()),
            "items": pa.array(
                [[{"time": T0 + 5}], [{"time": T0 + 6}], [None, {"time": None}]],
                pa.list_(pa.struct([("time", pa.int64())])),
            ),
        }
    )
    report = client.publish(table, progress=False)
    assert report.ok, report
    got = {r["eventUniqueId"]: r for r in emu.published()}
    midnight = int(dt.datetime(2026, 11, 18, tzinfo=UTC).timestamp() * 1000)
    assert got["a"]["startTime"] == T0 and got["a"]["endTime"] == midnight
    assert got["a"]["items"] == [{"time": T0 + 5}]
    # A null element and a null field are left out.
    assert got["c"]["items"] == [{}]


def test_a_legacy_column_is_refused_once_before_any_request(emu, client):
    frame = pd.DataFrame([record(3 * i) for i in range(1000)]).rename(
        columns={"locationId": "storeId"}
    )
    before = webhook_requests(emu)
    with pytest.raises(sv.ValidationError) as e:
        client.publish(frame, progress=False)
    assert webhook_requests(emu) == before == 0
    assert emu.published() == []
    assert e.value.problems == [
        Problem(
            "storeId",
            "unknown field `storeId`: it is the legacy name of `locationId`; use `locationId`",
            "error",
        ),
        Problem("locationId", "missing required field `locationId`", "error"),
    ]
    assert "nothing was sent" in str(e.value) and "storeId" in str(e.value)
    # The problems survive a pickle (a Dask worker's error reaching the client).
    again = pickle.loads(pickle.dumps(e.value))
    assert again.problems == e.value.problems and str(again) == str(e.value)
    # The dict path says the same of each row.
    row = frame.iloc[0].dropna().to_dict()
    assert set(e.value.problems) <= set(sv.validate(row))


def test_a_column_of_the_wrong_type_is_one_problem(emu, client):
    table = pa.Table.from_pylist([record(3 * i) for i in range(50)])
    table = table.set_column(
        table.schema.get_field_index("locationId"), "locationId", pa.array(range(50))
    )
    with pytest.raises(sv.ValidationError) as e:
        client.publish(table, progress=False)
    assert [str(p) for p in e.value.problems] == [
        "locationId: expected a string, found a column of `int64`; cast the column to strings"
    ]
    assert webhook_requests(emu) == 0


def test_bad_values_are_reported_per_row_with_the_dict_paths_problems(emu, client):
    rows = [record(3 * i) for i in range(300)]
    rows[3]["transactionId"] = None  # a required field null in a row
    rows[150]["locationId"] = ""  # an empty id
    rows[299]["startTime"] = "2026-11-17T05:00:00"  # no zone
    rows[200]["items"][1]["unitPrice"] = math.nan  # no JSON form
    table = pa.Table.from_pylist(rows)
    report = client.publish(table.to_reader(max_chunksize=64), progress=False)
    assert report.accepted == 296
    assert [f.index for f in report.rejected] == [3, 150, 200, 299]
    # The dict path reports the same rows with the same problems and messages.
    dicts = [{k: v for k, v in r.items() if v is not None} for r in rows]
    emu.clear_published()
    expected = client.publish(dicts, progress=False)
    assert [(f.index, f.problems, f.message) for f in report.rejected] == [
        (f.index, f.problems, f.message) for f in expected.rejected
    ]
    assert report.rejected[2].problems[0].path == "items[1].unitPrice"
    assert report.rejected[1].transaction_id == "t-450"
    assert len(emu.published()) == 296


def test_without_validation_columns_are_sent_as_they_are(emu, client):
    frame = pd.DataFrame([record(3 * i) for i in range(20)]).rename(
        columns={"locationId": "storeId"}
    )
    report = client.publish(frame, validate=False, batch_size=10, progress=False)
    # The service refuses them itself, with its own message.
    assert report.accepted == 0 and len(report.rejected) == 20
    assert {f.status for f in report.rejected} == {400}
    assert "storeId" in report.rejected[0].message
    assert webhook_requests(emu) > 0


def test_items_must_be_a_list_of_structs(emu, client):
    rows = [record(3 * i) for i in range(5)]
    for items in (pa.array(["[]"] * 5), pa.array([[1, 2]] * 5)):
        table = pa.Table.from_pylist(rows)
        table = table.set_column(table.schema.get_field_index("items"), "items", items)
        for validate in (True, False):
            with pytest.raises(sv.ValidationError, match="must be a list of structs") as e:
                client.publish(table, validate=validate, progress=False)
            assert [p.path for p in e.value.problems] == ["items"]
    assert webhook_requests(emu) == 0


def test_a_frame_without_items_is_refused_with_the_layout(emu, client):
    # Retail and restaurant records require items; `other` records do not.
    frame = pd.DataFrame([record(i) for i in range(30)]).drop(columns="items")
    with pytest.raises(sv.ValidationError) as e:
        client.publish(frame, progress=False)
    (problem,) = e.value.problems
    assert problem.path == "items"
    assert problem.message.startswith(
        "missing required field `items`: add an `items` column, a list of structs, one struct "
        "per item whose fields are the item fields"
    )
    assert webhook_requests(emu) == 0
    others = frame[frame["dataType"] == "other"].dropna(axis="columns", how="all")
    report = client.publish(others, progress=False)
    assert report.ok and report.accepted == 10


def test_a_frame_that_pyarrow_cannot_type_is_published_row_by_row(emu, client):
    rows = [record(3 * i) for i in range(20)]
    frame = pd.DataFrame(rows)
    frame["locationId"] = frame["locationId"].astype(object)
    frame.loc[5, "locationId"] = 17  # numbers and strings in one column: no Arrow type
    report = client.publish(frame, progress=False)
    # As dicts: the row whose value is wrong is kept back with the dict path's problem.
    assert report.accepted == 19 and [f.index for f in report.rejected] == [5]
    assert report.rejected[0].problems[0].path == "locationId"


def test_an_empty_frame_publishes_nothing(emu, client):
    frame = pd.DataFrame([record(0)]).iloc[0:0]
    report = client.publish(frame, progress=False)
    assert (report.total, report.accepted, report.requests, report.ok) == (0, 0, 0, True)
    report = client.publish(pd.DataFrame(), progress=False)
    assert report.total == 0
    assert webhook_requests(emu) == 0


def test_ctrl_c_leaves_a_report_whose_failures_finish_the_job(emu, client, tmp_path):
    emu.set_faults(latency_ms=100)
    # 8 in flight: the 200 requests take 2.5 s, and Ctrl-C comes after 0.8 s.
    paced = emu.client(max_retries=8, limits=replace(sv.Limits.unlimited(), publish_concurrency=8))
    rows = [record(3 * i) for i in range(20_000)]
    table = pa.Table.from_pylist(rows)
    with interrupt_after(0.8), pytest.raises(sv.PublishInterrupted) as e:
        paced.publish(table, progress=False)
    report = e.value.report
    assert report.interrupted and 0 < report.accepted < 20_000
    # The records of the requests in flight are unconfirmed: the service may have stored them.
    assert report.accepted + len(report.failures) == report.total
    assert report.unread == 20_000 - report.total
    # The records not accepted, and the rows not read, are written.
    path = tmp_path / "rest.jsonl"
    assert report.write_failures(path) == 20_000 - report.accepted
    emu.set_faults()
    again = client.publish(str(path), progress=False)
    assert again.ok and again.accepted == 20_000 - report.accepted
    assert sorted(r["transactionId"] for r in emu.published()) == sorted(
        r["transactionId"] for r in rows
    )


def test_a_stream_that_breaks_raises_after_publishing_what_it_gave(emu, client):
    table = pa.Table.from_pylist([record(3 * i) for i in range(300)])

    def batches():
        yield from table.to_batches(max_chunksize=100)[:2]
        raise RuntimeError("source broke")

    reader = pa.RecordBatchReader.from_batches(table.schema, batches())
    with pytest.raises(OSError, match="source broke") as e:
        client.publish(reader, progress=False)
    report = e.value.report
    assert report.accepted == 200 and report.unread is None
    assert len(emu.published()) == 200


def test_progress_counts_rows(emu, client):
    updates: list = []
    table = pa.Table.from_pylist([record(3 * i) for i in range(1000)])
    report = client.publish(table, progress=updates.append)
    assert report.ok
    assert updates[-1]["accepted"] == 1000 and updates[-1]["read"] == 1000


def test_the_columns_and_the_dicts_write_the_same_bytes():
    """One JSON writer for both paths: a record's text is the same whether it came as a dict
    or as a row of Arrow columns, floats in Python's form (``1e+16``, ``1.5e-05``) and strings
    with quotes, backslashes and control characters escaped as ``json.dumps`` does."""
    from surveillance import _core

    records = [
        {
            "dataType": "other",
            "schemaVersion": "1",
            "startTime": T0 + i,
            "locationId": f'store "{i}"\\\n\t\x01é',
            "dataSourceId": "pos-1",
            "eventUniqueId": f"e-{i}",
            "eventType": "door",
            "amount": value,
        }
        for i, value in enumerate([1e16, 1.5e-05, 0.1, -2.5e300, 123456789.0, 5e-324])
    ]
    table = pa.Table.from_pylist(records)
    assert list(_core.columns_json(table)) == [_core.to_json(r) for r in records]


# --- columns of JSON text: a DataFrame's lists and dicts, Arrow's `arrow.json` ---------------
def json_field(name: str, storage=None):
    return pa.field(
        name, storage or pa.large_string(), metadata={"ARROW:extension:name": "arrow.json"}
    )


def test_a_frames_items_go_as_json_text_and_bad_rows_get_the_dict_paths_problems(emu, client):
    """A DataFrame's `items` (Python lists of dicts) are written by the extension's own writer
    as a column of JSON text, not converted by pyarrow: the rows are stored as the dict path
    stores them, and each bad row is kept back with the dict path's problems."""
    from surveillance._frames import frame_table as _frame_table

    rows = [record(3 * i) for i in range(300)]
    rows[3]["transactionId"] = None  # a required field null in a row
    rows[150]["locationId"] = ""  # an empty id
    rows[200]["items"][1]["unitPrice"] = "free"  # an item field of the wrong type
    rows[201]["items"] = "none"  # not an array
    rows[202]["items"][0]["quantity"] = 2**70  # beyond 64 bits: judged carefully
    del rows[250]["items"][2]["description"]  # an item lacking a required field
    frame = pd.DataFrame(rows)
    table, made_structs = _frame_table(frame)
    assert not made_structs
    assert table.schema.field("items").metadata == {b"ARROW:extension:name": b"arrow.json"}
    assert table.column_names == list(frame.columns)

    report = client.publish(frame, progress=False)
    dicts = [{k: v for k, v in r.items() if v is not None} for r in rows]
    got = stored(emu)
    emu.clear_published()
    expected = client.publish(dicts, progress=False)
    assert [f.index for f in report.rejected] == [3, 150, 200, 201, 250]
    assert [(f.index, f.problems, f.message) for f in report.rejected] == [
        (f.index, f.problems, f.message) for f in expected.rejected
    ]
    assert report.accepted == expected.accepted == 295
    assert got == stored(emu)
    # The rows not read after a stop are written as records, their items as arrays.
    from surveillance import _core

    rest = [json.loads(t) for t in _core.columns_json(table, skip=290)]
    assert rest == [json.loads(_core.to_json(r)) for r in dicts[290:]]


def sale(i: int) -> dict:
    """A retail record whose items all have one shape: the same keys in the same order, each
    of one type (times as epoch milliseconds)."""
    return {
        "dataType": "retail",
        "schemaVersion": "1",
        "startTime": T0 + i,
        "endTime": T0 + i + 60_000,
        "locationId": f"store-{i % 7}",
        "dataSourceId": "pos-1",
        "transactionId": f"t-{i}",
        "status": "sale",
        "items": [
            {
                "time": T0 + i + k,
                "quantity": k + 1,
                "description": f'item {k} – é "{i}"\n',
                "unitPrice": [2.5, 0.1, 1e-7, 123456789.01, -3.0][(i + k) % 5],
                "type": "SALE",
                "gift": k == 2,
            }
            for k in range(3)
        ],
    }


@pytest.mark.parametrize("validate", [True, False])
def test_a_frames_items_of_one_shape_go_as_a_list_of_structs(emu, client, validate):
    """Items of one shape become a list<struct> column, which the core writes and checks as a
    Table's: the records stored and the rows kept back are the dict path's, byte for byte."""
    from surveillance._frames import frame_table as _frame_table

    rows = [sale(i) for i in range(300)]
    rows[7]["items"] = None  # missing: the row lacks items
    rows[8]["items"] = []
    rows[9]["items"] = tuple(rows[9]["items"])
    rows[10]["transactionId"] = None
    frame = pd.DataFrame(rows)
    table, made_structs = _frame_table(frame)
    assert made_structs
    item = table.schema.field("items").type.value_type
    assert [(f.name, str(f.type)) for f in item] == [
        ("time", "int64"),
        ("quantity", "int64"),
        ("description", "large_string"),
        ("unitPrice", "double"),
        ("type", "large_string"),
        ("gift", "bool"),
    ]
    # The bytes are the dict path's.
    dicts = [{k: v for k, v in r.items() if v is not None} for r in rows]
    texts = list(sv._core.columns_json(table))
    assert texts == [sv._core.to_json(d) for d in dicts]

    report = client.publish(frame, validate=validate, progress=False)
    got = stored(emu)
    emu.clear_published()
    expected = client.publish(dicts, validate=validate, progress=False)
    assert [(f.index, f.problems, f.message) for f in report.rejected] == [
        (f.index, f.problems, f.message) for f in expected.rejected
    ]
    assert report.accepted == expected.accepted
    assert got == stored(emu)
    assert 7 in [f.index for f in report.rejected] and 10 in [f.index for f in report.rejected]


def test_a_frames_items_whose_shape_the_model_refuses_are_judged_row_by_row(emu, client):
    """Items of one shape that the model refuses as a column (every item lacks a required
    field) are not refused as a whole, as a Table's would be: the frame goes again with its
    items as JSON text, and each row is kept back with the dict path's problems."""
    from surveillance._frames import frame_table as _frame_table

    rows = [sale(i) for i in range(40)]
    for r in rows:
        for item in r["items"]:
            del item["description"]
    frame = pd.DataFrame(rows)
    assert _frame_table(frame)[1]
    with pytest.raises(sv.ValidationError):
        client.publish(_frame_table(frame)[0], progress=False)  # as a Table: refused
    assert webhook_requests(emu) == 0
    report = client.publish(frame, progress=False)
    expected = client.publish(rows, progress=False)
    assert report.accepted == expected.accepted == 0
    assert [(f.index, f.problems) for f in report.rejected] == [
        (f.index, f.problems) for f in expected.rejected
    ]
    assert len(report.rejected) == 40


@pytest.mark.parametrize(
    "change",
    [
        "keys in another order",
        "a key more",
        "a None value",
        "an int where floats were",
        "a bool where ints were",
        "an int beyond 64 bits",
        "a nested dict",
        "a datetime",
        "NaN",
        "a list of strings",
        "an empty dict",
        "a dict subclass",
    ],
)
def test_items_of_more_than_one_shape_go_as_json_text(change):
    """What a list<struct> column would write differently from the dict path (or not at all)
    leaves the column to JSON text."""
    rows = [sale(i)["items"] for i in range(5)]
    item = rows[3][1]
    if change == "keys in another order":
        rows[3][1] = dict(reversed(list(item.items())))
    elif change == "a key more":
        item["colour"] = "red"
    elif change == "a None value":
        item["description"] = None
    elif change == "an int where floats were":
        item["unitPrice"] = 3
    elif change == "a bool where ints were":
        item["quantity"] = True
    elif change == "an int beyond 64 bits":
        item["quantity"] = 2**64
    elif change == "a nested dict":
        item["type"] = {"code": "SALE"}
    elif change == "a datetime":
        item["time"] = dt.datetime(2026, 11, 17, tzinfo=UTC)
    elif change == "NaN":
        item["unitPrice"] = math.nan
    elif change == "a list of strings":
        rows[3] = ["a", "b"]
    elif change == "an empty dict":
        rows[3][1] = {}
    elif change == "a dict subclass":
        rows[3][1] = type("Sub", (dict,), {})(item)
    assert sv._core.struct_list_column(rows) is None
    assert sv._core.struct_list_column([sale(i)["items"] for i in range(5)]) is not None


def test_a_list_of_structs_keeps_missing_rows_null():
    values = [sale(0)["items"], None, math.nan, pd.NaT, pd.NA, [], sale(1)["items"][:1]]
    column = pa.array(sv._core.struct_list_column(values))
    assert column.type == pa.large_list(pa.field("item", column.type.value_type, nullable=False))
    assert column.null_count == 4
    assert [len(v) if v is not None else None for v in column.to_pylist()] == [
        3,
        None,
        None,
        None,
        None,
        0,
        1,
    ]
    assert column.to_pylist()[0] == sale(0)["items"]
    assert sv._core.struct_list_column([[], None]) is None  # no item: no shape to take


def test_a_frame_whose_items_have_no_json_form_is_published_as_before(emu, client):
    # NaN has no JSON form: the column goes through pyarrow, and the row says where.
    rows = [record(3 * i) for i in range(30)]
    rows[7]["items"][1]["unitPrice"] = math.nan
    report = client.publish(pd.DataFrame(rows), progress=False)
    assert report.accepted == 29 and [f.index for f in report.rejected] == [7]
    assert report.rejected[0].problems[0].path == "items[1].unitPrice"


def test_an_arrow_json_column_is_written_as_it_is_and_checked_per_row(emu, client):
    rows = [record(3 * i) for i in range(40)]
    table = pa.Table.from_pylist(rows)
    texts = [sv_json(r["items"]) for r in rows]
    texts[5] = "[{not json"  # kept back: not JSON, and nothing else is lost
    texts[6] = '[{"time": 1}]'  # JSON, but an item lacking its fields
    at = table.schema.get_field_index("items")
    for storage in (pa.string(), pa.large_string(), pa.string_view()):
        emu.clear_published()
        data = table.set_column(at, json_field("items", storage), pa.array(texts, storage))
        report = client.publish(data, progress=False)
        assert report.accepted == 38 and [f.index for f in report.rejected] == [5, 6], storage
        assert report.rejected[0].problems[0].message.startswith("not valid JSON")
        assert report.rejected[1].problems[0].path.startswith("items[0].")
        assert len(emu.published()) == 38
    # Without validation, a text that is not JSON is still kept back (it would spoil its
    # batch); the service judges the rest, and refuses the record it finds wrong.
    emu.clear_published()
    report = client.publish(data, validate=False, progress=False)
    assert report.accepted == 38 and [f.index for f in report.rejected] == [5, 6]
    assert report.rejected[0].status is None and report.rejected[1].status == 400
    # pyarrow's own JSON type is the same extension type.
    if hasattr(pa, "json_"):
        emu.clear_published()
        column = pa.ExtensionArray.from_storage(pa.json_(pa.string()), pa.array(texts))
        report = client.publish(table.set_column(at, "items", column), progress=False)
        assert report.accepted == 38 and [f.index for f in report.rejected] == [5, 6]
    # JSON stored in something other than strings has no meaning.
    bad = table.set_column(at, json_field("items", pa.int64()), pa.array(range(40)))
    with pytest.raises(sv.ValidationError, match="must store strings"):
        client.publish(bad, progress=False)


def sv_json(value) -> str:
    from surveillance import _core

    return _core.to_json(value)


def test_a_json_column_keeps_its_values_missing_ones_left_out():
    from surveillance import _core

    values = [[{"a": 1}], None, math.nan, pd.NaT, pd.NA, {"b": [1.5, "é"]}, [], 7, "x"]
    column = pa.array(_core.json_column(values))
    assert column.type == pa.large_string()
    assert column.to_pylist() == [
        '[{"a":1}]',
        None,
        None,
        None,
        None,
        '{"b":[1.5,"é"]}',
        "[]",
        "7",
        '"x"',
    ]
    with pytest.raises(ValueError, match=r"row 1 at `\[0\]`: .*NaN"):
        _core.json_column([[1.0], [math.inf]])


def test_a_frame_with_a_name_twice_is_published_row_by_row(emu, client):
    rows = [record(3 * i) for i in range(4)]
    frame = pd.concat([pd.DataFrame(rows), pd.DataFrame({"items": [[]] * 4})], axis=1)
    with pytest.warns(UserWarning, match="not unique"):
        report = client.publish(frame, progress=False)
    assert report.total == 4
