"""A week of a whole chain's dwell-time events, fetched in parallel on a Dask cluster and
written as a Parquet dataset partitioned by UTC date (``events/date=2026-01-05/...``).

    pip install 'surveillance[dask]'
    python examples/dask_parquet.py                        # the local emulator, 2 workers
    python examples/dask_parquet.py --account --start 2026-01-01 --end 2026-02-01 \\
        --scheduler tcp://scheduler:8786                    # your account (SURVEILLANCE_*)

The result reads back with ``pandas.read_parquet("events")``, ``pyarrow.dataset``, duckdb or
polars; the ``date`` directories make a date filter read only its files.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import surveillance as sv
import surveillance.dask as svd


def write_dataset(client: sv.Client, start: Any, end: Any, path: Any) -> Any:
    """Fetches ``[start, end)`` one UTC day per partition, on the workers of the current Dask
    scheduler, and writes it to ``path`` partitioned by date; returns the dask DataFrame."""
    ddf = svd.events(client, start, end, partition="1D").reset_index()
    ddf["date"] = ddf["startTime"].dt.strftime("%Y-%m-%d")
    ddf.to_parquet(Path(path), partition_on=["date"], write_index=False)
    return ddf


def read_dataset(path: Any) -> Any:
    """The dataset as one pandas DataFrame, sorted by ``startTime``. (``dtype_backend="pyarrow"``
    reads the nested columns, ``locationTags`` and ``cameras``, that pandas otherwise fails to
    read back: pandas-dev/pandas#57411; duckdb, polars and ``pyarrow.dataset`` read the
    dataset as is.)"""
    import pandas as pd

    frame = pd.read_parquet(path, dtype_backend="pyarrow")
    return frame.sort_values(["startTime", "id"], ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default="events", help="dataset directory (default: events)")
    parser.add_argument("--start", default="2026-01-05")
    parser.add_argument("--end", default="2026-01-12")
    parser.add_argument("--account", action="store_true", help="use SURVEILLANCE_* credentials")
    parser.add_argument("--scheduler", help="address of a Dask scheduler (default: a local one)")
    args = parser.parse_args()

    from dask.distributed import Client as DaskClient
    from dask.distributed import LocalCluster

    emu = None if args.account else sv.Emulator(sites=50, days=7, events_per_day=20_000)
    if args.scheduler:
        cluster = None
        dask_client = DaskClient(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")
        dask_client = DaskClient(cluster)
    try:
        client = sv.Client() if emu is None else emu.client()
        t0 = time.perf_counter()
        ddf = write_dataset(client, args.start, args.end, args.path)
        seconds = time.perf_counter() - t0
        dates = sorted(p.name for p in Path(args.path).iterdir() if p.is_dir())
        print(f"{ddf.npartitions} partitions in {seconds:.1f} s: {', '.join(dates)}")
        frame = read_dataset(args.path)
        print(frame.groupby("date", observed=True)["details.duration_sec"].describe())
    finally:
        dask_client.close()
        if cluster is not None:
            cluster.close()
        if emu is not None:
            emu.stop()


if __name__ == "__main__":
    main()
