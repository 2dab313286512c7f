"""Shared fixtures and helpers: a small emulator per test module, reset around each test (also
a module's own ``big`` emulator), module emulators of other options, sample webhook records,
the environment of a child process pointed at an emulator, Ctrl-C after a delay, and a tiny
HTTP helper built on the standard library only (``urllib.request``), so the emulator's wire
contract is tested without the project's own client."""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import json
import os
import select
import shlex
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional

import pytest
import surveillance as sv

# Airflow and Dagster (surveillance.airflow, surveillance.dagster) keep their configuration,
# metadata database and logs under a home of their own: a temporary one, never the user's, set
# before either is imported (the doctests of the package import them at collection).
_SCHEDULERS_HOME = tempfile.mkdtemp(prefix="surveillance-schedulers-")
os.environ["AIRFLOW_HOME"] = os.path.join(_SCHEDULERS_HOME, "airflow")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["DAGSTER_HOME"] = os.path.join(_SCHEDULERS_HOME, "dagster")
os.makedirs(os.environ["DAGSTER_HOME"], exist_ok=True)

TIMEOUT = 10.0
PAGE = 100
OFFSET_CEILING = 10_000
UTC = timezone.utc
T0 = 1_794_891_600_000  # 2026-11-17T09:00Z: the times of the sample records below


def retail(i: int, **extra: Any) -> dict:
    """A valid retail record of one item, transaction ``t-{i}``, at ``T0 + i``."""
    r = {
        "dataType": "retail",
        "schemaVersion": "1",
        "startTime": T0 + i,
        "endTime": T0 + i + 60_000,
        "locationId": "store-1",
        "dataSourceId": "pos-1",
        "transactionId": f"t-{i}",
        "status": "sale",
        "items": [
            {"time": T0 + i, "quantity": 1, "description": "tea", "unitPrice": 2.5, "type": "SALE"}
        ],
    }
    r.update(extra)
    return r


def other(i: int = 0, **extra: Any) -> dict:
    """A valid record of the ``other`` model, event ``e{i}``, at ``T0 + i``."""
    r = {
        "dataType": "other",
        "schemaVersion": "1",
        "startTime": T0 + i,
        "locationId": "s",
        "dataSourceId": "d",
        "eventUniqueId": f"e{i}",
        "eventType": "door",
    }
    r.update(extra)
    return r


def service_env(emu: Any = None, **extra: str) -> dict:
    """This process's environment for a child: no ``SURVEILLANCE_*`` setting but the quota
    directory (each test's own), then the service settings of ``emu`` when given, then
    ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SURVEILLANCE_")
        or k in ("SURVEILLANCE_QUOTA_DIR", "SURVEILLANCE_CONFIG_FILE")
    }
    if emu is not None:
        env.update(
            SURVEILLANCE_BASE_URL=emu.url,
            SURVEILLANCE_EU_BASE_URL=emu.eu_url,
            SURVEILLANCE_API_KEY=emu.api_key,
            SURVEILLANCE_CLIENT_ID=emu.client_id,
            SURVEILLANCE_CLIENT_SECRET=emu.client_secret,
            SURVEILLANCE_AUDIENCE=emu.audience,
        )
    env.update(extra)
    return env


def run_in_pty(argv: list, env: dict, cwd: Any, columns: int = 160) -> tuple:
    """Runs ``argv`` with stdin, stdout and stderr on a pseudo-terminal of ``columns``; returns
    the exit status and everything it wrote."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                raise AssertionError("no output from the command for 60 s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        status = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return status, b"".join(chunks).decode("utf-8", "replace")


class EmulatorCommand(NamedTuple):
    """A running ``surveillance emulator`` (see :func:`emulator_command`)."""

    proc: subprocess.Popen
    #: What it printed, up to its ``# events from`` line.
    lines: list
    #: The variables of its ``export NAME=VALUE`` lines, unquoted as a shell would.
    exports: dict


def console_script() -> list:
    """The installed ``surveillance`` console script, else ``python -m surveillance.cli``."""
    script = Path(sys.executable).parent / "surveillance"
    return [str(script)] if script.exists() else [sys.executable, "-m", "surveillance.cli"]


