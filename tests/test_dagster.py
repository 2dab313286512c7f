"""The Dagster integration (surveillance.dagster): a partition of ``events_asset`` materialized
with ``SurveillanceResource`` (its settings from the environment through ``EnvVar``, as a
deployment keeps them) in a process of its own holds exactly its UTC day, with the requests and
events as metadata; a DataFrame for the IO manager without ``path``; a quota stop is
``RetryRequested`` with the wait until the reset."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import surveillance as sv

from conftest import service_env

if importlib.util.find_spec("dagster") is None:
    pytest.skip("the dagster extra is not installed", allow_module_level=True)

ds = pytest.importorskip("pyarrow.dataset")

UTC = timezone.utc
DAY = timedelta(days=1)
START = datetime(2026, 1, 5, tzinfo=UTC)
PYTHON = str(Path(sv.__file__).resolve().parent.parent)

#: A partition materialized as a deployment's run would: the resource's settings from the
#: environment; the result's metadata printed as a RESULT line.
MATERIALIZE = """
import json, sys
import dagster
from dagster import EnvVar
from surveillance.dagster import SurveillanceResource, events_asset

resource = SurveillanceResource(
    base_url=EnvVar("SURVEILLANCE_BASE_URL"), api_key=EnvVar("SURVEILLANCE_API_KEY"),
    client_id=EnvVar("SURVEILLANCE_CLIENT_ID"), client_secret=EnvVar("SURVEILLANCE_CLIENT_SECRET"),
    audience=EnvVar("SURVEILLANCE_AUDIENCE"),
)
asset = events_asset(path=sys.argv[1], start="2026-01-05")
result = dagster.materialize([asset], resources={"surveillance": resource},
                             partition_key=sys.argv[2])
assert result.success
(event,) = result.get_asset_materialization_events()
metadata = event.materialization.metadata
print("RESULT", json.dumps({k: getattr(v, "value", v) for k, v in metadata.items()}))
"""


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(seed=9, sites=3, days=3, events_per_day=1200) as e:
        yield e


def test_a_partition_holds_exactly_its_day_with_the_metadata(emu, tmp_path):
    script = tmp_path / "materialize.py"
    script.write_text(textwrap.dedent(MATERIALIZE))
    env = service_env(
        PYTHONPATH=os.pathsep.join([PYTHON, os.environ.get("PYTHONPATH", "")]),
        DAGSTER_HOME=str(tmp_path),
        **emu.env(),
    )
    emu.reset_stats()
    path = tmp_path / "events"
    out = subprocess.run(
        [sys.executable, str(script), str(path), "2026-01-06"],
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    metadata = json.loads(line[len("RESULT ") :])
    day = (START + DAY, START + 2 * DAY)
    truth = emu.truth(*day)
    ids = ds.dataset(path, partitioning="hive").to_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(truth) and len(ids) == len(set(ids))
    assert sorted(os.listdir(path)) == ["date=2026-01-06"]
    assert metadata["events"] == len(truth)
    # The client counts a request when it sends it: a page still in flight when its window
    # completes is abandoned, and may never have reached the emulator.
    served = sum(emu.stats()["requests"].get("GET /v2/events", {}).values())
    assert 0 < served <= metadata["requests"] <= served + 4
    assert (metadata["start"], metadata["end"]) == (day[0].isoformat(), day[1].isoformat())
    assert metadata["path"].endswith("date=2026-01-06/part-0.parquet")


def resource(emu: sv.Emulator, **settings: object):
    from surveillance.dagster import SurveillanceResource

    return SurveillanceResource(
        base_url=emu.url,
        api_key=emu.api_key,
        client_id=emu.client_id,
        client_secret=emu.client_secret,
        audience=emu.audience,
        **settings,
    )


def test_without_a_path_the_day_is_a_dataframe_for_the_io_manager(emu):
    import dagster
    from surveillance.dagster import events_asset

    asset = events_asset(start="2026-01-05")
    assert asset.partitions_def.get_partition_keys()[:2] == ["2026-01-05", "2026-01-06"]
    context = dagster.build_asset_context(
        partition_key="2026-01-05",
        resources={"surveillance": resource(emu, daily_requests=0, read_per_second=0)},
    )
    output = asset(context)
    frame = output.value
    assert sorted(frame["id"]) == sorted(emu.truth(START, START + DAY))
    assert output.metadata["events"].value == len(frame)


def test_a_quota_stop_requests_a_retry_at_the_reset(emu, tmp_path):
    import dagster
    from surveillance.dagster import events_asset

    emu.set_limits(daily_requests=3)
    try:
        asset = events_asset(path=tmp_path / "events", start="2026-01-05")
        context = dagster.build_asset_context(
            partition_key="2026-01-07",
            resources={"surveillance": resource(emu, daily_requests=3, read_per_second=0)},
        )
        with pytest.raises(dagster.RetryRequested) as e:
            asset(context)
        resets_at = emu.client().quota()["resets_at"]
        wait = (resets_at - datetime.now(UTC)).total_seconds()
        assert abs(e.value.seconds_to_wait - wait) < 60
        assert isinstance(e.value.__cause__, sv.QuotaExhaustedError)
        assert not (tmp_path / "events").exists() or not list((tmp_path / "events").iterdir())
    finally:
        emu.set_limits(daily_requests=None)


def test_the_resource_refuses_a_bad_setting_by_name(emu):
    from surveillance.dagster import SurveillanceResource

    with pytest.raises(sv.ConfigError, match="`region` of SurveillanceResource"):
        SurveillanceResource(base_url=emu.url, region="mars").get_client()
