"""tests/pg_support.py finds Debian's PostgreSQL off PATH, and says in one line what to install without it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pg_support
import pytest


def test_without_server_binaries_the_fixture_fails_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_support, "bin_dir", lambda: None)
    with pytest.raises(pytest.fail.Exception) as failed:
        pg_support.start_cluster()
    assert str(failed.value) == pg_support.MISSING
    assert "\n" not in pg_support.MISSING and "make postgres" in pg_support.MISSING


def test_off_path_the_newest_debian_server_is_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for major in ("9.6", "13", "15"):
        (tmp_path / major / "bin").mkdir(parents=True)
        (tmp_path / major / "bin" / "initdb").touch()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(pg_support, "DEBIAN_ROOT", tmp_path)
    assert pg_support.bin_dir() == tmp_path / "15" / "bin"


@pytest.mark.parametrize(("settings", "expected"), [(None, "off"), (pg_support.DURABLE_SETTINGS, "on")])
def test_a_durable_cluster_starts_with_fsync_and_synchronous_commit_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                       settings: dict[str, str] | None,
                                                                       expected: str) -> None:
    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(pg_support.Cluster, "run", lambda self, *args: started.append(args))
    pg_support.Cluster(tmp_path, tmp_path, 5432, None, {**pg_support.SERVER_SETTINGS, **(settings or {})}).start()
    options = started[-1][started[-1].index("-o") + 1]
    for setting in ("fsync", "synchronous_commit", "full_page_writes"):
        assert f"-c {setting}={expected}" in options
