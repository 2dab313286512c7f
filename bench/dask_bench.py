"""Dask benchmark: a range of events fetched by ``surveillance.dask.events`` on one and two
worker processes against one process (``client.events``), at 50 ms of emulator latency. The
cluster shares the key's limits (its read concurrency here), as one process holds them.

    python bench/dask_bench.py            # full sizes, prints the section (bench/run.py writes it)
    python bench/dask_bench.py --quick    # small sizes, a smoke test
"""

from __future__ import annotations

import argparse
import os
import time

import surveillance as sv
import surveillance.dask as svd

LATENCY_MS = 50
CONCURRENCY = 4  # read_concurrency of the key: of one process, or shared by the cluster
WORKERS = 2
#: Partitions fetched at once by a worker process; its client's read_concurrency is shared by
#: them, so a partition's first round trips overlap another's pages.
THREADS = 2
# (sites, days, events_per_day), partition, repeats
SIZES = {
    "full": ((20, 2, 40_000), "6h", 3),
    "quick": ((10, 1, 20_000), "6h", 1),
}
LIMITS = sv.Limits(
    read_per_second=None,
    read_concurrency=CONCURRENCY,
    publish_per_second=None,
    publish_concurrency=None,
    daily_requests=None,
)


def _requests(emu: sv.Emulator) -> int:
    return int(emu.stats()["requests"].get("GET /v2/events", {}).get("200", 0))


def _check(ids: list, truth: list) -> None:
    if ids != truth:
        raise AssertionError(f"not exact: {len(ids):,} events, expected {len(truth):,}")


def _one_process(emu: sv.Emulator, truth: list, repeats: int) -> tuple:
    """(seconds, requests) of ``client.events`` in this process, best of ``repeats``."""
    client = emu.client(limits=LIMITS)
    client.access_token()
    best = None
    for _ in range(repeats):
        emu.reset_stats()
        t0 = time.perf_counter()
        frame = client.events(emu.start, emu.end, output="pandas", progress=False)
        seconds = time.perf_counter() - t0
        _check(frame["id"].tolist(), truth)
        del frame
        best = min(best or (seconds, _requests(emu)), (seconds, _requests(emu)))
    return best


def _on_dask(emu: sv.Emulator, truth: list, workers: int, partition: str, repeats: int) -> dict:
    """Seconds and requests of ``persist`` (the range fetched into the workers' memory) and of
    ``compute`` (gathered into one pandas DataFrame here), best of ``repeats`` each."""
    from dask.distributed import Client as DaskClient
    from dask.distributed import LocalCluster, wait

    client = emu.client(limits=LIMITS)
    out: dict = {}
    with (
        LocalCluster(
            n_workers=workers,
            processes=True,
            threads_per_worker=THREADS,
            dashboard_address="127.0.0.1:0",
            host="127.0.0.1",
        ) as cluster,
        DaskClient(cluster),
    ):
        # Warm the workers up: imports, and each process's client with its token.
        svd.events(client, emu.start, emu.start.replace(hour=1), partition="5min").compute()
        out["partitions"] = svd.events(client, emu.start, emu.end, partition=partition).npartitions
        for _ in range(repeats):
            ddf = svd.events(client, emu.start, emu.end, partition=partition)
            emu.reset_stats()
            t0 = time.perf_counter()
            held = ddf.persist()
            wait(held)
            seconds = time.perf_counter() - t0
            requests = _requests(emu)
            _check(held.compute()["id"].tolist(), truth)
            del held
            out["persist"] = min(out.get("persist", (seconds, requests)), (seconds, requests))
            emu.reset_stats()
            t0 = time.perf_counter()
            frame = ddf.compute()
            seconds = time.perf_counter() - t0
            requests = _requests(emu)
            _check(frame["id"].tolist(), truth)
            del frame
            out["compute"] = min(out.get("compute", (seconds, requests)), (seconds, requests))
    return out


