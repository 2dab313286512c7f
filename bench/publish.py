"""Publishing benchmark: ``Client.publish`` against two pure-Python posters, same run, same
records, on local emulators started here.

    python bench/publish.py            # full run (a few minutes), writes its section of RESULTS.md
    python bench/publish.py --quick    # smoke test with small sizes, prints only
    python bench/publish.py --only separate      # one group; RESULTS.md keeps the other
    python bench/publish.py --only separate --server-cpus 0-7 --client-cpus 8

Two groups of scenarios:

**In process** (``--only inprocess``): the emulator runs in this process, and the clients post
the same list of dicts to it:
- **ours**: ``client.publish(records, batch_size=B, progress=False)`` (validation on, the default);
- **(a) requests**: a sequential loop over one ``requests.Session``, ``json.dumps`` per body;
- **(b) aiohttp**: ``aiohttp`` + ``orjson`` with an ``asyncio.Semaphore`` holding as many
  requests in flight as ours.
Both baselines retry 429 (after ``Retry-After``), 5xx and connection errors. Every run is
checked: the emulator must hold every record exactly once (``emu.published()``).

**Separate processes** (``--only separate``): the emulator runs alone in a subprocess, driven
over its stdin and stdout, and every measurement is a fresh client process that builds its
input (a list of dicts, a JSON Lines file, a pandas DataFrame, a pyarrow Table, a polars
DataFrame), fetches its token, then times the publish alone: wall time, and the process's own
CPU time (``getrusage(RUSAGE_SELF)``, user + system, all its threads). ``--server-cpus`` and
``--client-cpus`` pin them with ``taskset -c`` (default: CPU 1 and CPU 0, when the machine has
both; an empty list does not pin). Every run is checked against the emulator's store.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Optional

import surveillance as sv

SCRIPT = Path(__file__).resolve()
HERE = SCRIPT.parent
TITLE = "Publishing benchmark"
CONCURRENCY = 32
LATENCY_MS = 20
RATE, IN_FLIGHT = 100.0, 200  # the webhook's published limits

SIZES = {
    # records per run: batch 1, batch 100, latency 20 ms (batch 1), limits (requests), memory
    "full": {"b1": 20_000, "b100": 200_000, "lat": 6_400, "lim": 1_000, "mem": 1_000_000},
    "quick": {"b1": 2_000, "b100": 20_000, "lat": 640, "lim": 200, "mem": 100_000},
}
REPEATS = {"full": 3, "quick": 1}
#: The requests loop posts at most this many bodies per run at batch size 1 (its rate is steady).
REQUESTS_CAP_B1 = 5_000
#: Ours without client-side validation: the same work as the baselines, which do not validate.
NO_CHECK = "ours, validate=False"
#: Ours reading a JSON Lines file without validation: the least client work there is.
FROM_FILE = "ours, file, validate=False"


def record(i: int) -> dict:
    """A retail transaction with three items, about 600 bytes of JSON."""
    t = 1_794_891_600_000 + i * 1000
    return {
        "dataType": "retail",
        "schemaVersion": "1",
        "startTime": t,
        "endTime": t + 45_000,
        "locationId": f"store-{i % 50}",
        "dataSourceId": f"pos-{i % 7}",
        "transactionId": f"tx-{i:08d}",
        "status": "sale",
        "employeeId": f"emp-{i % 31}",
        "items": [
            {
                "time": t + k * 5000,
                "quantity": 1 + k,
                "description": ("coffee", "croissant", "water")[k],
                "unitPrice": (3.5, 2.25, 1.0)[k],
                "type": "SALE",
            }
            for k in range(3)
        ],
    }


def token(emu: sv.Emulator) -> str:
    import requests

    r = requests.post(
        emu.url + "/v2/oauth/token",
        json={
            "audience": emu.audience,
            "client_id": emu.client_id,
            "client_secret": emu.client_secret,
        },
        headers={"x-api-key": emu.api_key},
        timeout=30,
    )
    r.raise_for_status()
    return r.json()["access_token"]


def bodies(records: list, batch_size: int) -> list:
    if batch_size == 1:
        return records
    return [records[i : i + batch_size] for i in range(0, len(records), batch_size)]


def _retry_after(headers) -> float:
    try:
        return max(float(headers.get("retry-after", "0")), 0.05)
    except ValueError:
        return 0.5


# --- (a) requests ------------------------------------------------------------------------------
def post_requests(
    emu: sv.Emulator, tok: str, records: list, batch_size: int, per_second: Optional[float] = None
) -> int:
    """Sequential posts; returns the 429s received."""
    import requests

    url = emu.url + "/v2/webhook"
    headers = {
        "x-api-key": emu.api_key,
        "authorization": f"Bearer {tok}",
        "content-type": "application/json",
    }
    limited = 0
    next_at = time.perf_counter()
    with requests.Session() as s:
        for body in bodies(records, batch_size):
            data = json.dumps(body)
            for _attempt in range(10):
                if per_second:
                    now = time.perf_counter()
                    if next_at > now:
                        time.sleep(next_at - now)
                    next_at = max(next_at, now) + 1.0 / per_second
                try:
                    r = s.post(url, data=data, headers=headers, timeout=30)
                except requests.ConnectionError:
                    continue
                if r.status_code == 200:
                    break
                if r.status_code == 429:
                    limited += 1
                    time.sleep(_retry_after(r.headers))
                elif r.status_code < 500:
                    raise RuntimeError(f"(a) refused: {r.status_code} {r.text[:200]}")
    return limited


# --- (b) aiohttp -------------------------------------------------------------------------------
async def _post_aiohttp(emu, tok, records, batch_size, concurrency, per_second) -> int:
    import aiohttp
    import orjson

    url = emu.url + "/v2/webhook"
    headers = {
        "x-api-key": emu.api_key,
        "authorization": f"Bearer {tok}",
        "content-type": "application/json",
    }
    sem = asyncio.Semaphore(concurrency)
    limited = 0
    pace = {"next": time.perf_counter()}

    async def post(session, body) -> None:
        nonlocal limited
        async with sem:
            data = orjson.dumps(body)
            for _attempt in range(10):
                if per_second:
                    now = time.perf_counter()
                    at = max(pace["next"], now)
                    pace["next"] = at + 1.0 / per_second
                    if at > now:
                        await asyncio.sleep(at - now)
                try:
                    async with session.post(url, data=data, headers=headers) as r:
                        await r.read()
                        if r.status == 200:
                            return
                        if r.status == 429:
                            limited += 1
                            await asyncio.sleep(_retry_after(r.headers))
                        elif r.status < 500:
                            raise RuntimeError(f"(b) refused: {r.status}")
                except aiohttp.ClientConnectionError:
                    continue

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(post(session, b) for b in bodies(records, batch_size)))
    return limited


def post_aiohttp(emu, tok, records, batch_size, concurrency, per_second=None) -> int:
    return asyncio.run(_post_aiohttp(emu, tok, records, batch_size, concurrency, per_second))


# --- measuring ---------------------------------------------------------------------------------
@dataclass
class Result:
    scenario: str
    client: str
    batch_size: int
    records: int
    seconds: float
    requests: int  # POST /v2/webhook answered 200
    limited: int  # 429s the emulator sent
    stored_ok: bool
    note: str = ""

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def measure(emu: sv.Emulator, scenario: str, client: str, n: int, bs: int, run: Callable) -> Result:
    emu.clear_published()
    emu.reset_stats()
    t0 = time.perf_counter()
    run()
    seconds = time.perf_counter() - t0
    stats = emu.stats()["requests"].get("POST /v2/webhook", {})
    stored = emu.published()
    keys = {r["transactionId"] for r in stored}
    ok = len(stored) == n and len(keys) == n
    r = Result(scenario, client, bs, n, seconds, stats.get("200", 0), stats.get("429", 0), ok)
    print(
        f"  {scenario:<28} {client:<13} batch {bs:>3} {n:>9,} records {seconds:7.2f} s "
        f"{r.rate:>10,.0f} rec/s {r.requests:>7,} req {r.limited:>4} x429 "
        f"{'ok' if ok else 'WRONG: ' + str(len(stored))}",
        flush=True,
    )
    return r


def best(results: list) -> Result:
    b = min(results, key=lambda r: r.seconds / r.records)
    b.stored_ok = all(r.stored_ok for r in results)
    return b


def ours_client(emu: sv.Emulator, limits: sv.Limits) -> sv.Client:
    client = emu.client(limits=limits)
    client.access_token()  # outside the timing, as for the baselines
    return client


def check_report(report: sv.PublishReport, n: int) -> None:
    if report.accepted != n or report.rejected:
        raise SystemExit(f"ours did not publish everything: {report!r}")


def scenario_unlimited(sizes: dict, repeats: int, out: list) -> None:
    limits = sv.Limits(
        publish_per_second=None, publish_concurrency=CONCURRENCY, daily_requests=None
    )
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        tok = token(emu)
        client = ours_client(emu, limits)
        for bs, n in ((1, sizes["b1"]), (100, sizes["b100"])):
            records = [record(i) for i in range(n)]
            n_req = min(n, REQUESTS_CAP_B1) if bs == 1 else n
            scen = "1. latency 0, unlimited"
            print(f"{scen}, batch {bs}, {n:,} records, best of {repeats}")
            runs: dict = {"ours": [], NO_CHECK: [], "(a) requests": [], "(b) aiohttp": []}
            contenders: list = [("ours", records, True), (NO_CHECK, records, False)]
            if bs == 100:
                # The ceiling: no Python work and no client-side validation at all.
                lines = Path(tempfile.mkdtemp()) / "records.jsonl"
                lines.write_text("".join(json.dumps(r) + "\n" for r in records))
                contenders.append((FROM_FILE, lines, False))
                runs[FROM_FILE] = []
            for _ in range(repeats):
                for name, source, check in contenders:

                    def ours(bs=bs, source=source, n=n, check=check):
                        report = client.publish(
                            source, batch_size=bs, validate=check, progress=False
                        )
                        check_report(report, n)

                    runs[name].append(measure(emu, scen, name, n, bs, ours))
                runs["(a) requests"].append(
                    measure(
                        emu,
                        scen,
                        "(a) requests",
                        n_req,
                        bs,
                        lambda bs=bs, head=records[:n_req]: post_requests(emu, tok, head, bs),
                    )
                )
                runs["(b) aiohttp"].append(
                    measure(
                        emu,
                        scen,
                        "(b) aiohttp",
                        n,
                        bs,
                        lambda bs=bs, records=records: post_aiohttp(
                            emu, tok, records, bs, CONCURRENCY
                        ),
                    )
                )
            b = {k: best(v) for k, v in runs.items()}
            for name in ("ours", NO_CHECK, FROM_FILE):
                if name not in b:
                    continue
                o = b[name]
                o.note = (
                    f"**{o.rate / b['(a) requests'].rate:.1f}× (a)**, "
                    f"**{o.rate / b['(b) aiohttp'].rate:.2f}× (b)**"
                )
            out.extend(b.values())


def scenario_latency(sizes: dict, out: list) -> None:
    n = sizes["lat"]
    limits = sv.Limits(
        publish_per_second=None, publish_concurrency=CONCURRENCY, daily_requests=None
    )
    records = [record(i) for i in range(n)]
    ideal = n / CONCURRENCY * LATENCY_MS / 1000
    scen = f"2. latency {LATENCY_MS} ms"
    print(f"{scen}, {CONCURRENCY} in flight, batch 1, {n:,} records, ideal {ideal:.2f} s")
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        emu.set_faults(latency_ms=LATENCY_MS)
        tok = token(emu)
        client = ours_client(emu, limits)

        def ours():
            check_report(client.publish(records, batch_size=1, progress=False), n)

        o = measure(emu, scen, "ours", n, 1, ours)
        o.note = f"{o.seconds / ideal:.2f}× ideal ({ideal:.2f} s)"
        b = measure(emu, scen, "(b) aiohttp", n, 1, lambda: post_aiohttp(emu, tok, records, 1, 32))
        b.note = f"{b.seconds / ideal:.2f}× ideal"
        out.extend([o, b])
        out.append(
            Result(
                scen,
                "(a) requests",
                1,
                n,
                n * LATENCY_MS / 1000,
                0,
                0,
                True,
                f"not run: sequential, at least {n * LATENCY_MS / 1000:.0f} s (n × latency)",
            )
        )


def scenario_limits(sizes: dict, out: list) -> None:
    n = sizes["lim"]
    scen = f"3. limits {RATE:.0f}/s, {IN_FLIGHT} in flight"
    print(f"{scen}, batch 1, {n:,} records (ideal {n / RATE:.1f} s each)")
    records = [record(i) for i in range(n)]
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        tok = token(emu)
        runs = [
            ("ours", lambda c: check_report(c.publish(records, batch_size=1, progress=False), n)),
            ("(a) requests", lambda c: post_requests(emu, tok, records, 1, per_second=RATE)),
            ("(b) aiohttp", lambda c: post_aiohttp(emu, tok, records, 1, IN_FLIGHT, RATE)),
        ]
        for name, run in runs:
            # A fresh bucket for each client: the emulator's starts full (one second of burst).
            emu.set_limits(publish_per_second=RATE, publish_concurrency=IN_FLIGHT)
            client = ours_client(emu, sv.Limits(daily_requests=None)) if name == "ours" else None
            time.sleep(1.1)
            r = measure(emu, scen, name, n, 1, lambda run=run, client=client: run(client))
            r.note = f"{r.requests / r.seconds / RATE:.2f} of the allowed rate"
            out.append(r)
        emu.set_limits()


MEMORY_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    import surveillance as sv
    sys.path.insert(0, {here!r})
    from publish import record
    n = {n}
    def peak_kb():  # this process's own peak (ru_maxrss starts from the parent's at the fork)
        with open("/proc/self/status") as f:
            hwm = [int(x.split()[1]) for x in f if x.startswith("VmHWM:")]
        return hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        client = emu.client()
        before = peak_kb()
        t0 = time.perf_counter()
        def records():
            for i in range(n):
                if i % 100_000 == 0:
                    emu.clear_published()  # the emulator's store is not what is measured
                yield record(i)

        report = client.publish(records(), batch_size=100, progress=False)
        seconds = time.perf_counter() - t0
        peak = peak_kb()
        stored = emu.stats()["published_stored"]
        emu.clear_published()
    print(report.accepted, len(report.rejected), stored, before, peak, seconds)
    """
)


