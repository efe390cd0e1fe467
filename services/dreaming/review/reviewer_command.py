"""The reviewer command: what is started for ``reviewerCommand``, and what a failed start says.

A first element ``gateway`` is this installation's own command, run as the
dreaming process's interpreter with ``-m gateway_cli.cli`` (``resolve_command``).
The reviewer's PATH is the gateway's (``reviewer.reviewer_environment``), which
often lacks the virtualenv's ``bin``: ``make up`` runs ``.venv/bin/gateway`` by
its path. So ``["gateway", "reviewer", "stand-in"]`` works wherever the suite
runs, with no path in config.json (docs/concepts/reviewer.md "The reviewer").

A command that cannot start gets a reason that says how to fix it, with the
exact commands (``start_failure``): on a first try that is almost always the
default ``claude``, not installed.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final

GATEWAY: Final = "gateway"  # a reviewerCommand starting with it runs this installation's gateway command
GATEWAY_MODULE: Final = "gateway_cli.cli"
CLAUDE_INSTALL: Final = "npm install -g @anthropic-ai/claude-code"
STAND_IN_SETTING: Final = """gateway config set gateway.dreaming.reviewerCommand '["gateway","reviewer","stand-in"]'"""


def resolve_command(command: Sequence[str]) -> list[str]:
    """The argv to start for ``command``: a first element ``gateway`` becomes this process's
    interpreter with ``-m gateway_cli.cli`` (module docstring); anything else is as given."""
    if command and command[0] == GATEWAY:
        return [sys.executable, "-m", GATEWAY_MODULE, *command[1:]]
    return list(command)


def start_failure(command: Sequence[str], exc: OSError, env: Mapping[str, str]) -> str:
    """The reason of a reviewer that could not start: one line, with the fix as exact commands.

    A bare name that is not on the reviewer's PATH is the usual case on a first
    try: the default ``claude`` is not installed."""
    name = command[0]
    what = f"cannot start the reviewer {name!r}"
    if exc.errno == errno.ENOENT and "/" not in name:
        where = f"not found on the reviewer's PATH ({env.get('PATH', os.defpath)})"
        if name == "claude":
            return (f"{what}: {where}; install Claude Code ({CLAUDE_INSTALL}) where that PATH finds it, "
                    f"or try dreaming with the stand-in reviewer: {STAND_IN_SETTING}")
        return (f"{what}: {where}; give its absolute path in gateway.dreaming.reviewerCommand "
                f"(gateway config set gateway.dreaming.reviewerCommand '[\"/path/to/{name}\", ...]'), "
                f"or try dreaming with the stand-in reviewer: {STAND_IN_SETTING}")
    return (f"{what}: {exc.strerror or exc}; check gateway.dreaming.reviewerCommand "
            f"(gateway config get gateway.dreaming.reviewerCommand), or try the stand-in reviewer: {STAND_IN_SETTING}")
