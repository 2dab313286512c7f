"""Hardening, as a hostile user or a broken network would try it: no record counted as accepted
that the service did not store, no secret echoed back, over real loopback HTTP against the
emulator and its hostile modes."""

from __future__ import annotations

import pytest
import surveillance as sv

from conftest import emulator_fixture, interrupt_after, other

HOSTILE_MODES = ["truncated", "not_array", "html", "huge_string", "slow_body", "no_answer"]


emu = emulator_fixture(seed=7, sites=2, days=1, events_per_day=10)


@pytest.fixture(autouse=True)
def _clear(emu):
    emu.clear_published()
    yield
    emu.clear_published()


def test_an_html_200_from_a_proxy_is_not_an_acceptance(emu):
    """A proxy answers the webhook with 200 and an HTML page. Nothing is stored, so nothing may
    be counted as accepted, nor as refused: every record is unconfirmed, with the answer's first
    bytes, and written by ``write_failures``."""
    rows = [other(i) for i in range(5)]
    emu.set_hostile("html", path="/v2/webhook")
    r = emu.client(max_retries=1).publish(rows, progress=False)
    assert (r.accepted, r.ok, len(emu.published()), r.rejected) == (0, False, 0, [])
    assert [f.index for f in r.unconfirmed] == [0, 1, 2, 3, 4]
    for f in r.unconfirmed:
        assert f.kind == "unconfirmed"
        assert "not the API's" in f.message and "<html>" in f.message
    assert "5 unconfirmed" in r.summary()


def test_failures_of_a_proxy_page_are_written_to_publish_again(emu, tmp_path):
    emu.set_hostile("html", path="/v2/webhook")
    r = emu.client(max_retries=0).publish([other(i) for i in range(3)], progress=False)
    assert r.write_failures(tmp_path / "failed.jsonl") == 3
    emu.set_hostile()
    again = emu.client().publish(str(tmp_path / "failed.jsonl"), progress=False)
    assert again.accepted == 3 and len(emu.published()) == 3


@pytest.mark.parametrize("batch_size", [1, 10])
@pytest.mark.parametrize(
    # `not_array` is JSON: from the webhook, a 2xx JSON answer of any shape is the service's
    # acceptance (the client believes the service), so it has a test of its own below.
    "mode",
    [m for m in HOSTILE_MODES if m != "not_array"] + ["status"],
)
def test_publish_against_every_hostile_webhook_mode(emu, mode, batch_size):
    """With ``count`` set so that the mode passes, every record is stored exactly once or
    reported as not accepted, and none is counted as accepted without being stored."""
    rows = [other(i) for i in range(40)]
    emu.set_hostile(mode, path="/v2/webhook", count=3, size=1024, status=503)
    client = emu.client(timeout=1.0, max_retries=4)
    r = client.publish(rows, batch_size=batch_size, progress=False)
    stored = {rec["eventUniqueId"] for rec in emu.published()}
    failed = {rows[f.index]["eventUniqueId"] for f in r.failures}
    assert r.accepted + len(r.rejected) + len(r.unconfirmed) == r.total == 40
    assert len(emu.published()) == len(stored)  # once each
    assert r.accepted <= len(stored)  # never accepted without being stored
    assert stored | failed == {row["eventUniqueId"] for row in rows}
    assert r.ok, r  # the mode passed after three answers: everything went through


@pytest.mark.parametrize("mode", ["truncated", "html"])
def test_a_persistent_answer_that_proves_nothing_leaves_every_record_unconfirmed(emu, mode):
    emu.set_hostile(mode, path="/v2/webhook")
    r = emu.client(max_retries=1).publish([other(i) for i in range(4)], progress=False)
    assert (r.accepted, r.rejected, len(r.unconfirmed)) == (0, [], 4)
    # The truncated mode's records did reach the service (it stored them, then the answer
    # was cut): unconfirmed, neither accepted nor refused, and publishing them again is safe
    # (upsert).
    assert len(emu.published()) == (4 if mode == "truncated" else 0)


def test_a_2xx_json_answer_of_any_shape_is_believed(emu):
    """The client believes the service unless the service says otherwise: an object that is
    not the emulator's own ``{"accepted": n}`` is still an acceptance."""
    emu.set_hostile("not_array", path="/v2/webhook")
    r = emu.client(max_retries=1).publish([other(i) for i in range(4)], progress=False)
    assert (r.accepted, r.failures, r.requests) == (4, [], 1)


# --- Ctrl-C while native code consumes an Arrow stream ------------------------------------------
@pytest.mark.parametrize("consumer", ["read_all", "write_parquet"])
def test_ctrl_c_while_native_code_reads_event_batches(make_emu, tmp_path, consumer):
    import time

    import pyarrow as pa

    # Three windows of 10,000 events, 16 requests in flight of 150 ms: about a second each.
    slow = make_emu(sites=4, days=1, events_per_day=30_000, latency_ms=150)
    client = slow.client(limits=sv.Limits(None, 16, None, None, None))
    stream = client.event_batches(slow.start, slow.end)  # the first window arrives here
    target = tmp_path / "events.parquet"
    with interrupt_after(0.3, kill=True) as sent:
        with pytest.raises(KeyboardInterrupt):
            if consumer == "read_all":
                pa.RecordBatchReader.from_stream(stream).read_all()
            else:
                sv.write_parquet(stream, target)
        caught = time.monotonic()
    assert "at" in sent
    assert caught - sent["at"] < 0.1 + 0.05, f"{caught - sent['at']:.3f} s after SIGINT"
    assert not target.exists() and not list(tmp_path.iterdir())  # nothing left behind
    # The requests in flight were dropped: nothing more arrives, nothing is being served.
    time.sleep(0.4)
    before = slow.stats()["requests"]["GET /v2/events"]
    time.sleep(0.5)
    assert slow.stats()["requests"]["GET /v2/events"] == before
    assert slow.stats()["in_flight"]["read"] == 0


