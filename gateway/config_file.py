"""``gateway config check`` and ``gateway config migrate``: config.json on disk."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from gateway.config import build, read_config_file, read_raw
from gateway.config_edit import CONFIG_MODE, write_config
from gateway.config_migrations import migrate
from gateway.errors import ConfigError


def _report(exc: ConfigError, path: Path) -> int:
    print(f"gateway: {path} is invalid:", file=sys.stderr)
    for line in exc.problems:
        print(f"  {line}", file=sys.stderr)
    return 2


def _write_backup(path: Path, data: bytes) -> Path:
    """``config.json.bak-<time>`` beside ``path`` holding ``data``, mode 0600 from the start
    (it may hold plain keys); never overwrites an earlier backup. Returns its path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for n in range(100):
        backup = path.with_name(f"config.json.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, CONFIG_MODE)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(f"{path.parent}: too many config.json.bak-{stamp}* files")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return backup


def check(home: Path) -> int:
    """Validate config.json; print ``ok`` or one line per problem. Exit code 0 or 2."""
    path = home / "config.json"
    try:
        raw = read_raw(path)
        migrated, applied = migrate(raw)
        build(migrated, home)
    except ValueError as exc:
        return _report(ConfigError([str(exc)]), path)
    except ConfigError as exc:
        return _report(exc, path)
    pending = f" (migrations pending: {', '.join(applied)})" if applied else ""
    print(f"ok: {path}{pending}")
    return 0


def migrate_file(home: Path) -> int:
    """Rewrite config.json at the current configVersion, keeping a timestamped backup.

    The migrated result is validated first; an invalid file is left untouched.
    """
    path = home / "config.json"
    try:
        raw, original = read_config_file(path)
        migrated, applied = migrate(raw)
        build(migrated, home)
    except ValueError as exc:
        return _report(ConfigError([str(exc)]), path)
    except ConfigError as exc:
        return _report(exc, path)
    if not applied and migrated == raw:
        print(f"{path} is already at configVersion {migrated['configVersion']}; nothing to do")
        return 0
    backup = _write_backup(path, original)
    write_config(path, migrated, expected=original)
    print(f"migrated {path} to configVersion {migrated['configVersion']} (steps: {', '.join(applied) or 'none'}); backup: {backup}")
    return 0
