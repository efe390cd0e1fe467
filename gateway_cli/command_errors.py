"""How ``gateway`` says an operator's error: one line (or one per problem) on stderr, exit code 2.

Shared by ``gateway_cli.cli`` (every command) and ``gateway_cli.serve`` (the children of ``gateway
up``, which do not import the whole command line).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from gateway.errors import CommandError, ConfigError, ConfigNotFound, InvalidEdit


def say_invalid(home: Path, problems: list[str]) -> None:
    """``config.json in HOME is invalid:`` and one indented line per problem, on stderr."""
    print(f"gateway: config.json in {home} is invalid:", file=sys.stderr)
    for line in problems:
        print(f"  {line}", file=sys.stderr)


def run_reporting(home: Path, command: Callable[[], int]) -> int:
    """``command()``'s exit code; when it raises an operator error (a refused edit, no or an invalid
    config.json, a CommandError), that error said on stderr and 2."""
    try:
        return command()
    except InvalidEdit as exc:
        print(f"gateway: refused: the change would make config.json in {home} invalid; nothing was written:", file=sys.stderr)
        for line in exc.problems:
            print(f"  {line}", file=sys.stderr)
    except ConfigNotFound as exc:
        print(
            f"gateway: no config.json in {exc.path.parent} (not found); "
            "pass --home DIR or set GATEWAY_HOME (make up uses ./var/gateway)",
            file=sys.stderr,
        )
    except ConfigError as exc:
        say_invalid(home, exc.problems)
    except CommandError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
    return 2
