"""Throttling against the emulator over real HTTP: sporadic 429s (``set_faults``) delay only the
requests they refuse, a limit the client does not know (``set_limits``) is found and held with
few 429s, and a client whose limits are the service's gets none."""

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


# --- sporadic 429s -----------------------------------------------------------------------------
# 5% of the answers are 429 with `Retry-After: 1`, whatever the load. Each refused request waits
# its second; the others go on at full speed, so a run takes its fault-free time plus the few
# seconds of the longest chain of 429s that one request (or one wave of requests that wait for
# each other) draws. Fresh emulators: the faults are drawn by request rank from the seed, so the
# same runs draw the same 429s. The fault-free time is taken before and after the faulty run, the
# slower of the two, so that a change in the machine's load meanwhile counts in both.

SPORADIC = {"rate_limit_rate": 0.05, "retry_after": 1}


def bracketed(run: Callable[[dict], Any]) -> tuple[float, float, Any]:
    """``run(faults)`` without faults, with `SPORADIC`, and without again: the fault-free time
    (the slower), the faulty time and the faulty run's result."""
    _, before = timed(lambda: run({}))
    out, faulty = timed(lambda: run(SPORADIC))
    _, after = timed(lambda: run({}))
    return max(before, after), faulty, out


@pytest.mark.slow
def test_sporadic_429s_delay_only_the_records_they_refuse():
    rows = [retail(i) for i in range(3000)]
    limits = sv.Limits.unlimited()
    with sv.Emulator(seed=0, sites=2, days=1, events_per_day=10) as emu:

        def publish(faults: dict) -> tuple[Any, int]:
            emu.clear_published()
            emu.set_faults(**faults)
            client = emu.client(limits=limits, max_retries=8)
            report = client.publish(rows, batch_size=1, progress=False)
            assert report.accepted == 3000 and not report.rejected
            published = sorted(r["transactionId"] for r in emu.published())
            assert published == sorted(r["transactionId"] for r in rows)  # each once
            return report, client.stats()["rate_limited"]

        fault_free, faulty, (report, refused) = bracketed(publish)
        print(f"3,000 records: {fault_free:.2f} s without faults, {faulty:.2f} s, {refused} 429s")
        assert 100 < refused < 250 and report.rate_limited == refused
        assert faulty <= 3 * fault_free + 2.0


@pytest.mark.slow
def test_sporadic_429s_delay_only_the_pages_they_refuse():
    with sv.Emulator(seed=0, sites=5, days=1, events_per_day=10_000) as emu:
        want = emu.truth(emu.start, emu.end)
        assert len(want) == 10_000

        def fetch(faults: dict) -> int:
            emu.set_faults(**faults)
            client = emu.client(limits=sv.Limits.unlimited(), max_retries=8)
            got = client.events(emu.start, emu.end, progress=False)
            assert [e["id"] for e in got] == want  # every event once, in order
            return client.stats()["rate_limited"]

        # About 110 requests in a few waves that wait for each other (the first page, the
        # ceiling page, the rest): with this seed, one page of a wave is refused twice.
        fault_free, faulty, refused = bracketed(fetch)
        print(f"10,000 events: {fault_free:.2f} s without faults, {faulty:.2f} s, {refused} 429s")
        assert refused > 0
        assert faulty <= 3 * fault_free + 2.0


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
            f"{ok} pages in {took:.1f} s, {refused} 429s ({refused / (ok + refused):.1%}); "
            f"from 5 s: {rate:.1f}/s ({rate / RATE:.0%} of the limit), {share:.1%} 429s"
        )
        assert took > 12.0
        assert rate >= 0.9 * RATE
        assert share < 0.05
        assert refused < 0.1 * (ok + refused)


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
