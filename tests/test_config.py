"""One table of settings read the same way by the library and the command line: argument,
environment, profile, ``[default]``, built-in default; the config file and its profiles; secrets
only from a private file; ``surveillance config``; the emulator's printed environment; the
connection options once, on the top-level parser."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import pytest
import surveillance as sv
from surveillance import _config

from conftest import emulator_command, emulator_fixture, service_env

CLI = [sys.executable, "-m", "surveillance.cli"]

config_emu = emulator_fixture(seed=9, sites=2, days=1, events_per_day=50)


def _write(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return path


#: The five places a value may come from, highest first, and the value each gives.
LEVELS = ["argument", "environment", "profile", "[default]", "default"]
VALUES = {"argument": 7.0, "environment": 8.0, "profile": 9.0, "[default]": 10.0, "default": 30.0}


@pytest.mark.parametrize("high,low", list(itertools.combinations(LEVELS, 2)))
def test_precedence_of_every_pair(tmp_path, high, low):
    """Of any two places that give `timeout`, the higher one wins, in the library's
    resolution (which the CLI and Client() both use)."""
    present = {high, low}
    lines = []
    if "[default]" in present:
        lines += ["[default]", f"timeout = {VALUES['[default]']}"]
    if "profile" in present:
        lines += ["[profiles.p]", f"timeout = {VALUES['profile']}"]
    else:
        lines += ["[profiles.p]"]
    config = _write(tmp_path / "config.toml", "\n".join(lines) + "\n")
    env = {"SURVEILLANCE_CONFIG_FILE": str(config)}
    if "environment" in present:
        env["SURVEILLANCE_TIMEOUT"] = str(VALUES["environment"])
    given = {"timeout": VALUES["argument"]} if "argument" in present else {}
    got = _config.resolve(given, profile="p", environ=env)["timeout"]
    origin = "profile p" if high == "profile" else high
    assert got == (VALUES[high], origin)


def test_client_honours_the_daily_requests_variable(config_emu, clean_env):
    """`SURVEILLANCE_DAILY_REQUESTS=0`, as `surveillance emulator` prints it, lifts the quota
    of `Client()` as it does the CLI's (it was 2400 whatever the variable)."""
    for name, value in service_env(config_emu).items():
        if name.startswith("SURVEILLANCE_"):
            clean_env.setenv(name, value)
    clean_env.setenv("SURVEILLANCE_DAILY_REQUESTS", "0")
    with sv.Client() as client:
        assert client.quota()["limit"] is None
    clean_env.setenv("SURVEILLANCE_DAILY_REQUESTS", "50")
    with sv.Client() as client:
        assert client.quota()["limit"] == 50


def test_client_reads_a_profile_of_the_config_file(config_emu, tmp_path, clean_env):
    """`Client(profile=...)` and `SURVEILLANCE_PROFILE` take the credentials and the limits
    from `[profiles.NAME]`, over `[default]`."""
    config = _write(
        tmp_path / "config.toml",
        f"""
[default]
daily_requests = 10
base_url = "http://127.0.0.1:9"

[profiles.emu]
base_url = "{config_emu.url}"
api_key = "{config_emu.api_key}"
client_id = "{config_emu.client_id}"
client_secret = "{config_emu.client_secret}"
audience = "{config_emu.audience}"
daily_requests = 0
read_per_second = 0
""",
    )
    clean_env.setenv("SURVEILLANCE_CONFIG_FILE", str(config))
    with sv.Client(profile="emu") as client:
        assert client.quota()["limit"] is None
        assert len(client.sites()) == 2
    clean_env.setenv("SURVEILLANCE_PROFILE", "emu")
    with sv.Client() as client:
        assert len(client.sites()) == 2
    with pytest.raises(sv.ConfigError, match=r"no profile `nope`.*\[profiles\.nope\]"):
        sv.Client(profile="nope")


