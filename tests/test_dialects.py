"""The client against every dialect the emulator speaks: each "not shown" of API.md (the
webhook's answer, its refusals, error bodies, ``Retry-After``, the token answer, the answer to
an expired token) answered each plausible way. Whatever the service picks, a report equals
what the service stored, events equal the emulator's truth, and errors carry its words.
Scenarios run on one client where state carries from one call to the next."""

from __future__ import annotations

import math
import uuid

import pytest
import surveillance as sv

from conftest import emulator_fixture, other, retail

emu = emulator_fixture(seed=23, sites=4, days=1, events_per_day=3000)
DIALECTS = sv.Emulator.DIALECTS


@pytest.fixture(autouse=True)
def _nothing_published(emu):
    emu.clear_published()
    yield
    emu.clear_published()


def stored_ids(e: sv.Emulator) -> set:
    return {r["transactionId"] for r in e.published()}


def bad(i: int) -> dict:
    """A record the service refuses: a restaurant field on a retail record."""
    return retail(i, tableNumber=12)


# --- the webhook's success answer ------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [1, 100])
@pytest.mark.parametrize("answer", DIALECTS["webhook_answer"])
def test_the_report_equals_what_was_stored_whatever_the_webhook_answers(emu, answer, batch_size):
    emu.set_dialect(webhook_answer=answer)
    records = [retail(i) for i in range(200)]
    client = emu.client(max_retries=1)
    try:
        report = client.publish(records, batch_size=batch_size, progress=False)
    except sv.SurveillanceError as e:  # a run of pages that prove nothing stops publishing
        assert answer == "proxy_html", e
        report = e.report
    assert report.total == 200
    assert report.accepted + len(report.rejected) + len(report.unconfirmed) == 200
    if answer == "proxy_html":
        # A login page in front of the service proves nothing: never accepted, and what was
        # sent is unconfirmed (the rest, after a run of such answers, not sent).
        assert (report.accepted, emu.published()) == (0, [])
        assert report.unconfirmed and not report.ok
        assert {f.kind for f in report.failures} <= {"unconfirmed", "not sent"}
        assert "<html" in report.unconfirmed[0].message.lower()
    else:
        assert report.accepted == len(emu.published()) == 200, report
        assert report.ok and report.requests == math.ceil(200 / batch_size)


# --- the webhook's refusals --------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [1, 100])
@pytest.mark.parametrize("errors", DIALECTS["webhook_errors"])
def test_a_tenth_of_bad_records_costs_at_most_twice_the_requests(emu, errors, batch_size):
    emu.set_dialect(webhook_errors=errors)
    records = [bad(i) if i % 10 == 3 else retail(i) for i in range(200)]
    client = emu.client(max_retries=1)
    report = client.publish(records, batch_size=batch_size, validate=False, progress=False)
    wrong = {i for i in range(200) if i % 10 == 3}
    assert {f.index for f in report.rejected} == wrong
    assert report.unconfirmed == []
    assert report.accepted == len(emu.published()) == 180
    assert stored_ids(emu) == {records[i]["transactionId"] for i in range(200) if i not in wrong}
    for f in report.rejected:
        assert (f.kind, f.status) == ("refused", 400)
        assert "tableNumber" in f.message or errors == "message_only", f.message
    minimum = math.ceil(200 / batch_size)
    if errors != "message_only":
        # The refusal names the records: one request per array (a service that stores all or
        # nothing costs one more, for the good records sent again).
        assert report.requests <= 2 * minimum, report
        if errors != "all_or_nothing":
            assert report.requests == minimum
            assert all(f.problems for f in report.rejected)
    else:
        # Named by nobody: found by halves. Bounded, not one request per record.
        assert report.requests < 200 if batch_size == 100 else report.requests == 200


def test_other_records_at_two_locations_are_two_records_and_named_apart(emu):
    """An ``other`` record's upsert key is its location and event id (``Model::key``): one event
    id at two locations is two records, and a refusal naming one of them by its key names it,
    not its namesake at the other location."""
    emu.set_dialect(webhook_errors="by_transaction_id")
    good = [other(i, locationId="north") for i in range(50)]
    wrong = [other(i, locationId="south", eventType=7) for i in range(50)]
    records = [r for pair in zip(good, wrong) for r in pair]
    report = emu.client(max_retries=1).publish(
        records, batch_size=100, validate=False, progress=False
    )
    assert {f.index for f in report.rejected} == set(range(1, 100, 2)), report
    assert all("eventType" in f.message for f in report.rejected)
    assert report.requests == 1 and report.accepted == 50, report
    report = emu.client().publish([other(i, locationId="south") for i in range(50)])
    keys = {(r["locationId"], r["eventUniqueId"]) for r in emu.published()}
    assert len(emu.published()) == len(keys) == 100


