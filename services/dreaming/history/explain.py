"""``gateway dream explain AGENT QUERY``: an entry's history, from the KB's lifecycle rows and the journal.

1. The agent's archive is refreshed and searched for ``QUERY`` through the KB
   (no retrieval is recorded): each distinct entry the hits answer, best first, up to ``limit``,
   whether it is live, in a stale file, in ``pruned.md`` or another archive.
2. The KB says where each entry stands now and gives its lifecycle row: when
   and where it was first seen, how often and when it was last retrieved,
   ``invalid_at``, ``restored_at``, ``supersedes_key``.
3. The journal's records whose removed or inserted text holds the entry
   (whitespace aside) are its moves and edits: which run and op, from which
   file to which, and why (a staleness move's reason names its rule, the
   superseding entry or the idle days and retrieval count); a revert or a
   recall check that undid one of them is an event too.

When the search finds nothing, the journal alone is searched for the query
(an entry a dream op removed and nobody indexed since): its moves and edits
are shown without a lifecycle row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gateway.config import AgentConfig
from services.dreaming.apply.commit import PRUNED
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.apply.restore import RESTORED_BY
from services.dreaming.model.archive import Hit, Index, IndexedEntry
from services.dreaming.passes.moves import COMPLETED
from services.dreaming.passes.stale_blocks import STALE_FILES, split_lines
from services.dreaming.records import journal

SEARCH_LIMIT = 20
DEFAULT_ENTRIES = 5
MAX_ENTRIES = 20


@dataclass(frozen=True)
class Place:
    path: str
    start_line: int
    end_line: int
    state: str  # live, stale, pruned, completed or archived


@dataclass(frozen=True)
class Event:
    at: str  # ISO 8601 UTC
    kind: str  # first-seen, moved, edited, retrieved, invalidated, restored, undone
    detail: str
    run_id: str = ""
    op_id: str = ""
    file: str = ""
    to_file: str = ""


@dataclass
class Explained:
    entry_hash: str
    text: str
    places: list[Place] = field(default_factory=list)
    life: IndexedEntry | None = None
    events: list[Event] = field(default_factory=list)


def _iso(moment: float | None) -> str:
    if not moment:
        return ""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def state_of(path: str) -> str:
    if path in STALE_FILES:
        return "stale"
    if path == PRUNED:
        return "pruned"
    if path == COMPLETED:
        return "completed"
    return "archived" if path.startswith("memory/archive/") else "live"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _entry_text(workspace: Path, place: IndexedEntry) -> str:
    try:
        lines = split_lines(read_text(workspace, place.path))
    except (Unsafe, OSError):
        return ""
    return "".join(lines[place.start_line - 1 : place.end_line]).strip()


def _journal_events(records: Sequence[journal.Record], wanted: str) -> list[Event]:
    """The moves and edits of the journal whose text holds ``wanted`` (flattened), and their undoing."""
    if not wanted:
        return []
    ops: dict[str, list[journal.Record]] = {}
    for record in records:
        if record.get("kind") == "edit" and (wanted in _flat(str(record.get("removed", ""))) or wanted in _flat(str(record.get("inserted", "")))):
            ops.setdefault(str(record.get("op")), []).append(record)
    out = []
    for op_id, edits in ops.items():
        run = str(edits[0].get("run", ""))
        moved = [r for r in edits if r.get("opKind") == "move"]
        at = str(edits[0].get("at", ""))
        if moved:
            source = str(moved[0].get("file", ""))
            reason = str(moved[0].get("reason", ""))
            rule, _, target = reason.rpartition(" → ")
            out.append(Event(at, "moved", f"{source} → {target}: {rule or reason}", run, op_id, source, target))
            continue
        for r in edits:
            kind = str(r.get("opKind", ""))
            took = wanted in _flat(str(r.get("removed", "")))
            what = f"{kind} {'took it out of' if took else 'wrote it into'} {r.get('file', '')}"
            detail = f"{what}: {r.get('reason', '')}" if r.get("reason") else what
            out.append(Event(at, "edited", detail, run, op_id, str(r.get("file", ""))))
    for record in records:
        if record.get("kind") in ("revert", "restore") and str(record.get("op")) in ops:
            by = str(record.get("by", ""))
            if record.get("kind") == "revert":
                how = "reverted by " + by
            else:  # the recall check's, or a write that never finished (start-up, a relocation rolled back)
                how = "undone by the recall check" if by in ("", RESTORED_BY) else f"undone ({by})"
            out.append(Event(str(record.get("at", "")), "undone", f"{record.get('op')} {how}", str(record.get("run", "")), str(record.get("op", ""))))
    return out


def _life_events(life: IndexedEntry) -> list[Event]:
    out = [Event(_iso(life.first_seen), "first-seen", f"first seen in {life.first_path}", file=life.first_path)]
    if life.retrieval_count:
        out.append(Event(_iso(life.last_retrieved), "retrieved", f"retrieved {life.retrieval_count} times, last at {_iso(life.last_retrieved)}"))
    if life.invalid_at:
        out.append(Event(_iso(life.invalid_at), "invalidated", "invalidated by the staleness GC (in a stale file since)"))
    if life.restored_at:
        out.append(Event(_iso(life.restored_at), "restored", "promoted back from the stale archive after a retrieval"))
    return out


async def explain(agent: AgentConfig, index: Index, query: str, limit: int = DEFAULT_ENTRIES) -> list[Explained]:
    """The history of each entry ``query`` finds (module docstring). Raises what ``index`` raises."""
    limit = min(max(limit or DEFAULT_ENTRIES, 1), MAX_ENTRIES)
    records = journal.read(agent.workspace)
    hits: Sequence[Hit] = []
    if agent.knowledge.archive.enabled:
        await index.refresh(agent.id)  # what was just written is found
        hits = await index.search(agent.id, query, SEARCH_LIMIT)
    hashes = list(dict.fromkeys(h.entry_hash for h in hits if h.entry_hash))[:limit]
    out: list[Explained] = []
    if hashes:
        places, lives = await index.lifecycle(agent.id, hashes)
        by_hash = {life.entry_hash: life for life in lives}
        for digest in hashes:
            mine = [p for p in places if p.entry_hash == digest]
            text = next((t for p in mine if (t := _entry_text(agent.workspace, p))), "")
            item = Explained(digest, text, [Place(p.path, p.start_line, p.end_line, state_of(p.path)) for p in mine], by_hash.get(digest))
            item.events = (_life_events(item.life) if item.life else []) + _journal_events(records, _flat(text))
            item.events.sort(key=lambda e: e.at)
            out.append(item)
    if not out:
        wanted = _flat(query)
        events = _journal_events(records, wanted)
        if events:
            out.append(Explained("", wanted, events=sorted(events, key=lambda e: e.at)))
    return out


def render(agent_id: str, query: str, found: Sequence[Explained]) -> str:
    """What ``gateway dream explain`` prints."""
    if not found:
        return f"no entry of {agent_id} matches {query!r} (searched the archive and the journal)\n"
    lines = []
    for item in found:
        first = item.text.splitlines()[0] if item.text else ""
        shown = first if len(first) <= 100 else first[:99] + "…"
        lines.append(f"entry {item.entry_hash[:12] or '(not indexed)'}  \"{shown}\"")
        for place in item.places:
            lines.append(f"  stands in {place.path}:{place.start_line}-{place.end_line} ({place.state})")
        if not item.places and item.entry_hash:
            lines.append("  stands in no file now")
        life = item.life
        if life is not None:
            retrieved = f"{life.retrieval_count} times, last at {_iso(life.last_retrieved)}" if life.retrieval_count else "never"
            lines.append(f"  first seen {_iso(life.first_seen)} in {life.first_path}; retrieved {retrieved}")
            if life.supersedes_key:
                lines.append(f"  supersedes {life.supersedes_key}")
        lines.append("  history:")
        for event in item.events:
            where = f" [{event.op_id}]" if event.op_id else ""
            lines.append(f"    {event.at or '?':<20}  {event.kind:<11} {event.detail}{where}")
    return "\n".join(lines) + "\n"
