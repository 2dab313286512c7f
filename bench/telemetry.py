"""Telemetry benchmark: what OpenTelemetry costs the client, in CPU time.

    python bench/telemetry.py          # full sizes: its section of bench/RESULTS.md
    python bench/telemetry.py --quick  # small sizes, prints only

The emulator runs in its own process (``surveillance emulator``); each measurement is a fresh
client process, in one of three modes: ``off`` (OpenTelemetry not imported), ``api`` (the API
imported, no provider configured: the API's defaults) and ``sdk`` (the SDK's tracer and meter
providers, with an in-memory span exporter behind a ``SimpleSpanProcessor`` and an in-memory
metric reader). The client's CPU is ``getrusage(RUSAGE_SELF)`` (user + system, every thread of
the client process) around the call alone, after its token is fetched. Two calls: the fetch of
every event of a range (``output="arrow"``, the cheapest output, where an overhead shows most)
and a publish at ``batch_size=1`` (one request a record). The modes run in turn, run after run,
so that a machine's load falls on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODES = ("off", "api", "sdk")
#: The client before telemetry, with ``--baseline DIR`` (a checkout of it, built in place).
BASELINE = "before"
#: (sites, days, events a day, records published, runs)
SIZES = {"full": (20, 10, 100_000, 5_000, 3), "quick": (5, 2, 10_000, 500, 2)}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(mode: str, work: str, start: str, end: str, records: int) -> None:
    """One measurement, in this process: prints a line of JSON."""
    spans: Any = None
    if mode in ("api", "sdk"):
        from opentelemetry import metrics, trace  # noqa: F401

    if mode == "sdk":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    import surveillance as sv

    sys.path.insert(0, str(HERE))
    from publish import record  # the publish benchmark's retail record

    limits = sv.Limits(
        read_per_second=None,
        read_concurrency=16,
        publish_per_second=None,
        publish_concurrency=32,
        daily_requests=None,
    )
    client = sv.Client(limits=limits, cache=False)
    client.access_token()
    before = sum(client.stats()["requests"].values())
    if work == "fetch":
        data: Any = None
        t0, c0 = time.perf_counter(), _cpu()
        table = client.events(start, end, output="arrow", progress=False)
        cpu, wall = _cpu() - c0, time.perf_counter() - t0
        import pyarrow as pa

        count = pa.table(table).num_rows
    else:
        data = [record(i) for i in range(records)]
        t0, c0 = time.perf_counter(), _cpu()
        report = client.publish(data, batch_size=1, progress=False)
        cpu, wall = _cpu() - c0, time.perf_counter() - t0
        count = report.accepted
    requests = sum(client.stats()["requests"].values()) - before
    made = len(spans.get_finished_spans()) if spans is not None else 0
    client.close()
    print(
        json.dumps({"cpu": cpu, "wall": wall, "count": count, "requests": requests, "spans": made})
    )


def _emulator(sites: int, days: int, per_day: int) -> tuple[subprocess.Popen, dict, list]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "surveillance.cli", "emulator", "--port", "0", "--sites",
         str(sites), "--days", str(days), "--events-per-day", str(per_day)],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("SURVEILLANCE_")},
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list = []
    while not lines or not lines[-1].startswith("# events from"):
        lines.append(proc.stdout.readline())
        assert lines[-1], f"the emulator ended: {lines}"
    exports = {}
    for line in lines:
        if line.startswith("export "):
            name, value = line[len("export ") :].strip().split("=", 1)
            exports[name] = value.strip("'")
    return proc, exports, lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", nargs=5, metavar=("MODE", "WORK", "START", "END", "RECORDS"))
    p.add_argument(
        "--baseline",
        metavar="DIR",
        help="also measure the package of DIR/python (the tree before telemetry, built in "
        "place), telemetry off: the row `before`",
    )
    args = p.parse_args()
    if args.child:
        mode, work, start, end, records = args.child
        child(mode, work, start, end, int(records))
        return
    size = "quick" if args.quick else "full"
    sites, days, per_day, records, runs = SIZES[size]
    load_before = os.getloadavg()
    began = time.time()
    proc, exports, lines = _emulator(sites, days, per_day)
    start = datetime.fromisoformat(lines[-1].split()[3])
    end = start + timedelta(days=days)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURVEILLANCE_")}
    env.update(exports)
    env["SURVEILLANCE_QUOTA_DIR"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "bench-quota")
    modes = ((BASELINE,) if args.baseline else ()) + MODES
    results: dict = {(m, w): [] for m in modes for w in ("fetch", "publish")}
    try:
        for run in range(runs):
            for work in ("fetch", "publish"):
                for mode in modes:
                    child_env = env
                    if mode == BASELINE:
                        child_env = {**env, "PYTHONPATH": str(Path(args.baseline) / "python")}
                    out = subprocess.run(
                        [sys.executable, __file__, "--child",
                         "off" if mode == BASELINE else mode, work, start.isoformat(),
                         end.isoformat(), str(records)],
                        env=child_env, capture_output=True, text=True, check=True,
                    )  # fmt: skip
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    results[(mode, work)].append(r)
                    print(run, work, mode, r, flush=True)
    finally:
        proc.terminate()
        proc.wait()
    events = results[("off", "fetch")][0]["count"]
    rows = []
    for work, n in (("fetch", events), ("publish", records)):
        base = statistics.median(r["cpu"] for r in results[(modes[0], work)])
        for mode in modes:
            rs = results[(mode, work)]
            cpus = sorted(r["cpu"] for r in rs)
            med = statistics.median(cpus)
            floor = math.ceil(n / 100) if work == "fetch" else n
            rows.append(
                f"| {work} | {mode} | {n:,} | {statistics.median(r['wall'] for r in rs):.2f} | "
                f"{med:.2f} | {cpus[0]:.2f}–{cpus[-1]:.2f} | {(med / base - 1) * 100:+.1f}% | "
                f"{1e6 * (med - base) / max(rs[0]['requests'], 1):+.0f} | "
                f"{rs[0]['requests']:,} ({floor:,}) | {rs[0]['spans']:,} |"
            )
    table = "\n".join(
        [
            "| call | telemetry | events / records | wall (s) | CPU (s), median | CPU spread "
            f"(min–max) | CPU vs {modes[0]} | CPU µs per request vs {modes[0]} | "
            "requests (minimum) | spans |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    import surveillance as sv

    now = datetime.now(timezone.utc)
    text = f"""# Telemetry benchmark