def received(e: sv.Emulator) -> int:
    """Webhook requests the emulator received."""
    return sum(e.stats()["requests"].get("POST /v2/webhook", {}).values())


def publish_all(client: sv.Client, records: list, **options) -> sv.PublishReport:
    """The report of a publish, also when a refusal stopped it (raised with its report)."""
    try:
        return client.publish(records, validate=False, progress=False, **options)
    except sv.BadRequestError as e:
        assert e.report is not None and e.report.error == str(e)
        return e.report


def assert_true_to_what_was_stored(e: sv.Emulator, records: list, report: sv.PublishReport):
    """No record the service stored is reported rejected, and every record accepted was."""
    stored = stored_ids(e)
    rejected = {f.index for f in report.rejected}
    assert not {i for i in rejected if records[i]["transactionId"] in stored}, report
    failed = {f.index for f in report.failures}
    accepted = {records[i]["transactionId"] for i in range(report.total) if i not in failed}
    assert len(accepted) == report.accepted and accepted <= stored, report
    assert report.total + (report.unread or 0) == len(records)
    assert report.requests == received(e)


@pytest.mark.parametrize("errors", DIALECTS["webhook_errors"])
def test_a_refusal_of_every_record_costs_a_few_requests(emu, errors):
    emu.set_dialect(webhook_errors=errors)
    records = [bad(i) for i in range(1000)]
    report = publish_all(emu.client(max_retries=1), records)
    assert (report.accepted, emu.published()) == (0, [])
    assert_true_to_what_was_stored(emu, records, report)
    if errors != "message_only":
        # Named: one request per array, the 10 in flight together.
        assert len(report.rejected) == 1000 and {f.kind for f in report.rejected} == {"refused"}
        assert report.requests == 10 and report.error is None, report
    else:
        # Named by nobody: the first array judged, the next by one request each, then stopped.
        assert report.requests <= 20 and "one or more records failed validation" in report.error
        assert {f.kind for f in report.failures} == {"refused", "unconfirmed", "not sent"}


# --- a refusal that names no record, judged once per job ----------------------------------------
@pytest.mark.parametrize("batch_size", ["auto", 100])
@pytest.mark.parametrize("body", DIALECTS["error_body"])
def test_a_systematic_refusal_is_judged_once_and_stops_the_job(emu, body, batch_size):
    """Every array refused by one 400 that names no record (plain text, HTML, JSON, empty): the
    first is judged (its parts and three records alone), each later one by one request, and
    after 5 refused whole the job stops; the rest is not sent, the service's words in the
    error. 70 requests for 1,000 records before, 1 request in 9 of them for a record alone."""
    emu.set_dialect(error_body=body)
    emu.set_hostile("status", path="/v2/webhook", status=400)
    records = [retail(i) for i in range(1000)]
    client = emu.client(max_retries=1)
    with pytest.raises(sv.BadRequestError) as e:
        client.publish(records, batch_size=batch_size, progress=False)
    report = e.value.report
    assert report.requests <= 20 and emu.published() == [], report
    assert_true_to_what_was_stored(emu, records, report)
    assert e.value.status == 400 and "5 arrays in a row" in str(e.value)
    said = "injected status 400" if body != "empty" else "no details in the answer"
    assert said in report.error
    kinds = [f.kind for f in report.failures]
    assert set(kinds) == {"refused", "unconfirmed", "not sent"}, kinds
    # Refused: only records the service refused alone. Unconfirmed: those of a refused body.
    assert kinds.count("refused") <= 4 and kinds.count("unconfirmed") == 500 - kinds.count(
        "refused"
    )
    assert all(f.status == 400 and said in f.message for f in report.failures if f.status)
    not_sent = [f for f in report.failures if f.kind == "not sent"]
    assert len(not_sent) == report.total - report.sent and report.sent == 500
    assert all(said in f.message and f.status is None for f in not_sent)


@pytest.mark.parametrize("batch_size", ["auto", 100])
def test_100000_records_refused_whole_cost_at_most_30_requests(emu, batch_size):
    emu.set_dialect(error_body="plain_text")
    emu.set_hostile("status", path="/v2/webhook", status=400)
    records = [retail(i) for i in range(100_000)]
    report = publish_all(emu.client(), records, batch_size=batch_size)
    assert report.requests <= 30 and report.requests == received(emu), report
    assert report.accepted == 0 and report.total + report.unread == 100_000


