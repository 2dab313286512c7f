"""examples/dwell_time.ipynb runs end to end on a real Jupyter kernel (nbclient + ipykernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "dwell_time.ipynb"


@pytest.mark.slow
def test_dwell_time_notebook_runs_and_draws_the_chart(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    # Jupyter's own paths in the temporary directory, and no deprecation warning about them.
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # committed with its outputs (tests/test_jupyter.py): run afresh
        if cell.cell_type == "code":
            cell.outputs = []
    client = nbclient.NotebookClient(
        nb,
        timeout=90,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "21,000 events at 10 sites" in text
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "busiest_local_hour" in html and "localStartTime" in html
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the dwell-time chart


@pytest.mark.slow
def run_cells(cells: list, cwd: Path):
    """A new notebook of these code cells, executed in a Python kernel in `cwd`."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def test_async_client_with_top_level_await_in_a_jupyter_cell(tmp_path, monkeypatch):
    """The kernel runs its own event loop: ``await`` at the top of a cell works, and a cell
    with a long fetch leaves the kernel's loop free."""
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    cells = [
        "import asyncio, surveillance as sv\n"
        "emu = sv.Emulator(sites=3, days=1, events_per_day=3000)\n"
        "client = emu.async_client()",
        "sites = await client.sites()\n"
        "events = await client.events(emu.start, emu.end, progress=False)\n"
        "print(len(sites), len(events))",
        "ticks = 0\n"
        "async def tick():\n"
        "    global ticks\n"
        "    while True:\n"
        "        await asyncio.sleep(0.01)\n"
        "        ticks += 1\n"
        "t = asyncio.ensure_future(tick())\n"
        "n = sum([1 async for _ in client.iter_events(emu.start, emu.end)])\n"
        "t.cancel()\n"
        "print(n, ticks > 0)",
        "emu.stop()",
    ]
    nb = run_cells(cells, tmp_path)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "3 3000" in text and "3000 True" in text
