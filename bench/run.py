"""Events benchmark: this package against two pure-Python baselines (bench/baselines.py), on
local emulators started here.

    python bench/run.py            # full run (a few minutes), writes bench/RESULTS.md
    python bench/run.py --quick    # smoke test with small sizes (under a minute), prints only

Every run is checked against ``emu.truth(start, end)``: events lost, duplicated, or outside the
range. Request counts are the emulator's own (``GET /v2/events``, by status).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Optional

import surveillance as sv

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402

OURS, REQ, AIO = "ours", "(a) requests", "(b) aiohttp"
CONCURRENCY = 16
LATENCY_MS = 50
LIMITED_RATE, LIMITED_CONCURRENCY = 20, 3
SKIP_SEQUENTIAL_OVER_S = 60.0  # scenario 2: (a) is only estimated when it would take longer

# (sites, days, events_per_day) of each emulator.
SIZES = {
    "full": {"bulk": (20, 2, 50_000), "limited": (20, 1, 20_000), "memory": (50, 10, 200_000)},
    "quick": {"bulk": (5, 2, 10_000), "limited": (5, 1, 4_000), "memory": (10, 2, 50_000)},
}
REPEATS = {"full": 3, "quick": 1}


def reads(per_second: Optional[float], concurrency: int, daily: Optional[int]) -> sv.Limits:
    """Limits on reads (publishing unlimited): ``per_second`` reads a second (None: no rate),
    ``concurrency`` in flight, ``daily`` requests a day (None: no daily quota)."""
    return sv.Limits(
        read_per_second=per_second,
        read_concurrency=concurrency,
        publish_per_second=None,
        publish_concurrency=None,
        daily_requests=daily,
    )


#: A daily quota that the runs never reach (the client's ledger counts every run of the day).
QUOTA = 10**8
# No daily quota: with one (the default's 2,400), a fetch spends no request on speculation and
# walks each window a page at a time (scenario 2q measures that path).
UNLIMITED_16 = reads(None, CONCURRENCY, None)
FRUGAL_16 = reads(None, CONCURRENCY, QUOTA)
LIMITED = reads(LIMITED_RATE, LIMITED_CONCURRENCY, QUOTA)


# --- measuring --------------------------------------------------------------------------------
@dataclass
class Result:
    client: str
    expected: int  # events in the range (emu.truth)
    events: int  # events returned
    seconds: float
    requests: int  # GET /v2/events answered 200
    limited: int  # GET /v2/events answered 429
    lost: int
    dup: int
    extra: int

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def correct(self) -> bool:
        return self.lost == 0 and self.dup == 0 and self.extra == 0


Fetch = Callable[[], list]


def check(events: list, truth: list) -> tuple[int, int, int]:
    """(lost, duplicated, extra) of `events` against the exact ids of `truth`."""
    ids = [e["id"] for e in events]
    seen, expected = set(ids), set(truth)
    return len(expected - seen), len(ids) - len(seen), len(seen - expected)


def measure(emu: sv.Emulator, label: str, name: str, fetch: Fetch, truth: list):
    """Runs `fetch` once against `emu`; returns its Result and the events it returned."""
    emu.reset_stats()
    t0 = time.perf_counter()
    events = fetch()
    seconds = time.perf_counter() - t0
    by_status = emu.stats()["requests"].get("GET /v2/events", {})
    lost, dup, extra = check(events, truth)
    ok, limited = by_status.get("200", 0), by_status.get("429", 0)
    r = Result(name, len(truth), len(events), seconds, ok, limited, lost, dup, extra)
    print(
        f"  {label:<3} {name:<13} {r.events:>9,} events {r.seconds:7.2f} s "
        f"{r.rate:>9,.0f} ev/s  {r.requests:>5} req  {r.limited:>4} x429  "
        f"lost {r.lost} dup {r.dup} extra {r.extra}",
        flush=True,
    )
    return r, events


def best_of(runs: list[Result]) -> Result:
    """The fastest run, carrying the worst correctness seen over all runs."""
    best = min(runs, key=lambda r: r.seconds)
    return replace(
        best,
        lost=max(r.lost for r in runs),
        dup=max(r.dup for r in runs),
        extra=max(r.extra for r in runs),
    )


class Clients:
    """The three contenders on one emulator (tokens fetched before any timing)."""

    def __init__(self, emu: sv.Emulator) -> None:
        self.emu = emu
        self.token = baselines.fetch_token(
            emu.url, emu.api_key, emu.client_id, emu.client_secret, emu.audience
        )

    def ours(self, start, end, limits: sv.Limits) -> Fetch:
        client = self.emu.client(limits=limits)
        client.access_token()  # the token outside the timing, as for the baselines
        return lambda: client.events(start, end, progress=False)

    def requests(self, start, end, per_second: Optional[float] = None) -> Fetch:
        emu = self.emu
        return lambda: baselines.fetch_events_requests(
            emu.url, emu.api_key, self.token, start, end, per_second=per_second
        )

    def aiohttp(self, start, end, concurrency: int, per_second: Optional[float] = None) -> Fetch:
        emu = self.emu
        return lambda: baselines.fetch_events_aiohttp(
            emu.url,
            emu.api_key,
            self.token,
            start,
            end,
            concurrency=concurrency,
            per_second=per_second,
        )


# --- table ------------------------------------------------------------------------------------
@dataclass
class Row:
    scenario: str
    result: Optional[Result]
    client: str
    metric: str
    events: Optional[int] = None  # when result is None (not run)


rows: list[Row] = []


def add(scenario: str, result: Result, metric: str = "") -> None:
    rows.append(Row(scenario, result, result.client, metric))


def table() -> str:
    head = (
        "| scenario | client | events | time (s) | events/s | requests (min) | 429s "
        "| lost | dup | result |"
    )
    lines = [head, "|" + "---|" * 10]
    # In the order of the scenarios' numbers (memory runs first, see main).
    for row in sorted(rows, key=lambda row: row.scenario.split()[0]):
        r = row.result
        if r is None:
            n = row.events or 0
            cells = [row.scenario, row.client, f"{n:,}", "–", "–", "–", "–", "–", "–", row.metric]
        else:
            floor = math.ceil(r.expected / 100)
            dup = f"{r.dup}" if not r.extra else f"{r.dup} (+{r.extra} outside)"
            cells = [
                row.scenario,
                row.client,
                f"{r.events:,}",
                f"{r.seconds:.2f}",
                f"{r.rate:,.0f}",
                f"{r.requests:,} ({floor:,})",
                f"{r.limited}",
                f"{r.lost}",
                dup,
                row.metric,
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- scenarios --------------------------------------------------------------------------------
def scenario_bulk(emu: sv.Emulator, repeats: int) -> dict:
    """1 (latency 0, unlimited, best of `repeats`) and 2 (latency 50 ms) on one emulator."""
    start, end = emu.start, emu.end
    truth = emu.truth(start, end)
    c = Clients(emu)
    print(f"1. latency 0, {CONCURRENCY} in flight, {len(truth):,} events, best of {repeats}")
    runs: dict[str, list[Result]] = {OURS: [], REQ: [], AIO: []}
    ours_events: list = []
    for _ in range(repeats):
        r, ours_events = measure(emu, "1", OURS, c.ours(start, end, UNLIMITED_16), truth)
        runs[OURS].append(r)
        runs[REQ].append(measure(emu, "1", REQ, c.requests(start, end), truth)[0])
        runs[AIO].append(measure(emu, "1", AIO, c.aiohttp(start, end, CONCURRENCY), truth)[0])
    best = {name: best_of(rs) for name, rs in runs.items()}
    ours = best[OURS]
    s1 = "1. latency 0, unlimited"
    add(
        s1,
        ours,
        f"**{ours.rate / best[REQ].rate:.2f}× (a)**, **{ours.rate / best[AIO].rate:.2f}× (b)**",
    )
    add(s1, best[REQ])
    add(s1, best[AIO])

    burst_jump(emu, c, ours_events)

    print(f"2. latency {LATENCY_MS} ms, {CONCURRENCY} in flight, best of {repeats}")
    emu.set_faults(latency_ms=LATENCY_MS)
    s2 = f"2. latency {LATENCY_MS} ms"
    try:
        for name, make in (
            (OURS, lambda: c.ours(start, end, UNLIMITED_16)),
            (AIO, lambda: c.aiohttp(start, end, CONCURRENCY)),
        ):
            r = best_of([measure(emu, "2", name, make(), truth)[0] for _ in range(repeats)])
            ideal = r.requests / CONCURRENCY * LATENCY_MS / 1000
            add(s2, r, f"{r.seconds / ideal:.2f}× ideal ({ideal:.2f} s)")
        # The default path: under a daily quota each window is walked a page at a time.
        r = measure(emu, "2q", OURS, c.ours(start, end, FRUGAL_16), truth)[0]
        per_second = r.requests / r.seconds
        add(
            f"2q. latency {LATENCY_MS} ms, daily quota",
            r,
            f"{per_second:.1f} requests/s, {r.seconds / r.requests * 1000:.0f} ms each",
        )
        a = best[REQ]
        estimate = a.requests * (LATENCY_MS / 1000 + a.seconds / a.requests)
        if estimate > SKIP_SEQUENTIAL_OVER_S:
            print(f"  2   {REQ:<13} not run: estimated {estimate:.0f} s")
            rows.append(
                Row(s2, None, REQ, f"not run: est. {estimate:.0f} s ({a.requests:,} req)", a.events)
            )
        else:
            r = measure(emu, "2", REQ, c.requests(start, end), truth)[0]
            add(s2, r, f"sequential; est. was {estimate:.0f} s")
    finally:
        emu.set_faults()
    return best


def burst_jump(emu: sv.Emulator, c: Clients, events: list) -> None:
    """1b: a range chosen so that (a)'s cursor jump (at its 10,000th event) falls inside one of
    the emulator's dense bursts (over 100 events stamped with one millisecond)."""
    ms = [baselines.event_ms(e) for e in events]
    sizes = Counter(ms)
    first = {}
    for i, t in enumerate(ms):
        first.setdefault(t, i)
    bursts = sorted(first[t] for t, n in sizes.items() if n > 100)
    at = next((i for i in bursts if i >= 9_950), None)
    if at is None:
        print("1b. skipped: no dense burst 10,000 events into the range")
        return
    start, end = ms[at - 9_950], ms[min(at + 10_000, len(ms) - 1)]
    start_dt, end_dt = (baselines.EPOCH + timedelta(milliseconds=t) for t in (start, end))
    truth = emu.truth(start_dt, end_dt)
    print(f"1b. cursor jump inside a burst of {sizes[ms[at]]} events, {len(truth):,} events")
    s = f"1b. cursor jump in a {sizes[ms[at]]}-event burst"
    add(s, measure(emu, "1b", OURS, c.ours(start_dt, end_dt, UNLIMITED_16), truth)[0])
    add(s, measure(emu, "1b", REQ, c.requests(start_dt, end_dt), truth)[0])
    add(s, measure(emu, "1b", AIO, c.aiohttp(start_dt, end_dt, CONCURRENCY), truth)[0])


