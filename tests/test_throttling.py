"""Throttling against the emulator over real HTTP: sporadic 429s on every endpoint
(``set_faults``) delay only the requests they refuse, call after call and client after client, a
limit the client does not know (``set_limits``, a token bucket) is found and held with few 429s,
and a client whose limits are the service's gets none."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest
import surveillance as sv

from conftest import retail

RATE = 20  # the read limit of the emulator below: the published 1/s, scaled 20 times


def timed(f: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = f()
    return out, time.perf_counter() - start


def events_statuses(emu: Any) -> dict:
    return emu.stats()["requests"].get("GET /v2/events", {})


# --- sporadic 429s ----------------------------------------------------------------------------
# 5% of the answers are 429 with `Retry-After: 1`, on every endpoint (the token endpoint too),
# whatever the load: chance, not a limit. Each refused request waits its second; the others go
# on at full speed, and the rate is never cut, so a call takes its fault-free time plus the few
# seconds of the longest chain of 429s that one request (or one wave of requests that wait for
# each other) draws, however many calls and clients came before. The faults are drawn by
# request rank from the emulator's seed, so the same runs draw the same 429s.

SEQUENCE = ("publish", "events", "events")


@pytest.mark.slow
@pytest.mark.parametrize("retry_after", ["seconds", "http_date"])
def test_sporadic_429s_slow_no_call_of_a_long_lived_client(retry_after):
    rows = [retail(i) for i in range(3000)]
    with sv.Emulator(seed=3, sites=5, days=1, events_per_day=10_008) as emu:
        emu.set_dialect(retry_after=retry_after)
        want = emu.truth(emu.start, emu.end)
        assert len(want) == 10_008

        def call(client: Any, name: str) -> float:
            if name == "publish":
                emu.clear_published()
                report, took = timed(lambda: client.publish(rows, batch_size=1, progress=False))
                assert report.accepted == 3000 and not report.rejected
                published = sorted(r["transactionId"] for r in emu.published())
                assert published == sorted(r["transactionId"] for r in rows)  # each once
            else:
                got, took = timed(lambda: client.events(emu.start, emu.end, progress=False))
                assert [e["id"] for e in got] == want  # every event once, in order
            return took

        # The fault-free time of each call: the slowest of two sequences.
        client = emu.client(max_retries=8)
        fault_free: dict = {}
        for name in SEQUENCE * 2:
            fault_free[name] = max(fault_free.get(name, 0.0), call(client, name))
        emu.set_faults(rate_limit_rate=0.05, retry_after=1, token_endpoint=True)
        emu.reset_stats()
        # The sequence three times on one client, then three times on a new client each time.
        one = emu.client(max_retries=8)
        times = []
        for clients in ("one client", "new clients"):
            for round in range(3):
                client = one if clients == "one client" else emu.client(max_retries=8)
                for name in SEQUENCE:
                    times.append((clients, round, name, call(client, name)))
        refused = sum(s.get("429", 0) for s in emu.stats()["requests"].values())
        print(
            f"fault-free: publish {fault_free['publish']:.2f} s, events {fault_free['events']:.2f}"
            f" s; {refused} 429s"
        )
        for clients, round, name, took in times:
            print(f"  {clients} {round + 1}: {name} {took:.2f} s")
        assert refused > 800
        # 4x the fault-free time + 3 s, not the issue's + 2 s: a record refused three times in a
        # row waits three `Retry-After` seconds, and at 5% one of 3,000 records is in about a
        # third of the publishes (1 - (1 - 0.05**3)**3000). The + 2 s is then missed whatever
        # the client does short of retrying before `Retry-After`: a new client's first publish
        # here took 3.18-3.22 s (its token got no 429; one record's three 429s, the other
        # records done at 0.3 s) against 4 x 0.20 + 2 = 2.8 s.
        slow = [t for t in times if t[3] > 4 * fault_free[t[2]] + 3.0]
        assert not slow, slow


# --- random 429s at a high share ---------------------------------------------------------------
# Refusals at random, whatever the rate, cost retries, not rate: a publish stores about the
# configured rate times the share accepted, and once they stop the next publish goes at the
# configured rate; a limit the service enforces later is still found. One client throughout.


def test_random_429s_at_a_high_share_cost_retries_not_rate_call_after_call():
    rows = [retail(i) for i in range(300)]
    with sv.Emulator(seed=0, sites=2, days=1, events_per_day=10) as emu:
        # The published limits: 100 a second, 200 in flight.
        client = emu.client(limits=sv.Limits(daily_requests=None), max_retries=10)
        for share in (0.05, 0.3, 0.0):
            emu.set_faults(rate_limit_rate=share, retry_after=1)
            emu.clear_published()
            report, took = timed(lambda: client.publish(rows, batch_size=1, progress=False))
            assert report.accepted == 300 and len(emu.published()) == 300
            print(f"{share:.0%} of 429s at random: {300 / took:.1f} records/s ({took:.1f} s)")
            # 3 s at 100 a second, 4.3 s at 70: the bound leaves three times that, plus the
            # seconds a record refused several times in a row waits (the collapse this guards
            # against took 80 s, for the publish at 30% and for the next at 0% alike).
            assert took < 3 * 300 / (100 * (1 - share)) + 4.0
            emu.set_faults()
            assert len(client.sites()) == 2  # a read between
        # Then the service enforces half the configured rate: found (its 30% of 429s learnt as
        # chance, the client needs a few more 429s to tell the limit), and held with few 429s.
        emu.set_limits(publish_per_second=50)
        emu.reset_stats()
        emu.clear_published()
        rows = [retail(1000 + i) for i in range(1000)]
        report, took = timed(lambda: client.publish(rows, batch_size=1, progress=False))
        assert report.accepted == 1000
        final = emu.stats()["requests"]["POST /v2/webhook"]
        ok, refused = final.get("200", 0), final.get("429", 0)
        print(f"limit 50/s: {ok / took:.1f} records/s, {refused} 429s")
        assert ok / took >= 0.6 * 50
        assert refused <= 0.1 * (ok + refused)


# --- a limit the client does not know ----------------------------------------------------------


def fetch_sampling(emu: Any, client: Any) -> tuple[list, float, list]:
    """``client.events`` over the whole emulator, with the emulator's counts of events answers
    (200, 429) sampled every 0.1 s: the events, the seconds taken and the samples."""
    samples: list = []
    done = threading.Event()

    def sample() -> None:
        start = time.perf_counter()
        while not done.is_set():
            s = events_statuses(emu)
            samples.append((time.perf_counter() - start, s.get("200", 0), s.get("429", 0)))
            done.wait(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        got, took = timed(lambda: client.events(emu.start, emu.end, progress=False))
    finally:
        done.set()
        sampler.join()
    return got, took, samples


@pytest.mark.slow
@pytest.mark.parametrize(
    "limits",
    [
        sv.Limits.unlimited(),
        sv.Limits(read_per_second=2 * RATE, read_concurrency=None, daily_requests=None),
    ],
    ids=["unlimited", "twice-the-limit"],
)
def test_an_unknown_limit_is_found_and_held_with_few_429s(limits):
    # 30,000 events: about 305 requests, 15 s at the limit.
    with sv.Emulator(seed=0, sites=5, days=6, events_per_day=5000) as emu:
        emu.set_limits(read_per_second=RATE, read_concurrency=3)
        client = emu.client(limits=limits, max_retries=10)
        got, took, samples = fetch_sampling(emu, client)
        assert [e["id"] for e in got] == emu.truth(emu.start, emu.end)
        final = events_statuses(emu)
        ok, refused = final.get("200", 0), final.get("429", 0)
        # Settled: from the fifth second on (the first ones find the limit).
        at, ok5, refused5 = next(s for s in samples if s[0] >= 5.0)
        rate = (ok - ok5) / (took - at)
        share = (refused - refused5) / (ok - ok5 + refused - refused5)
        print(
            f"{ok} pages in {took:.1f} s ({ok / took / RATE:.0%} of the limit), {refused} 429s "
            f"({refused / (ok + refused):.1%}); from 5 s: {rate:.1f}/s ({rate / RATE:.0%} of the "
            f"limit), {share:.1%} 429s"
        )
        assert took > 12.0
        # The whole run, finding the limit included (about ten 429s of some 300 requests),
        # and once settled. The bound is for a client configured for twice the limit
        # (12 429s of some 315, 3.8%, measured; 15 when a probe past the limit took four 429s
        # to cut); an unlimited one sends its first second at full speed, whose 429s depend on
        # how fast the machine answers them (4-5% idle, 8.5% under the whole suite's load on 2
        # cores, 1.0% once settled).
        assert ok / took >= 0.8 * RATE
        assert refused <= (0.12 if limits.read_per_second is None else 0.05) * (ok + refused)
        assert rate >= 0.9 * RATE
        assert share < 0.05


@pytest.mark.slow
def test_publishing_finds_a_limit_half_the_configured_one():
    # 1,500 records one per request to a webhook that takes 100 a second, from a client
    # configured for 200: 15 s at the limit.
    rows = [retail(i) for i in range(1500)]
    with sv.Emulator(seed=0, sites=2, days=1, events_per_day=10) as emu:
        emu.set_limits(publish_per_second=100)
        limits = sv.Limits(publish_per_second=200, publish_concurrency=None, daily_requests=None)
        client = emu.client(limits=limits, max_retries=10)
        report, took = timed(lambda: client.publish(rows, batch_size=1, progress=False))
        assert report.accepted == 1500 and not report.rejected
        final = emu.stats()["requests"]["POST /v2/webhook"]
        ok, refused = final.get("200", 0), final.get("429", 0)
        print(f"{ok} records in {took:.1f} s ({ok / took:.0f}/s), {refused} 429s")
        assert ok / took >= 0.8 * 100
        assert refused <= 0.05 * (ok + refused)


# --- known limits ------------------------------------------------------------------------------


def test_limits_equal_to_the_services_get_no_429():
    with sv.Emulator(seed=0, sites=3, days=1, events_per_day=5000) as emu:
        emu.set_limits(
            read_per_second=RATE, read_concurrency=3, publish_per_second=200, publish_concurrency=20
        )
        limits = sv.Limits(
            read_per_second=RATE,
            read_concurrency=3,
            publish_per_second=200,
            publish_concurrency=20,
            daily_requests=None,
        )
        client = emu.client(limits=limits)
        got = client.events(emu.start, emu.end, progress=False)
        assert [e["id"] for e in got] == emu.truth(emu.start, emu.end)
        report = client.publish([retail(i) for i in range(300)], batch_size=1, progress=False)
        assert report.accepted == 300
        stats = emu.stats()
        assert stats["rate_limited"] == 0
        assert all("429" not in by_status for by_status in stats["requests"].values()), stats
        assert client.stats()["rate_limited"] == 0


# --- Retry-After and `max_wait` ----------------------------------------------------------------


def test_the_waits_after_429s_of_a_call_stay_within_max_wait():
    """A service that answers every request 429 with `Retry-After: 1`: a record's waits, over
    every retry and every round of a publish, stay within `max_wait` (they took 15 retries and
    up to 106 s with longer waits), and so do a read's."""
    with sv.Emulator(seed=0, sites=2, days=1, events_per_day=10) as emu:
        client = emu.client(max_wait=3, max_retries=20)
        client.sites()  # its token
        emu.set_faults(rate_limit_rate=1.0, retry_after=1)
        report, took = timed(lambda: client.publish([retail(0)], batch_size=1, progress=False))
        assert report.accepted == 0 and [f.status for f in report.failures] == [429]
        assert "max_wait" in report.failures[0].message
        assert took < 3 + 2.0
        # Three waits of a second, then one request in each of the two later rounds.
        assert report.requests <= 6
        with pytest.raises(sv.RateLimitError, match="max_wait"):
            timed(client.devices)
        emu.set_faults()
        assert len(client.devices()) >= 1
