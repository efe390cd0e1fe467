"""``gateway config check`` and ``gateway config migrate``: config.json on disk."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from gateway.atomic import write_atomic
from gateway.config import build, read_raw
from gateway.config_migrations import migrate
from gateway.errors import ConfigError


def _report(exc: ConfigError, path: Path) -> int:
    print(f"gateway: {path} is invalid:", file=sys.stderr)
    for line in exc.problems:
        print(f"  {line}", file=sys.stderr)
    return 2


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
        raw = read_raw(path)
        migrated, applied = migrate(raw)
        build(migrated, home)
    except ValueError as exc:
        return _report(ConfigError([str(exc)]), path)
    except ConfigError as exc:
        return _report(exc, path)
    if not applied and migrated == raw:
        print(f"{path} is already at configVersion {migrated['configVersion']}; nothing to do")
        return 0
    backup = path.with_name(f"config.json.bak-{time.strftime('%Y%m%dT%H%M%S')}")
    shutil.copy2(path, backup)
    write_atomic(path, (json.dumps(migrated, indent=2, ensure_ascii=False) + "\n").encode(), mode=0o600)
    print(f"migrated {path} to configVersion {migrated['configVersion']} (steps: {', '.join(applied) or 'none'}); backup: {backup}")
    return 0
