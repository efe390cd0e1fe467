"""The gateway home: where it is, and what the first start writes into it.

First start (DESIGN.md "config.json"): a config with one agent, ``alfred``,
and one admin key that is returned once and stored only as its SHA-256.
Also the internal token that services and the CLI present to each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from gateway.config_migrations import CURRENT_VERSION

DEFAULT_HOME = "~/.claude-gateway"
INTERNAL_TOKEN_FILE = ".internal-token"
FIRST_AGENT = "alfred"


def resolve_home(arg: str | None, env: dict[str, str]) -> Path:
    """Argument beats ``GATEWAY_HOME`` beats ``~/.claude-gateway``; absolute path."""
    raw = arg or env.get("GATEWAY_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().resolve()


def first_config(admin_key: str) -> dict[str, object]:
    """The config a first start writes: agent alfred and one hashed admin key."""
    return {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "api": {
                "keys": [
                    {
                        "name": "admin",
                        "keySha256": hashlib.sha256(admin_key.encode()).hexdigest(),
                        "agents": "*",
                        "write": True,
                    }
                ]
            },
            # SPEC: writeRouting defaults to false but the template turns it on.
            "memory": {"writeRouting": True},
        },
        "agents": [
            {
                "id": FIRST_AGENT,
                "workspace": f"agents/{FIRST_AGENT}/workspace",
                "transcriptsDir": f"agents/{FIRST_AGENT}/sessions",
            }
        ],
    }


@contextlib.contextmanager
def home_lock(home: Path) -> Iterator[None]:
    """Hold an exclusive lock on the home folder itself (flock; no lock file is left behind).

    Serialises what must not interleave between processes, or threads: a
    first start writing config.json and admin-key.txt, and the CLI's edits of
    config.json. Blocks until the lock is free. Raises OSError when the home
    cannot be opened.
    """
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _create_exclusive(path: Path, data: bytes, mode: int) -> bool:
    """Write ``path`` only if it does not exist yet; True when this call created it.

    The content lands in a temp file first and is linked into place, so a
    concurrent reader never sees a half-written file.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def ensure_home(home: Path) -> str | None:
    """Create the home's config and internal token if missing.

    Returns the new admin key when this call wrote the config (to be shown
    once), else None. Safe when several processes start on one empty home.
    """
    home.mkdir(parents=True, exist_ok=True)
    admin_key = None
    config_path = home / "config.json"
    if not config_path.exists():
        candidate = "gw_" + secrets.token_urlsafe(32)
        body = json.dumps(first_config(candidate), indent=2).encode() + b"\n"
        if _create_exclusive(config_path, body, 0o600):
            admin_key = candidate
            (home / "agents" / FIRST_AGENT / "workspace").mkdir(parents=True, exist_ok=True)
            (home / "agents" / FIRST_AGENT / "sessions").mkdir(parents=True, exist_ok=True)
    token_path = home / INTERNAL_TOKEN_FILE
    if not token_path.exists():
        _create_exclusive(token_path, secrets.token_urlsafe(32).encode(), 0o600)
    return admin_key


def tighten_config_mode(home: Path) -> int | None:
    """Make ``<home>/config.json`` mode 0600 when group or others may read or write it.

    It can hold plain keys. Returns the mode it had when this call changed it,
    else None (already private, or missing). Raises OSError when the mode
    cannot be changed (a file owned by another user).
    """
    path = home / "config.json"
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return None
    if not mode & 0o077:
        return None
    os.chmod(path, 0o600)
    return mode


def read_internal_token(home: Path) -> str:
    """The home's internal token. Raises OSError when it is missing."""
    return (home / INTERNAL_TOKEN_FILE).read_text(encoding="utf-8").strip()
