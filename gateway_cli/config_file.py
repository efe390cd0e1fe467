"""``gateway config check`` and ``gateway config migrate``: config.json on disk."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import build, read_config_file
from gateway.config_migrations import migrate
from gateway.errors import CommandError, ConfigError, ConfigNotFound
from gateway_cli.config_edit import CONFIG_MODE, write_config
from gateway_cli.config_lint import lint


@dataclass(frozen=True)
class CheckReport:
    """What ``config check`` found: errors (exit 2), warnings, and migrations not yet on disk."""

    path: Path
    errors: list[str]
    warnings: list[str]
    pending: list[str]


def check(home: Path) -> CheckReport:
    """Validate ``<home>/config.json`` as start-up does, plus the mistakes start-up tolerates
    (``config_lint``). Raises ConfigNotFound when it is missing."""
    path = home / "config.json"
    try:
        raw, _ = read_config_file(path)
        migrated, applied = migrate(raw)
    except ConfigNotFound:
        raise
    except ValueError as exc:
        return CheckReport(path, [str(exc)], [], [])
    except ConfigError as exc:
        return CheckReport(path, exc.problems, [], [])
    try:
        build(migrated, home)
        errors = []
    except ConfigError as exc:
        errors = exc.problems
    found = lint(migrated)
    return CheckReport(path, errors + found.errors, found.warnings, applied)


def _write_backup(path: Path, data: bytes) -> Path:
    """``config.json.bak-<time>`` beside ``path`` holding ``data``, mode 0600 from the start
    (it may hold plain keys), created whole through ``write_atomic`` (a crash leaves no torn
    backup); never overwrites an earlier backup. Returns its path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for n in range(100):
        backup = path.with_name(f"config.json.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            write_atomic(backup, data, expected=None, mode=CONFIG_MODE, keep_mode=False)
        except WriteConflict:
            continue
        return backup
    raise CommandError(f"{path.parent} already holds 100 config.json.bak-{stamp}* files; nothing was written")


def migrate_file(home: Path) -> str:
    """Rewrite config.json at the current configVersion, keeping a timestamped backup.

    The migrated result is validated first; an invalid file is left untouched.
    Returns the line to show. Raises ConfigError (ConfigNotFound) when the
    file is invalid (missing), CommandError when it changed meanwhile.
    """
    path = home / "config.json"
    raw, original = read_config_file(path)
    try:
        migrated, applied = migrate(raw)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    build(migrated, home)
    if not applied and migrated == raw:
        return f"{path} is already at configVersion {migrated['configVersion']}; nothing to do"
    backup = _write_backup(path, original)
    try:
        write_config(path, migrated, expected=original)
    except WriteConflict:
        backup.unlink()
        raise CommandError(f"{path} changed on disk while it was being migrated; nothing was written, run it again") from None
    return f"migrated {path} to configVersion {migrated['configVersion']} (steps: {', '.join(applied) or 'none'}); backup: {backup}"
