"""What fetches cost in requests, the scarce resource (2,400 a day per key): the job table of
README's promise, in every order and bound inclusivity the service may use, each row against
its bound, every result exact; and sequences of fetches on one client, whose later fetches use
what the earlier ones found out."""

from __future__ import annotations

import datetime as dt
import math

import pytest
import surveillance as sv

ORDERS = ["asc", "desc", "shuffled"]
BOUNDS = ["[)", "[]", "()", "(]"]
HOUR = dt.timedelta(hours=1)
#: A daily quota, as by default, without the 1 read/s pacing (the tests' time).
QUOTA = sv.Limits(read_per_second=None, read_concurrency=3, daily_requests=10**8)


def pages(n: int) -> int:
    """The fewest requests that can return ``n`` events: ``ceil(n / 100)``, at least 1."""
    return max(1, math.ceil(n / 100))


def reads(emu: sv.Emulator) -> int:
    """``GET /v2/events`` requests the emulator answered, since its stats were last reset."""
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def fetch(emu: sv.Emulator, client: sv.Client, start, end) -> tuple[int, int]:
    """Events and requests of one fetch, checked exact against the emulator."""
    emu.reset_stats()
    got = client.events(start, end, progress=False)
    assert [e["id"] for e in got] == emu.truth(start, end)
    return len(got), reads(emu)


def below_ceiling(n: int) -> int:
    """The bound of a range under 10,000 events: ``ceil(N / 100) + 1``."""
    return pages(n) + 1


def above_ceiling(n: int) -> int:
    """The bound of a range over 10,000 events: ``1.03 × ceil(N / 100) + 2``."""
    return math.floor(1.03 * pages(n) + 2)


@pytest.fixture(scope="module")
def day():
    """4,000 events over a day (hours of 80 to 300)."""
    with sv.Emulator(seed=3, sites=20, days=1, events_per_day=4000) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _semantics(request):
    yield
    for name in ("day",):
        if name in request.fixturenames:
            request.getfixturevalue(name).set_semantics()


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_one_hour_under_the_default_limits(day, order, bounds):
    day.set_semantics(order, bounds)
    start = day.start + 20 * HOUR
    n, requests = fetch(day, day.client(limits=sv.Limits()), start, start + HOUR)
    assert 100 < n < 300
    assert requests <= below_ceiling(n), (n, requests)


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_hourly_fetches_of_a_day_on_one_client(day, order, bounds):
    day.set_semantics(order, bounds)
    client = day.client(limits=QUOTA)
    total = floor = 0
    for hour in range(24):
        start = day.start + hour * HOUR
        n, requests = fetch(day, client, start, start + HOUR)
        assert requests <= below_ceiling(n), (hour, n, requests)
        # An hour of exactly 300 events needs an empty page to see its end.
        total, floor = total + requests, floor + pages(n) + (n % 100 == 0)
    # Only the first fetch of an unsorted service asks a ceiling page: the later ones know
    # from it how dense the events are.
    assert total <= floor + (order == "shuffled"), (total, floor)


@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_hourly_sync_rereads_the_settle_period_and_nothing_else(day, order, bounds, tmp_path):
    day.set_semantics(order, bounds)
    client = day.client(limits=QUOTA)
    stored = 0
    for hour in range(1, 25):
        day.reset_stats()
        result = client.sync_events(tmp_path, day.start, until=day.start + hour * HOUR)
        [(lo, hi)] = result.ranges
        # The settle period (an hour, the default) and the new hour, in one fetch.
        assert hi - lo == (HOUR if hour == 1 else 2 * HOUR)
        assert reads(day) <= pages(len(day.truth(lo, hi))) + 1, hour
        assert result.requests == client.last_cost.requests
        stored += result.added
    assert stored == len(day.truth(day.start, day.end))


def without_quota(n: int) -> float:
    """The bound without a quota: ``1.25 × ceil(N / 100)``."""
    return 1.25 * pages(n)


#: One fetch each: (the emulator's seed, days and events a day; the range, None for the
#: emulator's; the client's limits; the events; the bound on requests).
ONE_FETCH = {
    "a century holding 1,008 events": (
        (5, 1, 1008),
        ("1970-01-01", "2070-01-01"),
        QUOTA,
        1008,
        below_ceiling,
    ),
    "25,008 events": ((7, 3, 8336), None, QUOTA, 25_008, above_ceiling),
    "10,008 events without a quota": (
        (9, 2, 5004),
        ("1970-01-01", "2070-01-01"),
        sv.Limits.unlimited(),
        10_008,
        without_quota,
    ),
}


