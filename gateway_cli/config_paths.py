"""Dotted paths into config.json, the effective config, and masking (``gateway config get|set|show``).

A path names one key: object keys joined by ``.``, a list position in
brackets. ``gateway.dreaming.reviewerCommand``, ``gateway.api.keys[0].name``,
``agents[0].dreaming.mode``. An agent can also be named by its id:
``agents.alfred.dreaming.mode``, or ``agents[alfred.v2].dreaming.mode`` for an
id with a dot in it. Every path is checked against ``config_schema.json``
first, so a misspelt key is named before anything is read or written.

The *effective* config is config.json migrated as start-up does, with every
default filled in: the gateway's blocks, each API key's ``write``, the metrics
host (unset: the gRPC host), and each agent's ``workspace``,
``transcriptsDir`` and its ``memory``, ``dreaming`` and ``knowledge`` blocks
merged over the gateway's (docs/concepts/config.md "config.json"). Deployment overrides from the
environment (``GATEWAY_BIND_HOST``, ``GATEWAY_<SERVICE>_HOST``) are not part of
it: they belong to each process's start.

Secrets (``key``, ``keySha256``, and any field whose name says password,
secret, token or DSN) are shown as ``MASK`` wherever they appear.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Final

from gateway.config import deep_merge, fill_defaults, schema
from gateway.config_migrations import migrate
from gateway.errors import CommandError, ConfigError

Raw = dict[str, Any]
MASK: Final = "<masked>"
SECRET_NAMES: Final = frozenset({"key", "keySha256"})
# Names that say "secret" in any case, a DSN itself, and camelCase names ending in Token or Key (internalToken,
# apiKey); not tokenizer or chunkTokens, which are settings, nor dsnFile or dsnEnv, which say where a DSN is.
_SECRET_WORDS: Final = re.compile(r"(?i:password|passwd|secret|credential)|^(?i:token|dsn)$|[a-z](?:Token|Key)$")
_STEP: Final = re.compile(r"([^.\[\]]+)|\[([^\[\]]+)\]|(\.)")
AGENT_BLOCKS: Final = ("memory", "dreaming", "knowledge")


@dataclass(frozen=True)
class AgentRef:
    """``agents.<id>`` or ``agents[<id>]``: the agent with that id, wherever it is in the list."""

    id: str


Step = str | int | AgentRef


def is_secret(name: object) -> bool:
    """Whether a field of this name holds a secret that is never printed."""
    return isinstance(name, str) and (name in SECRET_NAMES or _SECRET_WORDS.search(name) is not None)


def parse_path(text: str) -> list[Step]:
    """``gateway.api.keys[0].name`` → ``["gateway", "api", "keys", 0, "name"]``; an agent by id
    becomes an ``AgentRef``. Raises CommandError for an empty or malformed path."""
    if not text or text.startswith(".") or text.endswith(".") or ".." in text:
        raise CommandError(f"{text!r} is not a config path: keys joined by dots, e.g. gateway.dreaming.mode or agents.alfred.dreaming.mode")
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise CommandError(f"{text!r} is not a config path: unexpected {text[pos]!r} at character {pos + 1}")
        name, index, _dot = match.groups()
        if name is not None:
            steps.append(AgentRef(name) if steps == ["agents"] else name)
        elif index is not None:
            steps.append(int(index) if index.isdigit() else AgentRef(index))
        pos = match.end()
    return steps


def show_path(steps: list[Step]) -> str:
    """The canonical text of a path (an agent by id as ``agents.<id>``)."""
    out = ""
    for step in steps:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, AgentRef):
            out += f".{step.id}" if "." not in step.id else f"[{step.id}]"
        else:
            out += f".{step}" if out else step
    return out


def _resolve(node: Raw) -> Raw:
    while "$ref" in node:
        node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def schema_node(steps: list[Step]) -> Raw:
    """The schema of the key at ``steps``. Raises CommandError naming the first step that is
    not a key of config.json (and the keys that are), or an index into something not a list."""
    node = _resolve(schema())
    for i, step in enumerate(steps):
        where = show_path(steps[:i]) or "config.json"
        if isinstance(step, int | AgentRef):
            if node.get("type") != "array":
                raise CommandError(f"{show_path(steps[: i + 1])}: {where} is not a list")
            if isinstance(step, AgentRef) and steps[:i] != ["agents"]:
                raise CommandError(f"{show_path(steps[: i + 1])}: only agents are named by id; give a position, e.g. [0]")
            node = _resolve(node["items"])
            continue
        props = node.get("properties")
        if node.get("type") == "array":
            raise CommandError(f"{show_path(steps[: i + 1])}: {where} is a list; give a position, e.g. {where}[0]")
        if not props or step not in props:
            known = ", ".join(props) if props else "nothing: it is a single value"
            raise CommandError(f"{show_path(steps[: i + 1])}: no such key in config.json ({where} has {known})")
        node = _resolve(props[step])
    return node


class Missing(Exception):
    """The path leads nowhere in the document it was looked up in (not an operator error)."""


def _agent_index(agents: object, ref: AgentRef) -> int:
    if isinstance(agents, list):
        for i, entry in enumerate(agents):
            if isinstance(entry, dict) and entry.get("id") == ref.id:
                return i
    raise Missing


def lookup(doc: Any, steps: list[Step]) -> Any:
    """The value at ``steps`` in ``doc``; raises Missing when any step is absent."""
    node = doc
    for step in steps:
        if isinstance(step, AgentRef):
            node = node[_agent_index(node, step)]
        elif isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise Missing
            node = node[step]
        else:
            if not isinstance(node, dict) or step not in node:
                raise Missing
            node = node[step]
    return node


def assign(doc: Raw, steps: list[Step], value: Any) -> None:
    """Set the value at ``steps`` in ``doc``, making the objects on the way that are missing.

    Raises CommandError when a list position or an agent does not exist (lists are not grown
    here: agents are added with ``gateway agents add``, keys with ``gateway keys add``).
    """
    node: Any = doc
    for i, step in enumerate(steps[:-1]):
        node = _step_into(node, step, steps[: i + 1], steps[i + 1])
    last = steps[-1]
    if isinstance(last, str):
        node[last] = value
    else:
        node[_position(node, last, steps)] = value


def _position(node: Any, step: int | AgentRef, upto: list[Step]) -> int:
    if isinstance(step, AgentRef):
        try:
            return _agent_index(node, step)
        except Missing:
            known = ", ".join(str(a.get("id")) for a in node if isinstance(a, dict)) if isinstance(node, list) else ""
            raise CommandError(f"no agent {step.id!r} in config.json (agents: {known or 'none'}); "
                               f"add it with: gateway agents add {step.id}") from None
    if not isinstance(node, list) or step >= len(node):
        size = len(node) if isinstance(node, list) else 0
        raise CommandError(f"{show_path(upto)}: there is no position {step} ({size} item{'s' if size != 1 else ''})")
    return step


def _step_into(node: Any, step: Step, upto: list[Step], following: Step) -> Any:
    if isinstance(step, str):
        if not isinstance(node.get(step), dict | list):
            node[step] = [] if isinstance(following, int | AgentRef) else {}
        return node[step]
    return node[_position(node, step, upto)]


def masked(value: Any, name: object = None) -> Any:
    """``value`` with every secret (by its field name, at any depth) replaced by MASK."""
    if is_secret(name) and value is not None:
        return MASK
    if isinstance(value, dict):
        return {k: masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, name) for v in value]
    return value


def touches_secret(steps: list[Step]) -> bool:
    """Whether the key at ``steps`` is, or lies under, a secret field or the API keys."""
    names = [s for s in steps if isinstance(s, str)]
    return any(is_secret(n) for n in names) or names[:3] == ["gateway", "api", "keys"]


def effective(raw: Raw) -> Raw:
    """config.json as the suite applies it: migrated, every default filled in (module docstring).

    Raises ConfigError when the file cannot be migrated."""
    try:
        migrated, _ = migrate(copy.deepcopy(raw))
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    full = fill_defaults(migrated)
    gw = full["gateway"]
    gw["metrics"].setdefault("host", gw["grpc"]["host"])
    key_schema = _resolve(schema()["properties"]["gateway"]["properties"]["api"]["properties"]["keys"]["items"])
    gw["api"]["keys"] = [fill_defaults(k, key_schema) if isinstance(k, dict) else k for k in gw["api"]["keys"]]
    agents = []
    for entry in full.get("agents", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            agents.append(entry)
            continue
        agent_id = entry["id"]
        filled = {**entry, "workspace": entry.get("workspace", f"agents/{agent_id}/workspace"),
                  "transcriptsDir": entry.get("transcriptsDir", f"agents/{agent_id}/sessions")}
        for block in AGENT_BLOCKS:
            own = entry.get(block, {})
            filled[block] = deep_merge(gw[block], own if isinstance(own, dict) else {})
        agents.append(filled)
    full["agents"] = agents
    ordered: Raw = _in_schema_order(full, schema())
    return ordered


def _in_schema_order(value: Any, node: Raw) -> Any:
    """``value`` with each object's keys in the order the schema lists them (unknown keys last),
    so ``config show`` reads like the reference table."""
    node = _resolve(node)
    if isinstance(value, list):
        items = node.get("items")
        return [_in_schema_order(v, items) if isinstance(items, dict) else v for v in value]
    if not isinstance(value, dict):
        return value
    props = node.get("properties", {})
    keys = [k for k in props if k in value] + [k for k in value if k not in props]
    return {k: _in_schema_order(value[k], props[k]) if k in props else value[k] for k in keys}


def origin(raw: Raw, steps: list[Step]) -> str:
    """Where the effective value of a key absent from config.json comes from: ``inherited from
    gateway.dreaming.mode`` (an agent's block, the gateway's key is in the file) or ``the default``."""
    if steps == ["gateway", "metrics", "host"]:
        return "the default: the value of gateway.grpc.host"
    if len(steps) >= 3 and steps[0] == "agents" and steps[2] in AGENT_BLOCKS:
        gateway_steps: list[Step] = ["gateway", *steps[2:]]
        try:
            lookup(raw, gateway_steps)
        except Missing:
            return "the default"
        return f"inherited from {show_path(gateway_steps)}"
    return "the default"
