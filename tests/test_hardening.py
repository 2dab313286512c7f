"""Hardening, as a hostile user or a broken network would try it: no record counted as accepted
that the service did not store, no secret echoed back, over real loopback HTTP against the
emulator and its hostile modes."""

from __future__ import annotations

import pytest
import surveillance as sv

HOSTILE_MODES = ["truncated", "not_array", "html", "huge_string", "slow_body", "no_answer"]


@pytest.fixture(scope="module")
def emu():
    with sv.Emulator(seed=7, sites=2, days=1, events_per_day=10) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _reset(emu):
    emu.clear_published()
    yield
    emu.set_hostile()
    emu.set_faults()
    emu.clear_published()


def other(i: int) -> dict:
    return {
        "dataType": "other",
        "schemaVersion": "1",
        "startTime": 1794891600000,
        "locationId": "s",
        "dataSourceId": "d",
        "eventUniqueId": f"e{i}",
        "eventType": "door",
    }


def test_an_html_200_from_a_proxy_is_not_an_acceptance(emu):
    """The reproducer: a proxy answers the webhook with 200 and an HTML page. Nothing is
    stored, so nothing may be counted as accepted; every record is reported as failed, with
    the answer's first bytes, and written by ``write_failures``."""
    rows = [other(i) for i in range(5)]
    emu.set_hostile("html", path="/v2/webhook")
    r = emu.client(max_retries=1).publish(rows, progress=False)
    assert (r.accepted, r.ok, len(emu.published())) == (0, False, 0)
    assert [f.index for f in r.rejected] == [0, 1, 2, 3, 4]
    for f in r.rejected:
        assert f.kind == "failed"
        assert "not the service's acceptance" in f.message and "<html>" in f.message


def test_failures_of_a_proxy_page_are_written_to_publish_again(emu, tmp_path):
    emu.set_hostile("html", path="/v2/webhook")
    r = emu.client(max_retries=0).publish([other(i) for i in range(3)], progress=False)
    assert r.write_failures(tmp_path / "failed.jsonl") == 3
    emu.set_hostile()
    again = emu.client().publish(str(tmp_path / "failed.jsonl"), progress=False)
    assert again.accepted == 3 and len(emu.published()) == 3


@pytest.mark.parametrize("batch_size", [1, 10])
@pytest.mark.parametrize("mode", HOSTILE_MODES + ["status"])
def test_publish_against_every_hostile_webhook_mode(emu, mode, batch_size):
    """With ``count`` set so that the mode passes, every record is stored exactly once or
    reported as failed, and none is counted as accepted without being stored."""
    rows = [other(i) for i in range(40)]
    emu.set_hostile(mode, path="/v2/webhook", count=3, size=1024, status=503)
    client = emu.client(timeout=1.0, max_retries=4)
    r = client.publish(rows, batch_size=batch_size, progress=False)
    stored = {rec["eventUniqueId"] for rec in emu.published()}
    failed = {rows[f.index]["eventUniqueId"] for f in r.rejected}
    assert r.accepted + len(r.rejected) == r.total == 40
    assert len(emu.published()) == len(stored)  # once each
    assert r.accepted <= len(stored)  # never accepted without being stored
    assert stored | failed == {row["eventUniqueId"] for row in rows}
    assert r.ok, r  # the mode passed after three answers: everything went through


@pytest.mark.parametrize("mode", ["truncated", "not_array", "html"])
def test_a_persistent_bad_webhook_answer_fails_every_record(emu, mode):
    emu.set_hostile(mode, path="/v2/webhook")
    r = emu.client(max_retries=1).publish([other(i) for i in range(4)], progress=False)
    assert r.accepted == 0 and len(r.rejected) == 4
    # The truncated mode's records did reach the service (it stored them, then the answer
    # was cut): reported as failed, so that publishing them again is safe (upsert).
    assert len(emu.published()) == (4 if mode == "truncated" else 0)


# --- Ctrl-C while native code consumes an Arrow stream ------------------------------------------
@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in the main thread during the test (whatever the parent
    set: an inherited SIG_IGN is replaced for the test)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_after(seconds: float) -> tuple:
    import os
    import signal
    import threading
    import time

    sent: dict = {}

    def fire() -> None:
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(seconds, fire)
    timer.start()
    return timer, sent


@pytest.mark.parametrize("consumer", ["read_all", "write_parquet"])
def test_ctrl_c_while_native_code_reads_event_batches(make_emu, sigint_raises, tmp_path, consumer):
    import time

    import pyarrow as pa

    # Three windows of 10,000 events, 16 requests in flight of 150 ms: about a second each.
    slow = make_emu(sites=4, days=1, events_per_day=30_000, latency_ms=150)
    client = slow.client(limits=sv.Limits(None, 16, None, None, None))
    stream = client.event_batches(slow.start, slow.end)  # the first window arrives here
    target = tmp_path / "events.parquet"
    timer, sent = interrupt_after(0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            if consumer == "read_all":
                pa.RecordBatchReader.from_stream(stream).read_all()
            else:
                sv.write_parquet(stream, target)
        caught = time.monotonic()
    finally:
        timer.cancel()
    assert "at" in sent
    assert caught - sent["at"] < 0.1 + 0.05, f"{caught - sent['at']:.3f} s after SIGINT"
    assert not target.exists() and not list(tmp_path.iterdir())  # nothing left behind
    # The requests in flight were dropped: nothing more arrives, nothing is being served.
    time.sleep(0.4)
    before = slow.stats()["requests"]["GET /v2/events"]
    time.sleep(0.5)
    assert slow.stats()["requests"]["GET /v2/events"] == before
    assert slow.stats()["in_flight"]["read"] == 0
