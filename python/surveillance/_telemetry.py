"""Traces and metrics of the client's calls, through the OpenTelemetry API (the ``otel`` extra),
with the tracer and meter providers the application configured (both named ``surveillance``).

A public call is one span, ``surveillance NAME`` (its range, report, requests, retries, 429s,
events or records, outcome), and each of its HTTP requests a child span that follows the HTTP
client conventions (``GET /v2/events``: ``http.request.method``, ``url.template``,
``server.address``, ``http.response.status_code``, ``error.type``,
``http.request.resend_count``); token requests are such spans too, and the waits after 429s or
through an outage are events of the call span. The core records what the call's requests did
without the GIL (``_core.CallScope(observe=True)``); the records become spans, with their own
start and end times, and metrics in the caller's thread, whenever the call leaves its scope.
The requests carry the W3C ``traceparent`` of the call span (the client's ``trace_context=False``
leaves it out). Every text an attribute takes from outside the client goes through the scrubber
of error messages (``_core.scrub``).

Nothing is done, and ``opentelemetry`` is not even imported, unless the application imported
it; and nothing but one check a call while the global providers are still the API's defaults
(no provider configured).
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import urllib.parse
import weakref
from typing import Any, Callable, Iterator, Optional

from . import _core

#: The classes of the API's global providers before an application sets its own.
_DEFAULTS = frozenset(
    {"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"}
)
#: Bounds of ``http.client.request.duration``, the conventions' advice (seconds).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
#: The arguments of a call that its span says, by parameter name.
_ARGUMENTS = {
    "start": "surveillance.start",
    "end": "surveillance.end",
    "until": "surveillance.end",
    "report_id": "surveillance.report_id",
    "site_id": "surveillance.site_id",
    "device_id": "surveillance.device_id",
    "batch_size": "surveillance.batch_size",
}


class Instruments:
    """The tracer and the instruments of one pair of global providers, made once."""

    def __init__(self, trace: Any, metrics: Any, tracer_provider: Any, meter_provider: Any):
        self.trace = trace
        self.tracer = tracer_provider.get_tracer("surveillance", _core.__version__)
        meter = meter_provider.get_meter("surveillance", _core.__version__)
        try:
            self.duration = meter.create_histogram(
                "http.client.request.duration",
                unit="s",
                description="Duration of HTTP client requests.",
                explicit_bucket_boundaries_advisory=list(_BUCKETS),
            )
        except TypeError:  # an API before 1.23 takes no advice
            self.duration = meter.create_histogram(
                "http.client.request.duration",
                unit="s",
                description="Duration of HTTP client requests.",
            )
        counter = meter.create_counter
        self.requests = counter(
            "surveillance.requests", unit="{request}", description="Requests sent to the service."
        )
        self.retries = counter(
            "surveillance.retries", unit="{request}", description="Requests sent again."
        )
        self.rate_limited = counter(
            "surveillance.rate_limited", unit="{response}", description="429 answers received."
        )
        self.renewals = counter(
            "surveillance.token.renewals", unit="{token}", description="Access tokens received."
        )
        self.events = counter(
            "surveillance.events.read", unit="{event}", description="Events read from the service."
        )
        self.published = counter(
            "surveillance.records.published",
            unit="{record}",
            description="Records a publish accounted for, by outcome.",
        )
        self.clients: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        meter.create_observable_gauge(
            "surveillance.quota.used",
            callbacks=[functools.partial(self._quota, metrics, "used")],
            unit="{request}",
            description="Requests counted today against the key's daily quota.",
        )
        meter.create_observable_gauge(
            "surveillance.quota.remaining",
            callbacks=[functools.partial(self._quota, metrics, "remaining")],
            unit="{request}",
            description="Requests left today in the key's daily quota.",
        )

    def _quota(self, metrics: Any, field: str, _options: Any = None) -> Iterator[Any]:
        """The ledger's figure ``field`` of each account a live client used, once each."""
        seen = set()
        for client in list(self.clients.values()):
            try:
                inner = client._inner
                where = inner.base_url
                quota = inner.quota()
            except Exception:  # a closed client, a ledger it cannot read: no figure
                continue
            if where in seen or quota[field] is None:
                continue
            seen.add(where)
            yield metrics.Observation(quota[field], {"server.address": _host(where)})


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).hostname or ""


_made: dict[tuple[int, int], Instruments] = {}
_lock = threading.Lock()


def instruments() -> Optional[Instruments]:
    """The instruments of the global providers, or None: ``opentelemetry`` not imported by the
    application, or no provider configured."""
    if "opentelemetry" not in sys.modules:
        return None
    from opentelemetry import metrics, trace  # optional: the otel extra, imported by the app

    tracer_provider = trace.get_tracer_provider()
    meter_provider = metrics.get_meter_provider()
    if type(tracer_provider).__name__ in _DEFAULTS and type(meter_provider).__name__ in _DEFAULTS:
        return None
    key = (id(tracer_provider), id(meter_provider))
    made = _made.get(key)
    if made is None:
        with _lock:
            made = _made.get(key)
            if made is None:
                made = Instruments(trace, metrics, tracer_provider, meter_provider)
                _made[key] = made
    return made


@functools.lru_cache(maxsize=256)
def _signature(method: Callable[..., Any]) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(method)
    except (TypeError, ValueError):
        return None


