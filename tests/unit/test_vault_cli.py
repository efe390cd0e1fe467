"""``gateway vault export`` and ``import`` in-process: the summary lines, and the refusals that write nothing
(docs/how-to/move-vault.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config_migrations import CURRENT_VERSION
from gateway.home import ensure_home
from gateway_cli.cli import main


def home_with(tmp_path: Path, shared: dict[str, object] | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    config = {"configVersion": CURRENT_VERSION, "gateway": {"knowledge": {"shared": shared or {}}}, "agents": [{"id": "alfred"}]}
    (home / "config.json").write_text(json.dumps(config))
    ensure_home(home)
    return home


def test_a_vault_written_by_hand_exports_and_imports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path)
    notes = home / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True)
    (notes / "a note.md").write_text("# A note\n- never indexed yet.\n")
    assert main(["vault", "export", "--project", "global", str(tmp_path / "out"), "--home", str(home)]) == 0
    assert "1 live and 0 retired notes, authors of 0, lifecycle rows of 0" in capsys.readouterr().out
    (notes / "a note.md").unlink()
    assert main(["vault", "import", "--project", "global", str(tmp_path / "out"), "--home", str(home)]) == 0
    assert "1 note written, 0 already there, 0 skipped" in capsys.readouterr().out
    assert (notes / "a note.md").read_text() == "# A note\n- never indexed yet.\n"


@pytest.mark.parametrize(("words", "says"), [
    (["export", "--project", "global"], "vault export: there is no vault at"),
    (["export", "--project", "../etc"], "vault: '../etc' is not a project name"),
    (["import", "--project", "global"], "manifest.json is missing (not a finished gateway vault export); nothing was written"),
])
def test_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str], says: str) -> None:
    home = home_with(tmp_path)
    (tmp_path / "out").mkdir()
    assert main(["vault", *words, str(tmp_path / "out"), "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (home / "shared" / "kb" / "global").exists()


@pytest.mark.parametrize(("postgres", "says"), [
    ({"dsnEnv": "VAULT_DSN_UNSET"}, "the environment variable VAULT_DSN_UNSET is not set"),
    ({"dsn": "host=127.0.0.1 port=9 user=gateway dbname=vault", "connectTimeoutS": 1},
     "vault: the shared vault of project 'global' is unavailable"),
])
def test_an_unreachable_postgresql_vault_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     postgres: dict[str, object], says: str) -> None:
    home = home_with(tmp_path, {"backend": "postgres", "postgres": postgres})
    assert main(["vault", "export", "--project", "global", str(tmp_path / "out"), "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "VAULT_DSN_UNSET=" not in err
    assert not (tmp_path / "out").exists()


def test_a_note_linked_out_of_the_vault_refuses_the_import_in_one_line(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path)
    notes = home / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True)
    (notes / "deploy.md").write_text("# Deploy\n- blue-green.\n")
    (notes / "other.md").write_text("# Other\n")
    assert main(["vault", "export", "--project", "global", str(tmp_path / "out"), "--home", str(home)]) == 0
    (notes / "other.md").unlink()
    (notes / "deploy.md").unlink()
    (tmp_path / "outside.md").write_text("# Elsewhere\n")
    (notes / "deploy.md").symlink_to(tmp_path / "outside.md")
    capsys.readouterr()
    assert main(["vault", "import", "--project", "global", str(tmp_path / "out"), "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'deploy'" in err and "outside the vault" in err
    assert err.strip().endswith("nothing was written")
    assert sorted(p.name for p in notes.iterdir()) == ["deploy.md"] and (tmp_path / "outside.md").read_text() == "# Elsewhere\n"


def test_reports_are_written_from_the_notes_into_the_vault_or_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = home_with(tmp_path)
    notes = home / "shared" / "kb" / "global" / "notes"
    notes.mkdir(parents=True)
    (notes / "kiln.md").write_text("# Kiln\nFired by [[potter]] and [[nobody]].\n")
    (notes / "potter.md").write_text("# Potter\n")
    assert main(["vault", "reports", "--project", "global", "--home", str(home)]) == 0
    assert "2 notes, 2 links (1 to missing notes), 0 problems; 5 of 5 files changed" in capsys.readouterr().out
    reports = home / "shared" / "kb" / "global" / "reports"
    assert "- `kiln` → `potter`" in (reports / "relationship-graph.md").read_text()
    assert main(["vault", "reports", "--project", "global", "--home", str(home)]) == 0
    assert "0 of 5 files changed" in capsys.readouterr().out
    assert main(["vault", "reports", "--project", "global", "--out", str(tmp_path / "out"), "--home", str(home)]) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(p.name for p in reports.iterdir()) and len(written) == 5
    assert all((tmp_path / "out" / n).read_bytes() == (reports / n).read_bytes() for n in written)


@pytest.mark.parametrize(("shared", "words", "says"), [
    ({}, [], "vault migrate: the vault's backend is 'sqlite', not 'postgres', and no --dsn-file or --dsn-env"),
    ({}, ["--dsn-env", "VAULT_DSN_UNSET"], "the environment variable VAULT_DSN_UNSET is not set"),
    ({"backend": "postgres", "postgres": {"dsn": "host=127.0.0.1 port=9 user=gateway dbname=vault password=hush",
                                          "connectTimeoutS": 1}}, [],
     "vault migrate: the vault schema 'gateway_vault' is unavailable: its PostgreSQL server refused the connection"),
])
def test_migrate_refusals_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], shared: dict[str, object],
                                       words: list[str], says: str) -> None:
    home = home_with(tmp_path, shared)
    assert main(["vault", "migrate", *words, "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "hush" not in err