def scenario_limited(emu: sv.Emulator) -> None:
    """3: the emulator enforces the published read limits scaled 20×; every client is held to
    the same (ours by its Limits, the baselines by pacing and a semaphore)."""
    start, end = emu.start, emu.end
    truth = emu.truth(start, end)
    c = Clients(emu)
    print(
        f"3. limits {LIMITED_RATE}/s, {LIMITED_CONCURRENCY} in flight (enforced), "
        f"{len(truth):,} events"
    )
    s = f"3. limits {LIMITED_RATE}/s, {LIMITED_CONCURRENCY} in flight"
    fetches = (
        (OURS, lambda: c.ours(start, end, LIMITED)),
        (REQ, lambda: c.requests(start, end, per_second=LIMITED_RATE)),
        (AIO, lambda: c.aiohttp(start, end, LIMITED_CONCURRENCY, per_second=LIMITED_RATE)),
    )
    for name, make in fetches:
        fetch = make()
        # Fresh limits (a full bucket) for every client, after its token is fetched.
        emu.set_limits(read_per_second=LIMITED_RATE, read_concurrency=LIMITED_CONCURRENCY)
        r = measure(emu, "3", name, fetch, truth)[0]
        achieved = r.requests / r.seconds / LIMITED_RATE
        add(s, r, f"{achieved:.2f} of the allowed rate")
    emu.set_limits()