def test_a_secret_in_a_file_others_can_read_is_refused(tmp_path, clean_env):
    """As ssh does with a key: a config file holding a secret must be private to the user;
    the error says how to fix it and shows no secret."""
    config = _write(
        tmp_path / "config.toml", '[default]\napi_key = "k-very-secret-value"\n', mode=0o644
    )
    clean_env.setenv("SURVEILLANCE_CONFIG_FILE", str(config))
    with pytest.raises(sv.ConfigError, match="chmod 600") as e:
        sv.Client(base_url="http://127.0.0.1:9")
    assert "very-secret" not in str(e.value)
    # Without a secret, a readable file is fine.
    _write(config, '[default]\nregion = "eu"\n', mode=0o644)
    assert _config.resolve(environ={"SURVEILLANCE_CONFIG_FILE": str(config)})["region"] == (
        "eu",
        "[default]",
    )


def test_a_secret_in_a_profile_not_selected_of_a_readable_file_is_refused(tmp_path, clean_env):
    """The rule holds for the whole file, as the guide says: a secret in any profile of a file
    that others can read refuses it, whichever profile is selected."""
    config = _write(
        tmp_path / "config.toml",
        '[default]\nregion = "us"\n[profiles.other]\nclient_secret = "s-very-secret-value"\n',
        mode=0o644,
    )
    env = {"SURVEILLANCE_CONFIG_FILE": str(config)}
    for profile in (None, "other"):
        with pytest.raises(sv.ConfigError, match="chmod 600") as e:
            _config.resolve(profile=profile, environ=env)
        assert "very-secret" not in str(e.value)
    os.chmod(config, 0o600)
    assert _config.resolve(environ=env)["region"] == ("us", "[default]")


@pytest.mark.parametrize(
    "line", ["timeout = inf", "timeout = 0", "max_outage = inf", "read_per_second = inf"]
)
def test_a_value_the_client_refuses_is_refused_where_it_is_read(tmp_path, line):
    """`surveillance config` showed `timeout = inf`, which `Client` then refused: the table's
    checks are the core's bounds, so the file's line is named at once."""
    config = _write(tmp_path / "config.toml", f"[default]\n{line}\n")
    env = {"SURVEILLANCE_CONFIG_FILE": str(config)}
    key = line.split()[0]
    with pytest.raises(sv.ConfigError, match=rf"`{key}` in \[default\] of .*must be"):
        _config.resolve(environ=env)
    with pytest.raises(sv.ConfigError, match=rf"`SURVEILLANCE_{key.upper()}`"):
        _config.resolve(
            environ={
                f"SURVEILLANCE_{key.upper()}": line.split()[-1],
                "SURVEILLANCE_CONFIG_FILE": str(tmp_path / "none.toml"),
            }
        )
    out = _run(["config"], service_env(SURVEILLANCE_CONFIG_FILE=str(config)))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr


def _accounts(tmp_path, emu, profile_lines=""):
    """A config file whose `[default]` is another account at another address, and whose
    profile `staging` sets the emulator's address (and `profile_lines`)."""
    return _write(
        tmp_path / "config.toml",
        f"""
[default]
base_url = "https://api.example.test"
api_key = "{REAL_KEY}"
client_id = "real-client"
client_secret = "{REAL_SECRET}"

[profiles.staging]
base_url = "{emu.url}"
read_per_second = 0
{profile_lines}
""",
    )


REAL_KEY = "real-account-key-" + "4242"
REAL_SECRET = "real-account-secret-" + "2424"


