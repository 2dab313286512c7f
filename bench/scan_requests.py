"""What a lazy polars scan (`sv.scan_events`) costs in requests, in each order the service may
use and at three densities: `head(10)` on a client's first scan, on a later one, and on a new
client whose cache kept what an earlier client found of the service (a later process: a
notebook's kernel started again, a job's next run), and a whole filtered collect against
`client.events` of the same range (a fresh client each, and a new client with the kept cache
each), with the minimum `ceil(N / 100)` beside it. Requests are counted by the emulator; every
collect is checked equal to `client.events`. A daily quota is set, as by default, without the
1 read/s pacing.

    python bench/scan_requests.py [--write]

`--write` replaces the "Lazy scan requests" section of `bench/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shutil
import tempfile
from pathlib import Path

import polars as pl
import run
import surveillance as sv

HERE = Path(__file__).resolve().parent
TITLE = "# Lazy scan requests"
QUOTA = sv.Limits(read_per_second=None, read_concurrency=3, daily_requests=10**8)
UTC = dt.timezone.utc
DAY = dt.timedelta(days=1)
#: Events a day over 20 sites: a sparse day (about 3 events in 10 minutes), an ordinary one,
#: and a dense one (about 320 in 10 minutes, more than a page).
DENSITIES = [500, 4000, 46_667]
ORDERS = ["asc", "desc", "shuffled"]


def reads(emu: sv.Emulator) -> int:
    """``GET /v2/events`` requests the emulator answered since its stats were reset."""
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def spent(emu: sv.Emulator, run) -> tuple:
    emu.reset_stats()
    result = run()
    return result, reads(emu)


def row(emu: sv.Emulator, per_day: int, order: str) -> str:
    emu.set_semantics(order, "[)")
    a = emu.start + dt.timedelta(hours=5, minutes=7)
    b = a + dt.timedelta(hours=20)
    where = pl.col("startTime").is_between(a.replace(tzinfo=UTC), b.replace(tzinfo=UTC), "left")
    want, direct = spent(
        emu, lambda: emu.client(limits=QUOTA).events(a, b, output="polars", progress=False)
    )
    client = emu.client(limits=QUOTA)
    heads = []
    for _ in range(2):
        head, n = spent(emu, lambda: sv.scan_events(client).filter(where).head(10).collect())
        assert head.equals(want.head(10))
        heads.append(n)
    fresh = emu.client(limits=QUOTA)
    got, scanned = spent(emu, lambda: sv.scan_events(fresh).filter(where).collect())
    assert got.equals(want)

    # A later process: the account's cache holds what an earlier client found fetching the
    # next day (not the range scanned, so that every request below is the service's).
    with tempfile.TemporaryDirectory() as tmp:
        kept = Path(tmp, "kept")
        emu.client(cache=kept, limits=QUOTA).events(a + DAY, b + DAY, progress=False)
        copies = [shutil.copytree(kept, Path(tmp, f"copy{i}")) for i in range(2)]
        later = emu.client(cache=copies[0], limits=QUOTA)
        head, later_head = spent(
            emu, lambda: sv.scan_events(later).filter(where).head(10).collect()
        )
        assert head.equals(want.head(10))
        later = emu.client(cache=copies[1], limits=QUOTA)
        got, later_scan = spent(emu, lambda: sv.scan_events(later).filter(where).collect())
        assert got.equals(want)
        alike = emu.client(cache=kept, limits=QUOTA)
        _, later_direct = spent(emu, lambda: alike.events(a, b, progress=False))
    least = max(1, math.ceil(want.height / 100))
    return (
        f"| {per_day:,} | {order} | {want.height:,} | {heads[0]} | {heads[1]} | {later_head} | "
        f"{scanned} | {direct} ({least}) | {scanned - direct:+d} | "
        f"{later_scan} − {later_direct} = {later_scan - later_direct:+d} |"
    )


def table() -> str:
    lines = [
        "| events a day | order | events | `head(10)`, first scan | `head(10)`, later "
        "| `head(10)`, new client, cache kept | whole collect | `events` (min) "
        "| collect − `events` | new client, cache kept: collect − `events` |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for per_day in DENSITIES:
        with sv.Emulator(seed=3, sites=20, days=3, events_per_day=per_day) as emu:
            for order in ORDERS:
                lines.append(row(emu, per_day, order))
                print(lines[-1], flush=True)
    return "\n".join(lines)


def section(text: str) -> str:
    return (
        f"{TITLE}\n\n`python bench/scan_requests.py`: the requests of a lazy scan of 20 hours "
        "(from 05:07) under a daily quota, counted by the emulator (loopback, same process), "
        "every result checked equal to `client.events`. `head(10)` is "
        "`scan_events(client).filter(a <= startTime < b).head(10).collect()`, on a client's "
        "first scan, again on the same client, and on a new client whose cache kept what an "
        "earlier client found fetching the next day (a later process); the whole collect and "
        "`client.events` are each on a fresh client, with the minimum `ceil(N / 100)` in "
        "brackets, and in the last column each on a new client with that kept cache.\n\n"
        f"{text}\n\n"
        "On a service that sorts ascending, the scan's first page holds the range's first "
        "events and the fetch takes it, so `head(10)` costs one request. In another order a "
        "first part is fetched alone, sized to hold about 30 events at the densest rate the "
        "client has seen (on a first scan: the rate of the page that showed a descending order, "
        "else 10 minutes), and the rest as `client.events` fetches it, with the page that "
        "showed the order: the whole costs `events` and the part. The order and density are "
        "kept in the client's cache, so a client of a later process asks no page to find "
        "them: its `head(10)` costs one request in any order, and its collect `events` or the "
        "part's request more (when the part holds fewer events than the rest's last page).\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()
    # `run.write` prints the section, and replaces its own section of the file with it.
    run.write(HERE / "RESULTS.md" if args.write else None, {TITLE: section(table())})


if __name__ == "__main__":
    main()
