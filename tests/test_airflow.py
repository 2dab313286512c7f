"""The Airflow provider (surveillance.airflow): DAG runs of SyncEventsOperator with
``dag.test()`` in a process of their own (Airflow's metadata database: sqlite, one per module),
the deferral on a quota stop and its resumption, the hook's connection, PublishOperator's
failures, and the provider's registration. The emulator runs in this process; the Airflow
processes reach it through ``AIRFLOW_CONN_SURVEILLANCE_DEFAULT``, as a deployment's workers
would."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import surveillance as sv

from conftest import retail, service_env

if importlib.util.find_spec("airflow") is None:
    pytest.skip("the airflow extra is not installed", allow_module_level=True)

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")

UTC = timezone.utc
DAY = timedelta(days=1)
START = datetime(2026, 1, 5, tzinfo=UTC)
PYTHON = str(Path(sv.__file__).resolve().parent.parent)


def connection(emu: sv.Emulator, **extra: object) -> str:
    """The emulator as an Airflow connection of type ``surveillance`` (JSON form)."""
    return json.dumps(
        {
            "conn_type": "surveillance",
            "host": emu.url,
            "login": emu.client_id,
            "password": emu.client_secret,
            "extra": {"api_key": emu.api_key, "audience": emu.audience, **extra},
        }
    )


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(seed=7, sites=3, days=3, events_per_day=1500) as e:
        yield e


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory, emu):
    """The environment of an Airflow process: its home, sqlite metadata database (migrated
    once) and DAG folder in a temporary directory, the package on its path, and the
    emulator as the connection ``surveillance_default`` (limits lifted, as emu.client())."""
    home = tmp_path_factory.mktemp("airflow")
    (home / "dags").mkdir()
    limits = {k.removeprefix("SURVEILLANCE_").lower(): int(float(v)) for k, v in emu.env().items()
              if k.endswith(("_PER_SECOND", "_CONCURRENCY", "DAILY_REQUESTS"))}  # fmt: skip
    env = service_env(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        AIRFLOW_CONN_SURVEILLANCE_DEFAULT=connection(emu, **limits),
        PYTHONPATH=os.pathsep.join([PYTHON, os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return env


def run_child(code: str, env: dict, cwd: Path, **kw) -> subprocess.CompletedProcess:
    script = cwd / "child.py"
    script.write_text(textwrap.dedent(code))
    out = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=cwd, capture_output=True, text=True, **kw
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return out


def results(out: subprocess.CompletedProcess) -> list:
    return [json.loads(line[len("RESULT ") :]) for line in out.stdout.splitlines()
            if line.startswith("RESULT ")]  # fmt: skip


def dataset_ids(path: Path) -> list:
    return ds.dataset(path, partitioning="hive").to_table(columns=["id"]).column("id").to_pylist()


def events_requests(emu) -> int:
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


#: A DAG file: each day's events into EVENTS, run by dag.test() for the days given on the
#: command line; each run's XCom printed as a RESULT line.
DAG = """
import json, sys
from datetime import datetime, timezone
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable
from surveillance.airflow import SyncEventsOperator

with DAG(
    "surveillance_events",
    start_date=datetime(2026, 1, 5, tzinfo=timezone.utc),
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
) as dag:
    SyncEventsOperator(task_id="events", path=EVENTS)

if __name__ == "__main__":
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    for day in sys.argv[1:]:
        run = dag.test(logical_date=datetime.fromisoformat(day))
        assert run.state == "success", run.state
        with create_session() as session:
            xcom = session.scalars(XComModel.get_many(
                run_id=run.run_id, dag_ids=dag.dag_id, task_ids="events", key="return_value"
            )).first()
            print("RESULT", json.dumps(XComModel.deserialize_value(xcom)), flush=True)
