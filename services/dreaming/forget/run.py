"""One forget from end to end (docs/concepts/forget.md): the workspace, then the KB, then the tombstone
and the record. The caller (``Dreamer.forget``) holds the agent's run lock, so no dream runs between
the steps and journals the text again.

Order, and why:

1. A tombstone id is drawn (``Tombstones.new_id``): the marker of every place of this forget.
2. On an apply, the tombstone (``Tombstones.add``, with no places yet): the text, or for a pattern the
   distinct strings it matches in the agent's files (never reported). Written before any file is
   touched: a forget cut short after step 3 (a kill, the KB down) has scrubbed those strings out of
   the files, and the same forget run again could not find them to tombstone them; meanwhile the
   tombstone already keeps the text out of dreaming's writes and the KB's search.
3. The workspace is scrubbed (or, for a dry run, scanned): ``workspace.apply_agent``.
4. The KB's part (``Knowledge.ForgetText``) gets the files step 3 rewrote, so it reindexes them,
   scrubs the vault (``shared``) and purges the databases' bytes. It comes after the files: an index
   rebuilt from a file that still held the text would hold it again.
5. The tombstones of the strings a pattern matched only in the shared vault's notes (the KB's answer
   names them), and the count of places changed set on all of this forget's tombstones. A shared
   forget's tombstones (each with its own salt) go to the vault with step 4 (``ForgetText.tombstones``),
   and again here with their places and a pattern's later ones (``ShareTombstones``): every host's KB
   mirrors the vault's, so every host refuses the text (docs/concepts/forget.md "Shared tombstones
   across hosts").
6. The forget's line in ``audit.jsonl``: its id, the key's name, the places per store.

When the KB cannot answer (step 4), steps 5 and 6 still run for what was done, and ``KbUnavailable``
says so: running the same forget again finishes it, since a scrubbed file holds no match. A process
killed at any step leaves each file old or scrubbed (``workspace``: one atomic compare-and-swap per
file), and the tombstone of step 2; the run that finishes the forget writes the record, under its
own id (the markers of the run cut short keep theirs, the id of the tombstone of step 2).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, Protocol

from gateway.config import AgentConfig
from gateway.errors import FailedPrecondition, GatewayError
from gateway.forgetting import SHARED_SCOPE, Target, Tombstone, Tombstones
from services.dreaming.forget.places import Place
from services.dreaming.forget.workspace import NAME_HOLDS_IT, apply_agent, matched_texts, record_forget, scan_agent

KB_LEFT: Final = "still found there after the KB's apply: run the same forget again"


@dataclass(frozen=True)
class KbPurge:
    """A database's bytes before and after an apply's purge."""

    store: str
    bytes_before: int
    bytes_after: int
    seconds: float


@dataclass(frozen=True)
class KbForget:
    """The KB's answer to ``ForgetText``: its places (``changed`` and ``left`` set for an apply), purges, and
    for a pattern's apply the strings it matched in the shared vault's notes (for the tombstones only)."""

    places: tuple[Place, ...] = ()
    purges: tuple[KbPurge, ...] = ()
    matched: tuple[str, ...] = ()


class KbForgetter(Protocol):
    """The KB's part of a forget (``peer_client.KbIndex.forget_text``). Raises PeerUnavailable."""

    async def forget_text(self, agent_id: str, target: Target, *, shared: bool, apply: bool, tombstone_id: str,
                          changed_paths: Sequence[str], tombstones: Sequence[Tombstone] = ()) -> KbForget: ...

    async def share_tombstones(self, agent_id: str, tombstones: Sequence[Tombstone], lift: str = "") -> None:
        """Keep shared ``tombstones`` in the agent's vault, and lift ``lift`` there (``ShareTombstones``)."""
        ...