MEMORY_SCRIPT = r"""
import json, resource, sys, tempfile, time
import surveillance as sv

mode, sites, days, per_day, concurrency = sys.argv[1], *map(int, sys.argv[2:6])


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def status_mb(key):  # Linux: VmRSS (now) or VmHWM (peak) of this process's own memory
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


with sv.Emulator(seed=0, sites=sites, days=days, events_per_day=per_day) as emu:
    limits = sv.Limits(read_per_second=None, read_concurrency=concurrency,
                       publish_per_second=None, publish_concurrency=None, daily_requests=None)
    client = emu.client(limits=limits)
    client.access_token()
    before = status_mb("VmRSS") or peak_mb()
    t0 = time.perf_counter()
    if mode == "iter":
        with tempfile.TemporaryFile("w+") as spool:  # ids kept on disk, not in memory
            n = 0
            for event in client.iter_events(emu.start, emu.end):
                spool.write(event["id"] + "\n")
                n += 1
            seconds = time.perf_counter() - t0
            peak, hwm = peak_mb(), status_mb("VmHWM")
            spool.seek(0)
            ids = spool.read().split()
    else:
        events = client.events(emu.start, emu.end, progress=False)
        n = len(events)
        seconds = time.perf_counter() - t0
        peak, hwm = peak_mb(), status_mb("VmHWM")
        ids = [e["id"] for e in events]
        del events
    requests = client.stats()["requests"]["GET /v2/events"]
    truth = emu.truth(emu.start, emu.end)
    seen, expected = set(ids), set(truth)
    print(json.dumps({
        "events": n, "seconds": seconds, "requests": requests, "before_mb": before,
        "peak_mb": peak, "hwm_mb": hwm, "lost": len(expected - seen),
        "dup": len(ids) - len(seen), "extra": len(seen - expected), "ordered": ids == truth,
        "expected": len(truth),
    }))
"""


