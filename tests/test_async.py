"""``sv.AsyncClient`` against the emulator over real HTTP: the same data as the sync client, many
calls at once in one loop, a loop that stays responsive, cancellation that closes connections,
and several event loops in turn."""

from __future__ import annotations

import asyncio
import datetime as dt
import statistics
import subprocess
import sys
import time

import pytest
import surveillance as sv


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(seed=3, sites=8, days=2, events_per_day=12_000) as emu:
        emu.add_events(emu.start + dt.timedelta(hours=9, milliseconds=40), 130)
        yield emu


def run(coro):
    return asyncio.run(coro)


def test_every_method_returns_what_the_sync_client_returns(emu):
    sync = emu.client()
    site = sync.sites()[0]["id"]

    async def main():
        async with emu.async_client() as client:
            return {
                "sites": await client.sites(),
                "devices": await client.devices(),
                "cameras": await client.cameras(),
                "site cameras": await client.cameras(site_id=site),
                "reports": await client.reports(),
                "events": await client.events(emu.start, emu.end, progress=False),
                "iter": [e async for e in client.iter_events(emu.start, emu.end)],
                "token": await client.access_token(),
            }

    got = run(main())
    assert got["sites"] == sync.sites()
    assert got["devices"] == sync.devices()
    assert got["cameras"] == sync.cameras()
    assert got["site cameras"] == sync.cameras(site_id=site)
    assert got["reports"] == sync.reports()
    assert got["events"] == sync.events(emu.start, emu.end, progress=False)
    assert got["iter"] == got["events"]
    assert [e["id"] for e in got["events"]] == emu.truth(emu.start, emu.end)
    assert isinstance(got["token"], str) and got["token"]


@pytest.mark.parametrize("output", ["arrow", "pandas", "polars"])
def test_typed_outputs_equal_the_sync_ones(emu, output):
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    pytest.importorskip("polars")
    import pyarrow as pa

    sync = emu.client()
    end = emu.start + dt.timedelta(hours=18)

    async def main():
        client = emu.async_client()
        return (
            await client.events(emu.start, end, output=output),
            await client.sites(output=output),
        )

    events, sites = run(main())
    want_events = sync.events(emu.start, end, output=output, progress=False)
    want_sites = sync.sites(output=output)
    if output == "arrow":
        assert pa.table(events).equals(pa.table(want_events))
        assert pa.table(sites).equals(pa.table(want_sites))
    elif output == "pandas":
        assert events.equals(want_events) and sites.equals(want_sites)
    else:
        assert events.equals(want_events) and sites.equals(want_sites)


def test_event_batches_async_for(emu):
    pa = pytest.importorskip("pyarrow")

    async def main():
        client = emu.async_client()
        return [pa.record_batch(b) async for b in client.event_batches(emu.start, emu.end)]

    batches = run(main())
    assert len(batches) > 1
    ids = [i for b in batches for i in b.column("id").to_pylist()]
    assert ids == emu.truth(emu.start, emu.end)


def test_async_fetches_hand_the_cores_progress_to_a_callback(emu):
    """``event_batches`` and ``events`` of the async client give the callback the same update
    dicts as the sync client (requests, expected events, ETA), while the fetch runs under the
    read limit and once at the end; the callback's exception ends the iteration."""
    pa = pytest.importorskip("pyarrow")
    end = emu.start + dt.timedelta(hours=5)
    truth = emu.truth(emu.start, end)

    async def main():
        # At 8 reads a second the fetch takes seconds: the updates come while it runs.
        client = emu.async_client(limits=sv.Limits(read_per_second=8, daily_requests=None))
        seen: list = []
        batches = [
            pa.record_batch(b)
            async for b in client.event_batches(emu.start, end, progress=seen.append)
        ]
        dicts: list = []
        events = await client.events(emu.start, end, progress=dicts.append, refresh=True)
        return batches, seen, events, dicts

    batches, seen, events, dicts = run(main())
    assert [i for b in batches for i in b.column("id").to_pylist()] == truth
    assert [e["id"] for e in events] == truth
    for updates in (seen, dicts):
        assert len(updates) > 3, updates
        last = updates[-1]
        assert last["events"] == len(truth) and last["done_ms"] == last["total_ms"]
        assert last["requests"] >= len(truth) / 100 and "eta_s" in last
        assert [u["requests"] for u in updates] == sorted(u["requests"] for u in updates)

    class Stop(Exception):
        pass

    def refuse(update):
        raise Stop

    async def stopped():
        client = emu.async_client(limits=sv.Limits(read_per_second=8, daily_requests=None))
        return [b async for b in client.event_batches(emu.start, end, progress=refuse)]

    with pytest.raises(Stop):
        run(stopped())
    with pytest.raises(TypeError, match="progress"):
        run(emu.async_client().event_batches(emu.start, end, progress=1).__anext__())


