"""``gateway config get PATH``, ``gateway config set PATH VALUE`` and ``gateway config show``.

``get`` prints the value at PATH (``config_paths``) as JSON on stdout: the
value in config.json (even in a file that is invalid: what is there is what
an operator needs to see), or, when the file does not set it, the effective one,
with a line on stderr saying it is the default (or inherited from the
gateway's block, for an agent's key). ``show`` prints the whole effective
config as JSON. Secrets are masked in both.

``set`` writes one key through ``config_edit.edit_config``: under the home's
lock, validated as start-up validates, atomic, mode 0600, compare-and-swap
against what it read; a refused change writes nothing. It may fix an invalid
file (the result must be valid; an invalid one lists what is still wrong). VALUE is read as JSON
when it parses (``3``, ``true``, ``["gateway","reviewer","stand-in"]``,
``"3"``), else as a plain string (``propose``). A running suite picks the
change up within a second (docs/concepts/config.md
"Changing config.json while the suite runs"); addresses and ports need a restart, and the line says so. API keys
and agents have their own commands (``gateway keys``, ``gateway agents``),
which ``set`` points to instead of writing them.

Refusals are CommandError (one line, exit 2); an invalid result is
InvalidEdit (one line per problem, naming the key), both rendered by
``gateway_cli.cli``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gateway.config import read_config_file
from gateway.errors import CommandError, ConfigError, InvalidEdit
from gateway_cli.config_edit import built, edit_config
from gateway_cli.config_paths import (
    AGENT_BLOCKS,
    AgentRef,
    Missing,
    Step,
    assign,
    effective,
    is_secret,
    lookup,
    masked,
    origin,
    parse_path,
    schema_node,
    show_path,
    touches_secret,
)

ACTIONS = ("get", "set", "show")
# Settings a running process keeps until it restarts (docs/concepts/config.md "Changing config.json while the suite runs").
RESTART_PREFIXES = (("gateway", "grpc"), ("gateway", "api", "host"), ("gateway", "api", "port"), ("gateway", "metrics"))


def add_actions(config_sub: Any) -> None:
    """Add ``get``, ``set`` and ``show`` to ``gateway config``'s subcommands."""
    get = config_sub.add_parser("get", help="print one key of config.json as JSON (its default when the file does not set it)")
    get.add_argument("path", metavar="PATH", help="dotted key, e.g. gateway.dreaming.mode, agents.alfred.dreaming.mode, agents[0].workspace")
    setter = config_sub.add_parser("set", help="set one key of config.json: validated, atomic, mode 0600; a running suite picks it up")
    setter.add_argument("path", metavar="PATH", help="dotted key, e.g. gateway.dreaming.reviewerCommand")
    setter.add_argument("value", metavar="VALUE", help="JSON when it parses (3, true, '[\"a\",\"b\"]', '\"3\"'), else a plain string")
    config_sub.add_parser("show", help="print the effective config as JSON: every default filled in, ports included, secrets masked")
    for name in ACTIONS:
        config_sub.choices[name].add_argument("--home", help="gateway home")


def run(args: argparse.Namespace, home: Path) -> int:
    """Run ``config get|set|show``; the exit code."""
    if args.action == "show":
        raw, _ = read_config_file(home / "config.json")
        built(raw, home)  # an invalid file: one line per problem, as at start-up (ConfigError)
        _print_json(masked(effective(raw)))
        return 0
    steps = parse_path(args.path)
    schema_node(steps)
    if args.action == "get":
        return _get(home, steps)
    return _set(home, steps, args.value)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _get(home: Path, steps: list[Step]) -> int:
    raw, _ = read_config_file(home / "config.json")
    shown = show_path(steps)
    try:
        value = lookup(raw, steps)
        where = ""
    except Missing:
        built(raw, home)  # the defaults are those of a valid file only (ConfigError otherwise)
        try:
            value = lookup(effective(raw), steps)
        except Missing:
            raise CommandError(_absent(raw, steps)) from None
        where = origin(raw, steps)
    _print_json(masked(value, _last_name(steps)))
    if where:
        print(f"gateway: {shown} is not set in {home / 'config.json'}; this is {where}", file=sys.stderr)
    if is_secret(_last_name(steps)) or _last_name(steps) == "keys":
        print("gateway: keys are never shown; gateway keys list names them", file=sys.stderr)
    return 0


def _last_name(steps: list[Step]) -> str | None:
    names = [s for s in steps if isinstance(s, str)]
    return names[-1] if names else None


def _absent(raw: dict[str, Any], steps: list[Step]) -> str:
    """Why a path has no value even with the defaults: its agent or list item does not exist,
    or the key has no default (an optional field)."""
    for i in range(1, len(steps)):
        try:
            lookup(effective(raw), steps[:i])
        except Missing:
            return f"{show_path(steps)}: {show_path(steps[:i])} is not in config.json"
    return f"{show_path(steps)} is not set in config.json and has no default"


