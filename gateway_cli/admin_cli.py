"""``gateway keys …`` and ``gateway agents …``: API keys and agents, edited from the command line.

``keys confirm`` deletes the first admin key's ``admin-key.txt`` once the
operator has saved the key.

Every change goes through ``config_edit.edit_config``: config.json is read,
changed, validated as start-up would, and written atomically with mode 0600.
A new key is printed once, on stdout, and stored only as its SHA-256 with a
name; the name is what the rpc log lines show for that key. Refusals are
CommandError (one line, exit 2), rendered by ``gateway_cli.cli``.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from gateway.config import Config, schema
from gateway.errors import CommandError
from gateway.home import ADMIN_KEY_FILE, confirm_admin_key
from gateway_cli.config_edit import edit_config, read_valid
from gateway_cli.config_lint import agent_ids, unknown_agent_line

Raw = dict[str, Any]

# A key's name is a short label: it lands in log lines and in commands.
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KEY_PREFIX = "gw_"


def add_parsers(sub: Any) -> None:
    """Add ``keys`` and ``agents`` to the ``gateway`` parser's subcommands."""
    keys = sub.add_parser("keys", help="add, list or revoke API keys; confirm the first admin key was saved")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    add = keys_sub.add_parser("add", help="make a key, print it once, store only its SHA-256")
    add.add_argument("name", help="a label for the key, shown in logs (letters, digits, . _ -; at most 64)")
    add.add_argument("--agents", required=True, help="agent ids the key covers, comma-separated, or '*' for every agent")
    add.add_argument("--write", action="store_true", help="let the key write (it can always read)")
    listing = keys_sub.add_parser("list", help="names and scopes of the keys (never the keys or their hashes)")
    revoke = keys_sub.add_parser("revoke", help="remove a key by name")
    revoke.add_argument("name", help="the key's name, as `gateway keys list` shows it")
    confirm = keys_sub.add_parser("confirm", help=f"say the first admin key is saved: delete {ADMIN_KEY_FILE}")
    for p in (add, listing, revoke, confirm):
        p.add_argument("--home", help="gateway home")

    agents = sub.add_parser("agents", help="add or list agents")
    agents_sub = agents.add_subparsers(dest="action", required=True)
    agent_add = agents_sub.add_parser(
        "add", help="add agents (one or many, in one config write) and create their workspace and sessions folders"
    )
    agent_add.add_argument("ids", nargs="*", metavar="ID", help="agent id: one safe path segment; several may be given")
    agent_add.add_argument("--from-file", metavar="FILE",
                           help="read more ids from FILE, one per line ('#' comments and blank lines skipped; - for stdin)")
    agent_add.add_argument("--workspace", help="workspace folder, relative to the home (default agents/ID/workspace); "
                           "only with a single id")
    agent_list = agents_sub.add_parser("list", help="the agents and their workspaces")
    for p in (agent_add, agent_list):
        p.add_argument("--home", help="gateway home")


def run(args: argparse.Namespace, home: Path) -> int:
    """Run ``gateway keys ACTION`` or ``gateway agents ACTION``; the exit code."""
    if args.command == "keys":
        if args.action == "add":
            return add_key(home, args.name, args.agents, args.write)
        if args.action == "list":
            return list_keys(home)
        if args.action == "revoke":
            return revoke_key(home, args.name)
        if args.action == "confirm":
            return confirm_key(home)
    if args.command == "agents":
        if args.action == "add":
            return add_agents(home, agents_to_add(args.ids, args.from_file), args.workspace)
        if args.action == "list":
            return list_agents(home)
    return 2


def _say(text: str) -> None:
    print(f"gateway: {text}", file=sys.stderr)


def _table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _keys_of(raw: Raw) -> list[Raw]:
    """``gateway.api.keys`` of ``raw``, created empty when missing."""
    gateway = raw.setdefault("gateway", {})
    api = gateway.setdefault("api", {})
    keys: list[Raw] = api.setdefault("keys", [])
    return keys


def _label(index: int, key: Raw) -> str:
    """What logs and ``keys list`` call a key: its name, else ``keys[i]`` (as start-up labels it)."""
    name = key.get("name")
    return name if isinstance(name, str) else f"keys[{index}]"


def _scope_text(agents: object) -> str:
    return "*" if agents == "*" else ",".join(str(a) for a in agents) if isinstance(agents, list) else "?"


def parse_scope(text: str) -> str | list[str]:
    """``--agents``: ``'*'``, or comma-separated ids (duplicates dropped). Raises CommandError."""
    if text.strip() == "*":
        return "*"
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise CommandError("--agents needs agent ids separated by commas, or '*' for every agent")
    if "*" in ids:
        raise CommandError("--agents '*' means every agent and stands alone; do not list it with ids")
    return list(dict.fromkeys(ids))