def test_twenty_concurrent_calls_are_exact(emu):
    emu.set_semantics("desc", "[]")
    hours = [(h, h + 5) for h in range(0, 40, 2)]
    assert len(hours) == 20

    async def main():
        client = emu.async_client()
        return await asyncio.gather(
            *(
                client.events(
                    emu.start + dt.timedelta(hours=a),
                    emu.start + dt.timedelta(hours=b),
                    progress=False,
                )
                for a, b in hours
            )
        )

    results = run(main())
    for (a, b), events in zip(hours, results):
        start, end = emu.start + dt.timedelta(hours=a), emu.start + dt.timedelta(hours=b)
        assert [e["id"] for e in events] == emu.truth(start, end)


def test_the_loop_stays_responsive_during_a_long_fetch(emu):
    # 25 ms a page: the fetch lasts over half a second, long enough to watch the loop at any speed
    # of the client (at 2 ms it had come down to 0.2 s, twenty ticks).
    emu.set_faults(latency_ms=25)

    async def main():
        client = emu.async_client()
        gaps: list = []
        done = asyncio.Event()

        async def ticker():
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.ensure_future(ticker())
        events = await client.events(emu.start, emu.end, progress=False)
        done.set()
        await tick
        return events, gaps

    events, gaps = run(main())
    assert len(events) > 20_000
    assert len(gaps) > 20
    gaps_ms = sorted(g * 1000 for g in gaps)
    # The ticker asks for 10 ms; what it gets says whether anything held the loop. (A sync
    # fetch would hold it for the whole fetch: hundreds of milliseconds.) The bounds leave
    # room for a loaded 2-core machine's scheduling.
    assert statistics.median(gaps_ms) < 15, gaps_ms
    assert gaps_ms[int(0.9 * len(gaps_ms))] < 30, gaps_ms
    assert gaps_ms[-1] < 250, gaps_ms
    assert sum(gaps_ms) > 4 * gaps_ms[-1]


def test_wait_for_cancels_the_fetch_and_closes_its_connections(emu):
    client = emu.async_client()

    async def warm():
        await client.access_token()

    run(warm())
    emu.set_faults(latency_ms=5000)

    async def main():
        async def sample():
            await asyncio.sleep(0.1)
            return emu.stats()["connections_open"]

        sampler = asyncio.ensure_future(sample())
        started = time.perf_counter()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.events(emu.start, emu.end, progress=False), 0.2)
        return time.perf_counter() - started, await sampler

    elapsed, during = run(main())
    assert elapsed < 0.5
    assert during >= 1  # the fetch had a request waiting on an open connection
    # The request in flight was dropped: its connection is closed, well before the emulator
    # would have answered.
    deadline = time.perf_counter() + 2.0
    while emu.stats()["connections_open"] >= during and time.perf_counter() < deadline:
        time.sleep(0.02)
    assert emu.stats()["connections_open"] < during


def test_cancelling_the_task_stops_the_fetch(emu):
    emu.set_faults(latency_ms=5000)

    async def main():
        client = emu.async_client()
        task = asyncio.ensure_future(client.sites())
        await asyncio.sleep(0.1)
        task.cancel()
        started = time.perf_counter()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.perf_counter() - started

    assert run(main()) < 0.3


def test_several_event_loops_in_turn(emu):
    client = emu.async_client()
    first = run(client.sites())
    second = run(client.sites())
    loop = asyncio.new_event_loop()
    try:
        third = loop.run_until_complete(client.reports())
    finally:
        loop.close()
    assert first == second and len(third) > 0


def test_errors_are_the_sync_clients(emu):
    async def main():
        client = emu.async_client()
        with pytest.raises(sv.NotFoundError):
            await client.events(
                emu.start, emu.end, report_id="00000000-0000-4000-8000-000000000000"
            )
        with pytest.raises(ValueError, match="must be after"):
            await client.events(emu.end, emu.start)
        with pytest.raises(ValueError, match="`output` must be one of"):
            await client.sites(output="csv")

    run(main())


def test_closed_client_refuses_calls(emu):
    async def main():
        client = emu.async_client()
        async with client:
            await client.sites()
        with pytest.raises(sv.TransportError):
            await client.sites()

    run(main())


def test_pickle_and_repr_hold_no_secret(emu):
    import pickle

    client = emu.async_client()
    text = repr(client)
    assert text.startswith("AsyncClient(") and emu.client_secret not in text
    again = pickle.loads(pickle.dumps(client))
    assert isinstance(again, sv.AsyncClient)
    assert len(run(again.sites())) == len(emu.client().sites())


def _records(n: int, prefix: str) -> list:
    return [
        {
            "dataType": "other",
            "schemaVersion": "1",
            "startTime": 1794891600000 + i,
            "locationId": "store-1",
            "dataSourceId": "door-1",
            "eventUniqueId": f"{prefix}-{i}",
            "eventType": "door open",
        }
        for i in range(n)
    ]


def test_publish_equals_the_sync_client(emu):
    emu.clear_published()
    records = _records(3000, "async") + [{"dataType": "other"}]  # one invalid

    async def main():
        async with emu.async_client() as client:
            return await client.publish(iter(records), batch_size=50, progress=False)

    report = run(main())
    assert report.accepted == 3000 and len(report.rejected) == 1
    assert sorted(r["eventUniqueId"] for r in emu.published()) == sorted(
        r["eventUniqueId"] for r in records[:-1]
    )
    sync = emu.client().publish(records, batch_size=50, progress=False)
    assert (sync.accepted, len(sync.rejected)) == (report.accepted, len(report.rejected))