@pytest.mark.parametrize("batch_size", ["auto", 100])
@pytest.mark.parametrize("errors", DIALECTS["webhook_errors"])
def test_a_job_whose_first_200_records_are_bad_stores_every_good_one(emu, errors, batch_size):
    emu.set_dialect(webhook_errors=errors)
    records = [bad(i) if i < 200 else retail(i) for i in range(1000)]
    report = publish_all(emu.client(max_retries=1), records, batch_size=batch_size)
    assert report.error is None and report.total == 1000
    assert stored_ids(emu) == {r["transactionId"] for r in records[200:]}
    assert report.accepted == 800 and {f.index for f in report.failures} == set(range(200))
    assert_true_to_what_was_stored(emu, records, report)


@pytest.mark.parametrize("batch_size", ["auto", 100])
@pytest.mark.parametrize("errors", DIALECTS["webhook_errors"])
def test_records_of_a_body_refused_like_the_systematic_refusal_are_not_reported_rejected(
    emu, errors, batch_size
):
    """After a refusal found systematic, an array refused with its words may hold good records
    that a service storing the valid records of a refused body (``message_only``) stored: its
    records are unconfirmed, never refused, whichever of them a probe would have picked."""
    emu.set_dialect(webhook_errors=errors)
    wrong = set(range(200)) | {200 + i for i in (0, 1, 25, 49, 50, 74, 75, 99)}
    records = [bad(i) if i in wrong else retail(i) for i in range(1000)]
    report = publish_all(emu.client(max_retries=1), records, batch_size=batch_size)
    assert report.error is None and report.total == 1000
    assert stored_ids(emu) == {r["transactionId"] for i, r in enumerate(records) if i not in wrong}
    assert_true_to_what_was_stored(emu, records, report)
    assert {f.index for f in report.rejected} <= wrong


def test_the_services_words_about_each_record_are_kept(emu):
    emu.set_dialect(webhook_errors="failures_list")
    records = [retail(0), bad(1), retail(2)]
    report = emu.client().publish(records, batch_size=100, validate=False, progress=False)
    (f,) = report.rejected
    assert f.index == 1 and f.problems and f.problems[0].path == "tableNumber"
    assert "tableNumber" in f.message and "validation_error" not in f.message


# --- error bodies, Retry-After, tokens, on reads and publishing, on one client -----------------
@pytest.mark.parametrize("body", DIALECTS["error_body"])
def test_errors_show_the_services_words_and_status_whatever_the_body(emu, body):
    emu.set_dialect(error_body=body)
    client = emu.client(max_retries=0)
    with pytest.raises(sv.NotFoundError) as e:
        client.events(emu.start, emu.end, report_id=str(uuid.uuid4()))
    assert "404" in str(e.value)
    if body != "empty":
        assert "no report" in str(e.value), str(e.value)
    bad_secret = emu.client(client_secret="not-the-secret", max_retries=0)
    with pytest.raises(sv.AuthError) as e:
        bad_secret.sites()
    assert "401" in str(e.value) and "not-the-secret" not in str(e.value)
    if body != "empty":
        assert "invalid client credentials" in str(e.value), str(e.value)
    # The same client goes on working.
    assert len(client.sites()) == 4


@pytest.mark.parametrize("retry_after", DIALECTS["retry_after"])
def test_429s_in_every_retry_after_form(emu, retry_after):
    emu.set_dialect(retry_after=retry_after)
    emu.set_faults(rate_limit_rate=0.1, retry_after=1)
    client = emu.client(max_retries=8)
    events = client.events(emu.start, emu.start.replace(hour=12), progress=False)
    assert [e["id"] for e in events] == emu.truth(emu.start, emu.start.replace(hour=12))
    records = [retail(i) for i in range(300)]
    report = client.publish(records, batch_size=10, progress=False)
    assert report.accepted == len(emu.published()) == 300 and report.rate_limited > 0


@pytest.mark.parametrize("token_answer", DIALECTS["token_answer"])
def test_every_token_answer_gives_a_working_token(emu, token_answer):
    emu.set_dialect(token_answer=token_answer)
    client = emu.client()
    events = client.events(emu.start, emu.end, progress=False)
    assert [e["id"] for e in events] == emu.truth(emu.start, emu.end)
    report = client.publish([retail(i) for i in range(50)], batch_size=1, progress=False)
    assert report.accepted == len(emu.published()) == 50
    emu.advance_clock(4 * 3600)  # every token expires: renewed, whatever expires_in said
    assert [e["id"] for e in client.events(emu.start, emu.end, progress=False)] == emu.truth(
        emu.start, emu.end
    )
    emu.advance_clock(-4 * 3600)