def reset_opentelemetry() -> None:
    """OpenTelemetry's global providers back to the API's defaults (none configured), as
    OpenTelemetry's own test utilities do, so that a test (or a guide's block) that set its
    providers leaves the other tests with none. Nothing when OpenTelemetry was not imported."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is not None:
        from opentelemetry.util._once import Once  # optional: OpenTelemetry is imported

        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace._TRACER_PROVIDER = None
    internal = sys.modules.get("opentelemetry.metrics._internal")
    if internal is not None:
        from opentelemetry.util._once import Once  # optional: OpenTelemetry is imported

        internal._METER_PROVIDER_SET_ONCE = Once()
        internal._METER_PROVIDER = None


def sigint_default() -> None:
    """For ``preexec_fn`` of a child that a test stops with Ctrl-C: the child takes SIGINT as a
    terminal's foreground job does, even when this process inherited it ignored (a background
    job of a shell, ``nohup ... &``), which the child would inherit too."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def emulator_command(*options: str, env: Any = None) -> Iterator[EmulatorCommand]:
    """``surveillance emulator --port 0 *options`` in a child process (environment `env`, by
    default :func:`service_env`), once it has printed its settings; stopped with Ctrl-C on the
    way out, and killed if it has not stopped within 10 s."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "surveillance.cli", "emulator", "--port", "0", *options],
        stdout=subprocess.PIPE,
        text=True,
        env=service_env() if env is None else env,
        preexec_fn=sigint_default,
    )
    try:
        assert proc.stdout is not None
        lines: list = []
        while not lines or not lines[-1].startswith("# events from"):
            lines.append(proc.stdout.readline())
            assert lines[-1], f"the emulator ended: {lines}"
        exports = dict(
            shlex.split(line[len("export ") :])[0].split("=", 1)
            for line in lines
            if line.startswith("export ")
        )
        yield EmulatorCommand(proc, lines, exports)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def iso_z(dt: datetime) -> str:
    """`dt` as the service's query format: UTC, milliseconds, trailing ``Z``."""
    dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_ts(text: str) -> datetime:
    """An event timestamp (ISO 8601 with an offset) as an aware datetime."""
    return datetime.fromisoformat(text)


class Resp(NamedTuple):
    """One HTTP answer: unpacks as ``(status, headers, body)``; body is parsed JSON or text."""

    status: int
    headers: Any
    body: Any


class Http:
    """Minimal client for the emulator: headers, a cached token, JSON in and out, paging."""

    def __init__(self, emu: Any, *, timeout: float = TIMEOUT, cafile: str | None = None) -> None:
        self.emu = emu
        self.url = emu.url.rstrip("/")
        self.timeout = timeout
        self._token: str | None = None
        handlers: list[Any] = [urllib.request.ProxyHandler({})]  # loopback: never a proxy
        if self.url.startswith("https://"):
            cafile = cafile if cafile is not None else getattr(emu, "ca_bundle", None)
            ctx = ssl.create_default_context(cafile=cafile)
            handlers.append(urllib.request.HTTPSHandler(context=ctx))
        self._opener = urllib.request.build_opener(*handlers)

    # -- tokens -------------------------------------------------------------------------------
    def token_request(self, body: Any = None, headers: dict | None = None) -> Resp:
        """POST /v2/oauth/token with the emulator's credentials unless `body` is given."""
        if body is None:
            body = {
                "audience": self.emu.audience,
                "client_id": self.emu.client_id,
                "client_secret": self.emu.client_secret,
            }
        return self.request("POST", "/v2/oauth/token", json=body, headers=headers, auth=False)

    def new_token(self) -> str:
        """A freshly issued token (also cached for later calls)."""
        r = self.token_request()
        assert r.status == 200, r
        self._token = r.body["access_token"]
        return self._token

    def token(self) -> str:
        """The cached token, fetched on first use."""
        return self._token if self._token is not None else self.new_token()

    # -- requests -----------------------------------------------------------------------------
    def full_url(self, path: str, params: dict | None = None) -> str:
        url = path if path.startswith(("http://", "https://")) else self.url + path
        if params:
            enc = {k: iso_z(v) if isinstance(v, datetime) else v for k, v in params.items()}
            url += "?" + urllib.parse.urlencode(enc)
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        headers: dict | None = None,
        json: Any = None,
        data: bytes | None = None,
        auth: bool = True,
        timeout: float | None = None,
    ) -> Resp:
        """One call. Headers default to x-api-key, accept and (if `auth`) the bearer token; a
        header given as None in `headers` is left out. Transport errors propagate."""
        hdrs: dict[str, str | None] = {"x-api-key": self.emu.api_key, "accept": "application/json"}
        if auth:
            hdrs["authorization"] = f"Bearer {self.token()}"
        if json is not None:
            data = _json_dumps(json)
            hdrs["content-type"] = "application/json"
        elif data is not None:
            hdrs["content-type"] = "application/json"
        hdrs.update(headers or {})
        req = urllib.request.Request(self.full_url(path, params), data=data, method=method)
        for k, v in hdrs.items():
            if v is not None:
                req.add_header(k, v)
        try:
            with self._opener.open(req, timeout=timeout or self.timeout) as r:
                return Resp(r.status, r.headers, _decode(r.read()))
        except urllib.error.HTTPError as e:
            try:
                return Resp(e.code, e.headers, _decode(e.read()))
            finally:
                e.close()

    def get(self, path: str, params: dict | None = None, headers: dict | None = None, **kw) -> Resp:
        return self.request("GET", path, params=params, headers=headers, **kw)

    def post(self, path: str, json: Any = None, headers: dict | None = None, **kw) -> Resp:
        return self.request("POST", path, json=json, headers=headers, **kw)

    # -- paging -------------------------------------------------------------------------------
    def pages(self, path: str, params: dict | None = None) -> list[list]:
        """Every page of a list endpoint, offset 0, 100, ... until a short page."""
        out: list[list] = []
        offset = 0
        while True:
            assert offset < OFFSET_CEILING, f"{path} {params}: more than 10,000 records"
            r = self.get(path, {**(params or {}), "offset": offset})
            assert r.status == 200, (path, params, offset, r)
            assert isinstance(r.body, list), r
            assert len(r.body) <= PAGE, f"page of {len(r.body)} records"
            out.append(r.body)
            if len(r.body) < PAGE:
                return out
            offset += PAGE

    def get_all(self, path: str, params: dict | None = None) -> list:
        """All records of a list endpoint, pages concatenated."""
        return [rec for page in self.pages(path, params) for rec in page]

    def events(
        self,
        start: datetime,
        end: datetime,
        report_id: str | None = None,
        step: timedelta = timedelta(hours=6),
    ) -> list[dict]:
        """Events of [start, end) in windows of `step` (under the default "[)" bounds)."""
        out: list[dict] = []
        t = start
        while t < end:
            u = min(t + step, end)
            params: dict[str, Any] = {"startTime": t, "endTime": u}
            if report_id is not None:
                params["reportId"] = report_id
            out.extend(self.get_all("/v2/events", params))
            t = u
        return out


