"""``gateway doctor secrets AGENT``: where secrets already sit in an agent's memory (docs/operations.md "Secrets in memory").

It reads the home itself (the suite need not run) and scans, with the secret guard
(``gateway.secrets_guard``, docs/concepts/secrets.md), the agent's workspace: the identity files
and CLAUDE.md, everything under ``memory/`` and ``.dreaming/`` (the audit, the journal, the
backups) and under ``episodicArchiveDir`` when it is elsewhere, and, when the agent reads the shared vault (``knowledge.shared.enabled``) on the SQLite
backend, the notes of its project. Each finding is printed as ``FILE:LINE: DETECTOR`` with the
forget command that would remove it; the secret itself is never printed, so the command carries a
placeholder (``<the secret at FILE:LINE>``) for the user to fill in. Symbolic links are not followed.

Exit codes: 0 no secret found, 1 some found, 2 bad usage (an unknown agent).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from gateway.config import AgentConfig, Config
from gateway.errors import CommandError
from gateway.secrets_guard import Finding, find_secrets
from services.file_api.names import ALLOWED_FILES
from services.kb.vault.names import NOTES_DIR

IDENTITY_FILES = (*ALLOWED_FILES, "CLAUDE.md")
FOLDERS = ("memory", ".dreaming")
MAX_FILE_BYTES = 64 * 1024 * 1024  # a larger file is named, not scanned
PLACEHOLDER = "<the secret at {where}>"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    doctor = sub.add_parser("doctor", help="check an agent's memory: doctor secrets AGENT lists where secrets sit")
    checks = doctor.add_subparsers(dest="check", required=True)
    secrets = checks.add_parser(
        "secrets", help="scan an agent's workspace (identity files, memory/, .dreaming/) and the shared vault notes it "
        "reads for secrets; print each file, line and detector (never the value) with the forget command; exit 1 "
        "when any is found")
    secrets.add_argument("agent", metavar="AGENT", help="the agent's id")
    secrets.add_argument("--home", help="gateway home")


def _files(root: Path) -> Iterator[Path]:
    """The regular files under ``root``, in name order, links not followed."""
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                yield path


def scanned(agent: AgentConfig) -> Iterator[tuple[str, Path]]:
    """What the doctor scans of ``agent`` (module docstring): (where, as printed; path)."""
    ws = agent.workspace
    for name in IDENTITY_FILES:
        if (ws / name).is_file() and not (ws / name).is_symlink():
            yield name, ws / name
    episodic = agent.memory.episodic_archive_dir.strip("/")
    outside = [] if any(episodic == f or episodic.startswith(f + "/") for f in FOLDERS) else [episodic]
    for folder in (*FOLDERS, *outside):
        if (ws / folder).is_dir() and not (ws / folder).is_symlink():
            yield from ((path.relative_to(ws).as_posix(), path) for path in _files(ws / folder))
    shared = agent.knowledge.shared
    if shared.enabled and shared.backend == "sqlite" and (shared.vault_dir / NOTES_DIR).is_dir():
        notes = shared.vault_dir / NOTES_DIR
        yield from ((f"vault {shared.project}:{path.relative_to(notes).as_posix()}", path) for path in _files(notes))


def findings(agent: AgentConfig) -> tuple[int, list[tuple[str, Finding]], list[str]]:
    """Scan ``agent``: the number of files scanned, each finding with where it is, and notes (files
    too large to scan, a vault not scanned)."""
    count, found, notes = 0, [], []
    for where, path in scanned(agent):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                notes.append(f"{where}: not scanned, larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
                continue
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            notes.append(f"{where}: not scanned ({exc.strerror or exc})")
            continue
        count += 1
        found += [(where, f) for f in find_secrets(text)]
    shared = agent.knowledge.shared
    if shared.enabled and shared.backend != "sqlite":
        notes.append(f"the shared vault {shared.project!r} is on {shared.backend}: not scanned here (`gateway vault "
                     "export` it to a folder to look through its notes)")
    return count, found, notes


def run(args: argparse.Namespace, config: Config) -> int:
    agent = config.agent(args.agent)
    if agent is None:
        known = ", ".join(a.id for a in config.agents) or "none"
        raise CommandError(f"doctor secrets: no agent {args.agent!r} (agents: {known})")
    count, found, notes = findings(agent)
    for line in notes:
        print(f"gateway: {line}", file=sys.stderr)
    if not found:
        print(f"no secret found in the {count} files scanned for agent {agent.id}")
        return 0
    files = len({where for where, _ in found})
    print(f"{len(found)} secret(s) in {files} file(s) of agent {agent.id} ({count} files scanned); the values are not shown")
    for where, f in found:
        at = f"{where}:{f.line}"
        print(f"{at}: {f.detector}")
        print(f"  gateway forget {shlex.quote(agent.id)} --text {shlex.quote(PLACEHOLDER.format(where=at))}")
    print("Each forget command needs the secret itself in place of <the secret at …>: this report never prints it.")
    return 1
