"""``surveillance.dlt``: a dlt source loaded into a real DuckDB database against the emulator:
each event once over runs, a run the daily quota stops resumes the next day, and the merge
keeps the latest version of an event fetched twice."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pytest
import surveillance as sv

dlt = pytest.importorskip("dlt")
pytest.importorskip("duckdb")
pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")

from surveillance.dlt import cost, surveillance_source  # noqa: E402

UTC = dt.timezone.utc
H = dt.timedelta(hours=1)

#: dlt logs through `Logger.warn`, which Python deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")


def pipeline(tmp_path, name="surveillance"):
    """A pipeline into a DuckDB file under `tmp_path`, its working directory there too."""
    return dlt.pipeline(
        name,
        destination=dlt.destinations.duckdb(str(tmp_path / f"{name}.duckdb")),
        pipelines_dir=str(tmp_path / "pipelines"),
        dataset_name="cloud",
    )


def rows(p, sql):
    with p.sql_client() as client:
        return client.execute_sql(sql)


def ids(p) -> list:
    return [r[0] for r in rows(p, "SELECT id FROM events ORDER BY start_time, id")]


@pytest.mark.parametrize("until", ["2026-01-04", "2026-01-05"], ids=["before", "at"])
def test_until_not_after_start_is_refused_as_sync_refuses_it(until):
    with sv.Emulator(seed=5, sites=1, days=1, events_per_day=10) as emu:
        with pytest.raises(ValueError, match=r"`until` \(2026-01-0.*\) must be after `start`"):
            surveillance_source(emu.client(), start="2026-01-05", until=until)


def test_two_runs_load_each_event_once_and_the_lists(tmp_path):
    with sv.Emulator(seed=5, sites=4, days=2, events_per_day=1500) as emu:
        p = pipeline(tmp_path)
        middle = emu.start + 30 * H
        p.run(surveillance_source(emu.client(), start=emu.start, until=middle))
        assert ids(p) == emu.truth(emu.start, middle)
        client = emu.client()
        p.run(surveillance_source(client, start=emu.start, until=emu.end))
        # The second run fetched from where the first got to, less the settle hour.
        assert ids(p) == emu.truth(emu.start, emu.end)
        assert rows(p, "SELECT count(*) - count(DISTINCT id) FROM events") == [(0,)]
        for kind in ("sites", "devices", "cameras", "reports"):
            [(count,)] = rows(p, f"SELECT count(*) FROM {kind}")
            assert count == len(emu.resources(kind)), kind
        # A third run with nothing new loads nothing new.
        p.run(surveillance_source(emu.client(), start=emu.start, until=emu.end))
        assert ids(p) == emu.truth(emu.start, emu.end)
        state = p.state["sources"]["surveillance"]["resources"]["events"]["incremental"]
        last = state["startTime"]["last_value"]
        assert last <= emu.end and last >= emu.end - H


def sent(emu) -> int:
    """Every request the emulator answered (tokens included) since its counts were reset."""
    return sum(n for answers in emu.stats()["requests"].values() for n in answers.values())


def test_a_run_reports_its_whole_cost_summed_over_its_resources(tmp_path):
    """Each resource counts its own requests in dlt's trace, apart from the others' that dlt
    interleaves with it, and ``cost(pipeline)`` sums them: the requests the emulator counted,
    run after run (a run with little to fetch costs little)."""
    with sv.Emulator(seed=5, sites=4, days=2, events_per_day=1500) as emu:
        p = pipeline(tmp_path)
        assert cost(p) == sv.Cost(0)
        client = emu.client()
        for until, events_least in ((emu.end, 30), (emu.end, 1)):
            emu.reset_stats()
            p.run(surveillance_source(client, start=emu.start, until=until))
            spent = sent(emu)
            assert cost(p) == sv.Cost(spent)
            per = {
                name: metrics.custom_metrics["surveillance.requests"]
                for step in p.last_trace.last_extract_info.metrics.values()
                for extract in step
                for name, metrics in extract["resource_metrics"].items()
                if "surveillance.requests" in metrics.custom_metrics  # not dlt's own state
            }
            assert set(per) == {"events", "sites", "devices", "cameras", "reports"}
            assert per["events"] >= events_least and sum(per.values()) == spent
            lists = [per[kind] for kind in ("sites", "devices", "cameras", "reports")]
            assert all(1 <= n <= 2 for n in lists), per  # a page each, and one the token


def load_day_after_day(p, emu, **client) -> list:
    """Runs the source into `p` once an (emulated) day, each run with a new client (`client`
    its keywords), until the table holds every event of the range (8 runs at most); the rows
    loaded after each run."""
    truth = emu.truth(emu.start, emu.end)
    loaded: list = []
    for _ in range(8):
        source = surveillance_source(emu.client(**client), start=emu.start, until=emu.end)
        info = p.run(source)
        assert not info.has_failed_jobs
        loaded.append(len(ids(p)))
        if loaded[-1] == len(truth):
            break
        emu.advance_clock(86_400)  # the next day's run
    return loaded


def test_a_run_stopped_by_the_quota_resumes_the_next_day_and_ends_equal_to_truth(tmp_path):
    budget = 120
    with sv.Emulator(seed=3, sites=6, days=3, events_per_day=10_000) as emu:
        emu.set_limits(daily_requests=budget)
        p = pipeline(tmp_path)
        truth = emu.truth(emu.start, emu.end)
        loaded = load_day_after_day(p, emu)
        stats = emu.stats()
    assert ids(p) == truth
    assert 3 <= len(loaded) <= 6, loaded  # stopped at least twice, each run got further
    assert loaded == sorted(loaded) and len(set(loaded)) == len(loaded)
    assert stats["rate_limited"] == 0
    assert all(used <= budget + 1 for used in stats["daily"]["days"].values()), stats["daily"]
    assert rows(p, "SELECT count(*) - count(DISTINCT id) FROM events") == [(0,)]


def test_after_a_run_the_quota_stopped_only_what_had_not_settled_is_fetched_again(tmp_path):
    budget = 40
    with sv.Emulator(seed=3, sites=4, days=2, events_per_day=4000) as emu:
        emu.set_limits(daily_requests=budget)
        p = pipeline(tmp_path)
        p.run(surveillance_source(emu.client(), start=emu.start, until=emu.end))
        cursor = p.state["sources"]["surveillance"]["resources"]["events"]["incremental"]
        stopped_at = cursor["startTime"]["last_value"]
        assert emu.start < stopped_at < emu.end - H, stopped_at  # stopped by the quota
        truth = emu.truth(emu.start, emu.end)
        for _ in range(4):
            emu.advance_clock(86_400)  # the next day's run
            source = surveillance_source(emu.client(), start=emu.start, until=emu.end)
            firsts: list = []
            source.events.add_map(first_times(firsts))
            p.run(source)
            # What the last run fetched had long settled then: none of it is fetched again.
            assert firsts and min(firsts) >= stopped_at, (min(firsts), stopped_at)
            if len(ids(p)) == len(truth):
                break
            cursor = p.state["sources"]["surveillance"]["resources"]["events"]["incremental"]
            stopped_at = cursor["startTime"]["last_value"]
        assert ids(p) == truth


@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
def test_no_window_a_run_stopped_by_the_quota_read_is_fetched_again(tmp_path, order):
    """Day after day, a run ends where the quota stops it. The events requests of all runs
    stay within two a run of the least the events take, in any order the service gives them:
    the pages read of the window the quota stopped are carried, in the client's cache, to the
    next run, which asks only the pages it lacks."""
    import math

    with sv.Emulator(seed=5, sites=4, days=2, events_per_day=4000) as emu:
        emu.set_semantics(order=order)
        emu.set_limits(daily_requests=36)
        p = pipeline(tmp_path)
        truth = emu.truth(emu.start, emu.end)
        runs = len(load_day_after_day(p, emu, cache=str(tmp_path / "cache")))
        reads = sum(emu.stats()["requests"].get("GET /v2/events", {}).values())
    assert ids(p) == truth
    least = math.ceil(len(truth) / 100)
    assert runs > 2 and reads <= least + 2 * runs, (reads, least, runs)


def first_times(into: list):
    """A map for a resource of tables: records each table's first startTime in ``into``."""

    def record(table):
        into.append(pc.min(table["startTime"]).as_py())
        return table

    return record


