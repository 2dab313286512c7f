"""Publishing benchmark: ``Client.publish`` against two pure-Python posters, same run, same
records, on local emulators started here.

    python bench/publish.py            # full run (a few minutes), writes its section of RESULTS.md
    python bench/publish.py --quick    # smoke test with small sizes, prints only

Contenders, all posting the same list of dicts to the same emulator:
- **ours**: ``client.publish(records, batch_size=B, progress=False)`` (validation on, the default);
- **(a) requests**: a sequential loop over one ``requests.Session``, ``json.dumps`` per body;
- **(b) aiohttp**: ``aiohttp`` + ``orjson`` with an ``asyncio.Semaphore`` holding as many
  requests in flight as ours.
Both baselines retry 429 (after ``Retry-After``), 5xx and connection errors. Every run is
checked: the emulator must hold every record exactly once (``emu.published()``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

import surveillance as sv

HERE = Path(__file__).resolve().parent
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
    limits = sv.Limits(publish_per_second=None, publish_concurrency=CONCURRENCY)
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
    limits = sv.Limits(publish_per_second=None, publish_concurrency=CONCURRENCY)
    records = [record(i) for i in range(n)]
    ideal = n / CONCURRENCY * LATENCY_MS / 1000
    scen = f"2. latency {LATENCY_MS} ms"
    print(f"{scen}, {CONCURRENCY} in flight, batch 1, {n:,} records, ideal {ideal:.2f} s")
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        emu.set_faults(latency_ms=LATENCY_MS)
        tok = token(emu)
        client = ours_client(emu, limits)

        def ours():
            check_report(client.publish(records, progress=False), n)

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
            ("ours", lambda c: check_report(c.publish(records, progress=False), n)),
            ("(a) requests", lambda c: post_requests(emu, tok, records, 1, per_second=RATE)),
            ("(b) aiohttp", lambda c: post_aiohttp(emu, tok, records, 1, IN_FLIGHT, RATE)),
        ]
        for name, run in runs:
            # A fresh bucket for each client: the emulator's starts full (one second of burst).
            emu.set_limits(publish_per_second=RATE, publish_concurrency=IN_FLIGHT)
            client = ours_client(emu, sv.Limits()) if name == "ours" else None
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


def run(quick: bool = False) -> str:
    """Runs every scenario; returns the markdown section."""
    mode = "quick" if quick else "full"
    sizes, repeats = SIZES[mode], REPEATS[mode]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    results: list = []
    scenario_memory(sizes, results)  # first, while this process is small
    scenario_unlimited(sizes, repeats, results)
    scenario_latency(sizes, results)
    scenario_limits(sizes, results)
    took = time.perf_counter() - t0
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    host = (
        f"{os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.system()} {platform.release()} ({platform.machine()}), surveillance "
        f"{sv.__version__}"
    )
    notes = [
        "- Records: retail transactions with three items (about 600 bytes of JSON each), the "
        "same list of dicts for every client; ours validates each one (the default), the "
        "baselines do not (the row `ours, validate=False` does the same work as they do). "
        "Tokens are fetched before timing.",
        f"- **1**: ours with `Limits(publish_per_second=None, publish_concurrency={CONCURRENCY})`"
        f", (b) with {CONCURRENCY} in flight, (a) sequential (at batch 1 on the first "
        f"{REQUESTS_CAP_B1:,} records: its rate is steady); best of {repeats}. Result: ours' "
        "records/s over (a)'s and (b)'s. The emulator runs in this process and validates "
        "every record too, so its own cost is in every figure. `ours, file, validate=False` "
        "publishes the same records from a JSON Lines file (read in Rust), without "
        "validation: the least work a client can do, so about the most the emulator "
        "accepts here.",
        f"- **2**: `emu.set_faults(latency_ms={LATENCY_MS})`; ideal = requests / {CONCURRENCY} "
        f"× {LATENCY_MS} ms.",
        f"- **3**: `emu.set_limits(publish_per_second={RATE:.0f}, publish_concurrency="
        f"{IN_FLIGHT})`, the published webhook limits, fresh for each client; ours with the "
        "default `sv.Limits()` (the same limits), (a) and (b) paced to 100/s. Allowed rate = "
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
            f"`python bench/publish.py{' --quick' if quick else ''}` ({mode} sizes), {date}, "
            f"took {took:.0f} s.",
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


def write_section(output: Path, text: str) -> None:
    """Replaces this benchmark's `# ` section of `output`, keeping the others."""
    old = output.read_text() if output.exists() else ""
    parts: dict = {}
    for chunk in ("\n" + old).split("\n# ")[1:]:
        parts[chunk.split("\n", 1)[0]] = "# " + chunk.rstrip("\n")
    parts[TITLE] = text.rstrip("\n")
    output.write_text("\n\n".join(parts.values()) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--output", type=Path, default=None, help="default bench/RESULTS.md")
    args = parser.parse_args()
    text = run(args.quick)
    print()
    print(text)
    output = args.output or (None if args.quick else HERE / "RESULTS.md")
    if output is not None:
        write_section(output, text)
        print(f"written to {output}")


if __name__ == "__main__":
    main()
