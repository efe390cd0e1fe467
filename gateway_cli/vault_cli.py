"""``gateway vault export``, ``import``, ``reports`` and ``migrate`` (and, in ``vault_reflect_cli``, the weekly
reflection's ``reflect``, ``revert``, ``reflections``, ``accept`` and ``reject``): a project's shared vault to a folder and
back (docs/how-to/move-vault.md; the work is ``services.kb.vault.export`` and ``import_notes``), its graph
reports rendered on demand (docs/concepts/vault.md "Shared vault", graph layer), and the PostgreSQL schema brought up
to date by its owner (docs/operations.md "A least-privilege role").

Each opens the project's vault store itself, with the home's ``gateway.knowledge.shared`` settings
(its root and its backend: SQLite, or PostgreSQL through the DSN its ``postgres`` settings point at, the
schema migrated first as the KB does), so they work whether the suite runs or not: export and reports
only read the vault (reports write the five files); import writes each note through the store, and a
running KB finds it at once (SQLite: the write reindexes the note, the KB's file watch finds it current;
PostgreSQL: every host reads what was committed). Exit codes: 0 done; 2 refused (one line: a non-empty
folder, a damaged export, a conflict, an unknown backend, nothing written; a PostgreSQL server that
cannot be reached, or a schema the role may not migrate).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

import apsw

from gateway.config import load_config
from gateway.config_model import SharedSettings, VaultPostgresSettings
from gateway.errors import CommandError, NotFound, Unavailable
from gateway_cli import vault_reflect_cli
from services.kb.graph.build import MAX_NOTE_BYTES, build_reports, build_reports_from_notes
from services.kb.graph.model import GraphReport
from services.kb.index import schema
from services.kb.vault import note_index
from services.kb.vault.export import export_vault
from services.kb.vault.import_notes import import_vault, read_folder
from services.kb.vault.names import NOTES_DIR
from services.kb.vault.registry_base import utc_now
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import VaultStore, require_built_in
from services.kb.vault_pg import pool
from services.kb.vault_pg.schema import DEFAULT_SCHEMA, latest_version
from services.kb.vault_pg.store import PostgresVaultStore

SHOWN = 20  # skipped notes named; the rest are counted


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    vault = sub.add_parser("vault", help="export a project's shared vault to a folder, or import one (to move "
                           "it to another backend or host, or to keep a copy)")
    actions = vault.add_subparsers(dest="action", required=True)
    export = actions.add_parser("export", help="write every note (live and retired), its authors and lifecycle, "
                                "and a manifest of sha256 sums into a new or empty DIR; read-only")
    export.add_argument("dir", metavar="DIR", help="a new or empty folder")
    imp = actions.add_parser("import", help="check DIR's manifest, then create every note it holds in the vault, "
                             "with its authors and retirement (run it again to finish an interrupted import)")
    imp.add_argument("dir", metavar="DIR", help="a folder written by gateway vault export")
    imp.add_argument("--skip-existing", action="store_true",
                     help="leave notes the vault holds with other content as they are (named), import the rest")
    reports = actions.add_parser("reports", help="compile the vault's notes (on any backend) into the five graph "
                                 "reports, written into DIR; read-only on the vault")
    reports.add_argument("--out", metavar="DIR", help="where to write them (default: the vault's reports/ folder "
                         "under gateway.knowledge.shared.root, where the KB writes them)")
    for parser in (export, imp, reports):
        parser.add_argument("--project", required=True, help="the vault's project (gateway.knowledge.shared.project)")
        parser.add_argument("--home", help="gateway home")
    migrate = actions.add_parser("migrate", help="apply the PostgreSQL vault's pending schema migrations (run as "
                                 "the schema's owner when the KB's role may not change the schema)")
    source = migrate.add_mutually_exclusive_group()
    source.add_argument("--dsn-file", metavar="FILE", help="a file holding the DSN to migrate with (default: the "
                        "home's gateway.knowledge.shared.postgres)")
    source.add_argument("--dsn-env", metavar="VAR", help="an environment variable holding that DSN")
    migrate.add_argument("--home", help="gateway home")
    vault_reflect_cli.add_parsers(actions)


def _shared(home: Path, project: str) -> SharedSettings:
    shared = load_config(home).knowledge.shared
    require_built_in(shared.backend)
    if not project or "/" in project or "\\" in project or project.startswith("."):
        raise CommandError(f"vault: {project!r} is not a project name (one folder name, not starting with '.')")
    return shared


def _opened(vault_dir: Path, *, write: bool) -> apsw.Connection:
    if write:
        return note_index.open_vault_index(vault_dir)
    if not vault_dir.is_dir():
        raise CommandError(f"vault export: there is no vault at {vault_dir} (no note was ever written to it)")
    try:
        return schema.open_reader(vault_dir / note_index.INDEX_FILE)
    except NotFound:  # notes written by hand, never indexed: an empty database holds no authors, no lifecycle rows
        return apsw.Connection(":memory:")


@contextlib.contextmanager
def _sqlite_store(shared: SharedSettings, *, write: bool) -> Iterator[VaultStore]:
    with contextlib.closing(_opened(shared.vault_dir, write=write)) as conn:
        yield SqliteVaultStore(shared.vault_dir, conn)


@contextlib.contextmanager
def _postgres_store(shared: SharedSettings, environ: Mapping[str, str]) -> Iterator[PostgresVaultStore]:
    """The project's vault on the configured PostgreSQL server, its schema migrated first as the KB does;
    a server that cannot be reached is one line (an import run again goes on where it stopped)."""
    conns = pool.open_pool(shared.postgres, environ)
    try:
        pool.migrate(conns, f"the shared vault of project {shared.project!r}", applied_by=socket.gethostname())
        yield PostgresVaultStore(conns, shared.project)
    except Unavailable as exc:
        raise CommandError(f"vault: {exc}") from None
    finally:
        pool.close_pools()


def _store(shared: SharedSettings, environ: Mapping[str, str], *, write: bool) -> AbstractContextManager[VaultStore]:
    """The project's vault store on the configured backend (SQLite: read-only unless ``write``)."""
    if shared.backend == "postgres":
        return _postgres_store(shared, environ)
    return _sqlite_store(shared, write=write)