"""


def test_a_dag_syncs_two_intervals_exactly_and_a_rerun_sends_nothing(emu, airflow_env, tmp_path):
    events = tmp_path / "events"
    dag_file = Path(airflow_env["AIRFLOW__CORE__DAGS_FOLDER"]) / "surveillance_events.py"
    dag_file.write_text(f"EVENTS = {str(events)!r}\n" + DAG)
    emu.reset_stats()
    # A run's logical date is the end of its interval (as Airflow infers a manual run's).
    days = [(START + DAY).isoformat(), (START + 2 * DAY).isoformat(), (START + 2 * DAY).isoformat()]
    out = run_child(f"import runpy, sys\nsys.argv = ['dag'] + {days!r}\n"
                    f"runpy.run_path({str(dag_file)!r}, run_name='__main__')\n",
                    airflow_env, tmp_path, timeout=110)  # fmt: skip
    first, second, rerun = results(out)
    # Each run's data interval is the day before its logical date.
    assert (first["start"], first["end"]) == (START.isoformat(), (START + DAY).isoformat())
    assert (second["start"], second["end"]) == (
        (START + DAY).isoformat(),
        (START + 2 * DAY).isoformat(),
    )
    ids = dataset_ids(events)
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(emu.truth(START, START + 2 * DAY))
    assert first["events"] == len(emu.truth(START, START + DAY))
    assert first["complete"] and second["complete"]
    # The rerun of the second interval: the dataset holds it, no request at all.
    assert rerun == {**second, "events": 0, "replaced": 0, "requests": 0}
    assert events_requests(emu) <= first["requests"] + second["requests"]
    assert sv.sync.read_state(events)["synced_until"].startswith("2026-01-07T00:00:00")


#: The operator run as a worker runs it: execute; on a deferral, the trigger's moment and the
#: state printed, then (once told on stdin) the method the trigger resumes.
DEFERRING = """
import json, sys
from airflow.sdk.exceptions import TaskDeferred
from surveillance.airflow import SyncEventsOperator

op = SyncEventsOperator(task_id="events", path=sys.argv[1])
context = {"data_interval_start": sys.argv[2], "data_interval_end": sys.argv[3]}
try:
    print("RESULT", json.dumps(op.execute(context)), flush=True)
except TaskDeferred as deferred:
    print("RESULT", json.dumps({"moment": deferred.trigger.moment.isoformat(),
                                "method": deferred.method_name, "kwargs": deferred.kwargs}),
          flush=True)
    sys.stdin.readline()
    resumed = getattr(op, deferred.method_name)(context, event=None, **deferred.kwargs)
    print("RESULT", json.dumps(resumed), flush=True)
