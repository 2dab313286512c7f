"""surveillance.dask on a real cluster: two worker processes (dask.distributed.LocalCluster)
that reach an emulator running in this process over loopback."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import runpy
import time
from collections import Counter
from pathlib import Path

import pytest

dd = pytest.importorskip("dask.dataframe")
db = pytest.importorskip("dask.bag")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

import dask  # noqa: E402
import surveillance as sv  # noqa: E402
import surveillance.dask as svd  # noqa: E402
from surveillance._time import from_ms, to_ms  # noqa: E402

UTC = dt.timezone.utc
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dask_parquet.py"

#: 30,000 events a day: every one-day partition is three windows over the offset ceiling.
START, DAYS, PER_DAY = "2026-01-05", 3, 30_000
#: Bursts of 150 events in one millisecond: on a partition boundary, just before one, inside.
BURSTS = ["2026-01-06T00:00:00Z", "2026-01-06T23:59:59.999Z", "2026-01-05T13:07:00.123Z"]


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes; no dashboard on a fixed port; closed at the end."""
    with _local_cluster(2) as dask_client:
        yield dask_client


@contextlib.contextmanager
def _local_cluster(workers: int):
    """A client of ``workers`` single-threaded worker processes on loopback, with no dashboard
    on a fixed port; closed at the end."""
    with (
        distributed.LocalCluster(
            n_workers=workers,
            processes=True,
            threads_per_worker=1,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as lc,
        distributed.Client(lc) as dask_client,
    ):
        yield dask_client


@pytest.fixture(scope="module")
def big():
    """An emulator with dense days and bursts at and near a partition boundary."""
    with sv.Emulator(seed=3, sites=12, days=DAYS, events_per_day=PER_DAY, start=START) as emu:
        for at in BURSTS:
            emu.add_events(at, 150)
        yield emu


def worker_clients(dask_client) -> dict:
    """How many cached clients each worker process holds."""
    return dask_client.run(lambda: len(__import__("surveillance.dask").dask._CLIENTS))


def same_strings(frame, like):
    """`frame` with its text columns in the string dtype of `like`'s (and nothing else)."""
    text = {
        c: like[c].dtype
        for c in frame.columns
        if isinstance(frame[c].dtype, pd.StringDtype) and isinstance(like[c].dtype, pd.StringDtype)
    }
    return frame.astype(text)


@pytest.mark.parametrize("order, bounds", [("asc", "[)"), ("desc", "[]"), ("shuffled", "()")])
def test_events_equal_client_events_across_dense_partitions(cluster, big, order, bounds):
    big.set_semantics(order=order, bounds=bounds)
    client = big.client()
    start, end = "2026-01-05T06:00:00Z", big.end
    ddf = svd.events(client, start, end)
    assert ddf.npartitions == 3 and ddf.known_divisions
    assert [str(d) for d in ddf.divisions] == [
        "2026-01-05 06:00:00+00:00",
        "2026-01-06 00:00:00+00:00",
        "2026-01-07 00:00:00+00:00",
        "2026-01-08 00:00:00+00:00",
    ]
    parts = dask.compute(*ddf.to_delayed())
    direct = client.events(start, end, output="pandas", progress=False)
    truth = big.truth(start, end)
    # the boundary burst is in the partition that starts there, and only there
    boundary = pd.Timestamp(BURSTS[0])
    assert [int((p.index == boundary).sum()) for p in parts] == [0, 150, 0]
    for part, lo, hi in zip(parts, ddf.divisions[:-1], ddf.divisions[1:]):
        assert len(part) > 10_000  # over the offset ceiling: several windows per partition
        assert part.index.min() >= lo and part.index.max() < hi
    frame = pd.concat(parts)
    assert frame["id"].tolist() == truth
    # Dask stores text as its own string dtype (its `dataframe.convert-string` setting): the
    # same values; every other column has client.events' dtype
    expected = same_strings(direct.set_index("startTime"), frame)
    assert frame.dtypes.equals(expected.dtypes) and frame.index.equals(expected.index)
    assert frame.equals(expected)  # values, index and dtypes (assert_frame_equal is slower)
    # meta (built without a request) is what the partitions are
    pd.testing.assert_series_equal(frame.dtypes, ddf.dtypes)
    assert frame.index.dtype == ddf.index.dtype


def test_compute_and_reset_index_give_client_events(cluster, big):
    client = big.client()
    start, end = "2026-01-05T23:00:00Z", "2026-01-06T01:00:00Z"
    with dask.config.set({"dataframe.convert-string": False}):  # client.events' dtypes, all
        ddf = svd.events(client, start, end, partition="15min")
    assert ddf.npartitions == 8
    frame = ddf.compute().reset_index()
    direct = client.events(start, end, output="pandas", progress=False)
    pd.testing.assert_frame_equal(frame[direct.columns], direct)
    assert list(frame.columns) == ["startTime", *(c for c in direct.columns if c != "startTime")]
    # index-based selection reads only the partitions it needs
    sub = ddf.loc["2026-01-06T00:00:00Z":"2026-01-06T00:14:59.999Z"]
    assert sub.npartitions == 1
    assert len(sub.compute()) == len(big.truth("2026-01-06T00:00:00Z", "2026-01-06T00:15:00Z"))


def test_a_second_compute_is_served_by_the_cache_of_settled_events(cluster, big, tmp_path):
    client = big.client(cache=tmp_path)  # the workers' clients share its directory
    start, end = "2026-01-05T20:00:00Z", "2026-01-06T04:00:00Z"

    def read() -> tuple:
        before = big.stats()["requests"].get("GET /v2/events", {}).get("200", 0)
        frame = svd.events(client, start, end, partition="2h").compute()
        return frame, big.stats()["requests"]["GET /v2/events"]["200"] - before

    first, spent = read()
    again, spent_again = read()
    assert spent >= len(first) // 100 and spent_again == 0
    assert again["id"].tolist() == first["id"].tolist() == big.truth(start, end)
    assert again.equals(first)


def test_each_worker_process_reuses_one_client_and_token(cluster, big):
    # a configuration no other test uses: the workers have no client for it yet
    client = big.client(timeout=29.0)
    before = worker_clients(cluster)
    for _ in range(2):  # a new graph, and a new Client object with the same configuration
        ddf = svd.events(big.client(timeout=29.0), "2026-01-05", "2026-01-06", partition="1h")
        assert len(ddf.compute()) == len(big.truth("2026-01-05", "2026-01-06"))
    issued = big.stats()["tokens_issued"]
    assert 1 <= issued <= 2  # 48 partitions on two processes: at most one token each
    after = worker_clients(cluster)
    assert all(after[w] - before[w] <= 1 for w in after)
    # revoked tokens: each worker's client renews once and goes on
    big.revoke_tokens()
    ddf = svd.events(client, "2026-01-05", "2026-01-06", partition="2h")
    assert ddf.compute()["id"].tolist() == big.truth("2026-01-05", "2026-01-06")
    assert big.stats()["tokens_issued"] - issued <= 2


def sent(emu) -> int:
    """Every request the emulator answered (tokens included) since its counts were reset."""
    return sum(n for answers in emu.stats()["requests"].values() for n in answers.values())


def test_a_runs_cost_is_summed_over_its_tasks_wherever_they_ran(cluster, big):
    """``svd.cost`` of a frame is what its partitions sent, summed over the tasks of two worker
    processes, or of the local scheduler's threads: the requests the emulator counted."""
    client = big.client(timeout=27.0)  # its own configuration: the workers fetch a token for it
    start, end = "2026-01-05T10:00:00Z", "2026-01-05T22:00:00Z"
    big.reset_stats()
    ddf = svd.events(client, start, end, partition="2h")
    assert svd.cost(ddf).requests == 0
    assert len(ddf.compute()) == len(big.truth(start, end))
    on_cluster = sent(big)
    assert on_cluster > 6 * 20  # six partitions of 2,500 events, and two tokens or so
    assert svd.cost(ddf).requests == on_cluster
    assert svd.cost(ddf.reset_index().loc[lambda f: f["id"] != ""]).requests == on_cluster
    assert svd.cost(ddf).quota == client.quota()
    # A second compute reads again: the cost is every compute's.
    ddf.compute()
    assert svd.cost(ddf).requests == sent(big) > on_cluster
    for scheduler in ("threads", "sync"):
        big.reset_stats()
        local = svd.events(client, start, end, partition="2h")
        with dask.config.set(scheduler=scheduler):
            assert len(local.compute()) == len(big.truth(start, end))
        assert svd.cost(local).requests == sent(big) >= 6 * 25, scheduler
    with pytest.raises(ValueError, match="not made by surveillance.dask.events"):
        svd.cost(dd.from_pandas(pd.DataFrame({"a": [1]}), npartitions=1))


def test_events_meta_is_the_client_schema(big):
    table = pa.table(big.client().events("2026-01-05", "2026-01-05T01:00:00Z", output="arrow"))
    assert table.schema.equals(svd._events_schema())
    assert table.num_rows > 0


def test_slices_and_arguments():
    day = 86_400_000
    lo = to_ms("2026-01-05T06:00:00Z")
    hi = to_ms("2026-03-03T00:00:00Z")
    month = svd._slices(lo, hi, "MS")
    assert [from_ms(t).isoformat()[:10] for t in month] == [
        "2026-01-05",
        "2026-02-01",
        "2026-03-01",
        "2026-03-03",
    ]
    assert svd._slices(0, day, dt.timedelta(hours=12)) == [0, day // 2, day]
    assert svd._slices(0, day, "1D") == [0, day]
    assert svd._slices(5, 7, "1D") == [5, 7]
    with pytest.raises(ValueError, match="partition"):
        svd._slices(0, day, "0h")
    with pytest.raises(ValueError, match="partition"):
        svd._slices(0, day, "nonsense")
    with pytest.raises(ValueError, match="more than"):
        svd._slices(0, 365 * day, "1ms")
    with pytest.raises(ValueError, match="after"):
        svd.events(None, "2026-01-06", "2026-01-05")
    with pytest.raises(TypeError, match="surveillance.Client"):
        svd.events(object(), "2026-01-05", "2026-01-06")
    with pytest.raises(TypeError, match="dask Bag or DataFrame"):
        svd.publish(sv.Client(api_key="k", client_id="i", client_secret="s",
                              base_url="http://127.0.0.1:9"), [{"a": 1}])  # fmt: skip


def record(i: int) -> dict:
    return {
        "dataType": "other",
        "schemaVersion": "1",
        "startTime": 1794891600000 + i,
        "locationId": f"store-{i % 7}",
        "dataSourceId": "door-1",
        "eventUniqueId": f"e-{i:06d}",
        "eventType": "door open",
    }


def test_publish_100k_records_through_dask_each_once(cluster, big):
    n = 100_000
    big.clear_published()
    ddf = dd.from_pandas(pd.DataFrame([record(i) for i in range(n)]), npartitions=8)
    report = svd.publish(big.client(), ddf)
    assert report.ok, report
    assert (report.total, report.accepted, report.sent) == (n, n, n)
    published = big.published()
    ids = Counter(r["eventUniqueId"] for r in published)
    assert len(published) == n and set(ids) == {f"e-{i:06d}" for i in range(n)}
    stats = big.stats()
    assert stats["published_upserts"] == 0  # each record arrived once
    # arrays of 100 (the default), each accepted once (a 401 after another test revoked the
    # tokens is answered before anything is stored); a partition's last array may be short
    assert n // 100 <= stats["requests"]["POST /v2/webhook"]["200"] <= n // 100 + 8
    assert stats["tokens_issued"] <= 2


def test_a_publish_leaves_its_whole_cost_summed_over_its_tasks_in_last_cost(cluster, big):
    client = big.client(timeout=26.0)  # its own configuration: the workers fetch a token for it
    big.clear_published()
    big.reset_stats()
    rows = [record(i) for i in range(400)]
    report = svd.publish(client, db.from_sequence(rows, npartitions=4), batch_size=10)
    assert report.ok and report.accepted == 400
    assert client.last_cost.requests == sent(big) >= 40
    assert client.last_cost.quota == client.quota()


def test_publish_bag_combines_failures_in_collection_order(cluster, big, tmp_path):
    big.clear_published()
    rows = [record(i) for i in range(40)]
    bad = {7, 18, 33}  # in partitions 0, 1 and 3 of four
    for i in bad:
        del rows[i]["locationId"]
    report = svd.publish(big.client(), db.from_sequence(rows, npartitions=4), batch_size=5)
    assert (report.total, report.accepted, len(report.rejected)) == (40, 37, 3)
    assert [f.index for f in report.rejected] == sorted(bad)
    failed = [f.record["eventUniqueId"] for f in report.rejected]
    assert failed == [f"e-{i:06d}" for i in sorted(bad)]
    assert all(f.kind == "invalid" for f in report.rejected)
    assert report.batch_size == 5 and not report.ok
    assert len(big.published()) == 37
    path = tmp_path / "failed.jsonl"
    assert report.write_failures(path) == 3
    assert [json.loads(line)["eventUniqueId"] for line in path.read_text().splitlines()] == [
        f"e-{i:06d}" for i in sorted(bad)
    ]


def test_publish_refused_credentials_raise_with_the_combined_report(cluster, big, tmp_path):
    rows = [record(i) for i in range(40)]
    client = big.client(client_secret="not-the-secret")
    with pytest.raises(sv.AuthError) as caught:
        svd.publish(client, db.from_sequence(rows, npartitions=4))
    report = caught.value.report
    assert (report.total, report.accepted, len(report.rejected)) == (40, 0, 40)
    assert [f.index for f in report.rejected] == list(range(40)) and report.error
    assert report.write_failures(tmp_path / "failed.jsonl") == 40


def test_example_writes_a_parquet_dataset_partitioned_by_date(cluster, big, tmp_path):
    example = runpy.run_path(str(EXAMPLE), run_name="example")
    path = tmp_path / "events"
    example["write_dataset"](big.client(), "2026-01-05T12:00:00Z", "2026-01-07", path)
    dates = sorted(p.name for p in path.iterdir() if p.is_dir())
    assert dates == ["date=2026-01-05", "date=2026-01-06"]
    back = example["read_dataset"](path)
    assert len(back) == len(big.truth("2026-01-05T12:00:00Z", "2026-01-07"))
    assert sorted(back["id"]) == sorted(big.truth("2026-01-05T12:00:00Z", "2026-01-07"))
    assert back["date"].astype(str).tolist() == back["startTime"].dt.strftime("%Y-%m-%d").tolist()


# --- the key's limits and daily quota across a cluster of four worker processes ------------------
#: The published read limits scaled up for test time, as the emulator enforces them and the
#: client is given them: 20 reads/s and 3 in flight; the webhook's 100/s and 200 in flight.
READS, READ_FLIGHT, POSTS, POST_FLIGHT = 20.0, 3, 100.0, 200


def _own_ledger_dir(base: str) -> str:
    """Gives this worker process a quota ledger of its own, as on a machine of its own."""
    import os

    path = os.path.join(base, str(os.getpid()))
    os.environ["SURVEILLANCE_QUOTA_DIR"] = path
    return path


def _worker_counts(url: str) -> dict:
    """What the cached clients of this worker process for the service at ``url`` sent, and
    how many 429s they met."""
    from surveillance import dask as svd_

    sent = limited = 0
    for c in svd_._CLIENTS.values():
        if c._inner.base_url.rstrip("/") != url.rstrip("/"):
            continue
        stats = c.stats()
        sent += sum(stats["requests"].values())
        limited += stats["rate_limited"]
    return {"sent": sent, "rate_limited": limited}


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    """Four single-threaded worker processes, each with a quota ledger of its own (as four
    machines would have), so only the cluster's coordination keeps them within the key's."""
    base = str(tmp_path_factory.mktemp("ledgers"))
    with _local_cluster(4) as dask_client:
        dirs = dask_client.run(_own_ledger_dir, base)
        assert len(set(dirs.values())) == 4
        dask_client.run(lambda: __import__("surveillance.dask").dask.events_meta())  # imports
        yield dask_client


def idle(dask_client) -> None:
    """Waits until no task runs (those left running after another one failed)."""
    deadline = time.monotonic() + 30
    while any(dask_client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.05)


def cluster_counts(dask_client, emu) -> dict:
    counts = dask_client.run(_worker_counts, emu.url).values()
    return {k: sum(c[k] for c in counts) for k in ("sent", "rate_limited")}


def limited_429s(emu) -> int:
    stats = emu.stats()
    return stats["rate_limited"] + sum(s.get("429", 0) for s in stats["requests"].values())


def test_cluster_reads_at_the_keys_rate_without_a_429(four):
    with sv.Emulator(seed=5, sites=4, days=5, events_per_day=4000) as emu:
        emu.set_limits(read_per_second=READS, read_concurrency=READ_FLIGHT)
        client = emu.client()  # the same limits
        ddf = svd.events(client, emu.start, emu.end)  # 5 partitions on 4 workers
        t0 = time.perf_counter()
        frame = ddf.compute()
        wall = time.perf_counter() - t0
        assert frame["id"].tolist() == emu.truth(emu.start, emu.end)
        reads = sum(emu.stats()["requests"]["GET /v2/events"].values())
        ratio = reads / wall / READS
        print(f"reads: {reads} in {wall:.2f} s, {ratio:.3f} of {READS:g}/s")
        assert limited_429s(emu) == 0 and cluster_counts(four, emu)["rate_limited"] == 0
        # 0.91-0.95 measured on an idle machine (bench/RESULTS.md, "Dask cluster limits");
        # a busy CI machine's scheduling may take a few percent more.
        assert ratio >= 0.8


def test_cluster_reads_stop_at_the_daily_budget(four):
    budget = 40
    with sv.Emulator(seed=6, sites=4, days=5, events_per_day=2500) as emu:
        emu.set_limits(read_per_second=READS, read_concurrency=READ_FLIGHT, daily_requests=budget)
        ddf = svd.events(emu.client(), emu.start, emu.end)  # about 130 requests
        with pytest.raises(sv.QuotaExhaustedError, match="used up"):
            ddf.compute()
        idle(four)
        counts = cluster_counts(four, emu)
        daily = emu.stats()["daily"]
        print(f"budget {budget}: the workers sent {counts['sent']}, the service counted "
              f"{daily['used']}")  # fmt: skip
        assert limited_429s(emu) == 0 and counts["rate_limited"] == 0
        assert counts["sent"] == daily["used"] <= budget
        assert daily["used"] >= budget - 4  # the budget is used, not stranded in blocks


def test_cluster_publishes_at_the_keys_rate_and_stops_at_the_budget(four):
    n, batch = 4_000, 10  # 400 requests
    frame = pd.DataFrame([record(i) for i in range(n)])
    with sv.Emulator(seed=7, sites=2, days=1, events_per_day=10) as emu:
        emu.set_limits(publish_per_second=POSTS, publish_concurrency=POST_FLIGHT)
        ddf = dd.from_pandas(frame, npartitions=4)
        t0 = time.perf_counter()
        report = svd.publish(emu.client(), ddf, batch_size=batch)
        wall = time.perf_counter() - t0
        assert report.ok and report.accepted == n and len(emu.published()) == n
        posts = sum(emu.stats()["requests"]["POST /v2/webhook"].values())
        ratio = posts / wall / POSTS
        print(f"posts: {posts} in {wall:.2f} s, {ratio:.3f} of {POSTS:g}/s")
        assert limited_429s(emu) == 0 and cluster_counts(four, emu)["rate_limited"] == 0
        # 0.91-0.95 measured on an idle machine (bench/RESULTS.md, "Dask cluster limits");
        # a busy CI machine's scheduling may take a few percent more.
        assert ratio >= 0.8
    budget = 30
    with sv.Emulator(seed=8, sites=2, days=1, events_per_day=10) as emu:
        emu.set_limits(
            publish_per_second=POSTS, publish_concurrency=POST_FLIGHT, daily_requests=budget
        )
        ddf = dd.from_pandas(frame.iloc[:800], npartitions=8)  # 80 requests
        with pytest.raises(sv.QuotaExhaustedError) as caught:
            svd.publish(emu.client(), ddf, batch_size=batch)
        idle(four)
        report = caught.value.report
        counts, daily = cluster_counts(four, emu), emu.stats()["daily"]
        assert limited_429s(emu) == 0 and counts["rate_limited"] == 0
        assert counts["sent"] == daily["used"] <= budget
        assert report.total == 800 and report.accepted == len(emu.published())
        # every record not accepted is in the report, ready to publish again
        assert report.accepted + len(report.rejected) == 800
