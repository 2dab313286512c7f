"""Fixtures for every test, the doctests of python/surveillance included."""

import pytest
import surveillance as sv


@pytest.fixture(autouse=True)
def _quota_ledgers(tmp_path_factory, monkeypatch):
    """Each test's clients count their requests in a ledger directory of the test's own (see
    `surveillance.Limits`), so that no count of another test (an emulator of the same seed on
    the same port) is seen, and nothing is written to the user's cache directory."""
    monkeypatch.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path_factory.mktemp("quota")))
    # No test reads the user's config file: a path of the test's own, absent unless written.
    config = tmp_path_factory.mktemp("config") / "config.toml"
    monkeypatch.setenv("SURVEILLANCE_CONFIG_FILE", str(config))


@pytest.fixture(autouse=True)
def _dlt_offline(tmp_path_factory, monkeypatch):
    """dlt (``surveillance.dlt``) sends no telemetry and keeps its own files in a directory of
    the test's own, not under the home directory."""
    monkeypatch.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")
    monkeypatch.setenv("DLT_DATA_DIR", str(tmp_path_factory.mktemp("dlt")))


@pytest.fixture(scope="session")
def _reference_emulator():
    """The emulator that the examples of the package's docstrings read, one per session."""
    with sv.Emulator(seed=7, sites=3, days=1, events_per_day=200) as emu:
        yield emu


@pytest.fixture(autouse=True)
def _reference_namespace(request, doctest_namespace):
    """What the examples of the docstrings find besides their own imports: the package as
    ``sv``, an emulator as ``emu`` and a client of each kind of it (``client``,
    ``async_client``), as the reference says. Made for the doctests only."""
    if type(request.node).__name__ != "DoctestItem":
        yield
        return
    emu = request.getfixturevalue("_reference_emulator")
    doctest_namespace.update(sv=sv, emu=emu, client=emu.client(), async_client=emu.async_client())
    yield
