"""Every argument of every public function and constructor, fed values of the wrong type,
negative, zero, NaN, ±inf, huge, empty and control-character strings: each call gives a
result or a `SurveillanceError`, `TypeError` or `ValueError` that names the argument, is
under 500 characters and holds no secret; never a panic, a hang, or an unnamed
`OverflowError`. The calls go to a small emulator over loopback."""

from __future__ import annotations

import datetime as dt
import inspect
import time
from typing import Any, Callable

import pytest
import surveillance as sv

from conftest import emulator_fixture, other

#: Values a careless or hostile caller passes, for any argument.
BAD: list = [
    -1,
    0,
    -0.5,
    float("nan"),
    float("inf"),
    float("-inf"),
    10**30,
    2**64,
    "",
    "\x00\n\t\x1b[31m",
    "x" * 10_000_000,
    b"bytes",
    [],
    {},
    object(),
    True,
]
#: Seconds a call may take, at most (the clients below time out after 2 s, without retries).
LIMIT = 15.0
ALLOWED = (sv.SurveillanceError, TypeError, ValueError)


emu = emulator_fixture(seed=2, sites=2, days=1, events_per_day=50)


def secrets_of(emu: Any) -> list:
    return [emu.api_key, emu.client_secret]


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 40 else text[:37] + "..."


def check_call(
    name: str, call: Callable[[], Any], argument: str, value: Any, secrets: list
) -> None:
    started = time.monotonic()
    try:
        call()
    except ALLOWED as e:
        message = str(e)
        where = f"{name}({argument}={shown(value)}) raised {type(e).__name__}: {message[:300]}"
        assert argument in message, f"{where}: the message does not name `{argument}`"
        assert len(message) < 500, f"{where}: {len(message)} characters"
        for s in secrets:
            assert s not in message, f"{where}: a secret in the message"
        assert not isinstance(e, OverflowError) or argument in message
    except BaseException as e:  # noqa: B036 (every other kind is a failure: panics included)
        raise AssertionError(
            f"{name}({argument}={shown(value)}) raised {type(e).__name__}: {str(e)[:300]}"
        ) from e
    finally:
        took = time.monotonic() - started
        assert took < LIMIT, f"{name}({argument}={shown(value)}) took {took:.1f} s"


def fuzz(
    name: str,
    func: Callable,
    valid: dict,
    secrets: list,
    skip: tuple = (),
    then: Callable[[Any], Any] = lambda result: result,
) -> None:
    """Calls ``func(**valid)`` with each argument replaced, in turn, by each bad value (and
    ``then`` on what it returns: an iterator is consumed)."""
    params = inspect.signature(func).parameters
    for argument in valid:
        assert argument in params, f"{name} has no argument `{argument}`"
    for argument in params:
        if argument in skip or params[argument].kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        for value in BAD:
            kwargs = {**valid, argument: value}
            check_call(name, lambda kw=kwargs: then(func(**kw)), argument, value, secrets)


def client_kwargs(emu: Any) -> dict:
    return {
        "api_key": emu.api_key,
        "client_id": emu.client_id,
        "client_secret": emu.client_secret,
        "base_url": emu.url,
        "eu_base_url": emu.eu_url,
        "audience": emu.audience,
        "timeout": 2.0,
        "max_retries": 0,
        "limits": sv.Limits.unlimited(),
    }


def test_client_constructor(emu):
    fuzz("Client", sv.Client, client_kwargs(emu), secrets_of(emu))


def test_async_client_constructor(emu):
    fuzz("AsyncClient", sv.AsyncClient, client_kwargs(emu), secrets_of(emu))


def test_limits(emu):
    fuzz("Limits", sv.Limits, {}, secrets_of(emu))


@pytest.fixture(scope="module")
def client(emu):
    return sv.Client(**client_kwargs(emu))


@pytest.mark.parametrize("method", ["sites", "devices", "reports"])
def test_lists(emu, client, method):
    fuzz(method, getattr(client, method), {}, secrets_of(emu))


def test_cameras(emu, client):
    fuzz("cameras", client.cameras, {}, secrets_of(emu))


def ranged(emu: Any) -> dict:
    return {"start": emu.start, "end": emu.start + dt.timedelta(hours=6)}


def test_events(emu, client):
    fuzz("events", client.events, {**ranged(emu), "progress": False}, secrets_of(emu))


def test_iter_events(emu, client):
    fuzz("iter_events", client.iter_events, ranged(emu), secrets_of(emu), then=list)


def test_event_batches(emu, client):
    fuzz("event_batches", client.event_batches, ranged(emu), secrets_of(emu))


def test_plan_events(emu, client):
    fuzz("plan_events", client.plan_events, ranged(emu), secrets_of(emu))


def test_sync_events(emu, client, tmp_path):
    fuzz(
        "sync_events",
        client.sync_events,
        {"path": str(tmp_path / "events"), "start": emu.start, "until": emu.end},
        secrets_of(emu),
    )


