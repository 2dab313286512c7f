"""One resolver reads the ``SURVEILLANCE_*`` variables (``surveillance._config``); the native
client takes what it resolved and reads none, so a variable means the same to ``Client()``,
the CLI, the dlt source and a worker, and ``surveillance config`` shows what a client uses."""

from __future__ import annotations

import ast
import inspect
import pathlib
import pickle
import subprocess
import sys

import pytest
import surveillance as sv
from surveillance import _config, _core, sync
from surveillance.cli import build_parser
from surveillance.publish import OPTION_DEFAULTS

from conftest import emulator_fixture, service_env

resolver_emu = emulator_fixture(seed=4, sites=2, days=1, events_per_day=20)


def _credentials(emu):
    return dict(
        api_key=emu.api_key,
        client_id=emu.client_id,
        client_secret=emu.client_secret,
        base_url=emu.url,
    )


def _ledger(inner) -> str:
    """Where the native client's daily quota's ledger is, as ``diagnose()`` says it."""
    line = next(x for x in inner.diagnose().splitlines() if x.startswith("quota:"))
    return line.split("(ledger: ", 1)[1].rstrip(")")


def test_the_native_client_reads_no_variable(resolver_emu, clean_env, tmp_path):
    """Each setting the native client once read from the environment for itself (the
    credentials, the region and the EU base, the audience, the outage, the cache, the quota's
    directory) is the resolver's alone: given nothing, the native client takes its default."""
    for name, value in {
        "SURVEILLANCE_API_KEY": "env-key",
        "SURVEILLANCE_REGION": "eu",
        "SURVEILLANCE_EU_BASE_URL": "https://eu.example.test",
        "SURVEILLANCE_AUDIENCE": "https://elsewhere.example.test/",
        "SURVEILLANCE_MAX_OUTAGE": "5",
        "SURVEILLANCE_CACHE": str(tmp_path / "env-cache"),
        "SURVEILLANCE_QUOTA_DIR": str(tmp_path / "env-quota"),
    }.items():
        clean_env.setenv(name, value)
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    given = _credentials(resolver_emu)
    config = _core.Client(**given).config()
    assert config["region"] == "us" and config["eu_base_url"] is None
    assert config["audience"] == resolver_emu.url.rstrip("/") + "/"
    assert config["max_outage"] == _core.DEFAULT_MAX_OUTAGE_S
    assert config["cache"] is False  # a loopback base URL, no cache asked
    if sys.platform.startswith("linux"):
        ledger = _ledger(_core.Client(**given))
        assert ledger.startswith(str(tmp_path / "xdg" / "surveillance" / "quota")), ledger
    del given["api_key"]
    with pytest.raises(sv.ConfigError, match="missing `api_key`.*SURVEILLANCE_API_KEY"):
        _core.Client(**given)


def test_the_variables_reach_the_native_client_through_the_resolver(
    resolver_emu, clean_env, tmp_path
):
    """What the native client no longer reads, ``sv.Client()`` hands it: the same values as
    before the move, the quota's directory (read by the native client alone before) too."""
    clean_env.setenv("SURVEILLANCE_MAX_OUTAGE", "5")
    clean_env.setenv("SURVEILLANCE_CACHE", str(tmp_path / "env-cache"))
    clean_env.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path / "env-quota"))
    clean_env.setenv("SURVEILLANCE_AUDIENCE", resolver_emu.audience)
    with sv.Client(**_credentials(resolver_emu)) as client:
        config = client._inner.config()
        assert config["max_outage"] == 5.0
        assert config["cache"] == str(tmp_path / "env-cache")
        assert config["audience"] == resolver_emu.audience
        assert _ledger(client._inner).startswith(str(tmp_path / "env-quota")), _ledger(
            client._inner
        )
        assert len(client.sites()) == 2
        shipped = pickle.dumps(client)
    # A worker's client reads its own machine's directory, not the pickled one's.
    clean_env.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path / "worker-quota"))
    assert "quota_dir" not in config
    with pickle.loads(shipped) as worker:
        assert _ledger(worker._inner).startswith(str(tmp_path / "worker-quota"))
    # Blank is unset, as for every variable.
    clean_env.setenv("SURVEILLANCE_QUOTA_DIR", " ")
    assert _config.quota_dir() is None
    given = dict(_credentials(resolver_emu), quota_dir=str(tmp_path / "given"))
    assert _ledger(_core.Client(**given)).startswith(str(tmp_path / "given"))


def test_the_emulator_forgets_its_ledger_in_the_resolved_directory(clean_env, tmp_path):
    """The ledger of an emulator's clients, in the directory the resolver read, is removed
    when it stops (the native emulator reads no variable to find it)."""
    clean_env.setenv("SURVEILLANCE_QUOTA_DIR", str(tmp_path / "quota"))
    with sv.Emulator(sites=2, days=1, events_per_day=10) as emu:
        emu.client().sites()
        assert len(list((tmp_path / "quota").iterdir())) == 1
    assert [p for p in (tmp_path / "quota").iterdir() if p.suffix != ".lock"] == []


