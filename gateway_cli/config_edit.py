"""Writing config.json: the one path every command that changes it goes through.

config.json can hold plain keys, so it is always written with mode 0600,
whatever mode the file had before. Writes are atomic (temp file, fsync,
rename) and compare-and-swap against the bytes the command read, so an edit
made meanwhile by someone else is never overwritten. An edit changes only
what it is about: the rest of the file (key order, other fields, the
configVersion) stays as the user wrote it; only the layout is normalised.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import Config, build, read_config_file
from gateway.config_migrations import migrate
from gateway.errors import CommandError, ConfigError, InvalidEdit
from gateway.home import home_lock

CONFIG_MODE = 0o600

Raw = dict[str, Any]


def config_bytes(raw: Raw) -> bytes:
    """How config.json is laid out on disk: two-space JSON, key order kept, UTF-8, final newline."""
    return (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_config(path: Path, raw: Raw, *, expected: bytes | None | object = ..., locked: bool = False) -> None:
    """Replace config.json at ``path`` with ``raw``, mode 0600.

    ``expected``: the bytes the caller read (``None``: the file must not
    exist); when the file holds anything else, WriteConflict is raised and
    nothing is written. ``locked``: the caller holds the home's lock. Raises
    OSError on I/O failure (the old file stays).
    """
    write_atomic(path, config_bytes(raw), expected=expected, mode=CONFIG_MODE, keep_mode=False, locked=locked)


def built(raw: Raw, home: Path) -> Config:
    """``raw`` validated exactly as start-up does (migrated in memory, then built). Raises ConfigError."""
    try:
        migrated, _ = migrate(raw)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    return build(migrated, home)


def read_valid(home: Path) -> tuple[Raw, Config]:
    """config.json as written, and its validated settings. Raises ConfigError (ConfigNotFound)."""
    raw, _ = read_config_file(home / "config.json")
    return raw, built(raw, home)


def edit_config(
    home: Path,
    change: Callable[[Raw], None],
    prepare: Callable[[Config], None] | None = None,
    *,
    repair: bool = False,
) -> Config:
    """Apply ``change`` to config.json and write the result; the new settings.

    ``change`` edits the file's parsed content in place (it may raise
    CommandError to refuse). The result is validated as start-up would;
    ``prepare(new settings)`` then runs before the write (to create folders
    the new config names). Nothing is written when any step fails.
    ``repair``: a file that is invalid already may be edited, as long as
    the result is valid (``gateway config set`` fixing a bad key).

    Raises ConfigError when config.json is invalid already and not
    ``repair`` (ConfigNotFound when missing), InvalidEdit when the result
    would be invalid, CommandError when the change is refused or the file
    changed meanwhile.
    """
    path = home / "config.json"
    with home_lock(home):
        raw, original = read_config_file(path)
        if not repair:
            built(raw, home)
        edited = copy.deepcopy(raw)
        change(edited)
        try:
            config = built(edited, home)
        except ConfigError as exc:
            raise InvalidEdit(exc.problems) from None
        if prepare is not None:
            prepare(config)
        try:
            write_config(path, edited, expected=original, locked=True)
        except WriteConflict:
            raise CommandError(f"{path} changed on disk during this command; nothing was written, run it again") from None
    return config
