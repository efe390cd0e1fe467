"""``gateway init``: the first start of a home, as a command of its own.

It writes config.json (mode 0600, agent alfred, one admin key stored as its
SHA-256), admin-key.txt and the internal token, through the same
``ensure_home`` that ``gateway up`` uses, and prints the admin key once, on
its own stdout. Compose runs it as a one-shot service before every other
one, so the key is in that service's log and nowhere else. On a home that is
already set up it changes nothing and says so; on a home whose config.json
is invalid it writes nothing and fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.config import load_config
from gateway.errors import CommandError, ConfigError
from gateway.home import ADMIN_KEY_FILE, INTERNAL_TOKEN_FILE, ensure_home


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser("init", help="write the first config.json, admin key and internal token of a home (once)")
    init.add_argument("--home", help="gateway home (default: $GATEWAY_HOME or ~/.claude-gateway)")


def run(home: Path) -> int:
    """Initialise ``home``; 0 when it is initialised afterwards (by this call or before).

    Raises CommandError (one line, nothing written) when config.json exists
    but is invalid, or when the home cannot be written."""
    config_path, token_path = home / "config.json", home / INTERNAL_TOKEN_FILE
    had_config = config_path.exists()
    if had_config:
        try:
            load_config(home)
        except ConfigError as exc:
            first = exc.problems[0] if exc.problems else "invalid"
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            raise CommandError(
                f"init: {config_path} exists and is invalid: {first}{more}; nothing was written "
                f"(every problem: gateway config check --home {home})"
            ) from None
    had_token = token_path.exists()
    try:
        admin_key = ensure_home(home)
    except OSError as exc:
        raise CommandError(f"init: cannot write {home}: {exc.strerror or exc}") from None
    if admin_key:
        print(
            f"gateway: initialised {home}. The admin key, shown once (config.json keeps only its SHA-256; "
            f"{home / ADMIN_KEY_FILE} holds it until you confirm you saved it: gateway keys confirm --home {home}):"
        )
        print(admin_key, flush=True)
    elif not had_config:  # another init or up took the home's lock first and wrote it
        print(f"gateway: {home} was initialised by another start at the same time; this one wrote nothing")
    elif had_token:
        print(f"gateway: {home} is already initialised (config.json and {INTERNAL_TOKEN_FILE} exist); nothing was changed")
    else:
        print(f"gateway: {home} already has a valid config.json; wrote the missing {token_path}")
    sys.stdout.flush()
    return 0
