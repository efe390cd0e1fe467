"""``--log-format`` and ``--verbose``: how ``gateway up`` and ``gateway serve`` write their logs (docs/operations.md "Logs").

The decision is made once, at the entry point: ``auto`` renders lines for a
person when the stream the logs go to (stdout) is a terminal, and JSON lines
otherwise (a pipe, a file, a container's log). ``gateway up`` passes what it
decided to every child as ``--log-format console|json`` (and ``--verbose``), so
the suite writes one format whatever each child would have guessed.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from gateway.logs import Console

FORMATS = ("auto", "console", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The two flags, on the parser of ``up`` or ``serve``."""
    parser.add_argument(
        "--log-format", choices=FORMATS, default="auto",
        help="console: lines for a person; json: one JSON object per line; auto (default): console on a terminal, else json",
    )
    parser.add_argument(
        "--verbose", action="store_true",
        help="on the console, also the per-request lines (rpc, http) and each process's stopping line",
    )


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def console_for(log_format: str, verbose: bool, stream: TextIO, env: Mapping[str, str]) -> Console | None:
    """How to render for a person on ``stream``, or None for JSON lines.

    Colours only when ``stream`` is a terminal and ``NO_COLOR`` is unset or empty (no-color.org):
    ``--log-format console`` into a file gives plain text.
    """
    terminal = _is_terminal(stream)
    if log_format == "json" or (log_format == "auto" and not terminal):
        return None
    return Console(colors=terminal and not env.get("NO_COLOR"), verbose=verbose)


def child_arguments(console: Console | None) -> list[str]:
    """What ``gateway up`` adds to each ``gateway serve``: its own decision, said explicitly."""
    if console is None:
        return ["--log-format", "json"]
    return ["--log-format", "console", *(["--verbose"] if console.verbose else [])]
