"""The archive staleness GC's decisions, pure: which entries go to ``stale.md``, which come back.

Inputs are the archive's entries as the KB lists them (where each stands now,
its text as read from the file, its lifecycle row: first seen, last retrieved,
retrieval count, supersedes_key, invalid_at, restored_at), the blocks already
in the stale files, the settings (``gateway.dreaming.staleness``, an agent's
override merged) and the time. Nothing here reads a file or calls the KB.

**Where the GC looks.** Only at ``memory/**``: MEMORY.md and USER.md are never
candidates (structurally: they are not under ``memory/``), nor is
``memory/pinned/**``, nor ``memory/archive/**`` (the system's own archives:
``completed.md``, ``pruned.md`` and the stale files themselves never age out and
are never superseded).

**Keys.** An entry's own key is ``#N`` (1 to 9 digits) opening its first line
(after a list bullet and a task box; ``[#42]``, ``(#42)``, ``**#42**`` count),
or a ``<!-- key: 42 -->`` (or ``#42``) marker anywhere in it. An entry names a
key it supersedes with ``supersedes #N``, ``replaces #N`` or ``obsoletes #N``
(any letter case, a space or a colon before ``#``); it may name several.

**Superseded** (when ``supersession`` is on): an entry A is superseded by an
entry B when B names A's own key, B is not A, and A is older than B: A's
(first_seen, path, start line) sorts before B's. B may stand anywhere the KB
indexes (MEMORY.md, USER.md, any ``memory/**`` file, the stale files included:
that B was itself superseded or aged out later does not bring A back) except
``memory/archive/pruned.md`` (text a dream op removed is no authority). A
restored entry (``restored_at``) is not superseded again by a B first seen
before that restore: its retrieval after the invalidation said it is still
wanted; it can still age out. Supersession does not look at importance or
retrieval counts: the author said the entry is replaced. Every entry naming
keys gets ``supersedes_key`` (``#41,#42``) recorded when it differs.

**Aged out**: idle for more than ``staleTtlDays`` × 86,400 seconds (idle since
the later of ``first_seen``, which a backfill sets from the file's mtime, and
``last_retrieved``), retrieved fewer than ``minRetrievalKeep`` times, and of
importance below ``keepImportance``. Exactly ``staleTtlDays`` idle is not more.

**The cap.** At most ``maxInvalidationsPerRun`` invalidations per run (both
rules together), oldest idle first (ties by path and line); the others wait
(``waiting``) and come first on a later run, as they are still the oldest.

**Restores** are never capped: a block in a stale file whose entry was
retrieved after its ``invalid_at`` goes back to the file it came from (named
in the block), unless that file already holds the same entry again.

**Sync.** The lifecycle rows are brought in line with the stale files: an
entry with a block but no ``invalid_at`` gets the block's; an entry with
``invalid_at`` that has no block anywhere (a revert put it back, a move did not
land) has it cleared.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from gateway.config import StalenessSettings
from services.dreaming.model.archive import IndexedEntry

DAY_S: Final = 86_400
SUPERSEDED = "superseded"
AGED_OUT = "aged-out"
PRUNED_ARCHIVE = "memory/archive/pruned.md"

_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
_OWN_KEY = re.compile(r"^[\[(*_]*#(\d{1,9})\b")
_KEY_MARKER = re.compile(r"<!--\s*key\s*:\s*#?(\d{1,9})\s*-->", re.IGNORECASE)
_REFERENCE = re.compile(r"\b(?:supersedes|replaces|obsoletes)(?:\s+|\s*:\s*)#(\d{1,9})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Block:
    """An entry standing in a stale file, with what its block says: the file it came from
    and when it was invalidated."""

    entry: IndexedEntry
    origin: str
    invalid_at: float


@dataclass(frozen=True)
class Invalidation:
    entry: IndexedEntry
    rule: str  # SUPERSEDED or AGED_OUT
    idle_s: float
    by: IndexedEntry | None = None  # the superseding entry
    key: str = ""  # the key it was superseded under ("#42")

    @property
    def idle_days(self) -> int:
        return int(self.idle_s // DAY_S)


@dataclass(frozen=True)
class Restore:
    block: Block
    retrieved_at: float


@dataclass
class Plan:
    invalidations: list[Invalidation] = field(default_factory=list)
    waiting: list[Invalidation] = field(default_factory=list)  # over the cap: a later run
    restores: list[Restore] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # entry hash → supersedes_key to record
    set_invalid: dict[str, float] = field(default_factory=dict)  # sync: hash → invalid_at
    clear_invalid: list[str] = field(default_factory=list)  # sync


def own_key(text: str) -> str | None:
    """The entry's own key ``#N`` (module docstring), or None."""
    first = text.lstrip("\n").split("\n", 1)[0]
    bullet = _BULLET.match(first)
    head = first[bullet.end() :] if bullet else first.lstrip()
    match = _OWN_KEY.match(head)
    if match:
        return "#" + str(int(match.group(1)))
    marker = _KEY_MARKER.search(text)
    return "#" + str(int(marker.group(1))) if marker else None


