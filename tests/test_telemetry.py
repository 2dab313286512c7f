"""Traces and metrics through the OpenTelemetry API: a client, with the SDK's in-memory span
exporter and metric reader as the application's providers, against an emulator in another
process, or in this one where a test scripts its faults on known requests (its ``GET
/_emulator/stats`` tells what it served and the ``traceparent`` headers it received)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import urllib.parse
import urllib.request
from collections import Counter
from datetime import datetime, timedelta
from typing import Any, Iterator

import pytest
import surveillance as sv

from conftest import emulator_command, reset_opentelemetry, retail

trace = pytest.importorskip("opentelemetry.trace")
metrics = pytest.importorskip("opentelemetry.metrics")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
sdk_metrics = pytest.importorskip("opentelemetry.sdk.metrics")
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


class Otel:
    """The application's providers: every span finished, and the metrics on demand."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        tracer_provider = sdk_trace.TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = tracer_provider.get_tracer("test")
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(sdk_metrics.MeterProvider(metric_readers=[self.reader]))

    def points(self) -> dict[str, list]:
        """Each metric of the ``surveillance`` meter: its data points (cumulative)."""
        out: dict[str, list] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                if sm.scope.name != "surveillance":
                    continue
                for m in sm.metrics:
                    out[m.name] = list(m.data.data_points)
        return out

    def sums(self) -> Counter:
        """Counter sums and histogram counts by metric name."""
        c: Counter = Counter()
        for name, points in self.points().items():
            for p in points:
                c[name] += p.count if hasattr(p, "count") else p.value
        return c


@pytest.fixture(scope="module")
def otel() -> Iterator[Otel]:
    reset_opentelemetry()
    o = Otel()
    yield o
    reset_opentelemetry()


@pytest.fixture
def spans(otel: Otel) -> InMemorySpanExporter:
    otel.spans.clear()
    return otel.spans


def _client(exports: dict, cls: Any = sv.Client, **kw: Any) -> Any:
    return cls(
        exports["SURVEILLANCE_API_KEY"],
        exports["SURVEILLANCE_CLIENT_ID"],
        exports["SURVEILLANCE_CLIENT_SECRET"],
        base_url=exports["SURVEILLANCE_BASE_URL"],
        eu_base_url=exports.get("SURVEILLANCE_EU_BASE_URL"),
        audience=exports.get("SURVEILLANCE_AUDIENCE"),
        limits=sv.Limits.unlimited(),
        cache=False,
        **kw,
    )


def _served(exports: dict) -> dict:
    """The emulator's statistics, with the ``traceparent`` headers it received."""
    url = exports["SURVEILLANCE_BASE_URL"].rstrip("/") + "/_emulator/stats"
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _start(lines: list) -> datetime:
    last = lines[-1].split()
    return datetime.fromisoformat(last[3])


def _answered(served: dict, status: str | None = None) -> int:
    return sum(
        n for by in served["requests"].values() for s, n in by.items() if status in (None, s)
    )