def scenario_memory(size: tuple[int, int, int]) -> None:
    """4: peak RSS of iter_events (bounded memory) and of events() (a list), each in a fresh
    process that runs its own emulator."""
    sites, days, per_day = size
    print(f"4. memory, {days * per_day:,} events, one subprocess each")
    s = "4. memory (own process)"
    for mode, name in (("iter", "ours iter_events"), ("list", "ours events()")):
        args = [str(v) for v in (mode, sites, days, per_day, CONCURRENCY)]
        proc = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, *args], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"memory run {mode} failed:\n{proc.stderr}")
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        counts = (m["events"], m["seconds"], m["requests"], 0, m["lost"], m["dup"], m["extra"])
        r = Result(name, m["expected"], *counts)
        order = "" if m["ordered"] else ", NOT in truth's order"
        print(
            f"  4   {name:<17} {r.events:>9,} events {r.seconds:7.2f} s "
            f"{r.rate:>9,.0f} ev/s  {r.requests:>5} req  ru_maxrss {m['peak_mb']:,.0f} MB "
            f"(VmHWM {m['hwm_mb'] or 0:,.0f} MB) "
            f"(before fetch {m['before_mb']:,.0f} MB)  lost {r.lost} dup {r.dup} "
            f"extra {r.extra}{order}",
            flush=True,
        )
        # VmHWM is the child's own peak; ru_maxrss starts from the parent's size at the fork.
        peak = m["hwm_mb"] or m["peak_mb"]
        add(s, r, f"**peak RSS {peak:,.0f} MB** (before fetch {m['before_mb']:,.0f} MB){order}")


# --- main -------------------------------------------------------------------------------------
def machine() -> str:
    built = datetime.fromtimestamp(os.path.getmtime(sv._core.__file__), timezone.utc)
    return (
        f"{os.cpu_count()} CPUs (nproc), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.release()} "
        f"({platform.machine()}), surveillance {getattr(sv, '__version__', '?')} "
        f"(extension built {built:%Y-%m-%d %H:%M} UTC)"
    )


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


NOTES = "\n".join(
    [
        "- **requests (min)**: `GET /v2/events` answered 200, as counted by the emulator; in "
        "brackets the minimum, ceil(events / 100). **429s**: answers 429 seen by the emulator.",
        "- **lost / dup**: against `emu.truth(start, end)` (the exact ids of `[start, end)`); "
        "every run is checked and the worst run is shown. Events returned outside the range "
        'would be shown as "outside".',
        f"- **1**: ours with `Limits(read_per_second=None, read_concurrency={CONCURRENCY}, ..., "
        f"daily_requests=None)`, (b) with {CONCURRENCY} in flight, (a) sequential; best of the "
        "repeats, tokens fetched before timing. The result column is ours' events/s over (a)'s "
        "and (b)'s.",
        "- **1b**: a range chosen so that (a)'s cursor jump (at its 10,000th event) falls inside "
        "one of the emulator's dense bursts (events stamped with one millisecond): API.md's "
        '"last + 1 ms" cursor skips the rest of the burst.',
        f"- **2**: `emu.set_faults(latency_ms={LATENCY_MS})`; ideal = own requests / "
        f"{CONCURRENCY} × {LATENCY_MS} ms. (a) is run only when its estimate (its requests × "
        f"({LATENCY_MS} ms + its time per request at latency 0)) is under "
        f"{SKIP_SEQUENTIAL_OVER_S:.0f} s.",
        f"- **2q**: as 2, one run, with a daily quota (`daily_requests={QUOTA:.0e}`; the "
        "default is the provider's 2,400): under a quota the client spends no request on "
        "speculation, so it asks no page ahead of the one that shows there is more, and each "
        "window is walked a page at a time. Its rate is then one request per round trip: 20 "
        "a second at 50 ms, over the provider's 1 read a second (a round trip over 1 s would "
        "hold it under that).",
        f"- **3**: `emu.set_limits(read_per_second={LIMITED_RATE}, "
        f"read_concurrency={LIMITED_CONCURRENCY})` (the published 1/s and 3 in flight, scaled "
        f"20×), fresh before each client; ours with the same `Limits`, (a) paced to "
        f"{LIMITED_RATE}/s, (b) paced to {LIMITED_RATE}/s with {LIMITED_CONCURRENCY} in flight. "
        f"A daily quota is set (`daily_requests={QUOTA:.0e}`), as by default. "
        f"Allowed rate = (requests / time) / {LIMITED_RATE}; the emulator's bucket starts full "
        f"({LIMITED_RATE} requests of burst), so a short run can exceed 1.00.",
        f"- **4**: each row is a fresh process (`subprocess`) that starts its own emulator, "
        f"fetches with {CONCURRENCY} in flight and prints its peak resident size (`VmHWM`). "
        "The emulator runs in that process: its data (about 70 MB per million events) is "
        "included, in the peak and in the resident size before the fetch. iter_events writes "
        "each id to a "
        "temporary file (for the correctness check); events() holds the whole list.",
    ]
)


