"""The types a user's type checker sees: a small typed script that calls every reading,
publishing and planning method of both clients is checked by ``mypy --strict`` in a
subprocess (one run). It must pass, but for the misspelt ``output="pandsa"`` that it must
refuse; each ``reveal_type`` must name the type promised (a TypedDict of
:mod:`surveillance.types`, a ``pyarrow.Table``, a pandas or polars ``DataFrame``, ...) and none
may contain ``Any``. The TypedDicts are also held against the records the emulator sends, and
the results' keys against their classes' attributes."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import textwrap
import typing
from typing import Any

import pytest
import surveillance as sv
from surveillance import _output

from conftest import emulator_fixture

emu = emulator_fixture(seed=3, sites=2, days=1, events_per_day=40)

#: Reveals of the script, by the label written after each one: the pattern that its revealed
#: type, as :func:`shown` writes it, must match in full.
EVENT = r"TypedDict\(surveillance\.types\.Event, \{.*\}\)"
FRAME = r"pandas(\.\w+)*\.DataFrame"
POLARS = r"polars(\.\w+)*\.DataFrame"
TABLE = r"pyarrow(\.\w+)*\.Table"


def record(name: str) -> str:
    return rf"TypedDict\(surveillance\.types\.{name}, \{{.*\}}\)"


def optional(pattern: str) -> str:
    return rf"(?:{pattern} \| None|Union\[{pattern}, None\])"


EXPECTED = {
    "events": rf"list\[{EVENT}\]",
    "events dicts": rf"list\[{EVENT}\]",
    "events arrow": TABLE,
    "events arrow positional": TABLE,
    "events pandas": FRAME,
    "events polars": POLARS,
    "event field": r"str",
    "event details": optional("int"),
    "event camera": r"str",
    "iter_events": rf"typing\.Iterator\[{EVENT}\]",
    "sites": rf"list\[{record('Site')}\]",
    "sites pandas": FRAME,
    "site externalId": optional("str"),
    "devices": rf"list\[{record('Device')}\]",
    "devices arrow": TABLE,
    "cameras": rf"list\[{record('Camera')}\]",
    "cameras polars": POLARS,
    "camera stream fps": r"float",
    "reports": rf"list\[{record('Report')}\]",
    "reports polars": POLARS,
    "publish": r"surveillance\._core_results\.PublishReport",
    "publish rejected": r"list\[surveillance\._core_results\.Failure\]",
    "publish failures": r"list\[surveillance\._core_results\.Failure\]",
    "failure problems": r"list\[tuple\[str, str, str, fallback=surveillance\.errors\.Problem\]\]",
    "quota": r"surveillance\._core_results\.Quota",
    "quota resets_at": r"datetime\.datetime",
    "quota limit": optional("int"),
    "stats": r"surveillance\._core_results\.Stats",
    "cache_info": optional(r"surveillance\._core_results\.CacheInfo"),
    "plan_events": r"surveillance\._core_results\.EventPlan",
    "plan events": r"int",
    "async events": rf"list\[{EVENT}\]",
    "async events arrow": TABLE,
    "async events pandas": FRAME,
    "async events polars": POLARS,
    "async iter_events": rf"typing\.AsyncIterator\[{EVENT}\]",
    "async event": EVENT,
    "async sites": rf"list\[{record('Site')}\]",
    "async devices": rf"list\[{record('Device')}\]",
    "async cameras": rf"list\[{record('Camera')}\]",
    "async cameras pandas": FRAME,
    "async reports arrow": TABLE,
    "async cameras arrow positional": TABLE,
    "async sites task": rf"_?asyncio(\.\w+)*\.Task\[list\[{record('Site')}\]\]",
    "async events output str": rf"list\[{EVENT}\] \| {TABLE} \| {FRAME} \| {POLARS}",
    "async publish": r"surveillance\._core_results\.PublishReport",
    "async quota": r"surveillance\._core_results\.Quota",
    "async plan_events": r"surveillance\._core_results\.EventPlan",
    "events output str": rf"list\[{EVENT}\] \| {TABLE} \| {FRAME} \| {POLARS}",
    "scan_events": r"polars(\.\w+)*\.LazyFrame",
    "event_batches": r"surveillance\._batches\.EventBatches",
    "event batch": r"pyarrow(\.\w+)*\.RecordBatch",
    "last_cost": r"surveillance\._core_results\.Cost",
    "last_cost requests": r"int",
    "last_cost quota": optional(r"surveillance\._core_results\.Quota"),
    "quota error resets_at": optional(r"datetime\.datetime"),
    "publish error report": optional(r"surveillance\._core_results\.PublishReport"),
    "sites output": rf"list\[{record('Site')}\] \| {TABLE} \| {FRAME} \| {POLARS}",
    "publish frame": r"surveillance\._core_results\.PublishReport",
    "publish path": r"surveillance\._core_results\.PublishReport",
    "async event batch": r"pyarrow(\.\w+)*\.RecordBatch",
    "dask events": r"dask\.dataframe(\.\w+)*\.DataFrame",
    "dask events_meta": FRAME,
    "dask publish": r"surveillance\._core_results\.PublishReport",
}

#: The calls of the script that mypy must refuse, by label: a misspelt ``output=`` on every
#: method that takes it (both clients), and records of no kind that ``publish`` reads.
REFUSED = {
    "misspelt events",
    "misspelt sites",
    "misspelt devices",
    "misspelt cameras",
    "misspelt reports",
    "misspelt async events",
    "misspelt async sites",
    "misspelt async devices",
    "misspelt async cameras",
    "misspelt async reports",
    "publish a number",
    "async publish a number",
}


def shown(revealed: str) -> str:
    """A revealed type as mypy 2 writes it, whichever mypy wrote it: older ones name
    ``builtins.str`` and quote a TypedDict's name and keys."""
    return revealed.replace("builtins.", "").replace("'", "")


