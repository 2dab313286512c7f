"""What a notebook user meets: progress bars that end as one line in the saved notebook (no
widget frozen at 0%), the shipped notebook committed with its outputs, a publish report as a
DataFrame, and ``output="arrow"`` as a ``pyarrow.Table``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import surveillance as sv
from test_notebook import run_cells

from conftest import emulator_fixture, other

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "dwell_time.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"

jup_emu = emulator_fixture(seed=4, sites=3, days=1, events_per_day=600)


def _texts(outputs) -> list:
    """Every text of the outputs: streams, and the plain text of displays and results."""
    texts = []
    for o in outputs:
        if o.get("output_type") == "stream":
            text = o.get("text", "")
            texts.append("".join(text) if isinstance(text, list) else text)
        text = o.get("data", {}).get("text/plain", "")
        texts.append("".join(text) if isinstance(text, list) else text)
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("bar", ["tqdm", "plain"])
def test_progress_in_an_executed_notebook_ends_as_one_line(tmp_path, monkeypatch, bar):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    if bar == "tqdm":
        pytest.importorskip("tqdm")
        pytest.importorskip("ipywidgets")
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    hide = "import sys; sys.modules['tqdm'] = None\n" if bar == "plain" else ""
    cells = [
        hide + "import surveillance as sv\n"
        "emu = sv.Emulator(sites=3, days=1, events_per_day=3000)\n"
        "client = emu.client()",
        "events = client.events(emu.start, emu.end)\nlen(events)",
        "report = client.publish([{'x': 1}] * 3)",
        "emu.stop()",
    ]
    nb = run_cells(cells, tmp_path)
    fetch, publish = nb.cells[1].outputs, nb.cells[2].outputs
    for outputs in (fetch, publish):
        assert not [o for o in outputs if WIDGET in o.get("data", {})]
        assert not [t for t in _texts(outputs) if "\r" in t or " 0%" in t]
    assert [t for t in _texts(fetch) if t.startswith("events: 100% (3,000 events, ")]
    assert _texts(publish) == ["publish: 100% (3/3 records, 3 rejected, 0 requests)"]


def test_the_shipped_notebook_is_committed_with_its_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    outputs = [o for c in code for o in c["outputs"]]
    assert all(c["execution_count"] for c in code), "run every cell, in order"
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = "".join(_texts(outputs))
    assert "21,000 events at 10 sites" in text and "events of bursts" in text
    assert any(t.startswith("events: 100% (21,000 events") for t in _texts(outputs))
    assert "busiest_local_hour" in "".join(
        "".join(o.get("data", {}).get("text/html", "")) for o in outputs
    )
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) == 1
    # No dead progress widget, nor its state.
    assert not [o for o in outputs if WIDGET in o.get("data", {})]
    assert "\r" not in text and "widgets" not in nb["metadata"]


def test_publish_report_to_pandas_lists_every_record_not_accepted(jup_emu):
    pd = pytest.importorskip("pandas")
    jup_emu.set_webhook(arrays=True)
    records = [other(0), other(1, eventType=3), other(2), other(3, unknown="x")]
    report = jup_emu.client().publish(records, progress=False)
    df = report.to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == [
        "index",
        "line",
        "transaction_id",
        "kind",
        "status",
        "message",
        "problems",
        "record",
    ]
    assert df["index"].tolist() == [1, 3] and df["kind"].tolist() == ["invalid", "invalid"]
    assert "eventType" in df.at[0, "problems"] and "unknown" in df.at[1, "problems"]
    assert json.loads(df.at[1, "record"]) == records[3]
    assert df["status"].isna().all() and str(df["status"].dtype) == "Int64"
    # A report without failures is an empty frame with the same columns.
    empty = jup_emu.client().publish([other(5)], progress=False).to_pandas()
    assert empty.empty and list(empty.columns) == list(df.columns)


def test_publish_report_to_pandas_has_the_services_refusals(jup_emu, tmp_path):
    pytest.importorskip("pandas")
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(other(i)) + "\n" for i in range(3)))
    jup_emu.set_hostile("status", path="/v2/webhook", status=400)
    try:
        report = jup_emu.client(max_retries=0).publish(str(path), progress=False)
    finally:
        jup_emu.set_hostile(None)
    df = report.to_pandas()
    assert len(df) == 3 and set(df["status"].dropna()) == {400}
    assert df["line"].tolist() == [1, 2, 3]


def test_arrow_output_is_a_pyarrow_table(jup_emu):
    pa = pytest.importorskip("pyarrow")
    client = jup_emu.client()
    table = client.events(jup_emu.start, jup_emu.end, output="arrow", progress=False)
    assert isinstance(table, pa.Table) and table.num_rows == 600
    assert pa.types.is_timestamp(table.schema.field("startTime").type)
    for kind in ("sites", "devices", "cameras", "reports"):
        assert isinstance(getattr(client, kind)(output="arrow"), pa.Table)


def test_arrow_output_of_the_async_client_is_a_pyarrow_table(jup_emu):
    import asyncio

    pa = pytest.importorskip("pyarrow")
    client = jup_emu.async_client()
    table = asyncio.run(client.events(jup_emu.start, jup_emu.end, output="arrow"))
    assert isinstance(table, pa.Table) and table.num_rows == 600
    assert isinstance(asyncio.run(client.sites(output="arrow")), pa.Table)
    assert sv.write_parquet  # the table is Arrow data for every reader, ours included