def parse_value(text: str) -> Any:
    """VALUE as JSON when it parses, else the text itself. Text that starts like a JSON list or
    object but does not parse is refused (a quoting mistake in the shell, most likely)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        if text.lstrip().startswith(("[", "{")):
            raise CommandError(
                f"VALUE {text!r} starts like JSON but does not parse ({exc}); quote it for the shell, "
                """e.g. '["gateway","reviewer","stand-in"]'; nothing was written"""
            ) from None
        return text


def _refusal(steps: list[Step]) -> str | None:
    """Keys ``set`` leaves to their own commands."""
    names = [s for s in steps if isinstance(s, str)]
    if names[:3] == ["gateway", "api", "keys"] or names[-1:] == ["keys"]:
        return ("API keys are managed with gateway keys add NAME --agents ... [--write], gateway keys list "
                "and gateway keys revoke NAME (config.json keeps only their SHA-256); nothing was written")
    if touches_secret(steps):
        return _secret_refusal(steps)
    if steps == ["agents"] or (names[:1] == ["agents"] and names[-1:] == ["id"] and len(steps) == 3):
        return "agents are added with gateway agents add ID (and listed with gateway agents list); nothing was written"
    if steps == ["configVersion"]:
        return "configVersion is changed by gateway config migrate; nothing was written"
    if steps in (["gateway"], []):
        return "set one key at a time, e.g. gateway.dreaming.mode; nothing was written"
    return None


def _secret_refusal(steps: list[Step]) -> str:
    hint = (" point at the DSN instead (gateway.knowledge.shared.postgres.dsnFile: a file holding it, or .dsnEnv: "
            "the environment variable holding it), or edit config.json;") if "postgres" in steps else " edit config.json;"
    return (f"{show_path(steps)} is or holds a secret, which is not set from the command line (it would stay in the "
            f"shell's history and the process list):{hint} nothing was written")


def _holds_secret(value: Any) -> bool:
    """Whether a JSON value has a secret field at any depth (``{"dsn": …}`` set as a whole block)."""
    if isinstance(value, dict):
        return any((is_secret(k) and v is not None) or _holds_secret(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_secret(v) for v in value)
    return False


def _set(home: Path, steps: list[Step], text: str) -> int:
    refused = _refusal(steps)
    if refused:
        raise CommandError(refused)
    value = parse_value(text)
    if _holds_secret(value):
        raise CommandError(_secret_refusal(steps))
    shown = show_path(steps)
    before: list[Any] = []

    def change(raw: dict[str, Any]) -> None:
        try:
            before.append(lookup(raw, steps))
        except Missing:
            pass
        assign(raw, steps, value)

    raw, _ = read_config_file(home / "config.json")  # ConfigNotFound is rendered with what to do
    try:
        built(raw, home)
        was_valid = True
    except ConfigError:
        was_valid = False
    try:
        edit_config(home, change, repair=True)
    except InvalidEdit as exc:
        if was_valid:
            raise
        print(f"gateway: refused: config.json in {home} would still be invalid after this change; nothing was written:",
              file=sys.stderr)
        for line in exc.problems:
            print(f"  {line}", file=sys.stderr)
        return 2
    rendered = json.dumps(masked(value, _last_name(steps)), ensure_ascii=False)
    if before and before[0] == value:
        print(f"{shown} is already {rendered} in {home / 'config.json'}; nothing changed")
        return 0
    print(f"set {shown} to {rendered} in {home / 'config.json'}" + ("" if was_valid else "; it is valid again"))
    if any(tuple(steps[: len(p)]) == p for p in RESTART_PREFIXES):
        print(f"gateway: a running suite keeps its addresses and ports until it restarts; restart it for {shown}", file=sys.stderr)
    else:
        print("gateway: a running suite picks this up within a second", file=sys.stderr)
    for line in _shadowed(home, steps):
        print(f"gateway: {line}", file=sys.stderr)
    return 0


def _shadowed(home: Path, steps: list[Step]) -> list[str]:
    """For a key of a gateway block agents may override: each agent whose own block sets it."""
    if len(steps) < 3 or steps[0] != "gateway" or steps[1] not in AGENT_BLOCKS:
        return []
    raw, _ = read_config_file(home / "config.json")
    out = []
    for entry in raw.get("agents", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        agent_steps: list[Step] = ["agents", AgentRef(entry["id"]), *steps[1:]]
        try:
            lookup(raw, agent_steps)
        except Missing:
            continue
        out.append(f"agent {entry['id']} sets its own {show_path(agent_steps)}, which wins for it")
    return out

