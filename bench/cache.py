"""A notebook session of re-run cells, in requests, with and without the cache of settled events.

The session reads a week of events, reads it again twice, reads its last 3 days, then the week
shifted by 3 days, as a data scientist who re-runs cells does. Each step is counted in
``GET /v2/events`` requests as the emulator answered them (and checked against
``emu.truth``), once with a client without a cache and once with a cache in a fresh
directory, under the provider's daily quota of 2,400 requests.

``python bench/cache.py`` prints the table and writes it into ``bench/RESULTS.md`` (the section
``# Cache benchmark``); ``--no-write`` only prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import re
import tempfile
import time

import surveillance as sv

DAY = dt.timedelta(days=1)
D0 = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
EVENTS = "GET /v2/events"
STEPS = [
    ("`client.events(week)`, first run", D0, D0 + 7 * DAY),
    ("the same cell again", D0, D0 + 7 * DAY),
    ("the same cell a third time", D0, D0 + 7 * DAY),
    ("the last 3 days of that week", D0 + 4 * DAY, D0 + 7 * DAY),
    ("the week shifted by 3 days", D0 + 3 * DAY, D0 + 10 * DAY),
]
RESULTS = pathlib.Path(__file__).with_name("RESULTS.md")


def served(emu: sv.Emulator) -> int:
    """``GET /v2/events`` answered 200 by the emulator so far."""
    return emu.stats()["requests"].get(EVENTS, {}).get("200", 0)


def session(emu: sv.Emulator, cache: object) -> list:
    """(events, requests, seconds, saved) of each step, with a client of ``cache``: ``saved`` is
    what the client's stats count as the requests the cache spared it."""
    client = emu.client(cache=cache)
    rows = []
    for _, lo, hi in STEPS:
        before = served(emu)
        saved = client.stats()["requests_saved"]
        t = time.perf_counter()
        events = client.events(lo, hi, progress=False)
        seconds = time.perf_counter() - t
        assert [e["id"] for e in events] == emu.truth(lo, hi), "not exact"
        saved = client.stats()["requests_saved"] - saved
        rows.append((len(events), served(emu) - before, seconds, saved))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    started = time.time()
    with sv.Emulator(sites=20, days=14, events_per_day=2000) as emu:
        emu.set_limits(daily_requests=2400)
        without = session(emu, False)
        with tempfile.TemporaryDirectory() as d:
            with_cache = session(emu, d)
    lines = [
        "| what the notebook does | events | minimum `ceil(N/100)` | requests without cache "
        "| requests with cache | saved, as the client counts | time without (s) "
        "| time with (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (what, _, _), (n, r0, t0, _), (n1, r1, t1, s1) in zip(STEPS, without, with_cache):
        assert n == n1
        lines.append(
            f"| {what} | {n:,} | {-(-n // 100):,} | {r0:,} | {r1:,} | {s1:,} | {t0:.2f} "
            f"| {t1:.2f} |"
        )
    total0 = sum(r[1] for r in without)
    total1 = sum(r[1] for r in with_cache)
    saved1 = sum(r[3] for r in with_cache)
    least = sum(-(-r[0] // 100) for r in without)
    lines.append(
        f"| **session** | | **{least:,}** | **{total0:,}** | **{total1:,}** | **{saved1:,}** | | |"
    )
    table = "\n".join(lines)
    now = dt.datetime.now(dt.timezone.utc)
    section = (
        "# Cache benchmark\n\n"
        f"`python bench/cache.py`, {now:%Y-%m-%d %H:%M} UTC, took {time.time() - started:.0f} s. "
        "An emulator of 20 sites, 2,000 events a day from 2026-01-05, the provider's daily "
        "quota of 2,400 requests (set on the emulator and the client); each step is one call "
        "of `client.events(...)`, checked against `emu.truth`. Requests are `GET /v2/events` "
        "answered 200, as the emulator counted them. *With cache*: `cache=` a fresh directory "
        "(settled events, the default `settle` of an hour: the whole range here). *Saved*: "
        "the growth of `client.stats()['requests_saved']` over the step, the requests that the "
        "reads which filled the cached windows spent on them.\n\n"
        f"{table}\n\n"
        f"The session spends {total0:,} requests without the cache, {total1:,} with it "
        f"({100 * total0 / 2400:.0f}% and {100 * total1 / 2400:.0f}% of the day's 2,400).\n"
    )
    print(section)
    if not args.no_write:
        text = RESULTS.read_text() if RESULTS.exists() else ""
        pattern = re.compile(r"# Cache benchmark\n.*?(?=\n# |\Z)", re.S)
        if pattern.search(text):
            text = pattern.sub(lambda _: section.rstrip("\n") + "\n", text)
        else:
            text = text.rstrip("\n") + "\n\n" + section
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
