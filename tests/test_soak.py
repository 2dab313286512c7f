"""Soak: one client fetches and publishes at the same time, for a while, against an emulator
with every fault on. At the end nothing is lost or duplicated, and the process holds no more
threads, sockets or memory than a stated bound above where it started.

``SURVEILLANCE_SOAK_SECONDS`` sets the duration (default 60 s; CI runs the default)."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import random
import threading
import time

import pytest
import surveillance as sv

SECONDS = float(os.environ.get("SURVEILLANCE_SOAK_SECONDS", "60"))
READS, PUBLISHES = 8, 64  # requests in flight
#: Growth allowed between the warmed-up start and the end. Sockets: the client's pool may keep
#: one idle connection per request that was in flight at once, and the emulator (in this
#: process) holds the other end of each: two descriptors a connection.
MAX_THREADS_GROWTH = 2
MAX_FDS_GROWTH = 2 * (READS + PUBLISHES) + 8
MAX_RSS_GROWTH_MB = 150


def resident_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def record(i: int) -> dict:
    return {
        "dataType": "retail",
        "schemaVersion": "1",
        "startTime": 1767600000000 + i,
        "endTime": 1767600060000 + i,
        "locationId": f"L{i % 7}",
        "dataSourceId": "R1",
        "transactionId": f"soak-{i}",
        "status": "sale",
        "items": [
            {
                "time": 1767600000000 + i,
                "quantity": 1,
                "description": "x",
                "unitPrice": 1.5,
                "type": "SALE",
            }  # fmt: skip
        ],
    }


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 240)
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")
def test_soak_fetch_and_publish_under_every_fault():
    with sv.Emulator(seed=21, sites=12, days=2, events_per_day=25_000) as emu:
        # A burst on a page boundary, so the windows split and chain under faults too.
        emu.add_events(emu.start + dt.timedelta(hours=20, milliseconds=7), 150)
        client = emu.client(
            max_retries=12,
            timeout=10,
            limits=sv.Limits(
                read_per_second=None,
                read_concurrency=READS,
                publish_per_second=None,
                publish_concurrency=PUBLISHES,
                # The soak sends more than a day's 2,400 requests: no daily quota.
                daily_requests=None,
            ),
        )
        # Warm up (pools, runtime threads, caches) before measuring the start.
        client.events(emu.start, emu.start + dt.timedelta(hours=2), progress=False)
        client.publish([record(-1)], progress=False)
        emu.clear_published()
        emu.set_faults(error_rate=0.05, rate_limit_rate=0.05, drop_rate=0.02, latency_ms=1)
        gc.collect()
        start = {"threads": os_threads(), "fds": open_fds(), "rss_mb": resident_mb()}

        deadline = time.monotonic() + SECONDS
        problems: list = []
        counts = {"windows checked": 0, "events checked": 0, "records published": 0}
        rng = random.Random(21)

        def fetch() -> None:
            while time.monotonic() < deadline and not problems:
                hours = rng.uniform(1, 30)
                lo = emu.start + dt.timedelta(minutes=rng.randrange(0, 48 * 60 - 60))
                hi = min(emu.end, lo + dt.timedelta(hours=hours))
                order = rng.choice(["asc", "desc", "shuffled"])
                emu.set_semantics(order, rng.choice(["[)", "[]", "()"]))
                try:
                    got = [e["id"] for e in client.events(lo, hi, progress=False)]
                except sv.SurveillanceError as e:
                    problems.append(f"fetch {lo}..{hi}: {e!r}")
                    return
                want = emu.truth(lo, hi)
                if got != want:
                    problems.append(f"fetch {lo}..{hi} ({order}): {len(got)} != {len(want)}")
                counts["windows checked"] += 1
                counts["events checked"] += len(got)

        def publish() -> None:
            n = 0
            while time.monotonic() < deadline and not problems:
                batch = [record(i) for i in range(n, n + 2000)]
                report = client.publish(batch, batch_size=rng.choice([1, 50, 100]), progress=False)
                # Every record stored exactly once; then the emulator forgets them, so that
                # its own store does not count as the client's memory.
                ids = [r["transactionId"] for r in emu.published()]
                want = [r["transactionId"] for r in batch]
                if report.accepted != len(batch) or sorted(ids) != sorted(want):
                    problems.append(f"publish {n}: {report.summary()}, {len(ids)} stored")
                    return
                emu.clear_published()
                n += len(batch)
                counts["records published"] = n

        workers = [threading.Thread(target=fetch), threading.Thread(target=publish)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        emu.set_faults()
        assert not problems, problems

        stats = emu.stats()
        gc.collect()
        time.sleep(1.5)  # connections closed by faults finish closing
        end = {"threads": os_threads(), "fds": open_fds(), "rss_mb": resident_mb()}
        figures = {
            "seconds": SECONDS,
            **counts,
            "client": client.stats(),
            "emulator requests": stats["requests"],
            "start": start,
            "end": end,
        }
        print("\nsoak figures:", json.dumps(figures, indent=1, default=str))
        assert counts["windows checked"] > 0 and counts["records published"] > 0
        assert client.stats()["retries"] > 0, "faults were injected and retried"
        assert end["threads"] <= start["threads"] + MAX_THREADS_GROWTH, figures
        assert end["fds"] <= start["fds"] + MAX_FDS_GROWTH, figures
        assert end["rss_mb"] <= start["rss_mb"] + MAX_RSS_GROWTH_MB, figures
        # Closing the client closes its pool: every socket it opened is gone.
        client.close()
        client = None  # the last reference: the pool goes with it
        gc.collect()
        deadline = time.monotonic() + 5
        while open_fds() > start["fds"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert open_fds() <= start["fds"], {"start": start, "after close": open_fds()}
