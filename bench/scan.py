"""Memory and cost of `sv.scan_events` on a large range, against `iter_events`, a whole
`client.events(output="polars")` and a pure-Python fetch, each client in a fresh process, the
emulator in its own.

    python bench/scan.py [--days 20] [--events-per-day 50000] [--write]

The emulator runs as `surveillance emulator --port 0` (pinned to CPU 1 by default); each client
is a fresh `python` process (pinned to CPU 0) that reads the same range and reports its wall
time, its own CPU time (`getrusage(RUSAGE_SELF)`, all its threads), its peak resident size
(`VmHWM`, and its size before the read), the rows it saw and the event requests it sent.
`--write` replaces the "Lazy polars scan" section of `bench/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TITLE = "# Lazy polars scan"

#: Each client: what it runs on the range `A`, `B` with `client` (ours) or the credentials.
CLIENTS = {
    "iter": (
        "ours `client.iter_events(a, b)`, counted",
        "rows = sum(1 for _ in client.iter_events(A, B, progress=False))",
    ),
    "scan_len": (
        "ours `scan_events(client).filter(a <= startTime < b).select(pl.len())`, streaming",
        "rows = sv.scan_events(client).filter(WHERE).select(pl.len())"
        '.collect(engine="streaming").item()',
    ),
    "scan_group": (
        'ours `scan_events(...).group_by("siteId").agg(pl.len())`, streaming',
        'rows = sv.scan_events(client).filter(WHERE).group_by("siteId").agg(pl.len())'
        '.collect(engine="streaming")["len"].sum()',
    ),
    "events": (
        'ours `client.events(a, b, output="polars")`, the whole frame',
        'rows = client.events(A, B, output="polars", progress=False).height',
    ),
    "baseline": (
        "(b) aiohttp + orjson (`bench/baselines.py`), then `pl.DataFrame(records)`",
        "records = baselines.fetch_events_aiohttp(URL, KEY, baselines.fetch_token(URL, KEY, CID, "
        "SECRET, AUD), A, B, concurrency=16)\nrows = pl.DataFrame(records).height",
    ),
}

CHILD = r"""
import datetime as dt, json, os, resource, sys, time
sys.path.insert(0, {here!r})
import polars as pl
import surveillance as sv
import baselines

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

URL, KEY = os.environ["SURVEILLANCE_BASE_URL"], os.environ["SURVEILLANCE_API_KEY"]
CID, SECRET = os.environ["SURVEILLANCE_CLIENT_ID"], os.environ["SURVEILLANCE_CLIENT_SECRET"]
AUD = os.environ.get("SURVEILLANCE_AUDIENCE", "")
A = dt.datetime.fromisoformat({a!r})
B = dt.datetime.fromisoformat({b!r})
WHERE = (pl.col("startTime") >= A) & (pl.col("startTime") < B)
client = sv.Client(limits=sv.Limits.unlimited())
client.access_token()
import aiohttp, orjson, pyarrow  # imported before the baseline line: not in its figures
before = rss()
usage = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
{code}
wall = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
# Ours: what the client sent; the baseline: what it counted (the client sent none).
requests = client.stats()["requests"].get("GET /v2/events", 0) + baselines.SENT["events"]
print(json.dumps({{"rows": int(rows), "wall": wall, "cpu": cpu, "peak": peak(),
                  "before": before, "requests": requests,
                  "affinity": sorted(os.sched_getaffinity(0))}}))
