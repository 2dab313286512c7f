"""The progress of a long fetch, as a user sees it: a bar drawn before the first answer that
moves with every page (not with every window of 10,000 events), counts events and requests
against what the pages read so far let the client expect, and says how long is left at the
read rate; a plan that shows the requests it asks as it counts. On a pseudo-terminal for the
command line, through the progress callback for the API."""

from __future__ import annotations

import json
import re
import sys

import pytest
import surveillance as sv
from surveillance import _progress

from conftest import emulator_fixture, other, run_in_pty, service_env

# 1 day of 16,000 events: more than one window of 10,000, so a bar that moved only when a
# window completes would show no count between 0 and 10,000.
busy = emulator_fixture(seed=11, sites=4, days=1, events_per_day=16_000)

CLI = [sys.executable, "-m", "surveillance.cli"]
#: Fast enough for a test, slow enough (40 reads a second, 3 in flight) that the bar is drawn
#: many times within a window.
PACED = ["--read-per-second", "40", "--read-concurrency", "3"]
RANGE = ["--start", "2026-01-05", "--end", "2026-01-06"]
FRAME = re.compile(
    r"events: +(\d+)%\|[^|]*\| \[[\d:]+, ([\d,]+) events, ([\d,]+)(?: of ~([\d,]+))? requests"
    r"(?: \([\d.]+% of the day\))?(?:, ~(\w+) left)?"
)


def _in_pty(args: list, env: dict, cwd) -> tuple:
    """Runs the CLI on a pseudo-terminal wide enough for the bar's words."""
    return run_in_pty([*CLI, *args], env, cwd, columns=200)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.parametrize("name", ["day.parquet", "day.csv"])
def test_an_export_draws_its_bar_at_once_and_moves_it_page_by_page(tmp_path, busy, name):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    pytest.importorskip("tqdm")
    status, text = _in_pty(["events", *RANGE, "-o", name, *PACED], service_env(busy), tmp_path)
    assert status == 0, text
    frames = [m.groups() for m in FRAME.finditer(text)]
    assert frames, text
    truth = len(busy.truth("2026-01-05", "2026-01-06"))
    summary = re.search(r"wrote ([\d,]+) events .*?([\d,]+) requests", text)
    assert summary and _number(summary.group(1)) == truth, text
    requests = _number(summary.group(2))
    fetched = [_number(f[1]) for f in frames]
    # Drawn before the first answer (empty, before any count), and moved by pages inside the
    # first window: counts between 0 and one window's 10,000 events, several of them.
    blank = re.search(r"events: +0%\|[^|]*\| \[[\d:]+\]", text)
    assert blank and blank.start() < FRAME.search(text).start(), text
    assert len({n for n in fetched if 0 < n < 10_000}) >= 5, text
    assert fetched == sorted(fetched)
    # Requests expected and a time left from the first pages on. The expectation extends the
    # density of the pages read so far to the rest of the range, so it moves as a day's busy
    # hours come in, and closes in on the requests made as the fetch ends.
    expecting = [f for f in frames if f[3]]
    assert expecting and all(f[4] for f in expecting if int(f[0]) < 100), text
    assert _number(expecting[0][1]) < 2_000, expecting[0]
    late = [f for f in expecting if _number(f[1]) >= 0.9 * truth]
    assert late, text
    for frame in late:
        assert abs(_number(frame[3]) - requests) <= 0.1 * requests, (frame, requests)
    assert "%/s" not in text


def test_plan_on_a_terminal_shows_the_requests_it_asks(tmp_path, busy):
    pytest.importorskip("tqdm")
    status, text = _in_pty(["plan", *RANGE, *PACED], service_env(busy), tmp_path)
    assert status == 0, text
    asked = [
        int(n) for n in re.findall(r"plan: +\d+%\|[^|]*\| \[[\d:]+, (\d+) requests asked", text)
    ]
    assert asked and max(asked) > 0, text
    assert re.search(r"about [\d,]+ events", text), text
    status, text = _in_pty(["plan", *RANGE, *PACED, "--no-progress"], service_env(busy), tmp_path)
    assert status == 0 and "requests asked" not in text, text


