"""The gateway home: where it is, and what the first start writes into it.

First start (docs/concepts/config.md "config.json"): a config with one agent, ``alfred``,
and one admin key that is returned once and stored in config.json only as its
SHA-256. The key is also written to ``admin-key.txt`` (mode 0600) before the
config, so a start that fails later (a port taken) cannot lose it; the file
stays until an operator runs ``gateway keys confirm``. Also the internal
token that services and the CLI present to each other. ``gateway init`` and
``gateway up`` write them (``ensure_home``); ``gateway serve`` only reads them.

hashlib and secrets are imported where a key is made: the launcher's supervisor reads this
module for its notices and stays small without them (docs/operations.md "Memory at rest").
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from gateway.atomic import WriteConflict, folder_lock, write_atomic
from gateway.config_migrations import CURRENT_VERSION

DEFAULT_HOME = "~/.claude-gateway"
INTERNAL_TOKEN_FILE = ".internal-token"
ADMIN_KEY_FILE = "admin-key.txt"
FIRST_AGENT = "alfred"


def resolve_home(arg: str | None, env: dict[str, str]) -> Path:
    """Argument beats ``GATEWAY_HOME`` beats ``~/.claude-gateway``; absolute path."""
    raw = arg or env.get("GATEWAY_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().resolve()


def first_config(admin_key: str) -> dict[str, object]:
    """The config a first start writes: agent alfred and one hashed admin key."""
    from hashlib import sha256  # here: see the module's docstring

    return {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "api": {
                "keys": [
                    {
                        "name": "admin",
                        "keySha256": sha256(admin_key.encode()).hexdigest(),
                        "agents": "*",
                        "write": True,
                    }
                ]
            },
            # writeRouting defaults to false, but a new home starts with it on.
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


def home_lock(home: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the exclusive lock of the home folder (the same flock ``write_atomic`` takes for files
    in it; no lock file is left behind).

    Serialises what must not interleave between processes, or threads: a
    first start writing config.json and admin-key.txt, and the CLI's edits of
    config.json (which then write with ``locked=True``). Blocks until the lock
    is free. Raises OSError when the home cannot be opened.
    """
    return folder_lock(home)


def _create_exclusive(path: Path, data: bytes, mode: int, *, locked: bool = False) -> bool:
    """Write ``path`` only if it does not exist yet; True when this call created it.

    Through ``write_atomic`` (a temp file linked into place), so a concurrent
    reader never sees a half-written file and a crash leaves only a temp file
    that the next start sweeps. ``locked``: the caller holds ``home_lock``.
    """
    try:
        write_atomic(path, data, expected=None, mode=mode, keep_mode=False, locked=locked)
    except WriteConflict:
        return False
    return True


def admin_key_text(home: Path, admin_key: str) -> str:
    """``admin-key.txt``: one header line saying what it is and how to confirm, then the key."""
    made = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return (
        f"# claude-gateway admin key of {home}, made {made} (config.json keeps only its SHA-256). "
        f"Save it elsewhere, then delete this file with: gateway keys confirm --home {home}\n"
        f"{admin_key}\n"
    )


def _write_private(path: Path, data: bytes, *, locked: bool) -> None:
    """Put ``data`` at ``path`` atomically, mode 0600 from its creation, durably (file and folder).

    ``locked``: the caller holds ``home_lock``."""
    write_atomic(path, data, mode=0o600, keep_mode=False, locked=locked)


def _first_start(home: Path) -> str | None:
    """Write admin-key.txt, then config.json holding that key's hash; the key, or None when another
    writer's config.json got there first."""
    from secrets import token_urlsafe  # here: see the module's docstring

    config_path, key_path = home / "config.json", home / ADMIN_KEY_FILE
    candidate = "gw_" + token_urlsafe(32)
    # The key file first: a crash in between leaves a key without a config (the next start makes
    # both again, replacing this file), never a config whose key nobody has.
    _write_private(key_path, admin_key_text(home, candidate).encode(), locked=True)
    body = json.dumps(first_config(candidate), indent=2).encode() + b"\n"
    if not _create_exclusive(config_path, body, 0o600, locked=True):
        # config.json appeared without the lock (a file system where flock does nothing): the
        # file's key is not the one in force, so it must not stay
        with contextlib.suppress(FileNotFoundError):
            if candidate in key_path.read_text(encoding="utf-8"):
                key_path.unlink()
        return None
    (home / "agents" / FIRST_AGENT / "workspace").mkdir(parents=True, exist_ok=True)
    (home / "agents" / FIRST_AGENT / "sessions").mkdir(parents=True, exist_ok=True)
    return candidate


def ensure_home(home: Path) -> str | None:
    """Create the home's config (with admin-key.txt) and internal token if missing.

    Returns the new admin key when this call wrote the config (to be shown
    once), else None. Safe when several processes start on one empty home:
    the first to take the home's lock writes both files, the others then
    find the config and return None.
    """
    from secrets import token_urlsafe  # here: see the module's docstring

    home.mkdir(parents=True, exist_ok=True)
    admin_key = None
    config_path = home / "config.json"
    if not config_path.exists():
        with home_lock(home):
            if not config_path.exists():
                admin_key = _first_start(home)
    token_path = home / INTERNAL_TOKEN_FILE
    if not token_path.exists():
        _create_exclusive(token_path, token_urlsafe(32).encode(), 0o600)
    return admin_key


def not_initialised(home: Path) -> str | None:
    """What keeps ``gateway serve`` from starting on ``home``: a missing config.json or internal
    token, named in one line that says to run ``gateway init``; None when both are there.

    A serve never writes them: only ``gateway init`` (and ``gateway up``, which is one
    supervisor on one machine) does, so a first start's admin key is printed by one
    process only, never in the log of whichever container came up first.
    """
    for name, what in (("config.json", "config.json"), (INTERNAL_TOKEN_FILE, "internal token")):
        if not (home / name).is_file():
            return (
                f"no {what} in {home} ({home / name} not found); run `gateway init --home {home}` "
                "first (compose: the init service does it)"
            )
    return None


def admin_key_notice(home: Path) -> str | None:
    """While ``admin-key.txt`` exists: where the admin key is and how to confirm it was saved."""
    path = home / ADMIN_KEY_FILE
    if not path.exists():
        return None
    return (
        f"the admin key is in {path} (mode 0600) until you confirm you saved it: "
        f"gateway keys confirm --home {home}"
    )


def confirm_admin_key(home: Path) -> bool:
    """Delete ``admin-key.txt``; False when there was none."""
    try:
        (home / ADMIN_KEY_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


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