def run(quick: bool) -> str:
    """Runs the benchmark; returns the markdown section."""
    mode = "quick" if quick else "full"
    (sites, days, per_day), partition, repeats = SIZES[mode]
    t0 = time.perf_counter()
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    with sv.Emulator(seed=0, sites=sites, days=days, events_per_day=per_day) as emu:
        truth = emu.truth(emu.start, emu.end)
        n = len(truth)
        emu.set_faults(latency_ms=LATENCY_MS)
        print(f"dask: {n:,} events, latency {LATENCY_MS} ms, {CONCURRENCY} in flight a process")
        one = _one_process(emu, truth, repeats)
        print(f"  one process              {one[0]:6.2f} s  {one[1]} requests", flush=True)
        runs = {}
        for workers in (1, WORKERS):
            runs[workers] = _on_dask(emu, truth, workers, partition, repeats)
            for kind in ("persist", "compute"):
                s, req = runs[workers][kind]
                print(
                    f"  dask {workers} worker(s) {kind:<8} {s:6.2f} s  {req} requests", flush=True
                )
    load_end = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    took = time.perf_counter() - t0
    parts = runs[WORKERS]["partitions"]

    rows = [('one process: `client.events(output="pandas")`', 1, one, False)]
    for workers in (1, WORKERS):
        label = f"{workers} worker{'s' if workers > 1 else ''}"
        rows.append((f"Dask, {label}: `ddf.persist()` (held by the workers)", workers,
                     runs[workers]["persist"], False))  # fmt: skip
        rows.append((f"Dask, {label}: `ddf.compute()` (gathered here)", workers,
                     runs[workers]["compute"], False))  # fmt: skip
    lines = [
        "| run | processes | events | time (s) | events/s | requests | ideal (s) | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, procs, (s, req), bold in rows:
        ideal = req / CONCURRENCY * LATENCY_MS / 1000
        ratio = f"{one[0] / s:.2f}×"
        lines.append(
            f"| {name} | {procs} | {n:,} | {s:.2f} | {n / s:,.0f} | {req:,} | {ideal:.2f} | "
            f"{f'**{ratio}**' if bold else ratio} |"
        )
    notes = "\n".join(
        [
            f"- Emulator latency {LATENCY_MS} ms on every answer, no server limits; the client "
            f"has `Limits(read_per_second=None, read_concurrency={CONCURRENCY}, ..., "
            "daily_requests=None)`, the key's limits, which a cluster shares (a "
            "`distributed.Semaphore` gives one reading task at a time the key's limits): the "
            f"workers take turns at the same {CONCURRENCY} requests in flight as one process, "
            "so they do not read "
            "faster, and what a run on the cluster costs over one process is its coordination "
            "(scheduler round trips) and the gathering.",
            f"- Dask: `LocalCluster(n_workers=N, processes=True, threads_per_worker={THREADS})`; "
            f'`surveillance.dask.events(client, start, end, partition="{partition}")`:'
            f" {parts} partitions. **persist**: the range fetched into the workers' memory (how "
            "a Dask job holds data larger than one process); **compute**: also gathered into "
            "one pandas DataFrame in this process. Workers warmed up (imports, their client "
            "and token) and the one-process client's token fetched before timing.",
            "- ideal = requests / concurrency × latency. requests: `GET /v2/events`"
            " answered 200, as counted by the emulator. Every run is checked against "
            f"`emu.truth` (ids, in order); best of {repeats}. The emulator runs in this "
            "process; the machine is shared, so times vary with its load.",
        ]
    )
    return "\n".join(
        [
            "# Dask benchmark",
            "",
            f"`python bench/dask_bench.py{' --quick' if quick else ''}` ({mode} sizes), took "
            f"{took:.0f} s; {os.cpu_count()} CPUs, load average (1, 5, 15 min) {load_start} "
            f"at the start, {load_end} at the end.",
            "",
            *lines,
            "",
            notes,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    print(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