"""


def test_a_quota_stop_defers_until_the_reset_and_resumes_exact(airflow_env, tmp_path):
    lo, hi = START, START + 2 * DAY
    options = dict(seed=8, sites=3, days=2, events_per_day=3000)
    # One uninterrupted run of the interval, on an emulator of the same data: the cost to
    # compare with.
    with sv.Emulator(**options) as same:
        whole = same.client().sync_events(tmp_path / "whole", lo, until=hi)
    assert whole.complete
    budget = whole.requests * 2 // 3  # two parts: the quota stops the first
    path = tmp_path / "events"
    (tmp_path / "child.py").write_text(DEFERRING)
    with sv.Emulator(**options) as emu:
        emu.set_limits(daily_requests=budget)
        ledger = tmp_path / "quota"
        ledger.mkdir()
        env = {**airflow_env, "SURVEILLANCE_QUOTA_DIR": str(ledger),
               "AIRFLOW_CONN_SURVEILLANCE_DEFAULT": connection(
                   emu, daily_requests=budget, read_per_second=0, read_concurrency=0)}  # fmt: skip
        child = subprocess.Popen(
            [sys.executable, str(tmp_path / "child.py"), str(path), lo.isoformat(), hi.isoformat()],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            line = "-"
            while line and not line.startswith("RESULT "):  # Airflow logs on stdout too
                line = child.stdout.readline()
            if not line:
                child.wait(timeout=60)
                pytest.fail(child.stderr.read()[-4000:])
            deferred = json.loads(line[len("RESULT ") :])
            # The trigger waits for the quota's reset: the emulator's next UTC midnight.
            resets_at = emu.client().quota()["resets_at"]
            assert datetime.fromisoformat(deferred["moment"]) == resets_at
            assert deferred["method"] == "execute_complete"
            # What was fetched before the stop is stored, exact up to where it stopped.
            state = sv.sync.read_state(path)
            assert state["complete"] is False
            stopped = datetime.fromisoformat(state["synced_until"].replace("Z", "+00:00"))
            assert lo < stopped < hi
            assert sorted(dataset_ids(path)) == sorted(emu.truth(lo, stopped))
            # The quota comes back; the trigger fires and the task resumes. (A client learns
            # the service's day from its answers: a fresh one starts from the local clock's,
            # which the emulator's jump does not move, so the machine's ledger of the spent
            # day goes, as the real midnight would leave it behind.)
            emu.advance_clock(86400)
            for spent in ledger.iterdir():
                spent.unlink()
            out, err = child.communicate("go\n", timeout=100)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
        assert child.returncode == 0, err[-4000:]
        (done,) = [
            json.loads(x[len("RESULT ") :]) for x in out.splitlines() if x.startswith("RESULT ")
        ]
        truth = emu.truth(lo, hi)
    assert done["complete"] is True
    assert sorted(dataset_ids(path)) == sorted(truth)
    assert done["events"] == len(truth)
    # Both parts together: at most one uninterrupted run plus 2.
    assert deferred["kwargs"]["requests"] <= budget
    assert done["requests"] <= whole.requests + 2, (done["requests"], whole.requests)
    print(
        f"uninterrupted: {whole.requests} requests; deferred at {deferred['kwargs']['requests']}, "
        f"both parts: {done['requests']}"
    )


# --- the hook, in this process -------------------------------------------------------------
@pytest.fixture
def hook_env(emu, monkeypatch):
    for name in list(os.environ):
        if name.startswith("SURVEILLANCE_") and name not in (
            "SURVEILLANCE_QUOTA_DIR",
            "SURVEILLANCE_CONFIG_FILE",
        ):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AIRFLOW_CONN_SURVEILLANCE_DEFAULT", connection(emu, daily_requests=0))
    return monkeypatch


def test_the_hook_builds_a_working_client_from_an_airflow_conn_variable(emu, hook_env):
    from surveillance.airflow import SurveillanceHook

    hook = SurveillanceHook()
    with hook.get_client() as client:
        assert len(client.sites()) == 3
        assert client.quota()["limit"] is None  # the extra's `daily_requests: 0`
    assert hook.test_connection()[0] is True
    assert emu.client_secret not in repr(hook.settings()["limits"])


def test_the_hook_names_the_connection_and_the_missing_field(emu, hook_env):
    from surveillance.airflow import SurveillanceHook

    for field, words in [("password", "password (the OAuth client secret)"),
                         ("host", "host (the service's base URL)"),
                         ("login", "login (the OAuth client id)")]:  # fmt: skip
        conn = json.loads(connection(emu))
        del conn[field]
        hook_env.setenv("AIRFLOW_CONN_SURVEILLANCE_DEFAULT", json.dumps(conn))
        with pytest.raises(sv.ConfigError) as e:
            SurveillanceHook().get_client()
        assert "the Airflow connection `surveillance_default` has no " + words in str(e.value)
    conn = json.loads(connection(emu))
    del conn["extra"]["api_key"]
    hook_env.setenv("AIRFLOW_CONN_SURVEILLANCE_DEFAULT", json.dumps(conn))
    with pytest.raises(
        sv.ConfigError, match="`surveillance_default` has no `api_key` in its extra"
    ):
        SurveillanceHook().get_client()
    conn = json.loads(connection(emu, daily_request=5))  # a typo
    hook_env.setenv("AIRFLOW_CONN_SURVEILLANCE_DEFAULT", json.dumps(conn))
    with pytest.raises(sv.ConfigError, match="unknown setting `daily_request`"):
        SurveillanceHook().get_client()
    ok, message = SurveillanceHook().test_connection()
    assert not ok and "daily_request" in message and emu.client_secret not in message


def test_publish_fails_the_task_and_writes_exactly_the_refused_records(emu, hook_env, tmp_path):
    from surveillance.airflow import PublishOperator

    records = [retail(0), retail(1, registerId="r-1"), retail(2), retail(3, registerId="r-3")]
    source = tmp_path / "sales.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    failures = tmp_path / "failed" / "sales.jsonl"
    failures.parent.mkdir()
    # Sent unchecked, so that the service (the emulator) is the one that refuses them.
    op = PublishOperator(task_id="sales", path=str(source), failures_path=str(failures),
                         validate=False, batch_size=1)  # fmt: skip
    with pytest.raises(sv.PublishError) as e:
        op.execute({})
    assert len(e.value.report.rejected) == 2
    written = [json.loads(line) for line in failures.read_text().splitlines()]
    assert written == [records[1], records[3]]
    # Told that two may fail, the task passes, and says what it sent.
    op = PublishOperator(task_id="sales", path=str(source), failures_path=str(failures),
                         validate=False, batch_size=1, max_rejected=2)  # fmt: skip
    summary = op.execute({})
    assert (summary["accepted"], summary["rejected"]) == (2, 2)
    assert len(failures.read_text().splitlines()) == 2


def test_the_operators_say_what_they_need(emu, hook_env):
    from surveillance.airflow import PublishOperator, SyncEventsOperator

    op = SyncEventsOperator(task_id="events", path="/data/events")
    assert [a.uri for a in op.outlets] == ["file:///data/events"]
    empty = {"data_interval_start": START, "data_interval_end": START}
    with pytest.raises(ValueError, match="CronDataIntervalTimetable"):
        op.execute(empty)
    with pytest.raises(ValueError, match="max_rejected"):
        PublishOperator(task_id="p", path="x.jsonl", max_rejected=-1)


def test_the_package_is_an_airflow_provider_with_the_connection_type():
    import tomllib  # noqa: I001 (3.11+, as Airflow 3 is here)

    from surveillance.airflow import get_provider_info

    import airflow

    schema = Path(airflow.__file__).parent / "provider_info.schema.json"
    info = get_provider_info()
    if schema.exists():
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(info, json.loads(schema.read_text()))
    assert info["connection-types"][0]["connection-type"] == "surveillance"
    assert info["versions"] == [sv.__version__]
    root = Path(__file__).resolve().parent.parent / "pyproject.toml"
    points = tomllib.loads(root.read_text())["project"]["entry-points"]
    assert points["apache_airflow_provider"] == {
        "provider_info": "surveillance._airflow_provider:get_provider_info"
    }
    # Installed (not from a source tree), Airflow's providers manager finds it.
    from importlib.metadata import PackageNotFoundError, entry_points

    try:
        found = [
            e
            for e in entry_points(group="apache_airflow_provider")
            if e.value.startswith("surveillance.")
        ]
    except PackageNotFoundError:  # pragma: no cover
        found = []
    if found:
        try:  # Airflow 3.3+: the task SDK's manager (the core's `hooks` is deprecated there)
            from airflow.sdk.providers_manager_runtime import (
                ProvidersManagerTaskRuntime as ProvidersManager,
            )
        except ImportError:
            from airflow.providers_manager import ProvidersManager

        hooks = ProvidersManager().hooks
        assert "surveillance" in hooks
        assert hooks["surveillance"].hook_class_name == "surveillance.airflow.SurveillanceHook"


def guide_block(marker: str) -> str:
    """The code block of the scheduling guide that holds ``marker``."""
    page = Path(__file__).resolve().parent.parent / "docs" / "guide" / "scheduling.md"
    blocks = re.findall(r"^```\w*\n(.*?)^```", page.read_text(), re.S | re.M)
    (block,) = [b for b in blocks if marker in b]
    return block


def test_the_guides_dag_runs_as_written(emu, airflow_env, tmp_path):
    """The scheduling guide's DAG, as a DAG file run with ``python dag.py`` (its
    ``dag.test()``): the day before its logical date, exactly."""
    dag_file = Path(airflow_env["AIRFLOW__CORE__DAGS_FOLDER"]) / "guide_dag.py"
    dag_file.write_text(guide_block("SyncEventsOperator("))
    out = subprocess.run([sys.executable, str(dag_file)], env=airflow_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=110)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    assert sorted(dataset_ids(tmp_path / "events")) == sorted(emu.truth(START, START + DAY))