@pytest.mark.parametrize("batch_size", [1, 100])
@pytest.mark.parametrize("expired", DIALECTS["expired_token"])
def test_tokens_that_stop_working_are_renewed_at_every_expiry(emu, expired, batch_size):
    """Each token stops after 6 requests, refused as the dialect says: reads and publishing
    outlive many tokens, exact, on one client."""
    emu.set_dialect(expired_token=expired, token_requests=6)
    client = emu.client(limits=sv.Limits.unlimited())
    events = client.events(emu.start, emu.end, progress=False)
    assert [e["id"] for e in events] == emu.truth(emu.start, emu.end)
    records = [retail(i) for i in range(300)]
    report = client.publish(records, batch_size=batch_size, progress=False)
    assert report.accepted == len(emu.published()) == 300, report
    assert report.ok
    assert emu.stats()["tokens_issued"] >= 5


@pytest.mark.parametrize("batch_size", [1, 100])
@pytest.mark.parametrize("expired", DIALECTS["expired_token"])
def test_a_token_that_stops_after_50_posts_costs_a_few_tokens(emu, expired, batch_size):
    emu.set_dialect(expired_token=expired, token_requests=50)
    records = [retail(i) for i in range(300)]
    report = emu.client().publish(records, batch_size=batch_size, progress=False)
    assert report.accepted == len(emu.published()) == 300 and report.ok, report
    assert emu.stats()["tokens_issued"] <= 10


@pytest.mark.parametrize("expired", DIALECTS["expired_token"])
def test_sync_outlives_many_tokens(emu, expired, tmp_path):
    emu.set_dialect(expired_token=expired, token_requests=4)
    client = emu.client()
    result = client.sync_events(tmp_path / "ds", emu.start, until=emu.end)
    assert result.complete
    import pyarrow.dataset as ds

    ids = sorted(
        ds.dataset(tmp_path / "ds", partitioning="hive").to_table(columns=["id"])["id"].to_pylist()
    )
    assert ids == sorted(emu.truth(emu.start, emu.end))
    assert emu.stats()["tokens_issued"] >= 5


@pytest.mark.parametrize("expired", DIALECTS["expired_token"])
def test_revoked_credentials_stop_publishing_with_a_true_report(emu, expired):
    emu.set_dialect(expired_token=expired)
    records = [retail(i) for i in range(300)]
    client = emu.client(max_retries=0, limits=sv.Limits(publish_concurrency=4))
    assert client.publish(records[:1], progress=False).accepted == 1
    emu.clear_published()
    emu.reset_stats()
    emu.revoke_tokens()
    emu.set_hostile("status", path="/v2/oauth/token", status=401)
    with pytest.raises(sv.AuthError) as e:
        client.publish(records, batch_size=1, progress=False)
    report = e.value.report
    assert report.accepted == len(emu.published())
    received = sum(emu.stats()["requests"].get("POST /v2/webhook", {}).values())
    assert report.requests == received
    assert {f.kind for f in report.failures} <= {"refused", "not sent", "unconfirmed"}
    assert report.total == report.accepted + len(report.failures)


# --- the daily quota in the middle of a publish ------------------------------------------------
@pytest.mark.parametrize("batch_size", [1, 100])
def test_a_publish_stopped_by_the_quota_counts_what_the_server_received(emu, batch_size):
    emu.set_limits(daily_requests=40)
    records = [retail(i) for i in range(5000)]
    client = emu.client()
    with pytest.raises(sv.QuotaExhaustedError) as e:
        client.publish(records, batch_size=batch_size, progress=False)
    report = e.value.report
    received = sum(emu.stats()["requests"].get("POST /v2/webhook", {}).values())
    assert report.requests == received > 0
    assert report.accepted == len(emu.published())
    assert report.error and "quota" in report.error
    not_sent = [f for f in report.failures if f.kind == "not sent"]
    assert len(not_sent) == report.total - report.sent > 0
    assert report.sent == report.accepted + len(report.failures) - len(not_sent)


