"""The client against a hostile server and a broken network, over real loopback HTTP(S): every
misbehaviour ends in a typed error or a correct result within the timeout, never a hang, a
crash or unbounded memory; real TLS with a generated certificate; proxies."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
import time

import pytest
import surveillance as sv

from conftest import emulator_fixture

TIMEOUT = 1.0


emu = emulator_fixture(seed=4, sites=4, days=1, events_per_day=3_000)


def quick_client(emu, **kwargs):
    kwargs.setdefault("timeout", TIMEOUT)
    kwargs.setdefault("max_retries", 1)
    kwargs.setdefault("max_outage", 0)  # a timeout fails at once, not after a minute
    return emu.client(**kwargs)


def events(client, emu):
    return client.events(emu.start, emu.start + dt.timedelta(hours=6), progress=False)


@pytest.mark.parametrize(
    "mode, needle",
    [
        ("truncated", "expected a JSON array of records"),
        ("not_array", "expected a JSON array of records"),
        ("html", "the answer starts with `<html>"),
    ],
)
def test_garbled_answers_are_api_errors(emu, mode, needle):
    emu.set_hostile(mode)
    started = time.perf_counter()
    with pytest.raises(sv.ApiError, match="cannot decode the answer of `/v2/events") as err:
        events(quick_client(emu), emu)
    assert needle in str(err.value)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("mode", ["truncated", "not_array", "html"])
def test_garbled_list_pages_are_api_errors(emu, mode):
    emu.set_hostile(mode, path="/v2/cameras")
    with pytest.raises(sv.ApiError, match="/v2/cameras"):
        quick_client(emu).cameras()


@pytest.mark.parametrize("mode", ["truncated", "not_array", "html"])
@pytest.mark.parametrize("path", ["/v2/sites", "/v2/events", "/v2/oauth/token"])
def test_a_garbled_200_that_heals_is_retried(emu, mode, path):
    """A proxy's HTML page, a cut body or an object where the list belongs, with status 200,
    is not the service's answer: it is retried like a 5xx, within ``max_retries``."""
    emu.set_hostile(mode, path=path, count=2)
    client = quick_client(emu, max_retries=2)
    if path == "/v2/events":
        got = events(client, emu)
        assert [e["id"] for e in got] == emu.truth(emu.start, emu.start + dt.timedelta(hours=6))
    else:
        assert len(client.sites()) == 4
    assert client.stats()["retries"] >= 2


def test_a_garbled_200_that_stays_is_an_api_error_after_the_retries(emu):
    emu.set_hostile("html", path="/v2/sites")
    client = quick_client(emu, max_retries=2)
    with pytest.raises(sv.ApiError, match="the answer starts with `<html>"):
        client.sites()
    assert client.stats()["retries"] == 2
    emu.set_hostile()
    assert len(client.sites()) == 4  # the client is still usable


def test_wrong_field_types_in_typed_output_name_the_field(emu):
    emu.set_faults(corrupt_rate=1.0)
    with pytest.raises(sv.ApiError, match="details.duration_sec"):
        quick_client(emu).events(emu.start, emu.end, output="arrow", progress=False)
    # As dicts, the events are handed over as the service sent them.
    got = events(quick_client(emu), emu)
    assert any(isinstance(e["details"]["duration_sec"], str) for e in got)


def test_a_50_mb_string_is_returned_whole_under_the_default_cap(emu):
    emu.set_hostile("huge_string", count=1)
    got = events(emu.client(timeout=30), emu)
    longest = max(got, key=lambda e: len(e["title"]))
    assert len(longest["title"]) >= 50 * 1024 * 1024
    assert [e["id"] for e in got] == emu.truth(emu.start, emu.start + dt.timedelta(hours=6))


def test_a_body_over_the_cap_is_a_clear_error(emu):
    emu.set_hostile("huge_string")
    with pytest.raises(sv.ApiError, match="larger than `max_body_bytes`"):
        events(emu.client(max_body_bytes=10 * 1024 * 1024, max_retries=0), emu)


@pytest.mark.parametrize("mode", ["slow_body", "no_answer"])
def test_a_server_that_never_finishes_is_a_timeout(emu, mode):
    emu.set_hostile(mode)
    started = time.perf_counter()
    with pytest.raises(sv.TransportError, match="timed out after 1.0 s"):
        events(quick_client(emu, max_retries=0), emu)
    assert time.perf_counter() - started < 3 * TIMEOUT


