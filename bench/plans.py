"""What ``plan_events`` predicts against what the fetch makes, and what the plan costs.

For each range and order the service may use, with a daily quota and without: the events and
requests of a fetch by a fresh client, the plan's prediction of both, the plan's own requests
(gross), and what the plan added to a fetch that followed it on the same client (net: the plan's
pages of a settled range are used by that fetch instead of being asked again). The minimum
``ceil(N / 100)`` is beside each fetch. Run: ``python bench/plans.py``; the table is printed in
Markdown for ``bench/RESULTS.md``.
"""

from __future__ import annotations

import datetime as dt
import math
import time

import surveillance as sv

QUOTA = sv.Limits(read_per_second=None, read_concurrency=3, daily_requests=10**8)
FREE = sv.Limits.unlimited()
DAY = dt.timedelta(days=1)
ROWS = [
    ("one hour", dict(seed=3, sites=20, days=1, events_per_day=4000), 20, 1 / 24),
    ("one day", dict(seed=3, sites=20, days=1, events_per_day=4000), 0, 1),
    ("one day, dense", dict(seed=4, sites=20, days=1, events_per_day=8000), 0, 1),
    ("three days", dict(seed=7, sites=20, days=3, events_per_day=8336), 0, 3),
    ("three days, dense", dict(seed=5, sites=30, days=3, events_per_day=46667), 0, 3),
]


def reads(emu: sv.Emulator) -> int:
    """``GET /v2/events`` requests the emulator answered since its stats were reset."""
    return sum(emu.stats()["requests"].get("GET /v2/events", {}).values())


def pct(a: float, b: float) -> str:
    return f"{(a - b) / b * 100:+.1f}%"


def main() -> None:
    began = time.perf_counter()
    lines = [
        "| range | order | limits | events | plan | requests (min) | plan | plan's requests "
        "| added to the fetch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, kw, hour, days in ROWS:
        with sv.Emulator(**kw) as emu:
            start = emu.start + dt.timedelta(hours=hour)
            end = start + days * DAY
            for order in ("asc", "desc", "shuffled"):
                emu.set_semantics(order, "[)")
                for lname, limits in (("quota", QUOTA), ("none", FREE)):
                    emu.reset_stats()
                    n = len(emu.client(limits=limits).events(start, end, progress=False))
                    alone = reads(emu)
                    client = emu.client(limits=limits)
                    emu.reset_stats()
                    plan = client.plan_events(start, end)
                    probes = reads(emu)
                    emu.reset_stats()
                    got = client.events(start, end, progress=False)
                    assert [e["id"] for e in got] == emu.truth(start, end)
                    added = probes + reads(emu) - alone
                    lines.append(
                        f"| {name} | {order} | {lname} | {n:,} | {plan.events:,} "
                        f"({pct(plan.events, n)}) | {alone:,} ({math.ceil(n / 100):,}) "
                        f"| {plan.requests:,} ({pct(plan.requests, alone)}) "
                        f"| {probes} ({probes / alone:.1%}) | {added} ({added / alone:.1%}) |"
                    )
                    print(lines[-1], flush=True)
    print()
    print("\n".join(lines))
    print(f"\n({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