"""


def start_emulator(days: int, per_day: int, cpus: str) -> tuple:
    """`surveillance emulator --port 0` in its own process; its exported settings."""
    cmd = ["surveillance", "emulator", "--port", "0", "--sites", "40", "--days", str(days)]
    cmd += ["--events-per-day", str(per_day)]
    proc = subprocess.Popen(
        (["taskset", "-c", cpus] if cpus else []) + cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    env = {}
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.match(r"export (\w+)=(.*)", line.strip())
        if m:
            env[m.group(1)] = m.group(2).strip("'\"")
        if "SURVEILLANCE_BASE_URL" in env and "SURVEILLANCE_CLIENT_SECRET" in env and not m:
            break
    if "SURVEILLANCE_BASE_URL" not in env:
        proc.kill()
        raise SystemExit("the emulator printed no settings")
    return proc, env


def run_client(code: str, a: str, b: str, env: dict, cpus: str) -> dict:
    child = CHILD.format(here=str(HERE), a=a, b=b, code=code)
    out = subprocess.run(
        (["taskset", "-c", cpus] if cpus else []) + [sys.executable, "-c", child],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise SystemExit(f"client failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--events-per-day", type=int, default=50_000)
    parser.add_argument("--server-cpus", default="1")
    parser.add_argument("--client-cpus", default="0")
    parser.add_argument("--only", nargs="*", choices=sorted(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = parser.parse_args()

    started = time.time()
    load0 = os.getloadavg()
    proc, env = start_emulator(args.days, args.events_per_day, args.server_cpus)
    a = "2026-01-05T00:00:00+00:00"
    b = (dt.datetime.fromisoformat(a) + dt.timedelta(days=args.days)).isoformat()
    results = {}
    try:
        for name in args.only:
            label, code = CLIENTS[name]
            results[name] = run_client(code, a, b, env, args.client_cpus)
            print(name, results[name], file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    load1 = os.getloadavg()
    rows = {r["rows"] for r in results.values()}
    if len(rows) != 1:
        raise SystemExit(f"the clients saw different rows: {results}")
    (n,) = rows
    minimum = math.ceil(n / 100)
    base = results.get("baseline")
    lines = [
        TITLE,
        "",
        f"`python bench/scan.py --days {args.days} --events-per-day {args.events_per_day}`, "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, took "
        f"{time.time() - started:.0f} s.",
        "",
        f"Machine: {os.cpu_count()} CPUs, CPython {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end.",
        "",
        f"The same range, {n:,} events ({args.days} days), read by each client in a fresh "
        "process (CPU "
        f"{args.client_cpus or 'any'}) from `surveillance emulator` in its own (CPU "
        f"{args.server_cpus or 'any'}); `Limits.unlimited()` (16 requests in flight for ours "
        "and (b)). Every client saw the same number of rows.",
        "",
        "| client | rows | requests (min) | wall (s) | CPU (s) | peak RSS (MB) | RSS before (MB) "
        "| (b) peak / peak | (b) CPU / CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in args.only:
        r = results[name]
        ratio_mem = ratio_cpu = ""
        if base is not None and name != "baseline":
            ratio_mem = f"{base['peak'] / r['peak']:.1f}×"
            ratio_cpu = f"{base['cpu'] / r['cpu']:.1f}×"
        requests = f"{r['requests']:,} ({minimum:,})"
        lines.append(
            f"| {CLIENTS[name][0]} | {r['rows']:,} | {requests} | {r['wall']:.2f} | "
            f"{r['cpu']:.2f} | {r['peak'] / 2**20:,.0f} | {r['before'] / 2**20:,.0f} | "
            f"{ratio_mem} | {ratio_cpu} |"
        )
    lines += [
        "",
        "- **peak RSS**: the client process's `VmHWM` at the end (its largest resident size, "
        "imports included); **RSS before**: its `VmRSS` after the imports and the token, "
        "before the read. A bounded read's peak stays near its size before, whatever the "
        "range; a whole frame's grows with it.",
        "- **CPU**: `getrusage(RUSAGE_SELF)` around the read, user + system, all threads. "
        "**requests**: `GET /v2/events` the client sent (ours: `client.stats()`; (b): its "
        "own count, retries included). The minimum is `ceil(N/100)`.",
        "",
    ]
    # `run.write` prints the section, and replaces its own section of the file with it (this
    # script's folder is on the path, as for any script).
    import run

    run.write(HERE / "RESULTS.md" if args.write else None, {TITLE: "\n".join(lines)})


if __name__ == "__main__":
    main()