class KbUnavailable(Exception):
    """The KB could not do its part; ``report`` is what was done (the workspace, the tombstone)."""

    def __init__(self, message: str, report: Forgotten) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class Forgotten:
    """What one forget found (a dry run) or did (an apply): never the text."""

    agent_id: str
    applied: bool
    shared: bool
    tombstone_id: str  # "" for a dry run
    places: tuple[Place, ...]
    purges: tuple[KbPurge, ...] = ()
    tombstones: int = 0

    @property
    def changed(self) -> int:
        """Places (files, notes, tables) rewritten."""
        return sum(1 for p in self.places if p.changed)

    @property
    def matches(self) -> int:
        return sum(p.count for p in self.places)

    @property
    def left(self) -> tuple[Place, ...]:
        return tuple(p for p in self.places if p.left)


def left_of(kind: str, store: str = "archive") -> str:
    """Why a KB place is still there after an apply: a workspace file's name is the agent's to change; a
    vault note's name is renamed by the KB, so one left there kept changing (run the forget again)."""
    return NAME_HOLDS_IT if kind == "name" and store == "archive" else KB_LEFT


async def forget(agent: AgentConfig, target: Target, kb: KbForgetter, tombstones: Tombstones, *, shared: bool,
                 apply: bool, by: str, now: Callable[[], str]) -> Forgotten:
    """One forget (module docstring). ``by``: the key's name; ``now()``: ISO 8601, UTC. Raises
    KbUnavailable (with what was done), OSError when a file cannot be read or written, and the KB's
    errors as GatewayError (raised after the record); FailedPrecondition, before anything, for a
    shared forget of an agent whose shared KB is off."""
    if shared and not agent.knowledge.shared.enabled:  # refused before any file is touched
        raise FailedPrecondition(f"shared KB disabled for agent {agent.id!r} (gateway.knowledge.shared.enabled is false)")
    if not apply:
        found = await asyncio.to_thread(scan_agent, agent, target)
        kb_part = await kb.forget_text(agent.id, target, shared=shared, apply=False, tombstone_id="", changed_paths=())
        return Forgotten(agent.id, False, shared, "", found.places + kb_part.places)
    tombstone_id = tombstones.new_id()
    scope = SHARED_SCOPE if shared else agent.id
    texts = [target.text] if target.text is not None else sorted(await asyncio.to_thread(matched_texts, agent, target))
    made = await asyncio.to_thread(tombstones.add, tombstone_id, texts, scope=scope, at=now(), by=by,
                                   places=0) if texts else []
    done = await asyncio.to_thread(apply_agent, agent, target, tombstone_id, by=by, at=now(), record=False)
    places = done.places
    changed = [p.path for p in done.places if p.changed and p.store == "workspace"]
    error: Exception | None = None
    kb_part = KbForget()
    try:
        kb_part = await kb.forget_text(agent.id, target, shared=shared, apply=True, tombstone_id=tombstone_id,
                                       changed_paths=changed, tombstones=made if shared else ())
    except Exception as exc:  # noqa: BLE001 - what was done is recorded below, then this is raised again
        error = exc
    report = Forgotten(agent.id, True, shared, tombstone_id, places + kb_part.places, kb_part.purges)
    more = [t for t in kb_part.matched if target.pattern is not None and t not in texts]
    if more:  # after the texts of step 2, so the ids .2, .3… already given stay theirs
        made += await asyncio.to_thread(tombstones.add, tombstone_id, texts + more, scope=scope, at=now(), by=by,
                                        places=0)
    if made:
        await asyncio.to_thread(tombstones.set_places, tombstone_id, report.changed)
    if made and shared and error is None:  # the vault's copies: their places, and a pattern's later ones
        try:
            await kb.share_tombstones(agent.id, [replace(t, places=report.changed) for t in made])
        except Exception as exc:  # noqa: BLE001 - recorded below, then raised again
            error = exc
    report = replace(report, tombstones=len(made))
    stores: dict[str, int] = {}
    for p in report.places:
        stores[p.store] = stores.get(p.store, 0) + p.changed
    extra: dict[str, object] = {"shared": shared, "stores": stores, "tombstones": len(made)}
    if error is not None:
        extra["kb"] = f"not done: {error}"
    await asyncio.to_thread(record_forget, agent.workspace, tombstone_id, by=by, at=now(), places=report.changed,
                            matches=report.matches, left=report.left, extra=extra)
    if isinstance(error, GatewayError):
        raise error
    if error is not None:
        raise KbUnavailable(str(error), report) from None
    return report