def test_an_async_publish_leaves_its_own_cost_in_last_cost(emu):
    """The publish runs in a worker thread of its own; its requests still count in the calling
    task's call, so ``last_cost`` says what the publish sent, beside a read of another task."""
    emu.clear_published()

    async def main():
        async with emu.async_client() as client:
            await client.sites()

            async def publish():
                report = await client.publish(_records(250, "cost"), progress=False)
                return report, client.last_cost.requests

            async def read():
                await client.sites()
                return client.last_cost.requests

            return await asyncio.gather(publish(), read())

    (report, published), read = run(main())
    assert report.accepted == 250
    assert published == report.requests >= 3 and read == 1


def test_publish_keeps_the_loop_free_and_stops_when_cancelled(emu):
    emu.clear_published()
    emu.set_faults(latency_ms=5000)

    async def main():
        client = emu.async_client()
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.ensure_future(ticker())
        started = time.perf_counter()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.publish(_records(500, "slow"), progress=False), 0.3)
        elapsed = time.perf_counter() - started
        during = emu.stats()["connections_open"]
        tick.cancel()
        return elapsed, ticks, during

    elapsed, ticks, during = run(main())
    assert elapsed < 0.6
    assert ticks >= 15  # the loop kept running while the worker thread posted
    assert during >= 1
    deadline = time.perf_counter() + 2.0
    while emu.stats()["connections_open"] >= during and time.perf_counter() < deadline:
        time.sleep(0.02)
    assert emu.stats()["connections_open"] < during  # the requests in flight were aborted
    assert emu.published() == []


# A worker thread of the runtime hands an awaitable's result to asyncio with
# `loop.call_soon_threadsafe`, which lets go of the GIL while it wakes the loop. Here that call
# is held for 0.3 s after the loop has its result, so the main thread returns and the
# interpreter exits while the worker is still in Python. Before the runtime stopped at exit, the
# worker never came back (the process ended under it; in CI it aborted, status -6).
EXIT_DURING_A_WAKE_CHILD = """
import asyncio, os, threading, time
import surveillance as sv

class Loop(asyncio.SelectorEventLoop):
    def call_soon_threadsafe(self, *args, **kwargs):
        handle = super().call_soon_threadsafe(*args, **kwargs)
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.3)
            os.write(2, b"the worker's call ended\\n")
        return handle

emu = sv.Emulator(seed=5, sites=3, days=1, events_per_day=10)

async def main():
    async with emu.async_client() as client:
        return await client.sites()

loop = Loop()
print(loop.run_until_complete(main()) == emu.resources("sites"))
loop.close()
emu.stop()
"""


def test_the_interpreter_exits_cleanly_while_a_worker_hands_asyncio_a_result():
    done = subprocess.run(
        [sys.executable, "-c", EXIT_DURING_A_WAKE_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "True"
    assert "the worker's call ended" in done.stderr


#: A program whose daemon threads each run AsyncClient calls in ``asyncio.run`` (two publishes
#: of 3,000 records, one a request, at 100 requests a second, and reads in a loop) and that ends
#: with ``sys.exit(7)`` ``sys.argv[1]`` seconds in.
EXIT_DURING_ASYNC_CALLS = """
import asyncio, sys, threading, time
import surveillance as sv

emu = sv.Emulator(sites=2, days=1, events_per_day=2000)
client = emu.async_client(limits=sv.Limits(publish_per_second=100.0, daily_requests=None))

def rows(prefix):
    return ({"dataType": "other", "schemaVersion": "1", "startTime": 1794891600000 + i,
             "locationId": "s", "dataSourceId": "d", "eventUniqueId": f"{prefix}-{i}",
             "eventType": "x"} for i in range(3000))

def publish(prefix):
    asyncio.run(client.publish(rows(prefix), batch_size=1, progress=False))

async def reads():
    while True:
        await client.events(emu.start, emu.end)
        await client.sites()

def read():
    asyncio.run(reads())

for target, args in ((publish, ("a",)), (publish, ("b",)), (read, ())):
    threading.Thread(target=target, args=args, daemon=True).start()
time.sleep(float(sys.argv[1]))
sys.exit(7)
"""


def test_a_program_ends_at_once_while_daemon_threads_run_async_calls():
    # AsyncClient.publish ran in the loop's default executor, whose threads the interpreter's
    # exit joins: the program above ended after its two publishes were done (30 s), not when
    # it said. Its threads are now held where they let go of the GIL, as the sync client's are,
    # and the exit status is the program's own.
    for wait in (0.3, 0.8, 0.5, 1.0):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", EXIT_DURING_ASYNC_CALLS, str(wait)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 7, (wait, done.stderr[-2000:])
        assert time.monotonic() - started < wait + 10, wait