SCRIPT = """
from __future__ import annotations

import asyncio
import datetime as dt

import dask.bag
import pandas
import surveillance as sv
import surveillance.dask as svd

rows = [{"dataType": "other"}]


def read(client: sv.Client, start: dt.datetime, end: dt.datetime, kind: sv.Output) -> None:
    events = client.events(start, end)
    reveal_type(events)  # events
    reveal_type(client.events(start, end, output="dicts"))  # events dicts
    reveal_type(client.events(start, end, output="arrow"))  # events arrow
    reveal_type(client.events(start, end, None, "arrow"))  # events arrow positional
    reveal_type(client.events(start, end, output="pandas"))  # events pandas
    reveal_type(client.events(start, end, output="polars", progress=False))  # events polars
    reveal_type(events[0]["startTime"])  # event field
    reveal_type(events[0]["details"].get("duration_sec"))  # event details
    reveal_type(events[0]["cameras"][0]["name"])  # event camera
    reveal_type(client.iter_events(start, end))  # iter_events
    reveal_type(client.sites())  # sites
    reveal_type(client.sites(output="pandas"))  # sites pandas
    reveal_type(client.sites()[0]["externalId"])  # site externalId
    reveal_type(client.devices())  # devices
    reveal_type(client.devices("arrow"))  # devices arrow
    reveal_type(client.cameras(site_id="s"))  # cameras
    reveal_type(client.cameras(None, None, "polars"))  # cameras polars
    reveal_type(client.cameras()[0]["streams"][0]["fps"])  # camera stream fps
    reveal_type(client.reports())  # reports
    reveal_type(client.reports(output="polars"))  # reports polars
    report = client.publish(rows, batch_size=100)
    reveal_type(report)  # publish
    reveal_type(report.rejected)  # publish rejected
    reveal_type(report.failures)  # publish failures
    reveal_type(report.rejected[0].problems)  # failure problems
    reveal_type(client.quota())  # quota
    reveal_type(client.quota()["resets_at"])  # quota resets_at
    reveal_type(client.quota()["limit"])  # quota limit
    reveal_type(client.stats())  # stats
    reveal_type(client.cache_info())  # cache_info
    reveal_type(client.plan_events(start, end))  # plan_events
    reveal_type(client.plan_events(start, end).events)  # plan events
    client.events(start, end, output="pandsa")  # misspelt events
    client.sites(output="panda")  # misspelt sites
    client.devices(output="dict")  # misspelt devices
    client.cameras(output="pyarrow")  # misspelt cameras
    client.reports(output="Polars")  # misspelt reports
    reveal_type(client.events(start, end, output=kind))  # events output str
    reveal_type(client.sites(output=kind))  # sites output
    reveal_type(client.publish(pandas.DataFrame(rows)))  # publish frame
    reveal_type(client.publish("records.jsonl"))  # publish path
    client.publish(3.5)  # publish a number
    reveal_type(sv.scan_events(client, start))  # scan_events
    reveal_type(client.event_batches(start, end))  # event_batches
    for batch in client.event_batches(start, end):
        reveal_type(batch)  # event batch
    reveal_type(client.last_cost)  # last_cost
    reveal_type(client.last_cost.requests)  # last_cost requests
    reveal_type(client.last_cost.quota)  # last_cost quota


async def read_async(
    client: sv.AsyncClient, start: dt.datetime, end: dt.datetime, kind: sv.Output
) -> None:
    reveal_type(await client.events(start, end))  # async events
    reveal_type(await client.events(start, end, output="arrow"))  # async events arrow
    reveal_type(await client.events(start, end, None, "pandas"))  # async events pandas
    reveal_type(await client.events(start, end, output="polars"))  # async events polars
    reveal_type(client.iter_events(start, end))  # async iter_events
    async for event in client.iter_events(start, end):
        reveal_type(event)  # async event
    reveal_type(await client.sites())  # async sites
    reveal_type(await client.devices())  # async devices
    reveal_type(await client.cameras(device_id="d"))  # async cameras
    reveal_type(await client.cameras(output="pandas"))  # async cameras pandas
    reveal_type(await client.reports("arrow"))  # async reports arrow
    reveal_type(await client.cameras(None, "d", "arrow"))  # async cameras arrow positional
    reveal_type(asyncio.create_task(client.sites()))  # async sites task
    reveal_type(await client.events(start, end, output=kind))  # async events output str
    reveal_type(await client.publish(rows, batch_size=100, progress=False))  # async publish
    reveal_type(client.quota())  # async quota
    reveal_type(await client.plan_events(start, end))  # async plan_events
    await client.events(start, end, output="pandsa")  # misspelt async events
    await client.sites(output="pandsa")  # misspelt async sites
    await client.devices(output="arow")  # misspelt async devices
    await client.cameras(output="panda")  # misspelt async cameras
    await client.reports(output="json")  # misspelt async reports
    await client.publish(3.5)  # async publish a number
    async for batch in client.event_batches(start, end):
        reveal_type(batch)  # async event batch


def scale_out(client: sv.Client, start: dt.datetime, end: dt.datetime, bag: dask.bag.Bag) -> None:
    reveal_type(svd.events(client, start, end))  # dask events
    reveal_type(svd.events_meta())  # dask events_meta
    reveal_type(svd.publish(client, bag))  # dask publish


def errors(client: sv.Client) -> None:
    try:
        client.publish(rows).raise_on_failure()
    except sv.QuotaExhaustedError as e:
        reveal_type(e.resets_at)  # quota error resets_at
    except sv.PublishError as e:
        reveal_type(e.report)  # publish error report
"""