def test_no_answer_for_a_while_then_answers_is_retried(emu):
    emu.set_hostile("no_answer", count=2)
    got = events(quick_client(emu, max_outage=30), emu)
    assert [e["id"] for e in got] == emu.truth(emu.start, emu.start + dt.timedelta(hours=6))


def test_token_endpoint_500_is_retried(emu):
    emu.set_hostile("status", path="/v2/oauth/token", status=500, count=2)
    client = quick_client(emu, max_retries=3)
    assert len(client.sites()) == 4
    assert client.stats()["retries"] >= 2


@pytest.mark.parametrize("status", [400, 401])
def test_token_endpoint_refusal_is_an_auth_error_at_once(emu, status):
    emu.set_hostile("status", path="/v2/oauth/token", status=status)
    client = quick_client(emu, max_retries=3)
    with pytest.raises(sv.AuthError, match=f"refused the token request \\({status}"):
        client.sites()
    assert client.stats()["retries"] == 0


def test_a_token_that_never_comes_is_a_timeout(emu):
    emu.set_hostile("no_answer", path="/v2/oauth/token")
    with pytest.raises(sv.TransportError, match="timed out"):
        quick_client(emu, max_retries=0).sites()


def test_short_token_lifetime_renews_ahead_of_expiry(emu):
    """``expires_in`` of a few seconds: the client renews a tenth of the lifetime early, so no
    request is ever refused for an expired token."""
    emu.set_token_lifetime(3)
    client = emu.client()
    client.sites()
    before = emu.stats()["requests"].get("GET /v2/sites", {})
    deadline = time.perf_counter() + 4.0
    while time.perf_counter() < deadline:
        client.sites()
        time.sleep(0.1)
    after = emu.stats()["requests"]["GET /v2/sites"]
    assert after.get("401", 0) == before.get("401", 0)  # never sent with an expired token
    assert client.stats()["tokens"] >= 2


def test_hostile_pages_leave_the_client_usable(emu):
    client = quick_client(emu)
    for mode in ("truncated", "html", "no_answer"):
        emu.set_hostile(mode)
        with pytest.raises(sv.SurveillanceError):
            events(client, emu)
    emu.set_hostile()
    assert [e["id"] for e in events(client, emu)] == emu.truth(
        emu.start, emu.start + dt.timedelta(hours=6)
    )


# --- TLS ----------------------------------------------------------------------------------------
tls_emu = emulator_fixture(seed=4, sites=3, days=1, events_per_day=500, tls=True)


def test_tls_with_the_ca_bundle_argument(tls_emu):
    assert tls_emu.url.startswith("https://127.0.0.1:")
    client = tls_emu.client(ca_bundle=tls_emu.ca_bundle)
    got = client.events(tls_emu.start, tls_emu.end, progress=False)
    assert [e["id"] for e in got] == tls_emu.truth(tls_emu.start, tls_emu.end)


def test_an_untrusted_certificate_is_refused(tls_emu):
    before = tls_emu.stats()["tls_failures"]
    with pytest.raises(sv.TransportError, match="certificate"):
        tls_emu.client(max_retries=0).sites()
    deadline = time.perf_counter() + 2
    while tls_emu.stats()["tls_failures"] == before and time.perf_counter() < deadline:
        time.sleep(0.02)
    assert tls_emu.stats()["tls_failures"] == before + 1  # the handshake never completed


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_tls_with_the_ca_variables(tls_emu, monkeypatch, variable):
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):  # SSL_CERT_FILE comes first
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, tls_emu.ca_bundle)
    assert len(tls_emu.client().sites()) == 3
    if variable == "REQUESTS_CA_BUNDLE":
        # trust_env=False ignores it: the certificate is unknown again. (SSL_CERT_FILE is
        # also read by the platform trust store itself, whatever trust_env says.)
        with pytest.raises(sv.TransportError, match="certificate"):
            tls_emu.client(trust_env=False, max_retries=0).sites()


def test_a_missing_ca_bundle_is_a_config_error(tls_emu, tmp_path):
    with pytest.raises(sv.ConfigError, match="CA bundle"):
        tls_emu.client(ca_bundle=tmp_path / "nope.pem")


