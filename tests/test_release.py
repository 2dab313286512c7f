"""What is released: one version everywhere (Cargo.toml, the package metadata,
``sv.__version__``, ``surveillance --version``, CHANGELOG.md, and the names of the wheel and the
sdist), and every file of the package in the installed package, the wheel and the sdist.

./build-wheels runs these against the wheel it built (installed into a new environment) and
names its files in ``SURVEILLANCE_WHEEL`` and ``SURVEILLANCE_SDIST``; the tests of those files
skip without them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
import surveillance as sv

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "python" / "surveillance"
#: The package's files as the repository holds them: modules, the stub, the typing marker.
PACKAGE_FILES = sorted(
    p.relative_to(SOURCE).as_posix()
    for p in SOURCE.rglob("*")
    if (p.suffix in (".py", ".pyi") or p.name == "py.typed") and "__pycache__" not in p.parts
)
INSTALLED = Path(sv.__file__).resolve().parent


def _cargo_version() -> str:
    package = (ROOT / "Cargo.toml").read_text(encoding="utf-8").split("\n[", 1)[0]
    found = re.search(r'^version = "([^"]+)"$', package, re.M)
    assert found, "Cargo.toml: no version in [package]"
    return found.group(1)


def _file(var: str) -> Path:
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"{var} is not set: ./build-wheels sets it to the file it built")
    return Path(value)


def test_the_version_is_kept_in_cargo_toml_alone():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^dynamic = \[[^\]]*"version"', pyproject, re.M)
    assert not re.search(r"^version\s*=", pyproject, re.M)
    assert sv.__version__ == _cargo_version()


def test_the_package_the_command_and_the_metadata_say_one_version():
    assert metadata.version("surveillance") == sv.__version__
    for command in ([sys.executable, "-m", "surveillance"], [str(_console_script())]):
        out = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=True
        )
        assert out.stdout == f"surveillance {sv.__version__}\n"


def _console_script() -> Path:
    script = Path(sys.executable).parent / "surveillance"
    if not script.exists():
        pytest.skip(
            f"no console script beside {sys.executable}: the package is not installed there"
        )
    return script


def test_the_changelog_starts_with_this_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## \[?([^\]\s]+)\]?", text, re.M)
    assert first and first.group(1) == sv.__version__


def test_the_installed_package_holds_every_file_of_the_source():
    if INSTALLED == SOURCE.resolve():
        pytest.skip("the package is the source tree (an editable install)")
    missing = [name for name in PACKAGE_FILES if not (INSTALLED / name).is_file()]
    assert missing == [], f"left out of the installed package in {INSTALLED}"
    assert list(INSTALLED.glob("_core.*")), "no extension module"


def test_the_wheel_is_named_for_the_version_and_holds_the_package():
    wheel = _file("SURVEILLANCE_WHEEL")
    name, version, python, abi, platform = wheel.name[: -len(".whl")].split("-")
    assert (name, version, python, abi) == ("surveillance", sv.__version__, "cp39", "abi3")
    # It is the wheel installed here: its tags are the installed distribution's.
    installed = metadata.distribution("surveillance").read_text("WHEEL") or ""
    tags = {line.split(":", 1)[1].strip() for line in installed.splitlines() if ":" in line}
    assert {f"{python}-{abi}-{p}" for p in platform.split(".")} <= tags
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    missing = [n for n in PACKAGE_FILES if f"surveillance/{n}" not in names]
    assert missing == [], f"left out of {wheel.name}"
    assert any(re.fullmatch(r"surveillance/_core\.(abi3\.so|pyd)", n) for n in names)


def test_the_sdist_is_named_for_the_version_and_holds_the_sources():
    sdist = _file("SURVEILLANCE_SDIST")
    assert sdist.name == f"surveillance-{sv.__version__}.tar.gz"
    top = f"surveillance-{sv.__version__}"
    with tarfile.open(sdist) as archive:
        names = {n[len(top) + 1 :] for n in archive.getnames() if n.startswith(top + "/")}
    needed = ["Cargo.toml", "Cargo.lock", "pyproject.toml", "README.md"]
    needed += [f"python/surveillance/{n}" for n in PACKAGE_FILES]
    needed += [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "src").rglob("*.rs"))]
    missing = [n for n in needed if n not in names]
    assert missing == [], f"left out of {sdist.name}"