def test_the_cache_command_reads_the_variable_through_the_resolver(clean_env, tmp_path):
    """``surveillance cache info`` finds the cache that ``SURVEILLANCE_CACHE`` names, and the
    user's cache directory's when it is a switch or blank."""
    clean_env.setenv("SURVEILLANCE_CACHE", str(tmp_path / "env-cache"))
    assert _core.cache_location(_config.variable("cache")) == str(tmp_path / "env-cache")
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for word in ("1", " off ", "Yes", " "):
        clean_env.setenv("SURVEILLANCE_CACHE", word)
        if sys.platform.startswith("linux"):
            where = _core.cache_location(_config.variable("cache"))
            assert where == str(tmp_path / "xdg" / "surveillance" / "events"), word
    env = service_env(None, SURVEILLANCE_CACHE=str(tmp_path / "env-cache"))
    out = subprocess.run(
        [sys.executable, "-m", "surveillance.cli", "cache", "info"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "env-cache") in out.stdout


def test_the_profile_shown_is_the_one_resolved(clean_env, tmp_path):
    """``surveillance config`` names the profile the resolver chose: the option's, else the
    variable's."""
    config = tmp_path / "config.toml"
    config.write_text("[profiles.a]\ntimeout = 3\n[profiles.b]\ntimeout = 4\n")
    config.chmod(0o600)
    env = service_env(None, SURVEILLANCE_CONFIG_FILE=str(config), SURVEILLANCE_PROFILE="a")
    for args, shown, timeout in (([], "a", "3.0"), (["--profile", "b"], "b", "4.0")):
        out = subprocess.run(
            [sys.executable, "-m", "surveillance.cli", *args, "config"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        assert f"profile: {shown}\n" in out.stdout
        assert "  timeout" in out.stdout and f" {timeout} " in out.stdout
    assert _config.selected_profile(None, {"SURVEILLANCE_PROFILE": "a"}) == "a"
    assert _config.selected_profile("b", {"SURVEILLANCE_PROFILE": "a"}) == "b"
    assert _config.selected_profile(None, {"SURVEILLANCE_PROFILE": ""}) is None


#: Parameters whose default the package states once, and the name every user reads it by.
SHARED = {"settle": "DEFAULT_SETTLE", "batch_size": "OPTION_DEFAULTS"}


def test_each_default_is_stated_once_and_read_by_its_users():
    """The settle period, the cache's on and off words, the emulator's data and the regions
    are the core's, the publish options' defaults the publish module's: every user reads them
    from there."""
    assert sync.DEFAULT_SETTLE.total_seconds() == _core.DEFAULT_SETTLE_S == 3600.0
    for reader in (sv.Client, sv.AsyncClient, sync.sync_events):
        assert inspect.signature(reader).parameters["settle"].default is sync.DEFAULT_SETTLE
    # No reader (the dlt source and the Airflow operator too) writes a default of its own.
    package = pathlib.Path(sv.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.arguments):
                names = [a.arg for a in node.args + node.kwonlyargs]
                defaults = [None] * (len(node.args) - len(node.defaults)) + node.defaults
                defaults += node.kw_defaults
                for name, default in zip(names, defaults):
                    if name in SHARED and default is not None:
                        assert SHARED[name] in ast.unparse(default), (path, name)
    publish = inspect.signature(sv.Client.publish).parameters
    assert {name: publish[name].default for name in OPTION_DEFAULTS} == OPTION_DEFAULTS
    parsed = build_parser().parse_args(["sync", "d", "--start", "2026-01-05"])
    assert sync.parse_settle(parsed.settle) == sync.DEFAULT_SETTLE
    assert _core.CACHE_SWITCHES == {
        **dict.fromkeys(("1", "true", "on", "yes"), True),
        **dict.fromkeys(("0", "false", "off", "no"), False),
    }
    data = sv.Emulator.DATA_DEFAULTS
    assert data == {
        "seed": 0,
        "sites": 20,
        "days": 14,
        "events_per_day": 5000,
        "start": "2026-01-05",
    }
    emulator = inspect.signature(sv.Emulator).parameters
    assert {name: emulator[name].default for name in data} == data
    parsed = build_parser().parse_args(["emulator"])
    assert (parsed.seed, parsed.sites, parsed.days, parsed.events_per_day, parsed.start) == (
        tuple(data.values())
    )
    demo = build_parser().parse_args(["demo"])
    assert (demo.sites, demo.events_per_day) == (data["sites"], data["events_per_day"])
    region = next(s for s in _config.SETTINGS if s.name == "region")
    assert region.default == _core.REGIONS[0] == "us"