def scenario_memory(sizes: dict, out: list) -> None:
    n = sizes["mem"]
    print(f"4. memory: a generator of {n:,} records, batch 100, in a fresh process")
    code = MEMORY_CHILD.format(here=str(HERE), n=n)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    accepted, rejected, stored, before, peak, seconds = done.stdout.split()
    seconds_f = float(seconds)
    r = Result(
        "4. memory (own process)",
        "ours generator",
        100,
        int(accepted),
        seconds_f,
        0,
        0,
        int(accepted) == n and int(rejected) == 0 and int(stored) >= n,
        f"**peak RSS {int(peak) / 1024:,.0f} MB** (before publishing {int(before) / 1024:,.0f} MB)",
    )
    print(f"  peak RSS {int(peak) / 1024:,.0f} MB, {r.rate:,.0f} rec/s")
    out.append(r)


# --- report ------------------------------------------------------------------------------------
def table(results: list) -> str:
    lines = [
        "| scenario | client | batch | records | time (s) | records/s | requests | 429s | "
        "stored once | result |",
        "|" + "---|" * 10,
    ]
    for r in results:
        measured = r.requests > 0 or r.client.startswith("ours")
        cells = [
            r.scenario,
            r.client,
            str(r.batch_size),
            f"{r.records:,}",
            f"{r.seconds:.2f}" if measured else "–",
            f"{r.rate:,.0f}" if measured else "–",
            f"{r.requests:,}" if r.requests else "–",
            str(r.limited) if measured else "–",
            ("yes" if r.stored_ok else "**no**") if measured else "–",
            r.note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    return (
        f"{os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()}), surveillance "
        f"{sv.__version__}"
    )


def run_inprocess(quick: bool = False, command: str = "python bench/publish.py") -> str:
    """Runs the in-process scenarios; returns the head of the markdown section."""
    mode = "quick" if quick else "full"
    sizes, repeats = SIZES[mode], REPEATS[mode]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load()
    t0 = time.perf_counter()
    results: list = []
    scenario_memory(sizes, results)  # first, while this process is small
    scenario_unlimited(sizes, repeats, results)
    scenario_latency(sizes, results)
    scenario_limits(sizes, results)
    took = time.perf_counter() - t0
    load_end = load()
    host = machine()
    notes = [
        "- Records: retail transactions with three items (about 600 bytes of JSON each), the "
        "same list of dicts for every client; ours validates each one (the default), the "
        "baselines do not (the row `ours, validate=False` does the same work as they do). "
        "Tokens are fetched before timing.",
        f"- **1**: ours with `Limits(publish_per_second=None, publish_concurrency={CONCURRENCY}"
        f", daily_requests=None)`, (b) with {CONCURRENCY} in flight, (a) sequential (at batch 1 "
        f"on the first {REQUESTS_CAP_B1:,} records: its rate is steady); best of {repeats}. "
        "Result: ours' records/s over (a)'s and (b)'s. The emulator runs in this process and "
        "validates every record too, so its own cost is in every figure. `ours, file, "
        "validate=False` publishes the same records from a JSON Lines file (read in Rust), "
        "without "
        "validation: the least work a client can do, so about the most the emulator "
        "accepts here.",
        f"- **2**: `emu.set_faults(latency_ms={LATENCY_MS})`; ideal = requests / {CONCURRENCY} "
        f"× {LATENCY_MS} ms.",
        f"- **3**: `emu.set_limits(publish_per_second={RATE:.0f}, publish_concurrency="
        f"{IN_FLIGHT})`, the published webhook limits, fresh for each client; ours with the "
        "default limits (the same ones; `sv.Limits(daily_requests=None)`: no daily quota, as "
        "for the baselines), (a) and (b) paced to 100/s. Allowed rate = "
        "(requests answered 200 / time) / 100; 429s as sent by the emulator.",
        "- **4**: a fresh process (`subprocess`) with its own emulator publishes a generator; "
        "`VmHWM` is its peak resident size, the emulator included (the generator empties "
        "the emulator's store every 100,000 records: the store is not what is measured).",
        "- **requests**: `POST /v2/webhook` answered 200, as counted by the emulator. "
        "**stored once**: the emulator holds every record exactly once after the run.",
    ]
    return "\n".join(
        [
            f"# {TITLE}",
            "",
            f"`{command}` ({mode} sizes), {date}, took {took:.0f} s.",
            "",
            f"Machine: {host}; load average (1, 5, 15 min) {load_start} at the start, "
            f"{load_end} at the end.",
            "",
            "Clients: **ours** is `Client.publish` (Rust core); **(a)** is `requests`, "
            "sequential, `json.dumps`; **(b)** is `aiohttp` + `orjson` with a semaphore. Both "
            "are in `bench/publish.py`.",
            "",
            table(results),
            "",
            "\n".join(notes),
        ]
    )


# --- the emulator and each client in separate processes ------------------------------------
SUBTITLE = "## The emulator in its own process, each client in a fresh one"
#: Records per run of the separate-process group, and its batch size.
SEPARATE_SIZES = {"full": 100_000, "quick": 10_000}
SEPARATE_BATCH = 100
#: The emulator of the separate group: few events, it only serves the webhook and tokens.
EMULATOR_ARGS = {"sites": 2, "days": 1, "events_per_day": 10}
#: Pinning when neither option is given: the emulator on CPU 1, the clients on CPU 0.
DEFAULT_SERVER_CPUS, DEFAULT_CLIENT_CPUS = "1", "0"
UNSUPPORTED = "not supported by this version"


@dataclass(frozen=True)
class Row:
    """One row of the separate-process table: an input given to a client."""

    source: str  # "dicts", "file", "frame", "arrow", "polars"
    client: str  # "ours" or "b"
    validate: bool = True  # ours only

    @property
    def input(self) -> str:
        return {
            "dicts": "list of dicts",
            "file": "JSON Lines file",
            "frame": "pandas DataFrame",
            "arrow": "pyarrow Table",
            "polars": "polars DataFrame",
        }[self.source]

    @property
    def label(self) -> str:
        if self.client == "ours":
            arg = {
                "dicts": "records",
                "file": "path",
                "frame": "df",
                "arrow": "table",
                "polars": "df",
            }
            return f"ours `publish({arg[self.source]})`, validate={self.validate}"
        return {
            "dicts": "(b) aiohttp + `orjson.dumps(chunk)`",
            "file": "(b) read + `orjson.loads` per line, then as above",
            "frame": '(b) `df.to_dict("records")`, then as above',
            "arrow": "(b) `table.to_pylist()`, then as above",
            "polars": "(b) `df.to_dicts()`, then as above",
        }[self.source]


SEPARATE_ROWS = [
    Row("dicts", "ours", True),
    Row("dicts", "ours", False),
    Row("dicts", "b"),
    Row("file", "ours", True),
    Row("file", "ours", False),
    Row("file", "b"),
    Row("frame", "ours", True),
    Row("frame", "b"),
    Row("arrow", "ours", True),
    Row("arrow", "b"),
    Row("polars", "ours", True),
    Row("polars", "b"),
]


def pinned(cpus: str) -> list:
    """The command prefix that pins a process to `cpus` (a `taskset -c` list), if any."""
    return ["taskset", "-c", cpus] if cpus else []


def serve_main() -> None:
    """The emulator alone in this process. Prints its settings as one JSON line, then answers
    each command read on stdin with one JSON line: `clear` (empties the webhook store and the
    counters), `check` (what the store holds) or `quit`."""
    import resource

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def reply(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    with sv.Emulator(**EMULATOR_ARGS) as emu:
        reply(
            {
                "url": emu.url,
                "api_key": emu.api_key,
                "client_id": emu.client_id,
                "client_secret": emu.client_secret,
                "audience": emu.audience,
                "affinity": sorted(os.sched_getaffinity(0)),
            }
        )
        for line in sys.stdin:
            command = line.strip()
            if command == "clear":
                emu.clear_published()
                emu.reset_stats()
                reply({"cpu": cpu()})
            elif command == "check":
                spent = cpu()  # before the check's own work
                stats = emu.stats()
                ids = sorted(r["transactionId"] for r in emu.published())
                reply(
                    {
                        "cpu": spent,
                        "stored": len(ids),
                        "distinct": len(set(ids)),
                        "digest": digest(ids),
                        "upserts": stats.get("published_upserts", 0),
                        "webhook": stats["requests"].get("POST /v2/webhook", {}),
                    }
                )
            elif command == "quit":
                break
            else:
                reply({"error": f"unknown command {command!r}"})


def digest(ids: list) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


class Server:
    """The emulator subprocess (`serve_main`), pinned to `cpus`."""

    def __init__(self, cpus: str) -> None:
        self.proc = subprocess.Popen(
            [*pinned(cpus), sys.executable, str(SCRIPT), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.settings = self._read()
        self.affinity = self.settings.pop("affinity")

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the emulator process exited ({self.proc.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, command: str) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._read()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def client_main(spec: dict) -> None:
    """One measurement, in a fresh process: builds the input and fetches a token (untimed),
    then times the publish alone, in wall time and in this process's CPU time (user +
    system, all threads). Prints one JSON line."""
    import resource

    row, n = Row(**spec["row"]), spec["n"]
    server = SimpleNamespace(**spec["server"])
    data: object
    if row.source == "file":
        data = spec["path"]
    else:
        records = [record(i) for i in range(n)]
        if row.source == "frame":
            import pandas as pd

            data = pd.DataFrame(records)
        elif row.source == "arrow":
            import pyarrow as pa

            data = pa.Table.from_pylist(records)
        elif row.source == "polars":
            import polars as pl
            import pyarrow as pa

            data = pl.from_arrow(pa.Table.from_pylist(records))
        else:
            data = records
        del records  # only the input itself stays alive

    if row.client == "ours":
        client = sv.Client(
            api_key=server.api_key,
            client_id=server.client_id,
            client_secret=server.client_secret,
            base_url=server.url,
            audience=server.audience,
            limits=sv.Limits(
                publish_per_second=None, publish_concurrency=CONCURRENCY, daily_requests=None
            ),
        )
        client.access_token()

        def publish() -> dict:
            try:
                report = client.publish(
                    data, batch_size=SEPARATE_BATCH, validate=row.validate, progress=False
                )
            except TypeError as e:
                if row.source not in ("arrow", "polars"):
                    raise
                return {"unsupported": f"TypeError: {e}"}
            return {"accepted": report.accepted, "rejected": len(report.rejected)}

    else:
        import aiohttp  # noqa: F401  (imported before timing, as ours is)
        import orjson

        tok = token(server)

        def publish() -> dict:
            if row.source == "file":
                with open(data, "rb") as f:  # type: ignore[arg-type]
                    rows = [orjson.loads(line) for line in f]
            elif row.source == "frame":
                rows = data.to_dict("records")  # type: ignore[attr-defined]
            elif row.source == "arrow":
                rows = data.to_pylist()  # type: ignore[attr-defined]
            elif row.source == "polars":
                rows = data.to_dicts()  # type: ignore[attr-defined]
            else:
                rows = data  # type: ignore[assignment]
            limited = post_aiohttp(server, tok, rows, SEPARATE_BATCH, CONCURRENCY)
            return {"accepted": len(rows), "rejected": 0, "limited": limited}

    before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    out = publish()
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    out["wall"] = wall
    out["user"] = after.ru_utime - before.ru_utime
    out["sys"] = after.ru_stime - before.ru_stime
    out["affinity"] = sorted(os.sched_getaffinity(0))
    print(json.dumps(out), flush=True)


@dataclass
class Measured:
    row: Row
    records: int
    wall: float = 0.0
    user: float = 0.0
    sys: float = 0.0
    server_cpu: float = 0.0  # the emulator process, over the client process's whole life
    requests: int = 0  # POST /v2/webhook answered 200
    other: dict = field(default_factory=dict)  # other statuses of POST /v2/webhook
    upserts: int = 0
    stored_ok: bool = False
    unsupported: str = ""
    affinity: list = field(default_factory=list)

    @property
    def cpu(self) -> float:
        return self.user + self.sys


def measure_separate(
    server: Server, row: Row, n: int, path: Path, expected: str, cpus: str
) -> Measured:
    spec = {
        "row": {"source": row.source, "client": row.client, "validate": row.validate},
        "n": n,
        "path": str(path),
        "server": server.settings,
    }
    server_before = server.ask("clear")["cpu"]
    done = subprocess.run(
        [*pinned(cpus), sys.executable, str(SCRIPT), "--client", json.dumps(spec)],
        capture_output=True,
        text=True,
    )
    check = server.ask("check")
    if done.returncode != 0:
        raise SystemExit(f"{row.label} on {row.input} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    m = Measured(row, n, server_cpu=check["cpu"] - server_before, affinity=out["affinity"])
    webhook = dict(check["webhook"])
    m.requests = webhook.pop("200", 0)
    m.other, m.upserts = webhook, check["upserts"]
    if "unsupported" in out:
        m.unsupported = out["unsupported"]
        m.stored_ok = check["stored"] == 0
        print(f"  {row.input:<17} {row.label:<52} {UNSUPPORTED}: {m.unsupported}", flush=True)
        return m
    m.wall, m.user, m.sys = out["wall"], out["user"], out["sys"]
    m.stored_ok = (
        out["accepted"] == n
        and out["rejected"] == 0
        and check["stored"] == n
        and check["distinct"] == n
        and check["digest"] == expected
    )
    print(
        f"  {row.input:<17} {row.label:<52} {n:>8,} records {m.wall:6.2f} s wall "
        f"{m.cpu:6.2f} s CPU ({m.user:.2f} user + {m.sys:.2f} sys), emulator {m.server_cpu:5.2f} "
        f"s CPU, {m.requests:,} req {m.other or ''} "
        f"{'ok' if m.stored_ok else 'WRONG: ' + json.dumps(check)}",
        flush=True,
    )
    return m


def best_wall(runs: list) -> Measured:
    """The run with the least wall time, with the median CPU time of all the runs (the CPU
    time a client spends moves with the machine's load from run to run, and its least wall
    time need not be its typical CPU time); checked only if every run was."""
    b = replace(min(runs, key=lambda m: m.wall))
    median = sorted(runs, key=lambda m: m.cpu)[len(runs) // 2]
    b.user, b.sys = median.user, median.sys
    b.stored_ok = all(m.stored_ok for m in runs)
    return b


def separate_table(results: list, server_cpus: int) -> str:
    """The markdown table; `server_cpus`: how many CPUs the emulator process may use."""
    lines = [
        "| input | client | records | wall (s) | CPU (s) | CPU µs/record | (b) wall / ours wall "
        "| (b) CPU / ours CPU | emulator CPU (s) (busy) | requests | stored once |",
        "|" + "---|" * 11,
    ]
    base = {m.row.source: m for m in results if m.row.client == "b"}
    for m in results:
        b = base.get(m.row.source)
        ratios = ["", ""]
        if m.row.client == "ours" and not m.unsupported and b is not None:
            ratios = [f"{b.wall / m.wall:.2f}×", f"{b.cpu / m.cpu:.2f}×"]
        if m.unsupported:
            cells = [f"{m.records:,}", f"{UNSUPPORTED} (TypeError)", *[""] * 5, "–", "–"]
        else:
            stored = ("yes" if m.stored_ok else "**no**") + (
                f" ({m.upserts} upserts)" if m.upserts else ""
            )
            cells = [
                f"{m.records:,}",
                f"{m.wall:.2f}",
                f"{m.cpu:.2f}",
                f"{m.cpu / m.records * 1e6:.1f}",
                *ratios,
                f"{m.server_cpu:.2f} ({m.server_cpu / (m.wall * server_cpus):.0%})",
                f"{m.requests:,}" + (f" (+ {m.other})" if m.other else ""),
                stored,
            ]
        lines.append("| " + " | ".join([m.row.input, m.row.label, *cells]) + " |")
    return "\n".join(lines)


def validation_cost(results: list) -> list:
    """(CPU with validation - CPU without) / records, in µs, per input that has both."""
    out = []
    for source in ("dicts", "file"):
        by = {
            m.row.validate: m for m in results if (m.row.source, m.row.client) == (source, "ours")
        }
        if True in by and False in by:
            on, off = by[True], by[False]
            out.append(
                f"{on.row.input}: ({on.cpu:.2f} − {off.cpu:.2f}) s / {on.records:,} = "
                f"**{(on.cpu - off.cpu) / on.records * 1e6:.1f} µs per record**"
            )
    return out


def installed(source: str) -> bool:
    """Whether the library that builds the input `source` can be imported here."""
    import importlib

    module = {"frame": "pandas", "arrow": "pyarrow", "polars": "polars"}.get(source)
    try:
        return module is None or bool(importlib.import_module(module))
    except ImportError:
        return False


def run_separate(
    quick: bool = False,
    server_cpus: str = DEFAULT_SERVER_CPUS,
    client_cpus: str = DEFAULT_CLIENT_CPUS,
    command: str = "python bench/publish.py",
) -> str:
    """Runs the separate-process group; returns its markdown subsection."""
    mode = "quick" if quick else "full"
    n, repeats = SEPARATE_SIZES[mode], REPEATS[mode]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = load()
    t0 = time.perf_counter()
    expected = digest([record(i)["transactionId"] for i in range(n)])
    pins = ", ".join(
        f"{who} `taskset -c {cpus}`" if cpus else f"{who} not pinned"
        for who, cpus in (("emulator", server_cpus), ("clients", client_cpus))
    )
    print(f"separate processes: {n:,} records, batch {SEPARATE_BATCH}, best of {repeats}, {pins}")
    rows = [row for row in SEPARATE_ROWS if installed(row.source)]
    for missing in sorted({row.source for row in SEPARATE_ROWS} - {row.source for row in rows}):
        print(f" {missing}: its library is not installed, its rows are skipped")
    runs: dict = {row: [] for row in rows}
    with tempfile.TemporaryDirectory() as tmp, Server(server_cpus) as server:
        path = Path(tmp) / "records.jsonl"
        with open(path, "w") as f:
            for i in range(n):
                f.write(json.dumps(record(i)) + "\n")
        for k in range(repeats):
            print(f" repeat {k + 1} of {repeats}", flush=True)
            for row in rows:
                runs[row].append(measure_separate(server, row, n, path, expected, client_cpus))
        server_affinity = server.affinity
    took = time.perf_counter() - t0
    load_end = load()
    results = [best_wall(v) for v in runs.values()]
    client_affinity = next((m.affinity for m in results if m.affinity), [])
    wrong = [m for m in results if not m.stored_ok]
    if wrong:
        print("WRONG: " + ", ".join(f"{m.row.input} {m.row.label}" for m in wrong))
    cost = validation_cost(results)
    notes = [
        "- **Processes**: the emulator (`sv.Emulator(sites=2, days=1, events_per_day=10)`) "
        "runs alone in a subprocess, driven over its stdin and stdout; it parses and "
        "validates every record it receives, on its own CPU. Each measurement is a fresh "
        "client process: it builds its input (untimed), fetches its token (untimed), then "
        "times the publish alone. Loopback only.",
        f"- **Pinning**: {pins} (`--server-cpus`, `--client-cpus`; CPUs the processes "
        f"reported: emulator {server_affinity}, clients {client_affinity}). Without options "
        "the emulator is pinned to CPU 1 and the clients to CPU 0, so that on a 2-CPU "
        "machine neither takes CPU time from the other; on a larger machine give the "
        "emulator more CPUs (e.g. `--server-cpus 0-7 --client-cpus 8`).",
        "- **wall**: `time.perf_counter()` around the publish alone. **CPU**: "
        "`resource.getrusage(RUSAGE_SELF)` around the same, user + system, all threads of "
        "the client process (ours' Rust threads included). **CPU µs/record**: CPU / records. "
        "**emulator CPU**: the emulator process's own CPU time from before the client process "
        "starts to after it exits (it is idle but for the token while the client builds its "
        "input); **busy**: that CPU time over the client's wall time × the emulator's CPUs. "
        "Near 100%, the emulator was the bottleneck and the wall time says more about it "
        "than about the client (the CPU time still measures the client alone).",
        f"- **Records**: the in-process group's `record(i)` (retail, three items), {n:,} per run,"
        f" posted in arrays of {SEPARATE_BATCH} (`batch_size={SEPARATE_BATCH}`), "
        f"{CONCURRENCY} requests in flight for both clients; ours with `sv.Limits("
        f"publish_per_second=None, publish_concurrency={CONCURRENCY}, daily_requests=None)` "
        "(no daily quota: its ledger would stop the runs at 2,400 requests a day, and the "
        "baselines keep none).",
        "- **(b)**: `aiohttp` + `orjson` as in the in-process group: chunks of 100 records, "
        f"`orjson.dumps(chunk)` per body, an `asyncio.Semaphore` of {CONCURRENCY}, one "
        "`aiohttp.ClientSession`. From a file it reads the lines and `orjson.loads` each "
        'before posting; from a DataFrame, `df.to_dict("records")`; from a Table, '
        "`table.to_pylist()`; from a polars DataFrame, `df.to_dicts()`; all inside the "
        "timing. The JSON Lines file (written once before any timing with `json.dumps`) and "
        "the inputs are the same for both clients; the "
        "DataFrame is `pd.DataFrame(records)` (its `items` column holds lists of dicts, no "
        "missing values) and the Table `pa.Table.from_pylist(records)` (`items` is a "
        "list<struct>), the polars DataFrame `pl.from_arrow` of that Table.",
        "- **Ratios**: (b)'s figure over ours for the same input: above 1, ours is better.",
        f"- **Best of {repeats}**: the rows are run in turn, {repeats} time(s); each row shows "
        "its least wall time (and the emulator's CPU time in that run), and the median of its "
        "CPU times (user + system as above, split as in that median run).",
        "- **stored once**: after each run the emulator process lists what it stores; every "
        "run must leave exactly the run's records, each once (count, distinct "
        "`transactionId`s and a digest of them against the expected ones), and ours' report "
        "must accept them all. **requests**: `POST /v2/webhook` answered 200 (other statuses "
        f"in brackets); above records / {SEPARATE_BATCH}, ours sent some arrays before they "
        "were full: it posts a partial array after 500 ms without a new record (`LINGER` in "
        "`src/client/publish/mod.rs`), which happens when its input is slower than its posting.",
    ]
    for m in results:
        if m.unsupported:
            notes.append(
                f"- **{m.row.input}**: {m.row.label} is {UNSUPPORTED}: it raised {m.unsupported} "
                "(nothing was stored)."
            )
    if cost:
        notes.append(
            "- **Validation cost** (CPU with validation minus without, per record, ours; a "
            "difference of two runs, so noisy): " + "; ".join(cost) + "."
        )
    return "\n".join(
        [
            SUBTITLE,
            "",
            f"`{command}` ({mode} sizes), {date}, took {took:.0f} s.",
            "",
            f"Machine: {machine()}; load average (1, 5, 15 min) {load_start} at the start, "
            f"{load_end} at the end.",
            "",
            separate_table(results, len(server_affinity)),
            "",
            "\n".join(notes),
        ]
    )


# --- entry points ------------------------------------------------------------------------------
GROUPS = ("inprocess", "separate")


def default_pins() -> tuple:
    """(emulator CPUs, client CPUs) when neither is given: CPU 1 and CPU 0 when this process
    may use both, else no pinning."""
    if {0, 1} <= os.sched_getaffinity(0):
        return DEFAULT_SERVER_CPUS, DEFAULT_CLIENT_CPUS
    return "", ""


def run(
    quick: bool = False,
    only: Optional[str] = None,
    server_cpus: Optional[str] = None,
    client_cpus: Optional[str] = None,
) -> str:
    """Runs both groups (or `only` one); returns the markdown: the whole section, or the
    group's part alone (see `merge`). CPUs: `taskset -c` lists, '' for no pinning; when both
    are None, `default_pins()`."""
    if server_cpus is None and client_cpus is None:
        server_cpus, client_cpus = default_pins()
    command = "python bench/publish.py" + (" --quick" if quick else "")
    command += f" --only {only}" if only else ""
    parts = []
    if only in (None, "inprocess"):
        parts.append(run_inprocess(quick, command))
    if only in (None, "separate"):
        parts.append(run_separate(quick, server_cpus or "", client_cpus or "", command))
    return "\n\n".join(parts)


def merge(old: str, new: str) -> str:
    """This benchmark's section: `new` (the in-process head, the separate-process
    subsection, or both) replacing its parts of `old`, keeping the others. The `### `
    parts of the separate-process subsection (what this script does not write: its analysis,
    runs on other machines) stay as they are."""

    def split(text: str) -> tuple:
        head, mark, sub = text.partition(SUBTITLE)
        written, notes, kept = sub.partition("\n### ")
        return head.rstrip("\n"), (mark + written).rstrip("\n"), (notes + kept).strip("\n")

    old_head, old_sub, old_kept = split(old)
    new_head, new_sub, new_kept = split(new)
    head = new_head or old_head or f"# {TITLE}"
    sub = "\n\n".join(p for p in (new_sub or old_sub, new_kept or old_kept) if p)
    return head + ("\n\n" + sub if sub else "")


def write_section(output: Path, text: str) -> None:
    """Replaces this benchmark's `# ` section of `output` (only the parts `text` holds),
    keeping the other sections."""
    old = output.read_text() if output.exists() else ""
    parts: dict = {}
    for chunk in ("\n" + old).split("\n# ")[1:]:
        parts[chunk.split("\n", 1)[0]] = "# " + chunk.rstrip("\n")
    parts[TITLE] = merge(parts.get(TITLE, ""), text).rstrip("\n")
    output.write_text("\n\n".join(parts.values()) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--output", type=Path, default=None, help="default bench/RESULTS.md")
    parser.add_argument(
        "--only", choices=GROUPS, help="run one group; RESULTS.md keeps the other's table"
    )
    parser.add_argument(
        "--server-cpus",
        default=None,
        help="`taskset -c` list for the emulator process of the separate group (default: 1 "
        "when CPUs 0 and 1 are available; '' does not pin)",
    )
    parser.add_argument(
        "--client-cpus",
        default=None,
        help="`taskset -c` list for each client process of the separate group (default: 0 "
        "when CPUs 0 and 1 are available; '' does not pin)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve_main()
    if args.client is not None:
        return client_main(json.loads(args.client))
    text = run(args.quick, args.only, args.server_cpus, args.client_cpus)
    print()
    print(text)
    output = args.output or (None if args.quick else HERE / "RESULTS.md")
    if output is not None:
        write_section(output, text)
        print(f"written to {output}")


if __name__ == "__main__":
    main()