def add_key(home: Path, name: str, agents: str, write: bool) -> int:
    """``keys add``: a new key, printed once on stdout; config.json keeps its SHA-256 and ``name``."""
    if not KEY_NAME.fullmatch(name):
        raise CommandError(f"{name!r} is not a key name: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    scope = parse_scope(agents)
    key = KEY_PREFIX + secrets.token_urlsafe(32)

    def change(raw: Raw) -> None:
        keys = _keys_of(raw)
        if any(k.get("name") == name for k in keys if isinstance(k, dict)):
            raise CommandError(f"a key named {name!r} exists already; pick another name, or first: gateway keys revoke {name}")
        if isinstance(scope, list):
            unknown = [a for a in scope if a not in agent_ids(raw)]
            if unknown:
                raise CommandError("; ".join(unknown_agent_line(a) for a in unknown) + "; no key was added")
        keys.append({"name": name, "keySha256": hashlib.sha256(key.encode()).hexdigest(), "agents": scope, "write": write})

    edit_config(home, change)
    print(key, flush=True)
    access = "read and write" if write else "read-only"
    _say(f"added key {name!r} ({access}, agents {_scope_text(scope)}) to {home / 'config.json'}; "
         "the key above is shown only this once (config.json keeps its SHA-256)")
    return 0


def list_keys(home: Path) -> int:
    """``keys list``: name, agents, access and how it is stored; never a key nor a hash."""
    raw, _ = read_valid(home)
    keys = raw.get("gateway", {}).get("api", {}).get("keys", [])
    if not keys:
        _say(f"no keys in {home / 'config.json'}; add one with: gateway keys add NAME --agents ID[,ID...]|'*' [--write]")
        return 0
    rows = [("NAME", "AGENTS", "ACCESS", "STORED")]
    for i, key in enumerate(keys):
        stored = "sha256" if "keySha256" in key else "plain text"
        rows.append((_label(i, key), _scope_text(key["agents"]), "write" if key.get("write") else "read", stored))
    _table(rows)
    return 0


def _admin_left(keys: list[Raw]) -> bool:
    return any(k.get("agents") == "*" and k.get("write") is True for k in keys)


def revoke_key(home: Path, name: str) -> int:
    """``keys revoke``: remove the key(s) with this name (or the unnamed ``keys[i]`` that ``keys list`` shows).

    Revoking the last key with write access to every agent is allowed: the
    CLI edits config.json directly, so ``keys add`` can always make another.
    """
    removed: list[Raw] = []
    left: list[Raw] = []

    def change(raw: Raw) -> None:
        keys = _keys_of(raw)
        hits = [i for i, k in enumerate(keys) if _label(i, k) == name]
        if not hits:
            known = ", ".join(_label(i, k) for i, k in enumerate(keys)) or "none"
            raise CommandError(f"no key named {name!r} in {home / 'config.json'} (keys: {known})")
        removed.extend(keys[i] for i in hits)
        left.extend(k for i, k in enumerate(keys) if i not in hits)
        keys[:] = left

    edit_config(home, change)
    for key in removed:
        print(f"revoked key {name!r} ({'write' if key.get('write') else 'read'}, agents {_scope_text(key.get('agents'))})")
    if not _admin_left(left):
        _say("no key left can write every agent; make one with: gateway keys add NAME --agents '*' --write")
    return 0


def confirm_key(home: Path) -> int:
    """``keys confirm``: the operator has the first admin key; delete ``admin-key.txt``."""
    path = home / ADMIN_KEY_FILE
    if confirm_admin_key(home):
        print(f"deleted {path}; the admin key is now only where you saved it (config.json keeps its SHA-256)")
    else:
        print(f"no {path}: nothing to confirm")
    return 0


def _agent_id_pattern() -> str:
    pattern: str = schema()["properties"]["agents"]["items"]["properties"]["id"]["pattern"]
    return pattern


@dataclass(frozen=True)
class NewAgent:
    """An id ``agents add`` was given, and where: ``""`` on the command line, else ``FILE:LINE``."""

    id: str
    where: str = ""

    def line(self, text: str) -> str:
        """``text`` (a problem with this id), prefixed with where the id was read."""
        return f"{self.where}: {text}" if self.where else text


def agents_to_add(ids: Sequence[str], from_file: str | None, stdin: TextIO | None = None) -> list[NewAgent]:
    """The ids of ``agents add``: the command line's, then ``from_file``'s (``-``: stdin), one per
    line, leading and trailing blanks stripped, blank lines and ``#`` comment lines skipped. Raises
    CommandError when none is given or the file cannot be read."""
    out = [NewAgent(i) for i in ids]
    if from_file is not None:
        name = "stdin" if from_file == "-" else from_file
        try:
            text = (stdin or sys.stdin).read() if from_file == "-" else Path(from_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {from_file} ({exc.strerror or exc}); no agent was added") from None
        except UnicodeDecodeError:
            raise CommandError(f"{name} is not UTF-8 text; no agent was added") from None
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                out.append(NewAgent(stripped, f"{name}:{number}"))
    if not out:
        raise CommandError("no agent id given: pass IDs, or --from-file FILE with one id per line (- for stdin)")
    return out


def _batch_problems(home: Path, batch: list[NewAgent], existing: set[str]) -> list[str]:
    """One line per id that cannot be added: not an id, given twice, or configured already."""
    pattern = _agent_id_pattern()
    problems = []
    first: dict[str, NewAgent] = {}
    for agent in batch:
        if not re.fullmatch(pattern, agent.id):  # fullmatch: "$" alone would let "id\n" through
            problems.append(agent.line(f"{agent.id!r} is not an agent id: one safe path segment matching {pattern}"))
        elif agent.id in first:
            earlier = first[agent.id].where or "the command line"
            problems.append(agent.line(f"{agent.id!r} is given twice (first on {earlier})"))
        elif agent.id in existing:
            problems.append(agent.line(f"agent {agent.id!r} exists already in {home / 'config.json'}"))
        first.setdefault(agent.id, agent)
    return problems


def add_agents(home: Path, batch: list[NewAgent], workspace: str | None = None) -> int:
    """``agents add``: new agent entries, all in one config write, their workspace and sessions
    folders created first. A batch with any bad id is refused whole, one line per problem, and
    nothing is written. ``workspace`` only with a single id."""
    if workspace is not None and len(batch) != 1:
        raise CommandError(f"--workspace names one agent's folder; it cannot go with {len(batch)} ids "
                           "(add that agent on its own)")
    if len(batch) == 1:
        return add_agent(home, batch[0].id, workspace)
    entries = [{"id": a.id, "workspace": f"agents/{a.id}/workspace", "transcriptsDir": f"agents/{a.id}/sessions"}
               for a in batch]

    def change(raw: Raw) -> None:
        refused = _batch_problems(home, batch, set(agent_ids(raw)))
        if refused:
            raise _refused(refused, len(batch))
        agents = raw.setdefault("agents", [])
        if not isinstance(agents, list):
            raise CommandError(f"agents in {home / 'config.json'} is not a list")
        agents.extend(entries)

    config = edit_config(home, change, lambda c: _make_folders(c, [a.id for a in batch]))
    for agent in batch:
        made = config.agent(agent.id)
        assert made is not None
        print(f"added agent {agent.id!r}: workspace {made.workspace}, sessions {made.transcripts_dir}")
    _say(f"added {len(batch)} agents to {home / 'config.json'} in one write")
    return 0


def _refused(problems: list[str], count: int) -> CommandError:
    lines = "\n".join(f"  {line}" for line in problems)
    return CommandError(f"refused: {len(problems)} problem{'s' if len(problems) > 1 else ''} in the {count} ids; "
                        f"no agent was added, nothing was written:\n{lines}")


def _make_folders(config: Config, ids: list[str]) -> None:
    """Create each agent's workspace and sessions folders (before config.json names them)."""
    for agent_id in ids:
        agent = config.agent(agent_id)
        assert agent is not None
        for folder in (agent.workspace, agent.transcripts_dir):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                what = f"agent {agent_id!r} was not added" if len(ids) == 1 else "no agent was added"
                raise CommandError(f"cannot create {folder} ({exc.strerror}); {what}") from None


def add_agent(home: Path, agent_id: str, workspace: str | None) -> int:
    """``agents add ID``: a new agent entry, its workspace and sessions folders created first."""
    if not re.fullmatch(_agent_id_pattern(), agent_id):  # fullmatch: "$" alone would let "id\n" through
        raise CommandError(f"{agent_id!r} is not an agent id: one safe path segment matching {_agent_id_pattern()}")
    entry = {
        "id": agent_id,
        "workspace": workspace if workspace is not None else f"agents/{agent_id}/workspace",
        "transcriptsDir": f"agents/{agent_id}/sessions",
    }

    def change(raw: Raw) -> None:
        if agent_id in agent_ids(raw):
            raise CommandError(f"agent {agent_id!r} exists already in {home / 'config.json'}")
        agents = raw.setdefault("agents", [])
        if not isinstance(agents, list):
            raise CommandError(f"agents in {home / 'config.json'} is not a list")
        agents.append(entry)

    config = edit_config(home, change, lambda c: _make_folders(c, [agent_id]))
    agent = config.agent(agent_id)
    assert agent is not None
    print(f"added agent {agent_id!r}: workspace {agent.workspace}, sessions {agent.transcripts_dir}")
    return 0


def list_agents(home: Path) -> int:
    """``agents list``: each agent's id and workspace (resolved against the home)."""
    _, config = read_valid(home)
    if not config.agents:
        _say(f"no agents in {home / 'config.json'}; add one with: gateway agents add ID")
        return 0
    _table([("ID", "WORKSPACE"), *((a.id, str(a.workspace)) for a in config.agents)])
    return 0