# --- one client, a sequence across dialects ------------------------------------------------------
def test_one_client_through_a_sequence_of_dialects(emu):
    client = emu.client(max_retries=6)
    truth = emu.truth(emu.start, emu.end)
    for answer, errors, body, retry_after, expired in zip(
        DIALECTS["webhook_answer"][:6],
        DIALECTS["webhook_errors"] * 2,
        DIALECTS["error_body"],
        DIALECTS["retry_after"] * 2,
        DIALECTS["expired_token"] * 2,
    ):
        emu.set_dialect(
            webhook_answer=answer,
            webhook_errors=errors,
            error_body=body,
            retry_after=retry_after,
            expired_token=expired,
            token_requests=25,
        )
        emu.set_faults(rate_limit_rate=0.05, retry_after=0)
        assert [e["id"] for e in client.events(emu.start, emu.end, progress=False)] == truth
        emu.clear_published()
        records = [bad(i) if i % 7 == 0 else retail(i) for i in range(120)]
        report = client.publish(records, validate=False, progress=False)
        assert report.accepted == len(emu.published()) == 120 - 18, (answer, errors, report)


# --- a 429 on one class never slows the other ----------------------------------------------------
def test_a_publish_that_met_429s_leaves_reads_at_full_speed(emu):
    import time

    client = emu.client()
    t = time.perf_counter()
    client.events(emu.start, emu.end, progress=False)
    clean = time.perf_counter() - t
    emu.set_faults(rate_limit_rate=0.05, retry_after=1)
    report = client.publish([retail(i) for i in range(1000)], batch_size=1, progress=False)
    assert report.rate_limited > 0
    t = time.perf_counter()
    events = client.events(emu.start, emu.end, progress=False)
    after = time.perf_counter() - t
    assert [e["id"] for e in events] == emu.truth(emu.start, emu.end)
    assert after <= 3 * clean + 2 + 1, f"{after:.2f} s after the publish, {clean:.2f} s clean"


# --- the token endpoint's other answers, and numbers past a float --------------------------------
@pytest.mark.parametrize(
    ("status", "error"),
    [(404, sv.NotFoundError), (302, sv.ApiError), (418, sv.ApiError), (401, sv.AuthError)],
)
def test_a_token_endpoint_at_the_wrong_address_is_not_a_credentials_error(emu, status, error):
    emu.set_hostile("status", path="/v2/oauth/token", status=status)
    with pytest.raises(error) as e:
        emu.client(max_retries=0).sites()
    assert str(status) in str(e.value)
    if error is not sv.AuthError:
        assert not isinstance(e.value, sv.AuthError) and "base_url" in str(e.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda e: sv.Client("k", "i", "s", base_url=e.url, timeout=10**400),
        lambda e: sv.Client("k", "i", "s", base_url=e.url, max_wait=10**400),
        lambda e: sv.Limits(read_per_second=10**400),
        lambda e: e.advance_clock(10**400),
        lambda e: e.set_faults(error_rate=10**400),
    ],
)
def test_numbers_past_a_float_are_named_errors(emu, call):
    with pytest.raises(ValueError, match="must be a number"):
        call(emu)


@pytest.mark.parametrize("value", [10**400, -(10**400)], ids=["huge", "huge-negative"])
@pytest.mark.parametrize(
    "name, call",
    [
        ("cache_max_bytes", lambda e, v: e.client(cache_max_bytes=v)),
        ("max_body_bytes", lambda e, v: e.client(max_body_bytes=v)),
        ("max_retries", lambda e, v: e.client(max_retries=v)),
        ("daily_requests", lambda e, v: sv.Limits(daily_requests=v)),
        ("read_concurrency", lambda e, v: sv.Limits(read_concurrency=v)),
        ("publish_concurrency", lambda e, v: sv.Limits(publish_concurrency=v)),
        ("daily_requests", lambda e, v: e.set_limits(daily_requests=v)),
    ],
)
def test_ints_past_every_range_are_value_errors_naming_the_range(emu, name, call, value):
    with pytest.raises(ValueError, match=rf"`{name}` must be from [\d,]+ to [\d,]+, got") as e:
        call(emu, value)
    assert not isinstance(e.value, OverflowError) and "(401 digits)" in str(e.value)
    assert len(str(e.value)) < 200


def test_sent_counts_each_record_once_however_often_it_left(emu):
    """A record posted in an array the service refuses, then alone, or posted again in a later
    round after a 503, left the machine: it counts once in ``sent``."""
    records = [retail(i) for i in range(200)]
    emu.set_webhook(arrays=False)
    report = emu.client().publish(records, progress=False)
    assert (report.accepted, report.sent, len(emu.published())) == (200, 200, 200)
    assert report.requests > 200  # the arrays, then each record alone
    emu.set_webhook()
    emu.clear_published()
    emu.set_hostile("status", path="/v2/webhook", status=503, count=4)
    report = emu.client(max_retries=0).publish(records, batch_size=50, progress=False)
    assert (report.accepted, report.sent, len(emu.published())) == (200, 200, 200)
    assert report.requests == 4 + 4