def _arguments(
    method: Optional[Callable[..., Any]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, str]:
    """The span attributes of a call's range, report and batch size."""
    signature = None if method is None else _signature(method)
    if signature is None:
        return {}
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return {}
    return {
        attribute: _core.scrub(str(bound[name]))
        for name, attribute in _ARGUMENTS.items()
        if bound.get(name) is not None
    }


def _traceparent(context: Any) -> Optional[str]:
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class CallTelemetry:
    """The span and the metrics of one call (see the module)."""

    def __init__(
        self,
        made: Instruments,
        client: Any,
        name: str,
        attributes: dict[str, str],
    ) -> None:
        self.made = made
        self.client = client
        made.clients[id(client)] = client
        self.span = made.tracer.start_span(
            f"surveillance {name}",
            attributes={"surveillance.call": name, **attributes},
        )
        self.context = made.trace.set_span_in_context(self.span)
        # The core leaves it out of the requests when the client's `trace_context` is off.
        self.traceparent = _traceparent(self.span.get_span_context())
        self.ended = False
        self.events = 0
        self.saved_before = _requests_saved(client)

    def attach(self) -> Any:
        """Makes the call span the current one; the token to detach it."""
        from opentelemetry import context  # optional: imported with the instruments

        return context.attach(self.context)

    def detach(self, token: Any) -> None:
        from opentelemetry import context  # optional: imported with the instruments

        try:
            context.detach(token)
        except Exception:  # left in another context than it was entered in (a generator)
            pass

    def record(self, scope: Any) -> None:
        """Spans and metrics of what the call's requests did since the last record."""
        drained = scope.drain()
        if drained is None:
            return
        made, span = self.made, self.span
        for x in drained["exchanges"]:
            method, template, status, error = x["method"], x["template"], x["status"], x["error"]
            endpoint = {"surveillance.endpoint": f"{method} {template}"}
            attributes: dict[str, Any] = {
                "http.request.method": method,
                "url.template": template,
                "server.address": x["server"],
                "server.port": x["port"],
            }
            if status is not None:
                attributes["http.response.status_code"] = status
            if error is not None:
                attributes["error.type"] = error
            made.duration.record(x["duration"] / 1e9, attributes)
            if x["sent"]:
                made.requests.add(
                    1, {**endpoint, "http.response.status_code": status if status else 0}
                )
            if x["resend"]:
                attributes["http.request.resend_count"] = x["resend"]
            if status == 429:
                made.rate_limited.add(1, endpoint)
            if x["token"]:
                attributes["surveillance.token"] = True
            child = made.tracer.start_span(
                f"{method} {template}",
                context=self.context,
                kind=made.trace.SpanKind.CLIENT,
                attributes=attributes,
                start_time=x["start"],
            )
            if error is not None:
                child.set_status(made.trace.Status(made.trace.StatusCode.ERROR))
            child.end(end_time=x["start"] + x["duration"])
        for w in drained["waits"]:
            span.add_event(
                "surveillance.wait",
                {
                    "surveillance.wait.reason": w["reason"],
                    "surveillance.wait.seconds": w["seconds"],
                    "surveillance.request": w["request"],
                },
                timestamp=w["at"],
            )
        tokens, events = drained["tokens"], drained["events"]
        if drained["retries"]:
            made.retries.add(drained["retries"])
        if tokens:
            made.renewals.add(tokens)
        if events:
            made.events.add(events)
            self.events += events

    def end(self, scope: Any, result: Any = None, error: Optional[BaseException] = None) -> None:
        """Records what is left and ends the call span with the call's figures and outcome."""
        self.record(scope)
        if self.ended:
            return
        self.ended = True
        span, trace = self.span, self.made.trace
        span.set_attribute("surveillance.requests", int(scope.requests))
        span.set_attribute("surveillance.retries", int(scope.retries))
        span.set_attribute("surveillance.rate_limited", int(scope.rate_limited))
        span.set_attribute("surveillance.events", self.events)
        saved = _requests_saved(self.client) - self.saved_before
        if saved > 0:
            span.set_attribute("surveillance.cache.requests_saved", saved)
        if isinstance(result, _core.PublishReport):
            for outcome, count in _published(result).items():
                span.set_attribute(f"surveillance.records.{outcome}", count)
                if count:
                    self.made.published.add(count, {"surveillance.outcome": outcome})
        if error is None:
            span.set_attribute("surveillance.outcome", "ok")
        else:
            interrupted = isinstance(error, (KeyboardInterrupt, GeneratorExit))
            span.set_attribute("surveillance.outcome", "interrupted" if interrupted else "error")
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, _core.scrub(str(error))))
        span.end()


def _published(report: Any) -> dict[str, int]:
    """A publish report's records by outcome."""
    unconfirmed = len(report.unconfirmed)
    rejected = len(report.rejected)
    return {
        "accepted": int(report.accepted),
        "rejected": rejected,
        "unconfirmed": unconfirmed,
        "not_sent": max(int(report.total) - int(report.accepted) - rejected - unconfirmed, 0),
    }


def _requests_saved(client: Any) -> int:
    try:
        return int(client._inner.stats()["requests_saved"])
    except Exception:  # a closed client
        return 0


def begin(
    client: Any,
    name: str,
    method: Optional[Callable[..., Any]] = None,
    args: tuple[Any, ...] = (),
    kwargs: Optional[dict[str, Any]] = None,
) -> Optional[CallTelemetry]:
    """The telemetry of a call of ``client`` named ``name`` (``method`` called with ``args``),
    or None when nobody watches."""
    made = instruments()
    if made is None:
        return None
    return CallTelemetry(made, client, name, _arguments(method, args, kwargs or {}))