`python bench/telemetry.py`, {now:%Y-%m-%d %H:%M} UTC, took {time.time() - began:.0f} s.

Machine: {os.cpu_count()} CPUs, CPython {platform.python_version()}, {platform.system()} \
{platform.release()}, surveillance {sv.__version__}; load average {load_before[0]:.2f}, \
{load_before[1]:.2f}, {load_before[2]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.

{table}

- **Modes**: `before`, the client before telemetry (when measured: `--baseline`), with
  OpenTelemetry not imported; `off`, the same with this client; `api`, `opentelemetry-api`
  imported with no provider configured; `sdk`, the SDK's providers with an in-memory span exporter
  (`SimpleSpanProcessor`) and an in-memory metric reader: a span per call and per request, a
  duration and a count per request.
- **CPU**: `getrusage(RUSAGE_SELF)` of the client process around the call alone (user + system,
  every thread); the emulator (`surveillance emulator`, {sites} sites, {days} days of
  {per_day:,} events) runs in its own process. Each measurement is a fresh client process;
  the modes run in turn, {runs} runs each, on a machine shared with other work: the
  spread says how much of a difference is noise.
- **fetch**: `client.events(start, end, output="arrow")` of every event of the emulator, 16
  requests in flight, no rate limit; **publish**: {records:,} retail records at
  `batch_size=1`, 32 in flight. **requests**: what the client sent (token excluded), beside
  the minimum (ceil(N/100) pages for the fetch, one per record for the publish).
"""
    print(text)
    if not args.quick:
        path = HERE / "RESULTS.md"
        old = path.read_text()
        head, _, rest = old.partition("# Telemetry benchmark\n")
        after = rest.partition("\n# ")[2]
        tail = "\n# " + after if after else ""
        path.write_text(head.rstrip("\n") + "\n\n" + text + tail)


if __name__ == "__main__":
    main()