def test_publish(emu, client):
    fuzz(
        "publish",
        client.publish,
        {"records": [other()], "progress": False},
        secrets_of(emu),
    )


def test_validate_and_write_parquet(emu, tmp_path):
    fuzz("validate", sv.validate, {"record": other()}, secrets_of(emu))
    table = sv.Client(**client_kwargs(emu)).sites(output="arrow")
    fuzz(
        "write_parquet",
        sv.write_parquet,
        {"data": table, "path": str(tmp_path / "x.parquet")},
        secrets_of(emu),
    )


def test_emulator_constructor():
    fuzz(
        "Emulator",
        sv.Emulator,
        {"sites": 1, "days": 1, "events_per_day": 1},
        [],
        then=lambda emu: emu.stop(),
    )


@pytest.mark.parametrize(
    "method, valid",
    [
        ("set_faults", {}),
        ("set_semantics", {}),
        ("set_limits", {}),
        ("set_hostile", {}),
        ("set_webhook", {}),
        ("advance_clock", {"seconds": 1.0}),
        ("truth", {"start": "2026-01-05", "end": "2026-01-06"}),
        ("published", {}),
        ("resources", {"kind": "sites"}),
        ("client", {}),
    ],
)
def test_emulator_methods(method, valid):
    with sv.Emulator(seed=2, sites=2, days=1, events_per_day=50) as emu:
        fuzz(f"Emulator.{method}", getattr(emu, method), valid, secrets_of(emu))


def test_quota_stats_diagnose_close(emu, client):
    # No arguments: they answer.
    assert client.quota()["used"] >= 0
    assert "requests" in client.stats()
    client.diagnose()


def run_async(result: Any) -> Any:
    """Awaits a coroutine, or consumes an async iterator, on a fresh event loop."""
    import asyncio

    async def drain() -> Any:
        if hasattr(result, "__aiter__"):
            return [x async for x in result]
        return await result

    return asyncio.run(drain())


@pytest.mark.parametrize(
    "method", ["sites", "cameras", "events", "iter_events", "event_batches", "plan_events"]
)
def test_async_client_methods(emu, method):
    aclient = sv.AsyncClient(**client_kwargs(emu))
    valid = {} if method in ("sites", "cameras") else ranged(emu)
    if method == "events":
        valid["progress"] = False
    fuzz(f"AsyncClient.{method}", getattr(aclient, method), valid, secrets_of(emu), then=run_async)


def test_async_publish(emu):
    aclient = sv.AsyncClient(**client_kwargs(emu))
    fuzz(
        "AsyncClient.publish",
        aclient.publish,
        {"records": [other()], "progress": False},
        secrets_of(emu),
        then=run_async,
    )


def test_analysis_helpers(emu, client):
    from surveillance.analysis import dwell_summary, location_tags, with_local_time

    events = client.events(emu.start, emu.end, output="pandas", progress=False)
    sites = client.sites(output="pandas")
    fuzz("location_tags", location_tags, {"df": events}, secrets_of(emu))
    fuzz(
        "with_local_time",
        with_local_time,
        {"events_df": events, "sites_df": sites},
        secrets_of(emu),
    )
    tagged = location_tags(events)
    fuzz("dwell_summary", dwell_summary, {"events_df": tagged}, secrets_of(emu))


def test_every_list_of_the_core_table_is_served_everywhere(emu, client):
    """The core's list table (`_core.LISTS`) is where a list endpoint is added: each list is a
    method of both clients, a CLI command with an option per filter, and served by the
    emulator, with the same records through each."""
    import asyncio

    import surveillance.cli as cli

    names = [spec["name"] for spec in sv._core.LISTS]
    assert names == ["sites", "devices", "cameras", "reports"]
    commands = {c.name: c for c in cli.COMMANDS}
    for spec in sv._core.LISTS:
        kind = spec["name"]
        served = emu.resources(kind)
        assert getattr(client, kind)() == served
        assert getattr(client, kind)(output="arrow").num_rows == len(served)
        assert asyncio.run(getattr(emu.async_client(), kind)()) == served
        assert commands[kind].help == spec["about"]
        options = cli.build_parser().parse_args([kind, *(f"--{f[:-3]}=x" for f in spec["filters"])])
        assert all(getattr(options, f[:-3]) == "x" for f in spec["filters"])
    with pytest.raises(ValueError, match="must be one of sites, devices, cameras, reports"):
        emu.resources("zones")


def test_a_library_warning_does_not_reach_stderr_without_logging_configured():
    """The package's logger has a ``NullHandler`` (the logging how-to's advice to libraries):
    an application that configures no logging sees none of its records on stderr, one that
    does sees them."""
    import subprocess
    import sys

    code = (
        "import logging, surveillance\n"
        "logging.getLogger('surveillance.dlt').warning('a warning of the library')\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    configured = "import logging; logging.basicConfig()\n" + code
    loud = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True)
    assert "a warning of the library" in loud.stderr