def _json_dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _decode(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def reset(emu: Any) -> None:
    """Back to the defaults: no faults, no hostile answers, asc/[), no limits, arrays on the
    webhook, default token lifetime, the default dialect, no stats."""
    emu.set_faults()
    emu.set_hostile()
    emu.set_semantics()
    emu.set_limits()
    emu.set_webhook()
    emu.set_token_lifetime(14399)
    emu.set_dialect()
    emu.reset_stats()


def emulator_fixture(**options: Any) -> Any:
    """A module-scoped fixture of an emulator of `options`, stopped after the module: assigned
    to a module-level name, it is the fixture of that name."""

    def fixture() -> Iterator[Any]:
        with sv.Emulator(**options) as e:
            yield e

    args = ", ".join(f"{k}={v!r}" for k, v in options.items())
    fixture.__doc__ = f"``sv.Emulator({args})``, shared by the test module."
    return pytest.fixture(scope="module")(fixture)


#: A small emulator shared by a test module (bursts exist: events_per_day >= 2000).
emu = emulator_fixture(seed=0, sites=12, days=3, events_per_day=3000)


@pytest.fixture(autouse=True)
def _reset_emulator(request):
    """Tests that use `emu` (or a module's `big`) start and end with it reset."""
    used = [request.getfixturevalue(n) for n in ("emu", "big") if n in request.fixturenames]
    for e in used:
        reset(e)
    yield
    for e in used:
        reset(e)


@pytest.fixture
def client(emu):
    """A client of the module's emulator, retrying 8 times, its webhook store emptied before
    and after (a module may define its own `client`)."""
    emu.clear_published()
    c = emu.client(max_retries=8)
    yield c
    c.close()
    emu.clear_published()


@pytest.fixture
def http(emu) -> Http:
    """A fresh HTTP helper (own token) on the shared emulator."""
    return Http(emu)


@pytest.fixture
def make_emu():
    """Factory of small private emulators, all stopped after the test."""
    made: list[Any] = []

    def make(**kw: Any) -> Any:
        args = {"seed": 1, "sites": 3, "days": 1, "events_per_day": 200, **kw}
        e = sv.Emulator(**args)
        made.append(e)
        return e

    yield make
    for e in made:
        e.stop()


@contextlib.contextmanager
def interrupt_after(
    seconds: float, *, kill: bool = False, count: Optional[Callable[[], int]] = None
) -> Iterator[dict]:
    """Ctrl-C `seconds` into the block unless it ends first (the timer is cancelled on the way
    out): ``_thread.interrupt_main()``, or with `kill` a real SIGINT, taken by the timer's
    thread (so that the signal is counted when the call returns, however loaded). Inside
    the block SIGINT raises KeyboardInterrupt in the main thread whatever the parent set: an
    inherited SIG_IGN (a background job of a shell) is replaced until the block ends. Yields a
    dict whose ``"at"`` is the ``time.monotonic()`` at which the interrupt was sent; with
    `count` (say, an emulator's requests), also its value just before (``"before"``) and just
    after (``"after"``) the interrupt."""
    sent: dict = {}

    def fire() -> None:
        if count is not None:
            sent["before"] = count()
        sent["at"] = time.monotonic()
        if kill:
            # This thread takes the signal: its C handler (the runtime's count of SIGINT, then
            # Python's flag for the main thread) has run when the call returns, whatever the
            # load, as a terminal's Ctrl-C is taken by whichever thread the kernel picks.
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        else:
            _thread.interrupt_main()
        if count is not None:
            sent["after"] = count()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(seconds, fire)
    timer.start()
    try:
        yield sent
    finally:
        timer.cancel()
        timer.join()  # `fire` done: `sent` is whole
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def clean_env(monkeypatch):
    """`monkeypatch` with every ``SURVEILLANCE_*`` variable removed from the environment."""
    for var in list(os.environ):
        if var.startswith("SURVEILLANCE_") and var not in (
            "SURVEILLANCE_QUOTA_DIR",
            "SURVEILLANCE_CONFIG_FILE",
        ):
            monkeypatch.delenv(var)
    return monkeypatch