@pytest.mark.parametrize("job", ONE_FETCH)
@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_one_fetch_within_its_bound(order, bounds, job):
    """Under a quota a range costs at most ``ceil(N / 100) + 1`` below 10,000 events and
    ``1.03 × ceil(N / 100) + 2`` above; without one, speed costs at most a quarter more."""
    (seed, days, per_day), span, limits, events, bound = ONE_FETCH[job]
    with sv.Emulator(seed=seed, sites=20, days=days, events_per_day=per_day) as emu:
        emu.set_semantics(order, bounds)
        start, end = span or (emu.start, emu.end)
        n, requests = fetch(emu, emu.client(limits=limits), start, end)
        assert n == events
        assert requests <= bound(n), requests


@pytest.mark.parametrize("hours", [1, 3])
@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("order", ORDERS)
def test_a_small_range_without_a_quota_costs_its_pages(day, order, bounds, hours):
    """Without a quota a fetch may spend requests on speed, but no more than a quarter over
    ``ceil(N / 100)``: a range of a few pages is paged by the density of its first page (a
    sorted one) or its second page first (one that does not sort), without its ceiling page."""
    day.set_semantics(order, bounds)
    client = day.client(limits=sv.Limits.unlimited())
    start = day.start + 20 * HOUR
    for _ in range(2):
        n, requests = fetch(day, client, start, start + hours * HOUR)
        assert 100 < n < 1000
        assert requests <= without_quota(n), (n, requests)
    plan = client.plan_events(start, start + hours * HOUR)
    # Its end searched from below, a window of a few pages may be off by its last one.
    assert abs(plan.requests - requests) <= 0.1 * requests + 1, (plan, requests)


@pytest.mark.parametrize("order", ORDERS)
def test_a_whole_number_of_pages_on_a_first_fetch(day, order):
    """The README's one exception: a day of exactly 4,000 events, fetched by a new client. A
    service that sorts costs 40 full pages and the empty page that shows the end; one that does
    not sort costs its ceiling page as well, and a later fetch of the client does not."""
    day.set_semantics(order, "[)")
    client = day.client(limits=QUOTA)
    n, requests = fetch(day, client, day.start, day.end)
    assert n == 4000
    if order == "shuffled":
        assert requests == pages(n) + 2
    else:
        assert requests == below_ceiling(n)
    n, requests = fetch(day, client, day.start, day.end - dt.timedelta(minutes=1))
    assert requests <= below_ceiling(n), (n, requests)


@pytest.mark.parametrize("order", ORDERS)
def test_a_burst_where_the_density_seen_said_the_window_was_small(order):
    """A client that saw quiet hours walks the next hour without its ceiling page; 12,000
    events in a few milliseconds of it turn the walk into a split, and the result stays
    exact."""
    with sv.Emulator(seed=13, sites=5, days=1, events_per_day=2000) as emu:
        emu.set_semantics(order, "[]")
        client = emu.client(limits=QUOTA)
        fetch(emu, client, emu.start + 2 * HOUR, emu.start + 3 * HOUR)
        burst = emu.start + 5 * HOUR + dt.timedelta(minutes=20)
        for i in range(6):
            emu.add_events(burst + dt.timedelta(milliseconds=7 * i), 2000)
        n, requests = fetch(emu, client, emu.start + 5 * HOUR, emu.start + 6 * HOUR)
        assert n > 12_000
        # The walk went to the ceiling before it knew (100 requests), then the rest; the
        # cuts fall between the bursts' milliseconds, so no burst is fetched twice.
        assert requests <= pages(n) + 100 + 5, requests


@pytest.mark.parametrize("order", ORDERS)
def test_a_dense_millisecond_under_a_quota(order):
    with sv.Emulator(seed=2, sites=3, days=1, events_per_day=500) as emu:
        emu.set_semantics(order, "()")
        at = emu.start + dt.timedelta(hours=12, milliseconds=5)
        emu.add_events(at, 9_999)
        n, _ = fetch(emu, emu.client(limits=QUOTA), emu.start, emu.end)
        assert n == 10_499
        emu.add_events(at, 2)
        with pytest.raises(sv.DenseWindowError) as err:
            emu.client(limits=QUOTA).events(emu.start, emu.end, progress=False)
        assert err.value.timestamp == "2026-01-05T12:00:00.005Z"


@pytest.mark.parametrize("bounds", ["[)", "[]"])
@pytest.mark.parametrize("order", ORDERS)
def test_a_dense_millisecond_within_the_bound(order, bounds):
    """README's case of a dense millisecond: 9,990 of 30,294 events in one millisecond cost
    at most ``1.03 × ceil(N / 100) + 2`` under a quota, and at most 35% over ``ceil(N / 100)``
    without one: the millisecond is fetched in a window of its own, which no other window's
    query reaches, rather than paged again by every window beside it."""
    with sv.Emulator(seed=7, sites=20, days=3, events_per_day=6768) as emu:
        emu.add_events(emu.start + dt.timedelta(hours=36, milliseconds=5), 9_990)
        emu.set_semantics(order, bounds)
        for limits, bound in ((QUOTA, above_ceiling), (sv.Limits.unlimited(), dense_no_quota)):
            n, requests = fetch(emu, emu.client(limits=limits), emu.start, emu.end)
            assert n == 30_294
            assert requests <= bound(n), (limits, requests)


