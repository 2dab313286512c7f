"""Pure-Python baselines for the events benchmark: what a competent engineer would write
without this package.

(a) :func:`fetch_events_requests`: ``requests`` with one Session, paging sequentially with the
    cursor of API.md's "suggested pattern" (when the offset reaches 9,900 or a page is short,
    the next start is the last item's startTime + 1 ms, the offset goes back to 0, until the
    end). Simple, but every event that shares the last millisecond of a ceiling page with
    events of the next page is lost at the cursor jump.

(b) :func:`fetch_events_aiohttp`: ``aiohttp`` + ``orjson`` with many requests in flight, and
    exact: each window is queried widened by 1 ms on both sides and filtered locally (so the
    service's bound inclusivity does not matter), a window over the offset ceiling is found by
    probing its page at offset 9,900 and bisected, records are de-duplicated by id and sorted
    by ``(startTime, id)``.

Both retry 429 (honouring ``Retry-After``) and 5xx answers, and can pace themselves to a
published rate limit (``per_second``).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone
from typing import Optional

import aiohttp
import orjson
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

__all__ = ["fetch_token", "fetch_events_requests", "fetch_events_aiohttp", "SENT"]

#: ``GET /v2/events`` requests that :func:`fetch_events_aiohttp` sent in this process, retries
#: included, for the benchmarks that show them beside the minimum.
SENT = {"events": 0}

PAGE = 100
CEILING_OFFSET = 9_900  # the last offset the service accepts (offset >= 10,000 is refused)
RETRY_STATUSES = (429, 500, 502, 503, 504)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_MS = timedelta(milliseconds=1)


# --- time helpers ---------------------------------------------------------------------------
def to_ms(value: datetime) -> int:
    """An aware datetime (naive is taken as UTC) as Unix epoch milliseconds."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return (value - EPOCH) // ONE_MS


def iso_z(ms: int) -> str:
    """Epoch milliseconds in the query format of the service: UTC, milliseconds, ``Z``."""
    dt = EPOCH + timedelta(milliseconds=ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def event_ms(event: dict) -> int:
    """An event's startTime (ISO 8601 with milliseconds and a UTC offset) in epoch ms."""
    return (datetime.fromisoformat(event["startTime"]) - EPOCH) // ONE_MS


# --- token ----------------------------------------------------------------------------------
def fetch_token(
    base_url: str, api_key: str, client_id: str, client_secret: str, audience: str
) -> str:
    """A bearer token from ``POST /v2/oauth/token``."""
    r = requests.post(
        base_url.rstrip("/") + "/v2/oauth/token",
        json={"audience": audience, "client_id": client_id, "client_secret": client_secret},
        headers={"x-api-key": api_key, "accept": "application/json"},
        timeout=30,
    )
    r.raise_for_status()
    return r.json()["access_token"]


def _headers(api_key: str, token: str) -> dict:
    return {
        "x-api-key": api_key,
        "authorization": f"Bearer {token}",
        "accept": "application/json",
    }


# --- (a) requests, sequential cursor --------------------------------------------------------
def fetch_events_requests(
    base_url: str,
    api_key: str,
    token: str,
    start: datetime,
    end: datetime,
    *,
    per_second: Optional[float] = None,
    max_retries: int = 5,
    timeout: float = 30.0,
) -> list[dict]:
    """Events of ``[start, end)`` paged sequentially with API.md's suggested cursor pattern.

    It trusts the service to sort by startTime ascending with ``[start, end)`` bounds, and it
    loses the events that share the cursor's millisecond at each jump (``last + 1 ms``).
    """
    retry = Retry(
        total=max_retries,
        backoff_factor=0.2,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"GET"}),
        respect_retry_after_header=True,
    )
    url = base_url.rstrip("/") + "/v2/events"
    end_iso = iso_z(to_ms(end))
    cursor, stop = to_ms(start), to_ms(end)
    offset = 0
    interval = 1.0 / per_second if per_second else 0.0
    next_slot = time.monotonic()
    out: list[dict] = []
    with requests.Session() as session:
        session.headers.update(_headers(api_key, token))
        session.mount("http://", HTTPAdapter(max_retries=retry))
        session.mount("https://", HTTPAdapter(max_retries=retry))
        while cursor < stop:
            if interval:
                now = time.monotonic()
                if next_slot > now:
                    time.sleep(next_slot - now)
                next_slot = max(now, next_slot) + interval
            params = {"startTime": iso_z(cursor), "endTime": end_iso, "offset": offset}
            r = session.get(url, params=params, timeout=timeout)
            r.raise_for_status()
            page = r.json()
            out.extend(page)
            if len(page) == PAGE and offset < CEILING_OFFSET:
                offset += PAGE
            elif len(page) < PAGE:
                # A short page: the window [cursor, end) is exhausted, so the end is reached.
                break
            else:
                # A full page at the ceiling: move the cursor past the last item.
                cursor = event_ms(page[-1]) + 1
                offset = 0
    return out


