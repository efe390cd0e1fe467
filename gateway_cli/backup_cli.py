"""``gateway backup DIR`` and ``gateway restore DIR``: the commands over ``gateway.backup`` and ``gateway.restore``.

Exit codes: 0 done; 2 refused (DIR not empty, a damaged backup, a non-empty
home without ``--force``, a home that a running suite holds, whatever the
flags: one line, nothing written); 1 when the copy itself failed (an I/O
error: the partial copy is removed).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from gateway.backup import MANIFEST, Summary, create_backup
from gateway.home import ADMIN_KEY_FILE
from gateway.restore import restore_backup
from gateway.suite_lock import NoHold, hold_home


def add_parsers(sub: Any) -> None:
    """Add ``backup`` and ``restore`` to the ``gateway`` parser's subcommands."""
    backup = sub.add_parser("backup", help="copy the home (and workspaces outside it) to DIR while the suite runs, "
                            "every SQLite database through SQLite's backup API")
    backup.add_argument("dir", metavar="DIR", help="a new or empty folder for the backup")
    backup.add_argument("--home", help="gateway home")
    restore = sub.add_parser("restore", help=f"check a backup's {MANIFEST} hashes, then restore it into an empty or new home "
                             "(never into one a running suite holds)")
    restore.add_argument("dir", metavar="DIR", help="a folder written by gateway backup")
    restore.add_argument("--home", help="gateway home to restore into")
    restore.add_argument("--force", action="store_true",
                         help="write into a non-empty home (the suite stopped): replace the files the backup holds, delete nothing else")


def _held(home: Path) -> contextlib.AbstractContextManager[object]:
    """The home held shared while it is copied, so no restore writes into it meanwhile (a restore
    in progress refuses the backup: HomeBusy). A home this user cannot write to (a read-only
    snapshot) is copied without the hold: nothing can restore into it either."""
    try:
        return hold_home(home, "gateway backup")
    except NoHold:
        return contextlib.nullcontext()


def _size(summary: Summary) -> str:
    return f"{summary.files} files, {summary.bytes / 1e6:.1f} MB, {summary.databases} database{'s' if summary.databases != 1 else ''}"


def run(args: argparse.Namespace, home: Path) -> int:
    dest = Path(args.dir).expanduser()
    try:
        if args.command == "backup":
            from gateway.config import load_config

            config = load_config(home)
            with _held(home):
                summary = create_backup(config, dest)
            print(f"backup of {home} written to {dest.absolute()}: {_size(summary)} (integrity_check ok)")
            for line in summary.skipped:
                print(f"  not copied: {line}", file=sys.stderr)
            if (home / ADMIN_KEY_FILE).exists():
                print(f"gateway: {ADMIN_KEY_FILE} is not in the backup: save the admin key elsewhere, "
                      f"then run gateway keys confirm --home {home}", file=sys.stderr)
            return 0
        summary = restore_backup(dest, home, force=args.force)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        after = ("the partial copy was removed" if args.command == "backup" else
                 "the home may hold part of the backup, but not its config.json (written last): run the restore again with --force")
        print(f"gateway: {args.command} failed: {exc.strerror or exc}{where}; {after}", file=sys.stderr)
        return 1
    print(f"restored {dest.absolute()} into {home}: {_size(summary)}; start the suite with gateway up --home {home}")
    return 0