def references(text: str) -> list[str]:
    """The keys the entry says it supersedes, in order, once each."""
    return list(dict.fromkeys("#" + str(int(m.group(1))) for m in _REFERENCE.finditer(text)))


def kept_place(path: str) -> str | None:
    """Why an entry at ``path`` is never a candidate, or None when it may be."""
    if not path.startswith("memory/"):
        return "only memory/** is collected (MEMORY.md and USER.md never are)"
    if path.startswith("memory/pinned/"):
        return "memory/pinned/** never ages out"
    if path.startswith("memory/archive/"):
        return "memory/archive/** holds the system's own archives"
    return None


def _order(entry: IndexedEntry) -> tuple[float, str, int]:
    return (entry.first_seen, entry.path, entry.start_line)


def _superseded(entries: Sequence[IndexedEntry], now: float) -> dict[int, Invalidation]:
    """Candidate entry (by index) → its supersession (the oldest superseder that names it)."""
    keyed: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        if kept_place(entry.path) is None and (key := own_key(entry.text)) is not None:
            keyed.setdefault(key, []).append(i)
    out: dict[int, Invalidation] = {}
    superseders = sorted((e for e in entries if e.path != PRUNED_ARCHIVE), key=_order)
    for by in superseders:
        for key in references(by.text):
            for i in keyed.get(key, ()):
                old = entries[i]
                if i in out or old.entry_hash == by.entry_hash or not _order(old) < _order(by):
                    continue
                if old.restored_at is not None and old.restored_at > by.first_seen:
                    continue  # restored since this superseder appeared: still wanted
                out[i] = Invalidation(old, SUPERSEDED, max(0.0, now - old.idle_since), by=by, key=key)
    return out


def _aged(entry: IndexedEntry, settings: StalenessSettings, now: float) -> Invalidation | None:
    idle = now - entry.idle_since
    if idle <= settings.stale_ttl_days * DAY_S:
        return None
    if entry.retrieval_count >= settings.min_retrieval_keep or entry.importance >= settings.keep_importance:
        return None
    return Invalidation(entry, AGED_OUT, idle)


def plan(entries: Sequence[IndexedEntry], blocks: Sequence[Block], settings: StalenessSettings, now: float) -> Plan:
    """What one run does (module docstring). ``entries``: every entry the KB lists, the stale
    files' included; ``blocks``: the entries of the stale files with what their blocks say."""
    out = Plan()
    if not settings.enabled:
        return out
    superseded = _superseded(entries, now) if settings.supersession else {}
    chosen: list[Invalidation] = []
    for i, entry in enumerate(entries):
        if kept_place(entry.path) is not None:
            continue
        found = superseded.get(i) or _aged(entry, settings, now)
        if found is not None:
            chosen.append(found)
    chosen.sort(key=lambda inv: (inv.entry.idle_since, inv.entry.path, inv.entry.start_line))
    cap = max(0, settings.max_invalidations_per_run)
    out.invalidations, out.waiting = chosen[:cap], chosen[cap:]
    live = {(e.path, e.entry_hash) for e in entries}
    for block in blocks:
        life = block.entry
        if life.last_retrieved is not None and life.last_retrieved > block.invalid_at and (block.origin, life.entry_hash) not in live:
            out.restores.append(Restore(block, life.last_retrieved))
    if settings.supersession:
        for entry in entries:
            named = ",".join(references(entry.text))
            if named and named != (entry.supersedes_key or ""):
                out.keys[entry.entry_hash] = named
    in_blocks = {b.entry.entry_hash: b for b in blocks}
    restoring = {r.block.entry.entry_hash for r in out.restores}
    for digest, block in in_blocks.items():
        if block.entry.invalid_at is None and digest not in restoring:
            out.set_invalid[digest] = block.invalid_at
    going = {inv.entry.entry_hash for inv in out.invalidations}
    out.clear_invalid = sorted({e.entry_hash for e in entries if e.invalid_at is not None
                                and e.entry_hash not in in_blocks and e.entry_hash not in going})
    return out