# --- (b) aiohttp + orjson, concurrent and exact ---------------------------------------------
class DenseWindowError(RuntimeError):
    """More than 10,000 events within a window that cannot be split further."""


class _Pacer:
    """Spaces request starts by ``1 / per_second`` (shared by every task of one fetch)."""

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._next = 0.0

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        at = max(now, self._next)
        self._next = at + self._interval
        if at > now:
            await asyncio.sleep(at - now)


class _Fetcher:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        concurrency: int,
        per_second: Optional[float],
        max_retries: int,
    ) -> None:
        self.session = session
        self.semaphore = asyncio.Semaphore(concurrency)
        self.pacer = _Pacer(per_second) if per_second else None
        self.max_retries = max_retries
        self.found: dict[str, tuple[int, dict]] = {}

    async def page(self, lo: int, hi: int, offset: int) -> list[dict]:
        """One page of the window ``[lo, hi)`` widened by 1 ms on both sides."""
        params = {"startTime": iso_z(lo - 1), "endTime": iso_z(hi + 1), "offset": str(offset)}
        for attempt in range(self.max_retries + 1):
            async with self.semaphore:
                if self.pacer is not None:
                    await self.pacer.wait()
                SENT["events"] += 1
                async with self.session.get("/v2/events", params=params) as r:
                    if r.status == 200:
                        return orjson.loads(await r.read())
                    if r.status not in RETRY_STATUSES or attempt == self.max_retries:
                        r.raise_for_status()
                        raise RuntimeError(f"unexpected HTTP {r.status} from {r.url}")
                    retry_after = r.headers.get("Retry-After", "")
                    delay = float(retry_after) if retry_after.isdigit() else 0.2 * 2**attempt
            await asyncio.sleep(delay)  # outside the semaphore: others may go on meanwhile
        raise AssertionError("unreachable: the last attempt returns or raises")

    def keep(self, lo: int, hi: int, page: list[dict]) -> None:
        """Keeps the events of ``[lo, hi)`` (the window was widened), once per id."""
        for event in page:
            t = event_ms(event)
            if lo <= t < hi:
                self.found.setdefault(event["id"], (t, event))

    async def window(self, lo: int, hi: int) -> None:
        probe = await self.page(lo, hi, CEILING_OFFSET)
        if len(probe) == PAGE:
            # At or over the ceiling: bisect the time range.
            if hi - lo <= 1:
                raise DenseWindowError(f"more than {CEILING_OFFSET + PAGE} events near {lo} ms")
            mid = (lo + hi) // 2
            await asyncio.gather(self.window(lo, mid), self.window(mid, hi))
        elif probe:
            # The window holds exactly 9,900 + len(probe): fetch all its pages at once.
            self.keep(lo, hi, probe)
            offsets = range(0, CEILING_OFFSET, PAGE)
            pages = await asyncio.gather(*(self.page(lo, hi, o) for o in offsets))
            for page in pages:
                self.keep(lo, hi, page)
        else:
            # Fewer than 9,900 records, how many unknown: a few pages in flight at a time
            # until a short one (the waste is at most the rest of the last wave).
            wave = 4
            offset = 0
            while offset < CEILING_OFFSET:
                offsets = range(offset, min(offset + wave * PAGE, CEILING_OFFSET), PAGE)
                pages = await asyncio.gather(*(self.page(lo, hi, o) for o in offsets))
                for page in pages:
                    self.keep(lo, hi, page)
                if any(len(page) < PAGE for page in pages):
                    break
                offset += wave * PAGE


async def _fetch_aiohttp(
    base_url: str,
    api_key: str,
    token: str,
    lo: int,
    hi: int,
    concurrency: int,
    per_second: Optional[float],
    max_retries: int,
    timeout: float,
) -> list[dict]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        base_url.rstrip("/"),
        headers=_headers(api_key, token),
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as session:
        fetcher = _Fetcher(session, concurrency, per_second, max_retries)
        await fetcher.window(lo, hi)
    ordered = sorted(fetcher.found.items(), key=lambda kv: (kv[1][0], kv[0]))
    return [event for _, (_, event) in ordered]


def fetch_events_aiohttp(
    base_url: str,
    api_key: str,
    token: str,
    start: datetime,
    end: datetime,
    *,
    concurrency: int = 16,
    per_second: Optional[float] = None,
    max_retries: int = 5,
    timeout: float = 30.0,
) -> list[dict]:
    """Every event of ``[start, end)`` exactly once, sorted by ``(startTime, id)``, with up to
    ``concurrency`` requests in flight (and at most ``per_second`` started a second)."""
    lo, hi = to_ms(start), to_ms(end)
    return asyncio.run(
        _fetch_aiohttp(
            base_url, api_key, token, lo, hi, concurrency, per_second, max_retries, timeout
        )
    )