def test_a_profile_with_its_own_address_takes_no_credential_from_default(
    config_emu, tmp_path, clean_env
):
    """A secret goes only to the address it was configured with: a profile that sets its own
    `base_url` takes no credential from `[default]` (it sent them to the profile's address),
    and the error names the profile and each missing one; the library, the command line and
    `surveillance config` alike. With its own credentials, the profile works."""
    config = _accounts(tmp_path, config_emu)
    clean_env.setenv("SURVEILLANCE_CONFIG_FILE", str(config))
    before = config_emu.stats()["tokens_issued"]
    with pytest.raises(sv.ConfigError) as e:
        sv.Client(profile="staging")
    message = str(e.value)
    assert "profile staging" in message and "[profiles.staging]" in message, message
    for name in ("`api_key`", "`client_id`", "`client_secret`"):
        assert name in message, message
    assert REAL_KEY not in message and REAL_SECRET not in message
    resolved = _config.resolve(profile="staging")
    assert resolved["api_key"].value is None and resolved["base_url"].value == config_emu.url
    assert resolved["api_key"].origin.startswith("not taken from [default]")

    env = service_env(SURVEILLANCE_CONFIG_FILE=str(config))
    out = _run(["--profile", "staging", "sites"], env)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "profile staging" in out.stderr, out.stderr
    out = _run(["--profile", "staging", "config"], env)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ")}
    for name in ("api_key", "client_id", "client_secret"):
        assert rows[name].split()[1] == "-", rows[name]
        assert "not taken from [default]: profile staging sets its own `base_url`" in rows[name]
    assert config_emu.stats()["tokens_issued"] == before, "a token was asked with [default]'s"

    # Environment variables are the user's choice for this run: they go with the profile.
    for name, value in service_env(config_emu).items():
        if name in ("SURVEILLANCE_API_KEY", "SURVEILLANCE_CLIENT_ID", "SURVEILLANCE_CLIENT_SECRET"):
            clean_env.setenv(name, value)
    clean_env.setenv("SURVEILLANCE_AUDIENCE", config_emu.audience)
    with sv.Client(profile="staging") as client:
        assert len(client.sites()) == 2
    for name in ("SURVEILLANCE_API_KEY", "SURVEILLANCE_CLIENT_ID", "SURVEILLANCE_CLIENT_SECRET"):
        clean_env.delenv(name)

    # A profile that carries its own credentials works, and shows them as its own.
    _accounts(
        tmp_path,
        config_emu,
        f'api_key = "{config_emu.api_key}"\nclient_id = "{config_emu.client_id}"\n'
        f'client_secret = "{config_emu.client_secret}"\naudience = "{config_emu.audience}"\n',
    )
    clean_env.delenv("SURVEILLANCE_AUDIENCE")
    with sv.Client(profile="staging") as client:
        assert len(client.sites()) == 2
    assert _config.resolve(profile="staging")["api_key"].origin == "profile staging"


def test_default_credentials_go_to_no_other_address_given_by_the_environment(
    config_emu, tmp_path, clean_env
):
    """`[default]`'s credentials belong with `[default]`'s address: an address given by an
    argument or a variable (an emulator's `SURVEILLANCE_BASE_URL`) does not take them; a
    `[default]` without an address lends its credentials to any."""
    config = _accounts(tmp_path, config_emu)
    clean_env.setenv("SURVEILLANCE_CONFIG_FILE", str(config))
    clean_env.setenv("SURVEILLANCE_BASE_URL", config_emu.url)
    with pytest.raises(sv.ConfigError, match=r"missing `api_key`, `client_id`, `client_secret`"):
        sv.Client()
    with pytest.raises(sv.ConfigError, match="`base_url` is another, given by an argument"):
        sv.Client(base_url=config_emu.url + "/v2/")
    # The same address, written with `/v2`, is the same.
    clean_env.setenv("SURVEILLANCE_BASE_URL", "https://api.example.test/v2/")
    assert _config.resolve()["api_key"] == (REAL_KEY, "[default]")
    clean_env.delenv("SURVEILLANCE_BASE_URL")
    _write(
        config,
        f'[default]\napi_key = "{config_emu.api_key}"\nclient_id = "{config_emu.client_id}"\n'
        f'client_secret = "{config_emu.client_secret}"\naudience = "{config_emu.audience}"\n',
    )
    with sv.Client(base_url=config_emu.url, limits=sv.Limits.unlimited()) as client:
        assert len(client.sites()) == 2


