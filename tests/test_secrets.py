"""No secret ever leaves the client in text: every public call, at DEBUG logging, with faults on,
expired and revoked tokens and refused credentials, and neither the client secret, the API key
nor any access token appears in a log line, a repr, an exception message or a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import io
import logging
import pickle
import traceback

import pytest
import surveillance as sv


class Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture()
def debug_log():
    logger = logging.getLogger("surveillance")
    handler = Collector()
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


def test_no_secret_in_any_text(debug_log, tmp_path):
    texts: list = []  # every repr, str, message and traceback produced below
    tokens: set = set()

    def seen(obj) -> None:
        texts.append(repr(obj))
        texts.append(str(obj))

    def failed(call) -> None:
        try:
            call()
        except BaseException as e:  # noqa: B036 (every kind of failure is inspected)
            texts.append("".join(traceback.format_exception(type(e), e, e.__traceback__)))
            texts.append(repr(e))
            return
        raise AssertionError(f"{call} did not fail")

    with sv.Emulator(seed=9, sites=4, days=1, events_per_day=4000) as emu:
        secrets = {"client secret": emu.client_secret, "api key": emu.api_key}
        emu.set_faults(error_rate=0.15, rate_limit_rate=0.1, drop_rate=0.05)
        client = emu.client(max_retries=10)
        seen(client)
        seen(emu)
        tokens.add(client.access_token())
        start, end = emu.start, emu.start + dt.timedelta(hours=12)
        seen(client.sites())
        seen(client.devices())
        seen(client.cameras())
        seen(client.reports())
        seen(client.events(start, end, progress=False))
        seen(sum(1 for _ in client.iter_events(start, end)))
        seen(client.events(start, end, output="arrow", progress=False))
        seen(client.sites(output="arrow"))
        seen(client.event_batches(start, end))
        seen(client.stats())
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            client.diagnose()
        texts.append(out.getvalue())
        records = [
            {
                "dataType": "retail",
                "schemaVersion": "1",
                "startTime": 1767600000000 + i,
                "endTime": 1767600060000 + i,
                "locationId": "L1",
                "dataSourceId": "R1",
                "transactionId": f"secret-test-{i}",
                "status": "sale",
                "items": [],
            }
            for i in range(300)
        ]
        records.append({"dataType": "retail", "storeId": "x"})  # rejected, with problems
        report = client.publish(records, progress=False)
        seen(report)
        texts.append(report._repr_html_())
        report.write_failures(tmp_path / "failed.jsonl")
        texts.append((tmp_path / "failed.jsonl").read_text())
        failed(report.raise_on_failure)
        seen(sv.validate(records[-1]))

        async def async_calls():
            async with emu.async_client(max_retries=10) as a:
                seen(a)
                tokens.add(await a.access_token())
                seen(await a.sites())
                seen(await a.events(start, end, progress=False))

        asyncio.run(async_calls())

        # Expired and revoked tokens: renewed, and every new token is collected too.
        emu.advance_clock(5 * 3600)
        seen(client.reports())
        tokens.add(client.access_token())
        emu.revoke_tokens()
        seen(client.reports())
        tokens.add(client.access_token())
        emu.set_faults()

        # Refused credentials, a wrong API key, a closed client, a bad base URL.
        wrong = "wrong-secret-value-" + "1234"
        failed(lambda: emu.client(client_secret=wrong, max_retries=0).sites())
        secrets["wrong secret"] = wrong
        # (Values in variables: a traceback shows the source line of the call.)
        wrong_key = "wrong-api-key-" + "5678"
        failed(lambda: emu.client(api_key=wrong_key, max_retries=0).sites())
        secrets["wrong api key"] = wrong_key
        password = "pw-" + "9z"
        url = f"http://user:{password}@example"
        failed(lambda: sv.Client(emu.api_key, emu.client_id, emu.client_secret, base_url=url))
        secrets["password in a URL"] = password
        closed = emu.client()
        closed.close()
        failed(closed.sites)
        emu.set_hostile("html", path="/v2/sites")
        failed(lambda: emu.client(max_retries=0).sites())
        emu.set_hostile()
        # A pickled client carries its configuration (so it can rebuild itself on a worker),
        # never a token.
        blob = pickle.dumps(client)
        for token in tokens:
            assert token.encode() not in blob

    assert len(tokens) >= 3, "renewals happened"
    assert any("retry" in line for line in debug_log), "DEBUG lines were produced"
    everything = "\n".join(texts + debug_log)
    for name, value in secrets.items():
        assert value not in everything, f"the {name} leaked"
    for token in tokens:
        assert token not in everything, "an access token leaked"


ECHO_STATUSES = [400, 401, 403, 429, 500]


@pytest.mark.parametrize("status", ECHO_STATUSES)
@pytest.mark.parametrize("path", ["/v2/oauth/token", "/v2/sites", "/v2/events", "/v2/webhook"])
def test_secrets_echoed_by_a_server_are_scrubbed(debug_log, tmp_path, path, status):
    """A server (or a proxy) that echoes the request, headers and body, into every error it
    returns: the key, the secret and the token appear in its answers verbatim, and in none of
    the client's texts (messages, ``.body``, reprs, tracebacks, logs, reports, files)."""
    texts: list = []

    def caught(call):
        try:
            return call()
        except BaseException as e:  # noqa: B036 (every kind of failure is inspected)
            texts.append("".join(traceback.format_exception(type(e), e, e.__traceback__)))
            texts.extend([repr(e), str(e), repr(getattr(e, "body", "")), repr(e.args)])
            report = getattr(e, "report", None)
            if report is not None:
                texts.extend([repr(report), str(report), report._repr_html_()])
            return None

    with sv.Emulator(seed=9, sites=2, days=1, events_per_day=50) as emu:
        client = emu.client(max_retries=1)
        token = client.access_token()
        if path == "/v2/oauth/token":
            client = emu.client(max_retries=1)  # its token request meets the echo
        emu.set_hostile("echo", path=path, status=status)
        if path == "/v2/webhook":
            record = {
                "dataType": "other",
                "schemaVersion": "1",
                "startTime": 1794891600000,
                "locationId": "s",
                "dataSourceId": "d",
                "eventUniqueId": "e",
                "eventType": "door",
            }
            report = caught(lambda: client.publish([record] * 3, progress=False))
            if report is not None:
                texts.extend([repr(report), str(report), report._repr_html_()])
                report.write_failures(tmp_path / "failed.jsonl")
                texts.append((tmp_path / "failed.jsonl").read_text())
        elif path == "/v2/events":
            caught(lambda: client.events(emu.start, emu.end, progress=False))
            caught(lambda: list(client.event_batches(emu.start, emu.end)))
        else:
            caught(client.sites)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            client.diagnose()
        texts.append(out.getvalue())
        texts.append(repr(client.stats()))
        emu.set_hostile()
    everything = "\n".join(texts + debug_log)
    assert texts, "nothing was collected"
    for name, value in {
        "client secret": emu.client_secret,
        "api key": emu.api_key,
        "token": token,
    }.items():
        assert value not in everything, f"the {name} leaked"
