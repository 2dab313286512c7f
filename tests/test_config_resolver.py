"""One resolver reads the ``SURVEILLANCE_*`` variables (``surveillance._config``); the native
client takes what it resolved and reads none, so a variable means the same to ``Client()``,
the CLI, the dlt source and a worker, and ``surveillance config`` shows what a client uses."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
import surveillance as sv
from surveillance import _config, _core

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