def test_bad_file_keys_and_values_are_config_errors(tmp_path):
    config = _write(tmp_path / "config.toml", "[default]\ntimout = 3\n")
    env = {"SURVEILLANCE_CONFIG_FILE": str(config)}
    with pytest.raises(sv.ConfigError, match="unknown key `timout`"):
        _config.resolve(environ=env)
    _write(config, '[default]\ntimeout = "soon"\n')
    with pytest.raises(sv.ConfigError, match="`timeout` in \\[default\\]"):
        _config.resolve(environ=env)


def _run(args, env, timeout=60):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_config_command_shows_origins_and_masks_secrets(config_emu, tmp_path):
    """`surveillance config` lists every setting of the table with where it comes from, the
    secrets masked, and whether the cache is on."""
    config = _write(
        tmp_path / "config.toml",
        f'[profiles.p]\nclient_secret = "{config_emu.client_secret}"\ntimeout = 12\n',
    )
    env = service_env(config_emu, SURVEILLANCE_CONFIG_FILE=str(config))
    del env["SURVEILLANCE_CLIENT_SECRET"]
    out = _run(["--profile", "p", "--read-per-second", "0", "config"], env)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("  ")}
    assert set(rows) == {s.name for s in _config.SETTINGS}
    assert rows["timeout"].split()[1:] == ["12.0", "profile", "p", f"({config})"]
    assert "option --read-per-second" in rows["read_per_second"]
    assert "env SURVEILLANCE_BASE_URL" in rows["base_url"]
    assert rows["daily_requests"].split()[1:] == ["2400", "default"]
    assert config_emu.client_secret not in out.stdout
    assert config_emu.api_key not in out.stdout
    assert "****" in rows["client_secret"] and "****" in rows["api_key"]
    assert rows["cache"].split()[1] == "off"  # the emulator is on loopback
    out = _run(["config"], dict(env, SURVEILLANCE_CACHE="1"))
    assert " on " in out.stdout.split("cache", 1)[1]