@pytest.mark.parametrize("order", ["asc", "desc", "shuffled"])
def test_the_callback_expects_from_the_first_pages_and_ends_exact(busy, order):
    busy.set_semantics(order=order)
    # Paced, so that the callback sees many updates (it is handed the latest every 50 ms).
    client = busy.client(limits=sv.Limits(read_per_second=200, read_concurrency=3))
    updates: list = []
    start, end = busy.start, busy.start + (busy.end - busy.start)
    events = client.events(start, end, progress=updates.append)
    total = len(events)
    assert total > 10_000
    last = updates[-1]
    assert last["events"] == last["fetched"] == total
    assert last["expected_events"] == total
    assert last["expected_requests"] == last["requests"]
    assert last["requests"] == client.stats()["requests"]["GET /v2/events"]
    assert last["eta_s"] == 0
    # Something to expect within the first half of the fetch.
    first = next(i for i, u in enumerate(updates) if u["expected_events"] is not None)
    assert first < len(updates) // 2, updates[: first + 1]
    # It closes in on the truth as the fetch ends (the density of a day's hours differs, so
    # the first pages of a range tell its size only roughly).
    late = [u for u in updates if u["fetched"] >= 0.9 * total]
    assert late and all(abs(u["expected_events"] - total) <= 0.1 * total for u in late)


def test_event_batches_report_progress_before_the_first_batch_is_taken(busy):
    pa = pytest.importorskip("pyarrow")
    client = busy.client(limits=sv.Limits(read_per_second=None))
    updates: list = []
    stream = client.event_batches(busy.start, busy.end, progress=updates.append)
    # The first window is fetched before the stream is handed over: its pages were reported.
    assert updates and updates[-1]["fetched"] > 0
    rows = pa.RecordBatchReader.from_stream(stream).read_all().num_rows
    assert rows == len(busy.truth(busy.start, busy.end))
    assert updates[-1]["events"] == updates[-1]["fetched"] == rows
    assert updates[-1]["expected_requests"] == updates[-1]["requests"]
    with pytest.raises(TypeError, match="progress"):
        client.event_batches(busy.start, busy.end, progress="yes")  # type: ignore[arg-type]


def test_a_plan_hands_its_count_to_the_callback(busy):
    client = busy.client()
    updates: list = []
    plan = client.plan_events(busy.start, busy.end, progress=updates.append)
    assert updates and updates[-1]["requests"] == plan.probes
    assert updates[-1]["done_ms"] == updates[-1]["total_ms"]