def dense_no_quota(n: int) -> float:
    """The bound without a quota of a range with a dense millisecond: ``1.35 × ceil(N / 100)``."""
    return 1.35 * pages(n)


def test_what_a_fetch_spent_is_told(day):
    client = day.client(limits=sv.Limits(read_per_second=None, daily_requests=2400))
    assert client.last_cost == sv.Cost(requests=0)
    start = day.start + 20 * HOUR
    day.reset_stats()
    events = client.events(start, start + HOUR, progress=False)
    cost = client.last_cost
    # The token request counts against the quota too.
    assert cost.requests == reads(day) + 1
    # The quota counts every client of the machine with the key (other tests' too).
    assert cost.quota is not None and cost.quota["resets_at"] == client.quota()["resets_at"]
    assert cost.requests <= cost.quota.used <= client.quota()["used"]
    assert cost.quota.limit == 2400 and cost.quota.remaining == 2400 - cost.quota.used
    assert cost.share == pytest.approx(cost.requests / 2400)
    assert str(cost).startswith(f"{cost.requests} requests, ")
    assert len(events) > 100
    updates = []
    day.reset_stats()
    list(client.iter_events(start, start + HOUR, progress=updates.append))
    assert client.last_cost.requests == reads(day) >= updates[-1]["requests"] > 1
    client.sites()
    assert client.last_cost.requests == 1
    unlimited = day.client(limits=sv.Limits.unlimited())
    unlimited.events(start, start + HOUR, progress=False)
    assert unlimited.last_cost.quota is not None and unlimited.last_cost.quota.limit is None
    assert unlimited.last_cost.share is None and "%" not in str(unlimited.last_cost)


def test_what_an_async_iteration_spent_is_told(day):
    """``iter_events`` and ``event_batches`` of the async client leave their cost in
    ``last_cost`` once the iteration ends, as the sync client's ``iter_events`` does."""
    import asyncio

    client = day.async_client(limits=sv.Limits(read_per_second=None, daily_requests=2400))
    start = day.start + 20 * HOUR

    async def drain(iterator):
        return [x async for x in iterator]

    for method in (client.iter_events, client.event_batches):
        asyncio.run(client.sites())
        assert client.last_cost.requests >= 1
        day.reset_stats()
        got = asyncio.run(drain(method(start, start + HOUR)))
        assert got and client.last_cost.requests == reads(day) > 1


def test_concurrent_callers_of_one_client_each_read_their_own_cost(day):
    """``last_cost`` is the caller's own: two threads, and two asyncio tasks, on one client at
    the same time each read the requests of their own call (an hour's fetch beside a day's),
    not the client's total over the time their calls overlapped."""
    import asyncio
    import threading

    day.set_faults(latency_ms=20)  # the calls overlap for most of their course
    try:
        client = day.client(limits=sv.Limits.unlimited())
        client.access_token()  # the token is no call's
        start = day.start + 20 * HOUR
        day.reset_stats()
        costs: dict = {}

        def read(name, hours):
            client.events(start, start + hours * HOUR, progress=False)
            costs[name] = client.last_cost.requests

        def read_sites():
            for _ in range(3):
                client.sites()
            costs["sites"] = client.last_cost.requests

        threads = [
            threading.Thread(target=read, args=("hour", 1)),
            threading.Thread(target=read, args=("day", 4)),
            threading.Thread(target=read_sites),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        day_reads = reads(day)
        assert costs["sites"] == 1
        assert costs["hour"] > 1 and costs["day"] > costs["hour"]
        assert costs["hour"] + costs["day"] == day_reads
        # The main thread made no call: it reads the client's latest.
        assert client.last_cost.requests in costs.values()

        aclient = day.async_client(limits=sv.Limits.unlimited())
        aclient._inner.access_token()

        async def aread(hours):
            await aclient.events(start, start + hours * HOUR, progress=False)
            return aclient.last_cost.requests

        async def both():
            return await asyncio.gather(aread(1), aread(4), aclient.sites())

        day.reset_stats()
        hour, whole, _ = asyncio.run(both())
        assert hour == costs["hour"] and whole == costs["day"]
        assert hour + whole == reads(day)
    finally:
        day.set_faults()