def test_emulator_environment_gives_a_quick_client():
    """The printed environment lifts the clients' limits as `emu.client()` does: `sv.Client()`
    and the CLI read a day of events at the emulator's speed (a page a second before), unless
    the emulator enforces the provider's limits."""
    with emulator_command("--days", "1", "--events-per-day", "2000") as emulator:
        env = service_env(None, **emulator.exports)
        code = (
            "import surveillance as sv, time; c = sv.Client(); t = time.monotonic(); "
            "n = len(c.events('2026-01-05', '2026-01-06')); "
            "print(n, time.monotonic() - t, c.quota()['limit'])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        assert out.returncode == 0, out.stderr
        events, seconds, limit = out.stdout.split()
        assert int(events) == 2000 and limit == "None"
        assert float(seconds) < 5  # 20 pages: over 19 s at one read a second
        start = time.monotonic()
        out = _run(
            ["events", "--start", "2026-01-05", "--end", "2026-01-06", "--format", "jsonl"], env
        )
        assert time.monotonic() - start < 15
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == 2000
    with emulator_command("--provider-limits") as emulator:
        # The clients are given the limits the emulator enforces: the published ones.
        assert float(emulator.exports["SURVEILLANCE_READ_PER_SECOND"]) == 1.0
        assert emulator.exports["SURVEILLANCE_READ_CONCURRENCY"] == "3"
        assert emulator.exports["SURVEILLANCE_DAILY_REQUESTS"] == "2400"


def test_connection_options_are_global_and_each_help_shows_only_its_own(config_emu):
    """The connection options are the top-level parser's (`surveillance --profile p sites`),
    still accepted after a command, and no command's help repeats them."""
    env = service_env(config_emu)
    for args in (["--read-per-second", "0", "sites"], ["sites", "--read-per-second", "0"]):
        out = _run([*args, "--format", "jsonl"], env)
        assert out.returncode == 0, out.stderr
        assert len(out.stdout.splitlines()) == 2
    top = _run(["--help"], env).stdout
    assert "--profile" in top and "--base-url" in top
    for command in ("sites", "events", "publish", "quota", "config"):
        text = _run([command, "--help"], env).stdout
        assert "--base-url" not in text and "--client-secret" not in text, command


def test_dlt_source_takes_its_credentials_from_dlt_secrets(config_emu, clean_env):
    """As dlt's verified sources do: `sources.surveillance.*` of dlt's config and secrets
    (here their environment form) configure the source's client."""
    from surveillance.dlt import surveillance_source

    for name in ("base_url", "api_key", "client_id", "client_secret", "audience"):
        clean_env.setenv(f"SOURCES__SURVEILLANCE__{name.upper()}", getattr(config_emu, _EMU[name]))
    clean_env.setenv("SURVEILLANCE_READ_PER_SECOND", "0")
    source = surveillance_source(start="2026-01-05")
    rows = list(source.resources["sites"])
    assert sum(getattr(r, "num_rows", 1) for r in rows) == 2


_EMU = {
    "base_url": "url",
    "api_key": "api_key",
    "client_id": "client_id",
    "client_secret": "client_secret",
    "audience": "audience",
}


def test_the_guide_lists_every_setting_of_the_table():
    """docs/guide/configuration.md's table is the one table: every setting, its variable, its
    option and its default."""
    from pathlib import Path

    guide = (Path(__file__).parent.parent / "docs" / "guide" / "configuration.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in guide.splitlines() if "| `" in line}
    for s in _config.SETTINGS:
        row = rows[s.name]
        assert f"`{s.variable}`" in row and f"`{s.flag}`" in row, s.name
        default = "-" if s.default is None else s.default
        if isinstance(default, (int, float)):
            default = f"{default:g}"
        assert row.split("|")[4].strip() == default, s.name


def test_the_limits_defaults_are_read_from_the_core_and_never_restated():
    """The published limits are stated once, in the core (`Limits::PUBLISHED`), and so are the
    timeout and the outage: `sv.Limits()` and the settings table read them from `_core`, and
    neither writes a figure of its own for them."""
    import ast
    import dataclasses
    from pathlib import Path

    from surveillance import _core

    published = _core.PUBLISHED_LIMITS
    assert published["daily_requests"] == 2400 and published["read_per_second"] == 1.0
    assert dataclasses.asdict(sv.Limits()) == published
    defaults = {s.name: s.default for s in _config.SETTINGS}
    assert {n: defaults[n] for n in published} == published
    assert (defaults["timeout"], defaults["max_outage"]) == (
        _core.DEFAULT_TIMEOUT_S,
        _core.DEFAULT_MAX_OUTAGE_S,
    )
    package = Path(sv.__file__).parent
    client = ast.parse((package / "client.py").read_text())
    limits = next(n for n in client.body if isinstance(n, ast.ClassDef) and n.name == "Limits")
    fields = [f for f in limits.body if isinstance(f, ast.AnnAssign)]
    assert len(fields) == len(published)
    literal = [ast.unparse(f) for f in fields if isinstance(f.value, ast.Constant)]
    assert literal == [], "sv.Limits restates a published limit"
    named = set(published) | {"timeout", "max_outage"}
    rows = [
        ast.unparse(t)
        for t in ast.walk(ast.parse((package / "_config.py").read_text()))
        if isinstance(t, ast.Tuple)
        and len(t.elts) > 1
        and isinstance(t.elts[0], ast.Constant)
        and t.elts[0].value in named
        and isinstance(t.elts[1], ast.Constant)
    ]
    assert rows == [], "the settings table restates a default of the core"