def test_plain_http_to_an_https_server_is_a_transport_error(tls_emu):
    with pytest.raises(sv.TransportError):
        sv.Client(
            tls_emu.api_key,
            tls_emu.client_id,
            tls_emu.client_secret,
            base_url=tls_emu.url.replace("https://", "http://"),
            max_retries=0,
            timeout=2,
        ).sites()


class ConnectProxy:
    """A tiny HTTPS proxy on loopback: answers ``CONNECT host:port`` by tunnelling to
    ``127.0.0.1:port`` whatever the host, and records the hosts asked for."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hosts: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._tunnel, args=(conn,), daemon=True).start()

    def _tunnel(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            chunk = conn.recv(4096)
            if not chunk:
                conn.close()
                return
            head += chunk
        target = head.split(b" ")[1].decode()
        host, port = target.rsplit(":", 1)
        self.hosts.append(host)
        upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        t.start()
        pipe(conn, upstream)
        t.join(10)
        conn.close()
        upstream.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def client_by_name(emu, host: str, **kwargs) -> sv.Client:
    """A client of the HTTPS emulator ``emu`` that reaches it as ``host`` (trusting its CA)."""
    port = emu.url.rsplit(":", 1)[1]
    return sv.Client(
        emu.api_key,
        emu.client_id,
        emu.client_secret,
        base_url=f"https://{host}:{port}",
        audience=emu.audience,
        ca_bundle=emu.ca_bundle,
        max_retries=0,
        timeout=5,
        **kwargs,
    )


def test_https_proxy_is_honoured(tls_emu, monkeypatch):
    """The service reached by a name that is not loopback (``emulator.test``, which only the
    proxy knows how to reach) goes through ``HTTPS_PROXY``; nothing resolves that name here."""
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = client_by_name(tls_emu, "emulator.test")
        assert len(client.sites()) == 3
        assert proxy.hosts and set(proxy.hosts) == {"emulator.test"}
    finally:
        proxy.close()


def test_loopback_never_goes_through_the_proxy(tls_emu, monkeypatch):
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        assert len(tls_emu.client(ca_bundle=tls_emu.ca_bundle).sites()) == 3
        assert proxy.hosts == []
    finally:
        proxy.close()


def test_secrets_stay_out_of_tls_errors(tls_emu):
    with pytest.raises(sv.TransportError) as err:
        tls_emu.client(max_retries=0).sites()
    text = str(err.value) + repr(err.value)
    for secret in (tls_emu.client_secret, tls_emu.api_key):
        assert secret not in text
    assert os.path.basename(tls_emu.ca_bundle) == "ca.pem"


def hosts_loopback_name():
    """A name the hosts file gives to a loopback address, other than localhost (which the
    client itself takes for loopback): it resolves with no DNS query."""
    try:
        with open("/etc/hosts") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        words = line.split("#")[0].split()
        if len(words) >= 2 and (words[0].startswith("127.") or words[0] == "::1"):
            for name in words[1:]:
                if name != "localhost" and all(c.isalnum() or c in "-." for c in name):
                    return name
    return None


def test_no_proxy_is_honoured(tls_emu, monkeypatch):
    """With HTTPS_PROXY set, a host listed in NO_PROXY is reached directly, others through the
    proxy. The host is a name /etc/hosts gives to loopback (the emulator's certificate covers
    those names), so nothing is looked up in DNS."""
    name = hosts_loopback_name()
    if name is None:
        pytest.skip("no loopback name besides localhost in /etc/hosts")
    proxy = ConnectProxy()
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("no_proxy", raising=False)

        def client(**kwargs):
            return client_by_name(tls_emu, name, **kwargs)

        monkeypatch.setenv("NO_PROXY", f"other.example,{name}")
        assert len(client().sites()) == 3
        assert proxy.hosts == []  # straight to the service
        monkeypatch.setenv("NO_PROXY", "other.example")
        assert len(client().sites()) == 3
        assert proxy.hosts == [name]  # through the proxy
        proxy.hosts.clear()
        assert len(client(trust_env=False).sites()) == 3
        assert proxy.hosts == []  # trust_env=False ignores HTTPS_PROXY
    finally:
        proxy.close()