def _export(shared: SharedSettings, folder: Path, environ: Mapping[str, str]) -> int:
    with _store(shared, environ, write=False) as store:
        done = export_vault(store, folder)
    c = done.counts
    print(f"exported vault {shared.project!r} to {folder.absolute()}: {c['live']} live and {c['retired']} retired "
          f"notes, authors of {c['authors']}, lifecycle rows of {c['lifecycle']}")
    for line in done.left_out:
        print(f"  not exported: {line}", file=sys.stderr)
    return 0


def _import(shared: SharedSettings, folder: Path, skip_existing: bool, environ: Mapping[str, str]) -> int:
    export = read_folder(folder)
    with _store(shared, environ, write=True) as store:
        done = import_vault(store, export, skip_existing=skip_existing)
    written = f"{len(done.written)} note{'' if len(done.written) == 1 else 's'}"
    print(f"imported {folder.absolute()} into vault {shared.project!r}: {written} written, "
          f"{len(done.present)} already there, {len(done.skipped)} skipped")
    if done.skipped:
        more = f" and {len(done.skipped) - SHOWN} more" if len(done.skipped) > SHOWN else ""
        names = ", ".join(repr(n) for n in done.skipped[:SHOWN])
        print(f"  skipped (the vault holds them with other content): {names}{more}", file=sys.stderr)
    return 0


def _reports(shared: SharedSettings, out: str | None, environ: Mapping[str, str]) -> int:
    """The five reports of the whole vault, by the KB's own rules (SQLite: from the notes' files;
    PostgreSQL: from every host's rows), so the same notes give the same bytes."""
    folder = Path(out).expanduser() if out else shared.vault_dir / note_index.REPORTS_DIR
    now = utc_now()
    report: GraphReport
    if shared.backend == "postgres":
        with _postgres_store(shared, environ) as store:
            report = build_reports_from_notes(store.contents(MAX_NOTE_BYTES + 1), folder, now)
    else:
        report = build_reports(shared.vault_dir / NOTES_DIR, folder, now)
    print(f"wrote the graph reports of vault {shared.project!r} to {folder.absolute()}: {len(report.nodes)} notes, "
          f"{len(report.edges)} links ({len(report.dangling)} to missing notes), {len(report.problems)} problems; "
          f"{len(report.written)} of 5 files changed")
    return 0


def _migrate(args: argparse.Namespace, home: Path, environ: Mapping[str, str]) -> int:
    """The schema brought to this release's version, through the home's DSN or the one given."""
    shared = load_config(home).knowledge.shared
    settings = shared.postgres
    if args.dsn_file or args.dsn_env:
        dsn_file = Path(args.dsn_file).expanduser() if args.dsn_file else None
        settings = dataclasses.replace(settings, dsn=None, dsn_file=dsn_file, dsn_env=args.dsn_env)
    elif shared.backend != "postgres":
        raise CommandError(f"vault migrate: the vault's backend is {shared.backend!r}, not 'postgres', and no "
                           "--dsn-file or --dsn-env was given: nothing to migrate")
    applied = _apply_migrations(settings, environ)
    done = f"applied {', '.join(map(str, applied))}" if applied else "nothing to apply"
    print(f"vault schema {DEFAULT_SCHEMA!r} is at version {latest_version()}: {done}")
    return 0


def _apply_migrations(settings: VaultPostgresSettings, environ: Mapping[str, str]) -> list[int]:
    conns = pool.open_pool(settings, environ)
    try:
        return pool.migrate(conns, f"the vault schema {DEFAULT_SCHEMA!r}", applied_by=socket.gethostname())
    except Unavailable as exc:
        raise CommandError(f"vault migrate: {exc}") from None
    finally:
        pool.close_pools()


def run(args: argparse.Namespace, home: Path, environ: Mapping[str, str]) -> int:
    """``environ``: the process's environment (a ``postgres.dsnEnv`` is looked up in it)."""
    if args.action == "migrate":
        return _migrate(args, home, environ)
    if args.action in vault_reflect_cli.ACTIONS:
        return vault_reflect_cli.run(args, home)
    shared = _shared(home, args.project)
    if args.action == "reports":
        return _reports(shared, args.out, environ)
    folder = Path(args.dir).expanduser()
    if args.action == "export":
        return _export(shared, folder, environ)
    return _import(shared, folder, args.skip_existing, environ)
