"""The publish report, defined once: ``PublishReport`` and ``Failure`` are frozen classes of the
extension, built from the core's report, that read as the report always has (repr, text,
Jupyter's HTML, the error that says records were not accepted; the figures in
``data/publish_report_shown.json`` are those of the Python class they replace), give their
fields as a dict and pickle. A publish goes down to the core once and comes back once: a
DataFrame whose lists of structs the models refuse is not built and published again, and the
rows a stopped publish did not read come with the report rather than from calls back into the
extension."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import surveillance as sv
from surveillance import _core

from conftest import retail

SHOWN = json.loads((Path(__file__).parent / "data" / "publish_report_shown.json").read_text())


def failure(index, tx, status, problems, message, line, record, kind) -> sv.Failure:
    return sv.publish.Failure(index, tx, status, problems, message, line, record, kind)


def failures() -> list:
    """One failure of each kind, with text that HTML escapes."""
    return [
        failure(
            3,
            "t-3",
            None,
            [("startTime", "expected epoch ms, found `noon`", "error")],
            "invalid: startTime: expected <ms> & not `noon`",
            4,
            '{"a":1}',
            "invalid",
        ),
        failure(7, "t-'7'", 400, [], 'refused: "bad" <b>', None, '{"b":2}', "refused"),
        failure(9, None, None, [], "sent, unconfirmed", None, None, "unconfirmed"),
        failure(11, "", 503, [], "failed after retries", 0, '{"c":3}', "failed"),
        failure(12, "t-12", None, [], "not sent: publishing stopped", None, '{"d":4}', "not sent"),
        failure(
            20,
            "t-20",
            None,
            [],
            "not accepted: publishing was interrupted",
            None,
            '{"e":5}',
            "interrupted",
        ),
    ]


COUNTS: dict[str, Any] = dict(
    total=1234, sent=1200, accepted=1228, requests=14, retries=2, rate_limited=1, elapsed=0.4567
)


def test_the_report_reads_as_it_did():
    FAILURES = failures()
    mixed = sv.PublishReport(
        **COUNTS,
        rejected=[f for f in FAILURES if f.kind != "unconfirmed"],
        unconfirmed=[f for f in FAILURES if f.kind == "unconfirmed"],
        region="eu",
        batch_size=7,
    )
    assert repr(mixed) == SHOWN["mixed.repr"]
    assert str(mixed) == SHOWN["mixed.str"]
    assert mixed._repr_html_() == SHOWN["mixed.html"]
    assert mixed.counts() == SHOWN["mixed.counts"]
    assert list(mixed.counts()) == list(SHOWN["mixed.counts"])
    stopped = sv.PublishReport(
        **COUNTS,
        rejected=FAILURES[:2],
        interrupted=True,
        error="credentials <refused> & 'gone'",
        unread=25_000,
    )
    assert repr(stopped) == SHOWN["stopped.repr"]
    assert str(stopped) == SHOWN["stopped.str"]
    assert stopped._repr_html_() == SHOWN["stopped.html"]
    with pytest.raises(sv.PublishError) as e:
        stopped.raise_on_failure()
    assert str(e.value) == SHOWN["stopped.error"] and e.value.report is stopped
    many = sv.PublishReport(
        **COUNTS,
        rejected=[
            failure(i, f"t-{i}", 400, [], "refused", None, "{}", "refused") for i in range(25)
        ],
    )
    assert str(many) == SHOWN["many.str"]
    assert many._repr_html_() == SHOWN["many.html"]
    with pytest.raises(sv.PublishError) as e:
        many.raise_on_failure()
    assert str(e.value) == SHOWN["many.error"]
    ok = sv.PublishReport(**dict(COUNTS, accepted=1234, elapsed=0.0))
    assert ok._repr_html_() == SHOWN["ok.html"]
    assert ok.raise_on_failure() is ok


def test_a_mixed_publish_gives_the_extensions_frozen_report(emu, client, tmp_path):
    records = [retail(i) for i in range(6)]
    records[2]["startTime"] = "noon"  # kept back
    records[4]["locationId"] = 7  # kept back
    report = client.publish(records, batch_size=2, progress=False)
    assert type(report) is _core.PublishReport and sv.PublishReport is _core.PublishReport
    assert sv.Failure is _core.Failure and sv.publish.Failure is sv.Failure
    with pytest.raises(AttributeError):
        report.total = 0  # type: ignore[misc]
    (first, second) = report.rejected
    with pytest.raises(AttributeError):
        first.index = 0  # type: ignore[misc]
    assert (report.total, report.accepted, report.sent, report.ok) == (6, 4, 4, False)
    assert [f.index for f in report.failures] == [2, 4] and report.unconfirmed == []
    assert first.kind == "invalid" and first.transaction_id == "t-2" and first.status is None
    assert (
        isinstance(first.problems[0], sv.publish.Problem) and first.problems[0].path == "startTime"
    )
    assert first.record == json.loads(_core.to_json(records[2]))
    assert (report.region, report.batch_size, report.unread, report.error) == (None, 2, None, None)
    assert report.counts() == {"invalid": 2}
    assert repr(report).startswith("<PublishReport: 6 records, 4 accepted, 2 rejected (2 invalid)")
    # The fields as a dict, JSON's types only.
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert list(d) == [
        "total",
        "sent",
        "accepted",
        "rejected",
        "unconfirmed",
        "requests",
        "retries",
        "rate_limited",
        "elapsed",
        "interrupted",
        "error",
        "region",
        "batch_size",
        "unread",
    ]
    assert d["rejected"][0] == {
        "index": 2,
        "transaction_id": "t-2",
        "status": None,
        "problems": [p._asdict() for p in first.problems],
        "message": first.message,
        "line": None,
        "record_json": first.record_json,
        "kind": "invalid",
    }
    assert all(d[k] == getattr(report, k) for k in d if k not in ("rejected", "unconfirmed"))
    # Equal to itself pickled, and to a report of the same fields.
    again = pickle.loads(pickle.dumps(report))
    assert again == report and type(again) is _core.PublishReport
    assert pickle.loads(pickle.dumps(first)) == first
    assert report != sv.PublishReport(**dict(d, rejected=[], unconfirmed=[]))
    assert report.write_failures(tmp_path / "failed.jsonl") == 2
    assert report.to_pandas()["index"].tolist() == [2, 4]


def test_combined_reports_shift_their_failures(emu, client):
    part = client.publish([retail(0), retail(1, startTime="noon")], progress=False)
    both = sv.PublishReport.combine([part, part], elapsed=2.0)
    assert (both.total, both.accepted, both.elapsed) == (4, 2, 2.0)
    assert [f.index for f in both.rejected] == [1, 3]
    with pytest.raises(ValueError, match="2 reports but 1 sizes"):
        sv.PublishReport.combine([part, part], sizes=[2])


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list:
    """Counts the calls of ``_core.<name>`` (those with ``columns=True`` as ``name:columns``)."""
    calls: list = []
    real = getattr(_core, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(f"{name}:columns" if kwargs.get("columns") else name)
        return real(*args, **kwargs)

    monkeypatch.setattr(_core, name, wrapper)
    return calls


def test_a_frame_whose_items_the_models_refuse_is_published_by_one_call(emu, client, monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    item = {"time": 1, "quantity": 1, "unitPrice": 2.5, "type": "SALE"}  # no description
    rows = [retail(i, items=[item]) for i in range(5)]
    calls = counting(monkeypatch, "publish")
    report = client.publish(pd.DataFrame(rows), progress=False)
    assert calls == ["publish:columns"]
    assert [f.index for f in report.rejected] == list(range(5)) and report.accepted == 0
    assert all("description" in str(f.problems) for f in report.rejected)


def no_call_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The helpers that used to write the rows a stopped publish did not read fail if called."""
    for name in ("columns_json", "jsonl_rest", "to_json"):

        def called(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            raise AssertionError(f"_core.{_name} called after publishing")

        monkeypatch.setattr(_core, name, called)


#: Records of a source that a publish stopped by refused credentials does not read to its end.
N = 20_000


@pytest.mark.parametrize("kind", ["list", "jsonl", "frame", "frame rows", "table", "parquet"])
def test_the_rows_not_read_come_with_the_report(emu, kind, tmp_path, monkeypatch):
    records = [retail(i) for i in range(N)]
    source: Any = records
    if kind in ("frame", "frame rows"):
        pd = pytest.importorskip("pandas")
        pytest.importorskip("pyarrow")
        frame = pd.DataFrame(records)
        if kind == "frame rows":  # a column pyarrow cannot type: published row by row
            frame["employeeId"] = ["e"] * (N - 1) + [7]
            records = [dict(r, employeeId=v) for r, v in zip(records, frame["employeeId"])]
        source = frame
    elif kind in ("table", "parquet"):
        pa = pytest.importorskip("pyarrow")
        source = pa.Table.from_pylist(records)
        if kind == "parquet":
            pq = pytest.importorskip("pyarrow.parquet")
            pq.write_table(source, tmp_path / "rows.parquet")
            source = str(tmp_path / "rows.parquet")
    elif kind == "jsonl":
        (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        source = str(tmp_path / "rows.jsonl")
    wrong = emu.client(api_key="wrong-key", max_retries=0)
    with pytest.raises(sv.AuthError) as e:
        wrong.publish(source, batch_size=10, progress=False)
    report = e.value.report
    assert report.accepted == 0 and report.total < N
    if kind != "jsonl":
        assert report.unread == N - report.total
    no_call_back(monkeypatch)
    path = tmp_path / "failed.jsonl"
    assert report.write_failures(path) == N
    assert report.write_failures(path) == N  # the rest is read again each time
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["transactionId"] for r in written] == [r["transactionId"] for r in records]
    if kind == "frame rows":
        assert [r["employeeId"] for r in written[-2:]] == ["e", 7]
