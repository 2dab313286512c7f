"""The scheduling guide's cron recipe (docs/guide/scheduling.md) runs as written: its script
exits 0 when the sync completes and when the day's quota stops it (the CLI's exit 75, a
"come back later"), and the next run goes on where the stopped one ended. (The guide's
Airflow DAG runs in test_airflow.py, its Dagster blocks in test_readme.py.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import surveillance as sv

from conftest import service_env

pytest.importorskip("pyarrow")

PAGE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "scheduling.md"


def test_the_cron_script_skips_a_quota_stop_and_the_next_run_completes(tmp_path):
    blocks = re.findall(r"^```\w*\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    (script,) = [b for b in blocks if b.startswith("#!/bin/sh")]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = bin_dir / "surveillance"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m surveillance.cli "$@"\n')
    command.chmod(0o755)
    settings, data = tmp_path / "surveillance.env", tmp_path / "events"
    # The script as written, but for where this test keeps its settings and dataset.
    script = script.replace("/etc/surveillance.env", str(settings)).replace(
        "/data/events", str(data)
    )
    script = script.replace("--start 2026-01-01", "--start 2026-01-05 --until 2026-01-07")
    (tmp_path / "sync-events.sh").write_text(script)
    with sv.Emulator(seed=3, sites=3, days=2, events_per_day=3000) as emu:
        emu.set_limits(daily_requests=20)
        settings.write_text("".join(f"export {k}='{v}'\n" for k, v in emu.env().items()))
        env = service_env(PATH=f"{bin_dir}:/usr/bin:/bin")
        stopped = subprocess.run(["sh", str(tmp_path / "sync-events.sh")], env=env,
                                 capture_output=True, text=True, timeout=100)  # fmt: skip
        assert stopped.returncode == 0, stopped.stderr
        assert "the day's quota is spent" in stopped.stderr
        state = sv.sync.read_state(data)
        assert state is not None and state["complete"] is False
        emu.set_limits(daily_requests=None)
        settings.write_text("".join(f"export {k}='{v}'\n" for k, v in emu.env().items()))
        done = subprocess.run(["sh", str(tmp_path / "sync-events.sh")], env=env,
                              capture_output=True, text=True, timeout=100)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "quota" not in done.stderr
        assert sv.sync.read_state(data)["complete"] is True
        import pyarrow.dataset as ds

        ids = ds.dataset(data, partitioning="hive").to_table(columns=["id"]).column("id")
        assert sorted(ids.to_pylist()) == sorted(emu.truth(emu.start, emu.end))


def test_importing_the_package_imports_no_scheduler():
    code = "import sys, surveillance; print(sorted({'airflow', 'dagster'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