# --- no panic, no endless wait, from any setting -------------------------------------------------
@pytest.mark.parametrize("timeout", [1e300, 1e20, 2**64, float("inf"), float("nan"), 0, -1])
def test_an_impossible_timeout_is_a_config_error(emu, timeout):
    with pytest.raises(sv.ConfigError, match="`timeout`"):
        emu.client(timeout=timeout)


@pytest.mark.parametrize("rate", [1e-20, 1e-9, 0.0, -1.0, float("nan")])
def test_a_rate_that_would_wait_for_decades_is_a_config_error(rate):
    with pytest.raises(sv.ConfigError, match="`read_per_second`"):
        sv.Limits(read_per_second=rate)


def test_every_bound_keeps_waits_finite(emu):
    slowest = sv.Limits(read_per_second=1 / 3600, publish_per_second=1 / 3600)
    client = emu.client(limits=slowest, timeout=86_400, max_wait=86_400)
    assert client.quota()["used"] == 0  # built; every wait is at most an hour or a day


# --- a deterministic failure is not retried, and has its own type --------------------------------
def test_a_key_with_a_newline_is_a_config_error_at_construction(emu):
    with pytest.raises(sv.ConfigError, match="`api_key`") as err:
        sv.Client("abc\ndef", emu.client_id, emu.client_secret, base_url=emu.url)
    assert "abc" not in str(err.value)  # named, never shown


@pytest.mark.parametrize("size", [0, 1, -5])
def test_a_body_cap_that_takes_nothing_is_a_config_error(emu, size):
    with pytest.raises(sv.ConfigError, match="`max_body_bytes`"):
        emu.client(max_body_bytes=size)


def test_an_end_near_the_year_9999_is_not_widened_past_it(emu):
    events = emu.client().events("9999-12-31T00:00:00Z", "9999-12-31T23:59:59.999Z")
    assert events == []


@pytest.mark.parametrize(
    "status, error", [(500, sv.ServerError), (503, sv.ServerError), (429, sv.RateLimitError)]
)
def test_a_token_endpoint_that_keeps_failing_is_not_an_auth_error(emu, status, error):
    emu.set_hostile("status", path="/v2/oauth/token", status=status)
    with pytest.raises(error) as err:
        emu.client(max_retries=1, max_wait=0.1, max_outage=0).sites()
    assert not isinstance(err.value, sv.AuthError)
    assert err.value.status == status


def test_a_webhook_that_stays_rate_limited_raises_a_rate_limit_error(emu):
    emu.set_hostile("status", path="/v2/webhook", status=429)
    with pytest.raises(sv.RateLimitError) as err:
        emu.client(max_retries=0).publish([other(i) for i in range(900)], batch_size=1)
    assert err.value.report.accepted == 0 and err.value.report.total > 0


# --- every bad argument is named ------------------------------------------------------------------
def test_negative_counts_are_named(emu):
    with pytest.raises(sv.ConfigError, match="`max_retries`"):
        emu.client(max_retries=-1)
    with pytest.raises(ValueError, match="`batch_size`"):
        emu.client().publish([other(0)], batch_size=-1)
    with pytest.raises(sv.ConfigError, match="`read_concurrency`"):
        sv.Limits(read_concurrency=-3)


def test_ids_of_the_wrong_type_are_named(emu):
    with pytest.raises(TypeError, match="`report_id`"):
        emu.client().events(emu.start, emu.end, report_id=123)
    with pytest.raises(TypeError, match="`site_id`"):
        emu.client().cameras(site_id=5)


def test_a_missing_time_is_named():
    import pandas as pd

    with sv.Emulator(sites=2, days=1, events_per_day=10) as small:
        with pytest.raises(ValueError, match="`start`"):
            small.client().events(pd.NaT, small.end)


def test_a_settle_that_is_not_a_number_is_named(emu, tmp_path):
    with pytest.raises(ValueError, match="`settle`"):
        emu.client().sync_events(tmp_path, emu.start, until=emu.end, settle=float("nan"))


def test_a_10_mb_bad_time_is_not_copied_into_the_message(emu):
    with pytest.raises(ValueError, match="`start`") as err:
        emu.client().events("x" * 10_000_000, emu.end)
    assert len(str(err.value)) < 500


def test_a_ca_bundle_that_is_not_pem_is_refused(emu, tmp_path):
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("this is not a certificate\n")
    with pytest.raises(sv.ConfigError, match="`ca_bundle`"):
        emu.client(ca_bundle=bundle)


def test_a_corrupt_file_in_a_sync_directory_is_named(emu, tmp_path):
    client = emu.client()
    client.sync_events(tmp_path, emu.start, until=emu.end)
    (part,) = list(tmp_path.glob("date=*/part-0.parquet"))
    part.write_bytes(b"PAR1 not parquet at all")
    with pytest.raises(sv.ConfigError, match=str(part.parent.name)) as err:
        client.sync_events(tmp_path, emu.start, until=emu.end, settle="2d")
    assert "damaged" in str(err.value)
