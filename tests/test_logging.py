"""The ``surveillance`` logger as an operator reads it: at DEBUG (``-v``) one line for each
request sent, token requests included (a refused one too), naming its URL once and saying
what followed (a retry, a wait, a renewed token); and the fields of that request on the
record (``endpoint``, ``status``, ``request_id``, ``attempt``), so that a JSON formatter shows
them. Never a secret."""

from __future__ import annotations

import logging
import subprocess

import surveillance as sv

from conftest import console_script, emulator_fixture, service_env

emu = emulator_fixture(seed=3, sites=3, days=1, events_per_day=800)

FIELDS = ("endpoint", "status", "request_id", "attempt")


def _request_records(caplog) -> list:
    return [r for r in caplog.records if r.name == "surveillance" and getattr(r, "endpoint", None)]


def _secrets(e, client) -> list:
    return [e.api_key, e.client_secret, client.access_token()]


def test_each_request_is_logged_once_with_its_fields(emu, caplog):
    """Retries, 429s and 5xx included: as many request lines as requests sent, each naming
    its URL once, with its fields; the token request among them."""
    client = emu.client(max_retries=20)
    caplog.set_level(logging.DEBUG, logger="surveillance")
    emu.set_faults(error_rate=0.2, rate_limit_rate=0.2)
    client.sites()
    client.devices()
    got = client.events(emu.start, emu.end, progress=False)
    emu.set_faults()
    assert [e["id"] for e in got] == emu.truth(emu.start, emu.end)
    stats = client.stats()
    assert stats["retries"] > 0 and stats["rate_limited"] > 0
    records = _request_records(caplog)
    assert len(records) == sum(stats["requests"].values()), [r.getMessage() for r in records]
    for r in records:
        message = r.getMessage()
        assert message.count("/v2/") == 1, message  # the URL once, not again in its error
        assert message.startswith(r.endpoint.split(" ")[0] + " /v2/"), message
        assert isinstance(r.status, int) and isinstance(r.attempt, int) and r.attempt >= 1
        assert r.request_id and r.request_id.startswith("emu-"), message
    by_endpoint = {}
    for r in records:
        by_endpoint.setdefault(r.endpoint, []).append(r)
    assert set(by_endpoint) == set(stats["requests"])
    (token,) = by_endpoint["POST /v2/oauth/token"]
    assert token.status == 200 and "new access token, valid for" in token.getMessage()
    retried = [r for r in records if r.status in (429, 500, 502, 503, 504)]
    assert retried and all(
        "; retry " in r.getMessage() or "; waiting: " in r.getMessage() for r in retried
    )
    assert any(r.attempt > 1 for r in records)
    # Lines about no request carry the fields too (None), so a format string may name them.
    for r in caplog.records:
        assert all(hasattr(r, f) for f in FIELDS), r.getMessage()
    assert not any(s in caplog.text for s in _secrets(emu, client))


def test_a_refused_token_request_is_logged(emu, caplog):
    caplog.set_level(logging.DEBUG, logger="surveillance")
    client = sv.Client(
        base_url=emu.url,
        api_key=emu.api_key,
        client_id=emu.client_id,
        client_secret="not-the-secret-4f1c",
        audience=emu.audience,
    )
    try:
        client.sites()
    except sv.AuthError:
        pass
    else:
        raise AssertionError("refused credentials were not an AuthError")
    records = _request_records(caplog)
    assert [(r.endpoint, r.status, r.attempt) for r in records] == [
        ("POST /v2/oauth/token", 401, 1)
    ]
    assert "the credentials are refused" in records[0].getMessage()
    assert "not-the-secret-4f1c" not in caplog.text and emu.client_secret not in caplog.text


def test_v_logs_each_request_once_on_stderr(emu, tmp_path):
    emu.set_faults(error_rate=0.5)
    out = subprocess.run(
        [*console_script(), "-v", "sites", "--format", "jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        env=service_env(emu),
        cwd=tmp_path,
    )
    emu.set_faults()
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if "/v2/" in line]
    assert any("POST /v2/oauth/token -> 200" in line for line in lines), out.stderr
    assert any("GET /v2/sites -> 5" in line for line in lines), out.stderr
    assert all(line.count("/v2/") == 1 for line in lines), out.stderr
    assert emu.client_secret not in out.stderr and emu.api_key not in out.stderr
