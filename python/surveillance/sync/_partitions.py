"""The date partitions of a dataset: fetched events merged by id into the partition of their
startTime's UTC date, a day at a time, and a partition's file read back."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Dict

from ..errors import ConfigError, arg, worded


class _PartitionWriter:
    """Merges fetched events into their date partitions, a day at a time.

    The client returns events sorted by startTime, so once a chunk reaches a later date, the
    earlier dates of the run are complete and are written at once (memory stays at about a
    day of events). Correctness does not rest on that order: a date seen again is merged again.
    """

    def __init__(self, store: Any, pa: Any, pq: Any) -> None:
        self.store, self.pa, self.pq = store, pa, pq
        self.pending: Dict[int, list[Any]] = {}
        self.added = 0
        self.replaced = 0
        self.written: set[Any] = set()

    def consume(self, table: Any) -> None:
        """Takes the events of ``table`` (the client's events schema)."""
        pa = self.pa
        if table.num_rows == 0:
            return
        import pyarrow.compute as pc  # optional: pyarrow

        table = table.combine_chunks()
        days = _day_numbers(pa, table.column("startTime").combine_chunks())
        # Arrow scalars, not Python ints: converting a Python value makes pyarrow import
        # pandas (most of a short run's time in a fresh process).
        unique = pc.unique(days)
        for day in unique:
            part = table if len(unique) == 1 else table.filter(pc.equal(days, day))
            self.pending.setdefault(day.as_py(), []).append(part)
        latest = pc.max(unique).as_py()
        for d in sorted(d for d in self.pending if d < latest):
            self._flush(d)

    def finish(self) -> None:
        """Writes the dates still pending."""
        for day in sorted(self.pending):
            self._flush(day)

    def _flush(self, day: int) -> None:
        """Merges the pending events of ``day`` into its partition; they stay pending until
        it is written, so that a run interrupted here still writes them as it ends."""
        pa, pq = self.pa, self.pq
        fetched = _dedupe(pa, pa.concat_tables(self.pending[day]))
        name = _date_name(day)
        old = self.store.read_partition(name, pq)
        if old is not None and not old.schema.equals(fetched.schema):
            old = old.cast(fetched.schema)
        if old is None or old.num_rows == 0:
            merged, replaced = fetched, 0
        else:
            import pyarrow.compute as pc  # optional: pyarrow

            seen_again = pc.is_in(old.column("id"), value_set=fetched.column("id"))
            replaced = int(pc.sum(seen_again).as_py() or 0)
            merged = pa.concat_tables([old.filter(pc.invert(seen_again)), fetched])
        merged = merged.sort_by([("startTime", "ascending"), ("id", "ascending")])
        # The events fetched again are unchanged: nothing to write.
        if old is None or not merged.equals(old):
            self.store.write_partition(name, lambda f: pq.write_table(merged, f))
            self.written.add(name)
        del self.pending[day]
        self.replaced += replaced
        self.added += fetched.num_rows - replaced


def _day_numbers(pa: Any, times: Any) -> Any:
    """Days since 1970-01-01 of the UTC dates of a ``timestamp[ms, UTC]`` array (int32)."""
    return times.cast(pa.timestamp("ms", "UTC")).cast(pa.date32()).cast(pa.int32())


def _dedupe(pa: Any, table: Any) -> Any:
    """``table`` with one row per id (the last one), as the client guarantees already."""
    import pyarrow.compute as pc  # optional: pyarrow

    if pc.count_distinct(table.column("id")).as_py() == table.num_rows:
        return table
    last = {v: i for i, v in enumerate(table.column("id").to_pylist())}
    return table.take(pa.array(sorted(last.values()), pa.int64()))


def _date_name(day: int) -> str:
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=day)).isoformat()


def _read_partition(pq: Any, source: Any, shown: str) -> Any:
    """The table of a partition's file (a path or an open file), named ``shown`` in errors."""
    try:
        return pq.ParquetFile(source).read()
    except Exception as e:  # pyarrow's errors name neither the file nor the remedy
        raise worded(
            ConfigError,
            arg("path"),
            f": the dataset file `{shown}` cannot be read ({type(e).__name__}: "
            f"{str(e)[:200]}): it is damaged; restore it from a copy (nothing was "
            "written by this run), or sync into a new directory",
        ) from e