def test_the_merge_keeps_the_latest_version_of_an_event_fetched_twice(tmp_path):
    with sv.Emulator(seed=7, sites=3, days=1, events_per_day=600) as emu:
        events = emu.client().events(emu.start, emu.end)
        event = events[len(events) // 2]
        # The first run stops 10 minutes after it: inside the settle hour, read again next run.
        until = dt.datetime.fromisoformat(event["startTime"]) + dt.timedelta(minutes=10)

        def older_version(table):
            stale = pc.if_else(pc.equal(table["id"], event["id"]), "an older title", table["title"])
            return table.set_column(table.schema.get_field_index("title"), "title", stale)

        p = pipeline(tmp_path)
        first = surveillance_source(emu.client(), start=emu.start, until=until)
        first.events.add_map(older_version)
        p.run(first)
        sql = f"SELECT title FROM events WHERE id = '{event['id']}'"
        assert rows(p, sql) == [("an older title",)]
        p.run(surveillance_source(emu.client(), start=emu.start, until=until + H))
        assert rows(p, sql) == [(event["title"],)]
        assert ids(p) == emu.truth(emu.start, until + H)


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="`start` is missing"):
        client = sv.Client(
            base_url="http://127.0.0.1:9", api_key="k", client_id="c", client_secret="s"
        )
        surveillance_source(client)
    with pytest.raises(TypeError, match="surveillance.Client"):
        surveillance_source(object(), start="2026-01-05")


def test_importing_the_package_does_not_import_dlt():
    code = "import surveillance, sys; print('dlt' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_details_lands_as_json_and_a_load_logs_no_hint_difference(tmp_path):
    """``details`` is a JSON column of DuckDB, and the Arrow tables match every other hint of
    the resources (``id`` not null, as the primary key): a load logs no "column hints were
    different" warning (it logged one for the events, whose ``details`` hint Arrow has no JSON
    type for, and one for each of the five resources before that)."""
    import logging

    said: list = []

    class Keep(logging.Handler):
        def emit(self, record):
            said.append(record.getMessage())

    keep = Keep(logging.WARNING)
    logging.getLogger("dlt").addHandler(keep)
    try:
        with sv.Emulator(seed=2, sites=3, days=1, events_per_day=300) as emu:
            p = pipeline(tmp_path)
            p.run(surveillance_source(emu.client(), start=emu.start, until=emu.end))
    finally:
        logging.getLogger("dlt").removeHandler(keep)
    sql = (
        "SELECT DISTINCT data_type FROM information_schema.columns "
        "WHERE table_name = 'events' AND column_name = 'details'"
    )
    assert rows(p, sql) == [("JSON",)]
    assert rows(p, "SELECT count(*) FROM events WHERE json_valid(details)") == [(300,)]
    differ = [m.split(",")[0] for m in said if "column hints were different" in m]
    assert differ == [], said
