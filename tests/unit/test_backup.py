"""``gateway backup`` / ``gateway restore`` on a temp home: what is copied, the manifest, the refusals."""

from __future__ import annotations

import json
import socket
import os
from pathlib import Path
from typing import Any

import apsw
import pytest

from gateway.backup import MANIFEST, BackupError, create_backup
from gateway.config import load_config
from gateway.home import ensure_home
from gateway.restore import restore_backup
from gateway_cli.cli import main


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def live_database(path: Path) -> apsw.Connection:
    """A WAL database whose last commit is still only in its -wal file (the connection stays open)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(os.fspath(path))
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE kb_meta(key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO kb_meta VALUES ('schema_version', '5')")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("INSERT INTO t VALUES ('only in the wal')")
    return conn


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A first-start home, with an agent ``bob`` whose workspace lies outside it."""
    home = tmp_path / "home"
    ensure_home(home)
    raw = json.loads((home / "config.json").read_text())
    raw["agents"].append({"id": "bob", "workspace": str(tmp_path / "elsewhere" / "bob")})
    (home / "config.json").write_text(json.dumps(raw))
    ws = home / "agents" / "alfred" / "workspace"
    write(ws / "IDENTITY.md", "I am alfred\n")
    write(ws / "memory" / "2026-12-01.md", "- a note\n")
    write(ws / ".dreaming" / "dreaming.json", "{}\n")
    write(ws / ".MEMORY.md.0123456789.gwtmp", "half a write")
    write(home / ".kb-sync" / "marker", "")
    write(home / "agents" / "alfred" / "sessions" / "s1.jsonl", '{"role": "user"}\n')
    write(home / "shared" / "kb" / "global" / "notes" / "topic.md", "shared note\n")
    write(tmp_path / "elsewhere" / "bob" / "IDENTITY.md", "I am bob\n")
    return home


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_backup_copies_data_skips_the_rest_and_restores_it_all(home: Path, tmp_path: Path) -> None:
    conn = live_database(home / "agents" / "alfred" / "kb.sqlite")
    other = live_database(home / "agents" / "alfred" / "workspace" / "tools" / "cache")  # a database by content, not name
    assert (home / "agents" / "alfred" / "kb.sqlite-wal").exists()
    (home / "run").mkdir()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a running service's (gateway.grpc.transport)
    listening.bind(str(home / "run" / "kb.sock"))
    summary = create_backup(load_config(home), tmp_path / "bk")
    listening.close()
    assert not [line for line in summary.skipped if "kb.sock" in line]  # not data, not worth a line
    conn.close()
    other.close()
    copied = files_of(tmp_path / "bk")
    assert "home/agents/alfred/workspace/IDENTITY.md" in copied
    assert "home/agents/alfred/workspace/.dreaming/dreaming.json" in copied
    assert "home/agents/alfred/sessions/s1.jsonl" in copied
    assert "home/shared/kb/global/notes/topic.md" in copied
    assert copied["external/agents/bob/workspace/IDENTITY.md"] == b"I am bob\n"
    assert not [p for p in copied if p.endswith((".gwtmp", "-wal", "-shm")) or "admin-key" in p]
    assert "home/admin-key.txt (the unconfirmed admin key)" in summary.skipped
    manifest = json.loads(copied[MANIFEST])
    assert manifest["version"] == 1 and manifest["home"] == str(home)
    assert manifest["databases"] == [{"path": "home/agents/alfred/kb.sqlite", "schema_version": "5", "integrity": "ok"},
                                     {"path": "home/agents/alfred/workspace/tools/cache", "schema_version": "5", "integrity": "ok"}]
    assert {f["path"] for f in manifest["files"]} == set(copied) - {MANIFEST}

    # each live database's copy holds the commit that was only in its WAL, and stands alone
    for rel in ("kb.sqlite", "workspace/tools/cache"):
        copy = apsw.Connection(os.fspath(tmp_path / "bk" / "home" / "agents" / "alfred" / rel))
        assert list(copy.execute("SELECT x FROM t")) == [("only in the wal",)], rel
        assert list(copy.execute("PRAGMA journal_mode")) == [("delete",)], rel
        copy.close()

    # restore into a new home; bob's workspace comes back where the config puts it
    original = files_of(home)
    bob_before = files_of(tmp_path / "elsewhere" / "bob")
    (tmp_path / "elsewhere" / "bob" / "IDENTITY.md").unlink()
    (tmp_path / "elsewhere" / "bob").rmdir()
    restore_backup(tmp_path / "bk", tmp_path / "new")
    restored = {k: v for k, v in files_of(tmp_path / "new").items() if not k.startswith(".running/")}  # the home's lock
    expected = {k: v for k, v in original.items()
                if not k.endswith((".gwtmp", "-wal", "-shm")) and k not in ("admin-key.txt", ".kb-sync/marker")}
    assert set(restored) == set(expected)
    databases = ("kb.sqlite", "tools/cache")  # copied through the backup API: same rows, not the same bytes
    assert {k: v for k, v in restored.items() if not k.endswith(databases)} == {
        k: v for k, v in expected.items() if not k.endswith(databases)}
    assert files_of(tmp_path / "elsewhere" / "bob") == bob_before
    assert (tmp_path / "new" / "config.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "new" / ".internal-token").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "new" / "agents" / "bob").is_dir() is False  # bob's folders are elsewhere


def damage(backup: Path, how: str) -> str:
    manifest: dict[str, Any] = json.loads((backup / MANIFEST).read_text())
    rel = next(f["path"] for f in manifest["files"] if f["path"].endswith("IDENTITY.md"))
    if how == "changed":
        with (backup / rel).open("ab") as f:
            f.write(b"!")
    else:
        (backup / rel).unlink()
    return rel


@pytest.mark.parametrize("how", ["changed", "missing"])
def test_a_damaged_backup_is_refused_before_anything_is_written(home: Path, tmp_path: Path, how: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    create_backup(load_config(home), tmp_path / "bk")
    rel = damage(tmp_path / "bk", how)
    assert main(["restore", str(tmp_path / "bk"), "--home", str(tmp_path / "new")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"gateway: damaged backup: {rel} ") and "nothing was restored" in line
    assert not (tmp_path / "new").exists()


def test_restore_into_a_non_empty_home_needs_force_and_force_deletes_nothing(home: Path, tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    live_database(home / "agents" / "alfred" / "kb.sqlite").close()
    create_backup(load_config(home), tmp_path / "bk")
    target = tmp_path / "busy"
    write(target / "notes.txt", "mine")
    write(target / "agents" / "alfred" / "workspace" / "IDENTITY.md", "an older alfred\n")
    write(target / "agents" / "alfred" / "kb.sqlite-wal", "the old database's wal")
    assert main(["restore", str(tmp_path / "bk"), "--home", str(target)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"gateway: {target} is not empty; restore into a new or empty home, or pass --force to replace "
                    "the files the backup holds (nothing else is deleted)")
    assert (target / "agents" / "alfred" / "workspace" / "IDENTITY.md").read_text() == "an older alfred\n"

    assert main(["restore", str(tmp_path / "bk"), "--home", str(target), "--force"]) == 0
    assert (target / "notes.txt").read_text() == "mine"
    assert (target / "agents" / "alfred" / "workspace" / "IDENTITY.md").read_text() == "I am alfred\n"
    assert not (target / "agents" / "alfred" / "kb.sqlite-wal").exists()  # it would corrupt the restored file
    copy = apsw.Connection(os.fspath(target / "agents" / "alfred" / "kb.sqlite"))
    assert list(copy.execute("PRAGMA integrity_check")) == [("ok",)]
    copy.close()


def test_backup_refuses_a_non_empty_or_inner_folder(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "full" / "x", "")
    assert main(["backup", str(tmp_path / "full"), "--home", str(home)]) == 2
    assert capsys.readouterr().err == (f"gateway: {tmp_path / 'full'} exists and is not an empty folder; "
                                       "give a new or empty folder for the backup\n")
    assert main(["backup", str(home / "bk"), "--home", str(home)]) == 2
    assert "is inside" in capsys.readouterr().err and not (home / "bk").exists()
    (tmp_path / "empty").mkdir()
    assert main(["backup", str(tmp_path / "empty"), "--home", str(home)]) == 0
    assert (tmp_path / "empty" / MANIFEST).is_file()


def test_a_failed_backup_leaves_nothing_that_looks_whole(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(home / "agents" / "alfred" / "kb.sqlite", "SQLite format 3\x00 and then no database at all" * 100)
    assert main(["backup", str(tmp_path / "bk"), "--home", str(home)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"gateway: {home / 'agents' / 'alfred' / 'kb.sqlite'} cannot be copied as a SQLite database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "home"]  # no bk, no partial copy
    with pytest.raises(BackupError, match="is not a backup"):
        restore_backup(tmp_path / "bk", tmp_path / "new")


def test_every_command_of_the_operations_guide_parses() -> None:
    """The sample sessions of docs/operations.md use real subcommands and flags (a rename fails here)."""
    import shlex

    from gateway_cli.cli import _parser

    guide = (Path(__file__).parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    lines = [line.removeprefix("$ ") for line in guide.splitlines() if line.startswith("$ gateway ")]
    assert len(lines) >= 10
    for line in lines:
        _parser().parse_args(shlex.split(line)[1:])  # SystemExit(2) on an unknown command or flag