def typed(module: str) -> bool:
    """Whether mypy sees the types of ``module``: it ships ``py.typed``, or its stubs
    (``<module>-stubs``, PEP 561) are installed. Without them, what it returns is ``Any``."""
    for entry in sys.path:
        if os.path.isdir(os.path.join(entry, f"{module}-stubs")):
            return True
        if os.path.isfile(os.path.join(entry, module, "py.typed")):
            return True
    return False


def run_mypy(tmp_path: Any) -> tuple[int, dict, dict]:
    """mypy's exit status, the revealed types by label and the errors by label."""
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")  # no configuration of the user's or the project's
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(config)]
        + ["--cache-dir", str(tmp_path / "mypy-cache"), "--no-color-output"]
        + ["--no-error-summary", "--hide-error-context", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert not out.stderr.strip(), out.stderr
    labels = {
        n: line.rsplit("# ", 1)[1]
        for n, line in enumerate(script.read_text().splitlines(), 1)
        if "# " in line
    }
    revealed: dict = {}
    errors: dict = {}
    for line in out.stdout.splitlines():
        m = re.match(r"user\.py:(\d+): (note|error): (.*)$", line)
        assert m, f"unexpected mypy output: {line}"
        label = labels.get(int(m.group(1)), f"line {m.group(1)}")
        if m.group(2) == "error":
            errors.setdefault(label, []).append(m.group(3))
        elif m.group(3).startswith("Revealed type is "):
            revealed[label] = shown(m.group(3)[len("Revealed type is ") :].strip('"'))
    return out.returncode, revealed, errors


@pytest.mark.slow
def test_mypy_strict_sees_every_result_typed(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (the `test` extra has it)")
    status, revealed, errors = run_mypy(tmp_path)

    # The only errors are the calls the script makes to be refused: a misspelt output of any
    # method, refused as no overload's Literal (an `output=` held in an `sv.Output` matches
    # the fallback overload, whose type is the union of the outputs), and records that
    # publish does not read. The messages name only public names.
    assert sorted(errors) == sorted(REFUSED), errors
    for label in REFUSED:
        for message in errors[label]:
            if label.startswith("misspelt"):
                assert message.startswith("No overload variant of "), message
                assert message.endswith("[call-overload]"), message
            else:
                assert message.endswith("[arg-type]"), message
            assert not re.search(r"(?<!\w)_[A-Za-z]|Rows\b", message), message
    assert status == 1

    assert sorted(revealed) == sorted(EXPECTED), "a reveal_type is missing or unexpected"
    # Without their stubs (pandas-stubs, pyarrow-stubs: in the `test` extra), pandas and
    # pyarrow are untyped to mypy, so a DataFrame or Table it cannot see is `Any`: that, and
    # only that, is allowed then.
    untyped = {FRAME: not typed("pandas"), TABLE: not typed("pyarrow"), POLARS: not typed("polars")}
    for label, pattern in EXPECTED.items():
        got = revealed[label]
        if untyped.get(pattern) and got == "Any":
            continue
        assert re.fullmatch(pattern, got), f"{label}: revealed {got!r}, expected {pattern!r}"
        assert not re.search(r"\bAny\b", got), f"{label}: revealed {got!r}"


def test_output_literal_is_what_the_clients_accept():
    assert typing.get_args(sv.types.Output) == _output.OUTPUTS


def test_types_are_exported():
    for name in sv.types.__all__:
        assert getattr(sv, name) is getattr(sv.types, name)
        assert name in sv.__all__
        if isinstance(getattr(sv, name), type):  # an alias is documented by its `#:` comment
            assert getattr(sv, name).__doc__


def keys_fit(record: dict, kind: Any, where: str) -> None:
    """The record holds every key its TypedDict requires and no key it does not name."""
    missing = kind.__required_keys__ - record.keys()
    unknown = record.keys() - kind.__required_keys__ - kind.__optional_keys__
    assert not missing and not unknown, f"{where}: missing {missing}, not named {unknown}"


def attributes_fit(result: Any, kind: type, where: str) -> None:
    """A result is of its class, and its keys are the class's typed attributes."""
    import inspect

    assert type(result) is kind, where
    attributes = {n for n, v in vars(kind).items() if inspect.isgetsetdescriptor(v)}
    assert set(result) == attributes, where


def test_records_fit_their_types(emu):
    client = emu.client()
    event = client.events(emu.start, emu.end, progress=False)[0]
    keys_fit(event, sv.Event, "event")
    keys_fit(event["cameras"][0], sv.EventCamera, "event camera")
    documented = sv.EventDetails.__optional_keys__
    assert documented <= event["details"].keys()  # descriptive keys come besides these
    keys_fit(client.sites()[0], sv.Site, "site")
    keys_fit(client.devices()[0], sv.Device, "device")
    camera = client.cameras()[0]
    keys_fit(camera, sv.Camera, "camera")
    keys_fit(camera["streams"][0], sv.Stream, "stream")
    keys_fit(camera["streams"][0]["dimensions"], sv.StreamDimensions, "stream dimensions")
    keys_fit(client.reports()[0], sv.Report, "report")
    quota = client.quota()
    attributes_fit(quota, sv.Quota, "quota")
    assert isinstance(quota["resets_at"], dt.datetime)
    attributes_fit(client.stats(), sv.Stats, "stats")


def test_cache_info_fits_its_type(emu, tmp_path):
    client = emu.client(cache=str(tmp_path))
    client.events(emu.start, emu.end, progress=False)
    info = client.cache_info()
    assert info is not None
    attributes_fit(info, sv.CacheInfo, "cache info")
    attributes_fit(info["entries"][0], sv.CacheEntry, "cache entry")
    lo, hi = info["entries"][0]["ranges"][0]
    assert isinstance(lo, dt.datetime) and isinstance(hi, dt.datetime)


def test_results_cross_the_binding_as_python_objects():
    """The plan, the quota, the stats, the cache's contents (classes of the native module) and
    the emulator's lists (dicts and lists) come from the native module derived from the core's
    types: no native method hands
    back JSON text for the Python layer to parse. (``columns_json`` and ``to_json`` write
    the webhook's request bodies, which are JSON by definition, as a failure's
    ``record_json`` holds one.)"""
    import ast
    import pathlib

    package = pathlib.Path(sv.__file__).parent
    stubs = [ast.parse(f.read_text()) for f in package.glob("_core*.pyi")]
    assert len(stubs) == 2
    wire = {"columns_json", "to_json", "record_json"}
    texts = [
        node.name
        for stub in stubs
        for node in ast.walk(stub)
        if isinstance(node, ast.FunctionDef)
        and node.name.endswith("_json")
        and node.name not in wire
    ]
    assert texts == []
    parsed = [
        f"{path.name}:{number}"
        for path in package.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(
            r"json\.loads\((?:await )?(?:self\._inner|self\._client\._inner|_core)\.", line
        )
    ]
    assert parsed == []
    with sv.Emulator(sites=1, days=1, events_per_day=5) as emulator:
        client = emulator.client()
        plan = client.plan_events(emulator.start, emulator.end)
        assert isinstance(plan.events, int) and isinstance(plan.seconds, float)
        assert isinstance(client.quota()["used"], int)
        assert isinstance(client.stats()["requests"], dict)
        assert isinstance(emulator.stats()["requests"], dict)


@pytest.mark.slow
def test_the_package_passes_mypy_strict(tmp_path):
    """The package itself (its modules, the ``cli`` package included, and the stubs
    ``_core.pyi`` and ``_core_results.pyi``) passes ``mypy --strict`` without a configuration
    of the project's: 150 errors in 18 files before its types were completed."""
    pytest.importorskip("mypy", reason="mypy is not installed (the `test` extra has it)")
    import pathlib

    package = pathlib.Path(sv.__file__).parent
    # Installed, the package is found as a typed one (py.typed), from a folder of its own: in
    # site-packages, mypy would read the modules beside it (mypy_extensions.py) as the
    # project's. From the source tree, it is read where it is.
    installed = package.parent.name in ("site-packages", "dist-packages")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", str(config)]
        + ["--cache-dir", str(tmp_path / "mypy-cache"), "--no-color-output"]
        + ["-p", "surveillance"],
        cwd=tmp_path if installed else package.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


#: Parameters of a :class:`~surveillance.Client` method that its
#: :class:`~surveillance.AsyncClient` twin does not take: a bar drawn while a coroutine is
#: awaited would stall the event loop's other tasks.
ASYNC_WITHOUT = {"iter_events": {"progress"}, "plan_events": {"progress"}}


def test_the_async_client_takes_the_sync_clients_parameters():
    """Each method of both clients shows the same parameters, names, kinds and defaults, to
    ``inspect.signature`` (Jupyter's ``?``, the API reference): the async ones are written
    with the sync ones' (``_overloads.signature_of``, a shared family) or checked here."""
    import inspect

    shared = sorted(
        name
        for name in set(dir(sv.Client)) & set(dir(sv.AsyncClient))
        if not name.startswith("_") and inspect.isfunction(getattr(sv.Client, name))
    )
    assert {"events", "publish", "sites", "event_batches", "plan_events"} <= set(shared)

    def parameters(method: Any, without: set) -> list:
        params = inspect.signature(method).parameters.values()
        return [(p.name, p.kind, p.default) for p in params if p.name not in without]

    for name in shared:
        without = ASYNC_WITHOUT.get(name, set())
        sync = parameters(getattr(sv.Client, name), without)
        awaited = parameters(getattr(sv.AsyncClient, name), set())
        assert sync == awaited, f"AsyncClient.{name} differs from Client.{name}"

    # AsyncClient.publish's options are applied by the function both clients call, with its
    # defaults: they must be the ones Client.publish shows.
    from surveillance import publish as _publish

    shown = inspect.signature(sv.Client.publish).parameters
    applied = inspect.signature(_publish.publish).parameters
    for option in _publish.PublishOptions.__annotations__:
        assert applied[option].default == shown[option].default, option