@pytest.mark.parametrize("tqdm", [True, False], ids=["tqdm", "plain"])
def test_a_notebook_bar_that_showed_nothing_leaves_no_line(monkeypatch, tqdm):
    """A plan that asked nothing (its bar got no update) leaves no "plan: nothing" line in the
    cell; one that did ends as its last line."""
    from surveillance import _progress

    shown: list = []

    class Handle:
        def update(self, obj, **_):
            shown.append(obj)

    class Bar:
        container = object()

        def __init__(self, **_):
            pass

        def set_postfix_str(self, *_, **__):
            pass

        def refresh(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(_progress, "_in_notebook", lambda: True)
    monkeypatch.setattr(_progress, "_tqdm", lambda notebook: Bar if tqdm else None)
    monkeypatch.setattr(_progress, "_display", lambda obj, **_: Handle())
    bar = _progress._Bar("plan", plan=True)
    bar.close()
    assert shown == [{"text/plain": ""}]
    shown.clear()
    bar = _progress._Bar("plan", plan=True)
    bar({"requests": 3, "done_ms": 5, "total_ms": 10})
    bar.close()
    assert shown[-1]["text/plain"].startswith("plan: ")


# --- what the client waits for, and the publish bar ---------------------------------------


def _publishing(emu, per_second: float) -> sv.Client:
    """A client that publishes at ``per_second`` requests (of 10 records each, below), so
    that its bar is drawn many times."""
    return emu.client(limits=sv.Limits(None, None, per_second, 4, None))


def _records(n: int) -> list:
    return [other(i) for i in range(n)]


@pytest.mark.parametrize("plain", [False, True], ids=["tqdm", "plain"])
def test_a_429_wait_shows_on_the_bar_while_it_lasts(busy, capsys, monkeypatch, plain):
    if plain:
        monkeypatch.setattr("surveillance._progress._tqdm", lambda notebook: None)
    else:
        pytest.importorskip("tqdm")
    client = busy.client(limits=sv.Limits(None, 2, None, None, None))
    client.access_token()
    busy.set_faults(rate_limit_rate=0.3, retry_after=2)
    try:
        _a_429_wait_shows(busy, client, capsys)
    finally:
        busy.set_faults()


def _a_429_wait_shows(busy, client, capsys) -> None:
    updates: list = []
    bar, close = _progress.make(True, "events")
    assert bar is not None

    def both(update: dict) -> None:
        updates.append(update)
        bar(update)

    try:
        client.events(busy.start, busy.start + (busy.end - busy.start) / 8, progress=both)
    finally:
        close()
    waits = [(u["waiting"], u["waiting_brief"]) for u in updates if u.get("waiting")]
    assert waits and all(w == "rate limited (429): next try in " + b[9:-6] for w, b in waits)
    assert all(re.fullmatch(r"retry in \d s \(429\)", b) for _, b in waits), waits
    assert updates[-1]["waiting"] is None and updates[-1]["waiting_brief"] is None
    err = capsys.readouterr().err
    # Right after the bar's name, where a narrow terminal does not cut it off.
    assert re.search(r"events \[waiting: retry in \d s \(429\)\]: +\d+%", err), err
    cost = client.last_cost
    assert cost.rate_limited > 0 and cost.retries >= cost.rate_limited and cost.waited > 0
    assert f"{cost.rate_limited:,} answered 429 (" in str(cost)


def test_the_outage_countdown_goes_down_on_the_publish_bar(make_emu, capsys, monkeypatch):
    """The ``max_outage`` left counts down while the publish waits, on the bar as in the
    callback's words."""
    e = make_emu(seed=5, sites=2, days=1, events_per_day=100)
    client = _publishing(e, 50)
    client.access_token()
    updates: list = []
    e.outage(3.5, after=3)
    report = client.publish(_records(200), batch_size=10, progress=updates.append)
    assert report.accepted == 200
    left = [
        int(re.search(r", (\d+) s of max_outage left", u["waiting_brief"]).group(1))
        for u in updates
        if u.get("waiting_brief")
    ]
    assert len(set(left)) >= 3 and left[0] > left[-1], left
    assert client.last_cost.outage >= 3.0, client.last_cost
    assert "s of outage ridden out" in str(client.last_cost)
    monkeypatch.setattr("surveillance._progress._tqdm", lambda notebook: None)
    e.outage(2.5, after=3)
    client.publish(_records(100), batch_size=10, progress=True)
    shown = re.findall(
        r"publish \[waiting: retry[^]]*, (\d+) s of max_outage left", capsys.readouterr().err
    )
    assert len(set(shown)) >= 2, shown


@pytest.mark.parametrize("plain", [False, True], ids=["tqdm", "plain"])
def test_the_publish_bar_has_a_total_a_share_and_a_time_left_when_the_length_is_known(
    busy, capsys, monkeypatch, tmp_path, plain
):
    if plain:
        monkeypatch.setattr("surveillance._progress._tqdm", lambda notebook: None)
    else:
        pytest.importorskip("tqdm")
    client = _publishing(busy, 40)
    records = _records(400)
    client.publish(records, batch_size=10, progress=True)
    err = capsys.readouterr().err
    if plain:
        frame = r"publish: +(\d+)% \(([\d,]+)/400 records, ~\w+ left, 0 rejected"
    else:
        frame = r"publish: +(\d+)%\|[^|]*\| (\d+)/400 \[[\d:]+<[\d:]+"
    shares = [int(m.group(1)) for m in re.finditer(frame, err)]
    assert len(set(shares)) >= 3 and 0 < shares[0] < 100, err
    # A JSON Lines file is counted first: the same bar.
    path = tmp_path / "records.jsonl"
    path.write_text("".join(f"{json.dumps(r)}\n\n" for r in records))
    client.publish(str(path), batch_size=10, progress=True)
    assert re.search(frame, capsys.readouterr().err)
    # An iterator of unknown length: the records done, no total, no share.
    client.publish(iter(records), batch_size=10, progress=True)
    err = capsys.readouterr().err
    assert "400 records" in err and "/400" not in err and "%" not in err, err