def _http_children(finished: list, parent: Any) -> list:
    return [
        s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def test_a_call_is_a_span_its_requests_child_spans_and_the_counts_agree(otel, spans):
    with emulator_command("--sites", "3", "--days", "1", "--events-per-day", "1500") as emu:
        start = _start(emu.lines)
        client = _client(emu.exports)
        before = otel.sums()
        with otel.tracer.start_as_current_span("nightly job") as job:
            events = client.events(start, start + timedelta(days=1))
            report = client.publish([retail(i) for i in range(250)], batch_size=100)
        sent = sum(client.stats()["requests"].values())
        served = _served(emu.exports)
        client.close()
    assert len(events) > 1000 and report.accepted == 250
    finished = spans.get_finished_spans()
    calls = {s.name: s for s in finished if s.name.startswith("surveillance ")}
    assert set(calls) == {"surveillance events", "surveillance publish"}
    trace_id = job.get_span_context().trace_id
    for call in calls.values():
        assert call.parent.span_id == job.get_span_context().span_id
        assert call.context.trace_id == trace_id
        assert call.attributes["surveillance.outcome"] == "ok"
    http = [s for s in finished if s.kind == trace.SpanKind.CLIENT]
    assert {s.parent.span_id for s in http} <= {c.context.span_id for c in calls.values()}
    # One span, one duration, one count per request sent, as the client and the emulator count.
    delta = otel.sums() - before
    assert len(http) == sent == _answered(served)
    assert delta["http.client.request.duration"] == sent
    assert delta["surveillance.requests"] == sent
    event_spans = _http_children(finished, calls["surveillance events"])
    assert len(event_spans) == calls["surveillance events"].attributes["surveillance.requests"]
    page = next(s for s in event_spans if s.attributes["url.template"] == "/v2/events")
    assert page.name == "GET /v2/events"
    assert page.attributes["http.request.method"] == "GET"
    assert page.attributes["server.address"] == "127.0.0.1"
    assert page.attributes["http.response.status_code"] == 200
    posts = [s for s in finished if s.attributes.get("url.template") == "/v2/webhook"]
    assert len(posts) == 3 and all(s.name == "POST /v2/webhook" for s in posts)
    assert delta["surveillance.events.read"] >= len(events)
    assert delta["surveillance.records.published"] == 250
    assert calls["surveillance publish"].attributes["surveillance.records.accepted"] == 250
    assert calls["surveillance events"].attributes["surveillance.start"] == str(start)
    # The context went with the work through the GIL's release and the tokio runtime: every
    # request carried a traceparent of the job's trace, data, token and webhook alike.
    received = served["traceparents"]
    assert {"GET /v2/events", "POST /v2/webhook", "POST /v2/oauth/token"} <= set(received)
    for route, values in received.items():
        for value in values:
            version, tid, parent, flags = value.split("-")
            assert (version, int(tid, 16)) == ("00", trace_id), route
            assert int(flags, 16) & 1, "sampled"
    assert sum(len(v) for v in received.values()) == sent
    # The quota gauges read the ledger.
    points = otel.points()
    assert "surveillance.quota.used" in points


def test_retries_429s_and_renewals_in_the_metrics_are_what_the_emulator_served(
    otel, spans, make_emu
):
    # The 429s go to requests whose answers are always read and whose retries are always sent:
    # a fetch drops its pages past the range's end once it has what it needs, one in flight
    # (its 429 served, never read) or waiting for its retry (counted, never sent), so random
    # faults on the events pages would make the figures below hold in some runs only. An
    # emulator of this process scripts them: the first request of each sites() call, then
    # random 429s on the webhook, whose posts are all answered.
    emu = make_emu(sites=2, days=1, events_per_day=400)
    emu.set_token_lifetime(1)
    exports = emu.env()
    client = _client(exports, max_retries=20)
    before = otel.sums()
    for _ in range(2):
        client.events(emu.start, emu.start + timedelta(hours=12))
        emu.set_hostile("status", path="/v2/sites", count=1, status=429)
        client.sites()
        time.sleep(1.0)  # the token expires
    emu.set_hostile(None)
    emu.set_faults(rate_limit_rate=0.3)
    client.publish([retail(i) for i in range(30)], batch_size=10)
    stats = client.stats()
    served = _served(exports)
    client.close()
    delta = otel.sums() - before
    limited = _answered(served, "429")
    assert limited >= 2 and served["tokens_issued"] >= 2
    assert delta["surveillance.rate_limited"] == limited == stats["rate_limited"]
    assert delta["surveillance.token.renewals"] == served["tokens_issued"] == stats["tokens"]
    refused = _answered(served, "401") + _answered(served, "403")
    assert delta["surveillance.retries"] == stats["retries"] == limited + refused
    finished = spans.get_finished_spans()
    waits = [e for s in finished for e in s.events if e.name == "surveillance.wait"]
    assert len(waits) == limited  # each 429 waited for its retry
    assert {e.attributes["surveillance.wait.reason"] for e in waits} == {"rate_limited"}
    # Every retry was sent, and its span says it is a resend: the sites' request once each
    # call, and the posts.
    sites = [
        (s.attributes["http.response.status_code"], s.attributes.get("http.request.resend_count"))
        for s in finished
        if s.attributes.get("url.template") == "/v2/sites"
    ]
    assert sites == [(429, None), (200, 1)] * 2
    resent = [s for s in finished if s.attributes.get("http.request.resend_count")]
    assert len(resent) == stats["retries"]


def test_trace_context_off_sends_no_traceparent(otel, spans):
    with emulator_command("--sites", "2", "--days", "1", "--events-per-day", "50") as emu:
        client = _client(emu.exports, trace_context=False)
        with otel.tracer.start_as_current_span("job"):
            client.sites()
        served = _served(emu.exports)
        client.close()
    assert served["traceparents"] == {}
    assert [s.name for s in spans.get_finished_spans()][-1] == "job"


def _encodings(secret: str) -> set[str]:
    b = secret.encode()
    return {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
        base64.b64encode(b).decode().rstrip("="),
        base64.urlsafe_b64encode(b).decode().rstrip("="),
    }


def test_no_secret_in_any_attribute_event_or_log_record(otel, spans, caplog):
    caplog.set_level(logging.DEBUG, logger="surveillance")
    with emulator_command(
        "--sites", "2", "--days", "1", "--events-per-day", "200",
        "--rate-limit-rate", "0.2", "--token-lifetime", "1",
    ) as emu:  # fmt: skip
        exports = emu.exports
        start = _start(emu.lines)
        client = _client(exports, max_retries=20)
        tokens = set()
        with otel.tracer.start_as_current_span("job") as job:
            for _ in range(2):
                client.events(start, start + timedelta(hours=6))
                tokens.add(client.access_token())
                time.sleep(1.0)
            client.publish([retail(i) for i in range(5)])
            # A secret in the call's arguments is scrubbed from its span too.
            with pytest.raises(ValueError):
                client.cameras(site_id=exports["SURVEILLANCE_CLIENT_SECRET"])
        client.close()
    pair = f"{exports['SURVEILLANCE_CLIENT_ID']}:{exports['SURVEILLANCE_CLIENT_SECRET']}"
    secrets = set()
    for s in (
        exports["SURVEILLANCE_API_KEY"],
        exports["SURVEILLANCE_CLIENT_SECRET"],
        pair,
        *tokens,
    ):
        secrets |= _encodings(s)
    texts = []
    for s in spans.get_finished_spans():
        texts.append(s.name)
        texts.append(repr(dict(s.attributes)))
        texts.append(str(s.status.description))
        for e in s.events:
            texts.append(e.name + repr(dict(e.attributes)))
    for r in caplog.records:
        texts.append(r.getMessage() + repr(r.__dict__))
    blob = "\n".join(texts)
    assert "surveillance cameras" in blob and len(tokens) >= 2
    for secret in secrets:
        assert secret not in blob
    # Each line of the `surveillance` logger logged within a call carries its trace and span.
    traced = [r for r in caplog.records if r.name == "surveillance" and hasattr(r, "trace_id")]
    assert traced
    calls = {
        f"{s.context.span_id:016x}"
        for s in spans.get_finished_spans()
        if s.name.startswith("surveillance ")
    }
    for r in traced:
        assert r.trace_id == f"{job.get_span_context().trace_id:032x}"
        assert r.span_id in calls


def test_async_calls_continue_the_callers_span_in_their_own_tasks(otel, spans):
    with emulator_command("--sites", "2", "--days", "1", "--events-per-day", "300") as emu:
        start = _start(emu.lines)

        async def job() -> tuple:
            client = _client(emu.exports, sv.AsyncClient)
            with otel.tracer.start_as_current_span("a") as a:
                sites = asyncio.create_task(client.sites())
                with otel.tracer.start_as_current_span("b") as b:
                    events = await client.events(start, start + timedelta(hours=8))
                await sites
            return a, b, len(events)

        a, b, n = asyncio.run(job())
        served = _served(emu.exports)
    assert n > 0
    finished = {s.name: s for s in spans.get_finished_spans()}
    assert finished["surveillance sites"].parent.span_id == a.get_span_context().span_id
    assert finished["surveillance events"].parent.span_id == b.get_span_context().span_id
    events = finished["surveillance events"].context.span_id
    sent = [int(v.split("-")[2], 16) for v in served["traceparents"]["GET /v2/events"]]
    assert sent and set(sent) == {events}
