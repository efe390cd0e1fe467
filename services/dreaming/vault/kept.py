"""The promotions kept on the host: ``.dreaming/promotions.pending.json`` (docs/concepts/promotion.md
"Kept and retried").

A promotion the KB could not answer because it, or the vault behind it, was unavailable
(``UNAVAILABLE``, ``DEADLINE_EXCEEDED``) is kept here, with its request id (``request_id``: the KB
answers one id once), the run and op it came from, its proposal, and the fact text as it was sent. The
file is one JSON object (``{"version": 1, "kept": [...]}``, oldest first) replaced whole through
``gateway.atomic.write_atomic`` (temp file, fsync, rename, folder fsync), so a process killed at any
point leaves the old file or the new one, never a torn one. Only a dreaming run of the agent writes it
(the caller holds the agent's run lock).

At most ``MAX_KEPT`` (1,000) promotions are kept: the oldest stay, and a newer one that would pass the
cap is refused (``add`` returns it; the caller logs, audits and reports it). A file that cannot be read
as this format is copied aside to ``promotions.pending.json.unreadable-<its SHA-256, 12 hex>`` (never
deleted) and logged, and the queue starts empty (the next write replaces the file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Final

import structlog

from gateway.atomic import WriteConflict, write_atomic

PENDING: Final = ".dreaming/promotions.pending.json"
MAX_KEPT: Final = 1000
VERSION: Final = 1
ASKED: Final = "asked; its answer is not journaled yet (a process killed before it was: the next run gets the KB's answer back)"

log = structlog.get_logger()


@dataclass(frozen=True)
class Kept:
    """One promotion waiting to be retried: ``run_id``/``op_id`` it came from (the op's proposal
    ``proposal_id``, ``topic`` and ``reason``), ``fact`` as sent, when it was kept (``kept_at``, ISO) and
    why (``error``, the last failure)."""

    request_id: str
    run_id: str
    op_id: str
    proposal_id: str
    topic: str
    reason: str
    fact: str
    kept_at: str
    error: str


def request_id(agent_id: str, op_id: str) -> str:
    """The id a promotion of ``op_id`` (``<run>/<n>``) is asked under, every time: ``<agent>/<run>/<n>``."""
    return f"{agent_id}/{op_id}"


def _path(workspace: Path) -> Path:
    return workspace / PENDING


def _key(name: str) -> str:
    """A field's key in the file: camelCase, as in dreaming's other JSON files."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _parse(data: bytes) -> list[Kept]:
    """ValueError (or a KeyError, TypeError) when ``data`` is not this format."""
    raw = json.loads(data.decode("utf-8"))
    if not isinstance(raw, dict) or raw.get("version") != VERSION or not isinstance(raw.get("kept"), list):
        raise ValueError("not a promotions.pending.json of version 1")
    names = [f.name for f in fields(Kept)]
    return [Kept(**{name: str(item[_key(name)]) for name in names}) for item in raw["kept"]]


def read(workspace: Path) -> list[Kept]:
    """The promotions kept, oldest first (none when there is no file; module docstring for a broken one)."""
    path = _path(workspace)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        return _parse(data)
    except (ValueError, KeyError, TypeError) as exc:
        aside = path.with_name(f"{path.name}.unreadable-{hashlib.sha256(data).hexdigest()[:12]}")
        with contextlib.suppress(OSError, WriteConflict):  # WriteConflict: copied aside before
            write_atomic(aside, data, expected=None, mode=0o600)
        log.error("dream_promotions_kept_unreadable", file=str(path), copied_to=str(aside), error=str(exc))
        return []


def count(workspace: Path) -> int:
    """How many promotions are kept (0 when the file is missing or unreadable; nothing is copied)."""
    try:
        return len(_parse(_path(workspace).read_bytes()))
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write(workspace: Path, kept: Sequence[Kept]) -> None:
    """Replace the file with ``kept`` (removed when empty). Raises OSError."""
    path = _path(workspace)
    if not kept:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": VERSION, "kept": [{_key(name): value for name, value in asdict(k).items()} for k in kept]}
    write_atomic(path, (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8"), mode=0o600)


def add(workspace: Path, new: Sequence[Kept]) -> list[Kept]:
    """Keep ``new`` after those already kept (an id kept already is not kept twice), up to ``MAX_KEPT``;
    the ones refused for the cap. Raises OSError (nothing was kept then)."""
    kept = read(workspace)
    known = {k.request_id for k in kept}
    fresh = [k for k in new if k.request_id not in known]
    room = max(0, MAX_KEPT - len(kept))
    if fresh[:room]:
        write(workspace, [*kept, *fresh[:room]])
    return fresh[room:]


def keep_ahead(agent_id: str, workspace: Path, asks: Sequence[Kept]) -> set[str]:
    """Keep a run's ``asks`` before they are asked (docs/concepts/promotion.md "Kept and retried"), so
    a process killed after the KB wrote and before the journal did leaves them kept: the next run's
    retry gets the KB's answer back and journals it under their run. The request ids kept; none when
    the file cannot be written (logged), nor those past the cap (kept later only if they wait)."""
    if not asks:
        return set()
    try:
        refused = {k.request_id for k in add(workspace, asks)}
    except OSError as exc:
        log.warning("dream_promotions_not_kept_ahead", agent=agent_id, error=str(exc))
        return set()
    return {k.request_id for k in asks} - refused


def settle_ahead(agent_id: str, workspace: Path, ahead: set[str], waiting: Sequence[Kept]) -> list[str]:
    """The queue once the run's promotions are journaled: those kept ahead that were answered leave it,
    the ``waiting`` ones stay with their reason; a note of the run when it cannot be rewritten."""
    if not ahead:
        return []
    why = {k.request_id: k for k in waiting}
    try:
        write(workspace, [why.get(k.request_id, k) for k in read(workspace) if k.request_id not in ahead or k.request_id in why])
    except OSError as exc:
        log.error("dream_promotions_kept_not_written", agent=agent_id, error=str(exc))
        return [f"The kept promotions could not be rewritten ({exc}); the next run asks this run's again, and the KB "
                "answers each request once."]
    return []
