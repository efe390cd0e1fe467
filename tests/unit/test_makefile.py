"""What the Makefile's targets would run (``make -n``): data is deleted only when asked by name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str) -> list[str]:
    """The recipe lines ``make TARGET`` would run, without running them (prerequisites skipped)."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "install", target],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    return result.stdout.splitlines()


def test_make_demo_seeds_its_config_with_mode_0600() -> None:
    seeding = [line for line in dry_run("demo") if "examples/demo-config.json" in line]
    assert seeding and all("install -m 600" in line for line in seeding), seeding


def test_make_clean_removes_build_artefacts_but_never_var() -> None:
    lines = dry_run("clean")
    assert any(".venv" in line for line in lines)
    assert not any(" var" in line.replace("./var -prune", "") for line in lines), lines


def test_make_clean_data_deletes_var_and_says_what_that_is() -> None:
    lines = dry_run("clean-data")
    assert lines[-1] == "rm -rf var"
    assert lines[0].startswith('echo "deleting ./var:') and "config.json" in lines[0] and "workspaces" in lines[0]


def test_make_test_builds_the_documentation_site_strictly() -> None:
    lines = dry_run("test")
    built = [line for line in lines if "mkdocs build" in line]
    assert built == [".venv/bin/mkdocs build --strict"], lines
    assert lines.index(built[0]) < next(i for i, line in enumerate(lines) if "pytest" in line)


def test_make_reference_regenerates_the_reference_pages() -> None:
    assert dry_run("reference") == [".venv/bin/python -m gateway_cli.docs_reference"]


def test_make_test_installs_postgresql_when_its_server_binaries_are_missing() -> None:
    lines = dry_run("test")
    found = [line for line in lines if "initdb" in line]
    assert len(found) == 1 and "apt-get install -y -q postgresql" in found[0], lines
    assert lines.index(found[0]) < next(i for i, line in enumerate(lines) if "pytest" in line)
