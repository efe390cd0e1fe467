"""pyproject.toml's exact pins and constraints.txt (the versions the suite was tested with) agree.

The Makefile and the Dockerfile install with ``-c constraints.txt``: a pin changed in one file
and not the other would make pip refuse the install, or install what was not tested.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^\s*([A-Za-z0-9_.\[\]-]+?)(\[[^\]]*\])?\s*==\s*([^\s;]+)")


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def constraints() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not NAME==VERSION"
            out[_name(name)] = version.strip()
    return out


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = list(project["dependencies"]) + [s for extra in project["optional-dependencies"].values() for s in extra]
    pins = {}
    for spec in specs:
        match = PIN.match(spec)
        assert match, f"pyproject.toml: {spec!r} is not an exact pin"
        pins[_name(match.group(1))] = match.group(3)
    return pins


def test_every_pin_of_pyproject_is_the_constrained_version() -> None:
    held = constraints()
    pins = pyproject_pins()
    missing = sorted(set(pins) - set(held))
    assert not missing, f"in pyproject.toml, not in constraints.txt: {missing}"
    differ = {name: (version, held[name]) for name, version in pins.items() if held[name] != version}
    assert not differ, f"pyproject.toml vs constraints.txt: {differ}"


def test_the_installed_packages_are_the_constrained_versions() -> None:
    from importlib.metadata import distributions

    held = constraints()
    installed = {_name(d.metadata["Name"]): d.version for d in distributions()}
    wrong = {name: (version, installed[name]) for name, version in held.items() if name in installed and installed[name] != version}
    assert not wrong, f"constraints.txt vs this venv (run make install): {wrong}"