#: Other benchmarks: modules of bench/ whose `run(quick) -> str` returns a markdown section.
SECTIONS = ["arrow", "publish", "dask_bench"]


def write(output: Optional[Path], sections: dict) -> None:
    """Prints the sections; writes them into `output`, each replacing its own `# ` section and
    keeping the others (so one benchmark can be rerun alone)."""
    old = output.read_text() if output is not None and output.exists() else ""
    parts = {}
    for chunk in ("\n" + old).split("\n# ")[1:]:
        parts[chunk.split("\n", 1)[0]] = "# " + chunk.rstrip("\n")
    for text in sections.values():
        print()
        print(text)
        parts[text.split("\n", 1)[0][2:]] = text.rstrip("\n")
    if output is not None:
        output.write_text("\n\n".join(parts.values()) + "\n")
        print(f"written to {output}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument(
        "--only",
        choices=["events", *SECTIONS],
        action="append",
        help="run only these benchmarks (default: all); RESULTS.md keeps the other sections",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="where to write the markdown (default: bench/RESULTS.md, not written by --quick)",
    )
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    sizes, repeats = SIZES[mode], REPEATS[mode]
    output = args.output or (None if args.quick else HERE / "RESULTS.md")
    host, load_start = machine(), load()
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.perf_counter()

    only = set(args.only or ["events", *SECTIONS])
    sections = {}
    # Subprocess measurements first, while this process is small: on Linux a child's
    # ru_maxrss starts from its parent's resident size at the fork.
    for name in SECTIONS:
        if name in only:
            sections[name] = importlib.import_module(name).run(args.quick)
    if "events" not in only:
        write(output, sections)
        return
    scenario_memory(sizes["memory"])
    sites, days, per_day = sizes["bulk"]
    with sv.Emulator(seed=0, sites=sites, days=days, events_per_day=per_day) as emu:
        scenario_bulk(emu, repeats)
    sites, days, per_day = sizes["limited"]
    with sv.Emulator(seed=1, sites=sites, days=days, events_per_day=per_day) as emu:
        scenario_limited(emu)

    took = time.perf_counter() - t0
    exact = [r for r in (row.result for row in rows) if r and r.client != REQ and not r.correct]
    text = "\n".join(
        [
            "# Events benchmark",
            "",
            f"`python bench/run.py{' --quick' if args.quick else ''}` ({mode} sizes), "
            f"{date}, took {took:.0f} s.",
            "",
            f"Machine: {host}; load average (1, 5, 15 min) {load_start} at the start, "
            f"{load()} at the end.",
            "",
            "Clients: **ours** is `surveillance` (Rust core); **(a)** is `requests`, sequential, "
            "API.md's suggested cursor; **(b)** is `aiohttp` + `orjson`, concurrent, exact "
            "(bisection at the ceiling). Both are in `bench/baselines.py`.",
            "",
            table(),
            "",
            NOTES,
        ]
    )
    sections["events"] = text
    write(output, sections)
    if exact:
        names = ", ".join(r.client for r in exact)
        sys.exit(f"an exact client lost or duplicated events: {names}")


if __name__ == "__main__":
    main()
