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
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        "commit the notebook without outputs"
    )
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
