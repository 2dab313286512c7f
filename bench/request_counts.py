"""Requests per job: what the ETL jobs of README's promise cost, against the minimum
``ceil(N / 100)`` and against the exact pure-Python baseline (b) of bench/baselines.py
(``aiohttp``, bisection at the ceiling, 3 in flight), in the same run.

Requests are the scarce resource (2,400 a day per key), so the table counts them: the
``GET /v2/events`` the emulator answered. Every result is checked against ``emu.truth``.
The last part runs the published limits scaled 20× (20 reads/s, 3 in flight) on both sides
and reports the share of the allowed rate the fetch held, and the 429s.

    python bench/request_counts.py            # prints the tables
    python bench/request_counts.py --write    # and replaces its section of bench/RESULTS.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import surveillance as sv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baselines  # noqa: E402

HOUR = dt.timedelta(hours=1)
#: The default daily quota, without the 1 read/s pacing (which changes no request count).
QUOTA = sv.Limits(read_per_second=None, read_concurrency=3, daily_requests=10**8)
ORDERS = ("asc", "desc", "shuffled")
TITLE = "# Requests per job"


def reads(emu: sv.Emulator) -> int:
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def pages(n: int) -> int:
    return max(1, math.ceil(n / 100))


#: Seconds and CPU seconds of this process of the last fetch (the check excluded).
LAST = {"wall": 0.0, "cpu": 0.0}


def timed(fetch):
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    got = fetch()
    LAST["wall"] = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    LAST["cpu"] = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    return got


def baseline(emu: sv.Emulator, token: str, start, end, per_second=None) -> tuple[int, int]:
    """Events and requests of baseline (b) over ``[start, end)``."""
    emu.reset_stats()
    got = timed(
        lambda: baselines.fetch_events_aiohttp(
            emu.url, emu.api_key, token, start, end, concurrency=3, per_second=per_second
        )
    )
    assert [e["id"] for e in got] == emu.truth(start, end), "baseline (b) not exact"
    return len(got), reads(emu)


def ours(emu: sv.Emulator, client: sv.Client, start, end) -> tuple[int, int]:
    emu.reset_stats()
    got = timed(lambda: client.events(start, end, progress=False))
    assert [e["id"] for e in got] == emu.truth(start, end), "not exact"
    return len(got), reads(emu)


def aware(t) -> dt.datetime:
    return dt.datetime.fromisoformat(str(t).replace("Z", "+00:00")).replace(tzinfo=dt.timezone.utc)


def jobs(order: str) -> list[tuple[str, int, int, int, object]]:
    """(job, events, ours, minimum, baseline) rows for one order of the service."""
    rows = []
    with sv.Emulator(seed=3, sites=20, days=1, events_per_day=4000) as emu:
        emu.set_semantics(order, "[)")
        token = emu.client().access_token()
        start = emu.start + 20 * HOUR
        n, r = ours(emu, emu.client(limits=sv.Limits()), start, start + HOUR)
        rows.append(
            (
                "one hour, default `Limits()`",
                n,
                r,
                pages(n),
                baseline(emu, token, start, start + HOUR)[1],
            )
        )
        client = emu.client(limits=QUOTA)
        total = floor = base = events = 0
        for hour in range(24):
            s = emu.start + hour * HOUR
            n, r = ours(emu, client, s, s + HOUR)
            total, floor, events = total + r, floor + pages(n), events + n
            base += baseline(emu, token, s, s + HOUR)[1]
        rows.append(("24 hourly fetches over one day, one client", events, total, floor, base))
        total = floor = events = 0
        with tempfile.TemporaryDirectory() as d:
            for hour in range(1, 25):
                emu.reset_stats()
                result = client.sync_events(d, emu.start, until=emu.start + hour * HOUR)
                total += reads(emu)
                events += result.added
                floor += sum(pages(len(emu.truth(a, b))) for a, b in result.ranges)
        rows.append(("hourly `sync_events` (settle 1h) over one day", events, total, floor, None))
    with sv.Emulator(seed=5, sites=20, days=1, events_per_day=1008) as emu:
        emu.set_semantics(order, "[)")
        token = emu.client().access_token()
        a, b = aware("1970-01-01"), aware("2070-01-01")
        n, r = ours(emu, emu.client(limits=QUOTA), a, b)
        rows.append(
            (
                "a range over 100 years holding 1,008 events",
                n,
                r,
                pages(n),
                baseline(emu, token, a, b)[1],
            )
        )
    with sv.Emulator(seed=7, sites=20, days=3, events_per_day=8336) as emu:
        emu.set_semantics(order, "[)")
        token = emu.client().access_token()
        n, r = ours(emu, emu.client(limits=QUOTA), emu.start, emu.end)
        rows.append(
            (
                "25,008 events over 3 days",
                n,
                r,
                pages(n),
                baseline(emu, token, emu.start, emu.end)[1],
            )
        )
    with sv.Emulator(seed=9, sites=20, days=2, events_per_day=5004) as emu:
        emu.set_semantics(order, "[)")
        token = emu.client().access_token()
        a, b = aware("1970-01-01"), aware("2070-01-01")
        n, r = ours(emu, emu.client(limits=sv.Limits.unlimited()), a, b)
        rows.append(
            (
                "10,008 events, `Limits.unlimited()`, 100-year range",
                n,
                r,
                pages(n),
                baseline(emu, token, a, b)[1],
            )
        )
    return rows


def rate(order: str) -> list[tuple]:
    """The published limits scaled 20×, enforced by the emulator: ours under the same limits
    with a daily quota, and baseline (b) paced to 20/s with 3 in flight."""
    out = []
    for who in ("ours", "(b)"):
        with sv.Emulator(seed=7, sites=20, days=2, events_per_day=5000) as emu:
            emu.set_semantics(order, "[)")
            token = emu.client(limits=sv.Limits.unlimited()).access_token()
            emu.set_limits(read_per_second=20, read_concurrency=3)
            limits = sv.Limits(read_per_second=20, read_concurrency=3, daily_requests=10**8)
            client = emu.client(limits=limits)
            client.access_token()
            if who == "ours":
                n, r = ours(emu, client, emu.start, emu.end)
            else:
                n, r = baseline(emu, token, emu.start, emu.end, per_second=20)
            wall, used = LAST["wall"], LAST["cpu"]
            throttled = emu.stats().get("rate_limited", 0)
            out.append((who, n, r, pages(n), wall, used, r / wall / 20, throttled))
    return out


def render(tables: dict, rates: dict, took: float) -> str:
    load = os.getloadavg()
    lines = [
        TITLE,
        "",
        f"`python bench/request_counts.py`, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"took {took:.0f} s; {os.cpu_count()} CPUs, CPython {platform.python_version()}, "
        f"load average {load[0]:.2f} at the end.",
        "",
        "Requests: `GET /v2/events` answered by the emulator (the token's are not counted); "
        "**minimum**: `ceil(N / 100)` per fetch (for the sync, per run over the range it "
        "fetched: the settle hour and the new hour). **(b)**: the exact pure-Python baseline "
        "of bench/baselines.py with 3 in flight, same ranges. Every result is checked "
        "against `emu.truth`. Bounds `[)`; tests/test_requests.py runs every bound "
        "inclusivity.",
        "",
        "| job | order | events | requests | minimum | ours / minimum | (b) requests "
        "| (b) / ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for order, rows in tables.items():
        for job, n, r, floor, base in rows:
            b = "–" if base is None else f"{base:,}"
            vs = "–" if base is None else f"{base / r:.2f}×"
            lines.append(
                f"| {job} | {order} | {n:,} | {r:,} | {floor:,} | {r / floor:.3f} | {b} | {vs} |"
            )
    lines += [
        "",
        "Under the published limits scaled 20× (the emulator enforces 20 reads/s and 3 in flight, "
        "its bucket starting full); ours with the same `Limits` and a daily quota, (b) paced to "
        "20/s. Share of the allowed rate = requests / time / 20. CPU: this process's own "
        "(`getrusage`), the emulator's work included.",
        "",
        "| order | client | events | requests (min) | time (s) | CPU (s) "
        "| share of the allowed rate | 429s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for order, rows in rates.items():
        for who, n, r, floor, wall, used, share, throttled in rows:
            lines.append(
                f"| {order} | {who} | {n:,} | {r:,} ({floor:,}) | {wall:.2f} | {used:.2f} | "
                f"{share:.3f} | {throttled} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    os.environ.setdefault("SURVEILLANCE_QUOTA_DIR", tempfile.mkdtemp())
    started = time.perf_counter()
    tables = {order: jobs(order) for order in ORDERS}
    rates = {order: rate(order) for order in ("asc", "shuffled")}
    text = render(tables, rates, time.perf_counter() - started)
    print(text)
    if args.write:
        path = Path(__file__).with_name("RESULTS.md")
        old = path.read_text()
        if TITLE in old:
            head, _, rest = old.partition(TITLE)
            nxt = rest.find("\n# ")
            old = head + (rest[nxt + 1 :] if nxt >= 0 else "")
        path.write_text(old.rstrip("\n") + "\n\n" + text)


if __name__ == "__main__":
    main()
