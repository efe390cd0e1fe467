"""The staleness GC in a run: ask the KB, plan (``staleness``), move through ``relocate``, check, record.

1. The KB refreshes the archive, folds the retrieval log (so retrievals up to
   now count) and lists every entry with its lifecycle row
   (``ListArchiveEntries``). The dreaming process never opens a ``kb.sqlite``,
   and none of these calls counts as a retrieval.
2. Every listed source is read; one whose bytes are not what the index holds
   (changed since the refresh, not UTF-8, a link) takes no part in this run.
3. ``staleness.plan`` decides; the stale files' blocks come from
   ``stale_blocks.parse``.
4. In propose mode nothing is written: the moves are listed as what a run in
   auto mode would do (they are not proposals to accept).
5. In auto mode, restores first (one ``relocate`` per stale file: the block
   out, its entry appended to the file it came from), then invalidations (one
   ``relocate`` per source file: the entry out, its block appended to its stale
   file). Each is written like every pass's moves: the journal's intent, the
   destination, a backup, compare-and-swap, so ``gateway dream revert`` undoes
   them; each moved entry is one op of the run. ``stale-untrusted.md`` gets its
   frontmatter before its first block, outside any op.
6. The recall check: the KB reindexes what was written and one ``ProbeRecall``
   asks for every moved entry in its destination; if any is not found, or the
   KB cannot answer, every source the GC wrote gets its pre-image back (the
   copies in the destinations stay, with a line saying so) and nothing is
   recorded for them.
7. The KB records the decisions (``UpdateEntryLifecycle``): ``invalid_at`` of
   what went, ``invalid_at`` cleared and ``restored_at`` of what came back,
   ``supersedes_key`` of every entry naming keys, and the sync of rows that
   disagree with the stale files. A failure here is noted; the next run's sync
   repairs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gateway.config import AgentConfig
from services.dreaming.apply import recall, sections
from services.dreaming.apply.files import Unsafe, append_text, confined, read_text
from services.dreaming.apply.restore import Check, Written, verify
from services.dreaming.model.archive import Index, IndexedEntry, LifecycleUpdate
from services.dreaming.model.values import MEMORY_FILE, PROPOSE, OpResult, Proposal
from services.dreaming.passes import staleness
from services.dreaming.passes.moves import Move
from services.dreaming.passes.relocate import Relocated, relocate
from services.dreaming.passes.stale_blocks import (
    STALE_FILES,
    STALE_UNTRUSTED,
    UNTRUSTED_FRONTMATTER,
    Found,
    block_text,
    entry_span,
    iso,
    parse,
    split_lines,
    target_for,
    why_text,
    with_blanks,
)

STALE_KIND = "stale"
RESTORE_KIND = "restore"
MAX_NAMED = 100  # the KB's Refresh takes at most this many named sources


@dataclass
class GcOutcome:
    results: list[OpResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ops: int = 0
    ran: bool = False  # the GC was on and got as far as asking the KB


@dataclass
class _Files:
    texts: dict[str, str] = field(default_factory=dict)
    lines: dict[str, list[str]] = field(default_factory=dict)
    offsets: dict[str, list[int]] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)


def _read(agent: AgentConfig, listed: dict[str, str]) -> _Files:
    """Every listed source (path → content hash) whose bytes are what the index holds."""
    out = _Files()
    for path, digest in listed.items():
        try:
            text = read_text(agent.workspace, path)
        except (Unsafe, OSError):
            out.unread.append(path)
            continue
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
            out.unread.append(path)
            continue
        lines = split_lines(text)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        out.texts[path], out.lines[path], out.offsets[path] = text, lines, offsets
    return out


def _entry(e: IndexedEntry, files: _Files) -> IndexedEntry:
    """``e`` with its text as read from its file."""
    return replace(e, text="".join(files.lines[e.path][e.start_line - 1 : e.end_line]).rstrip("\r\n"))


def _restorable_origin(path: str) -> bool:
    parts = path.split("/")
    return staleness.kept_place(path) is None and path.endswith(".md") and all(p and not p.startswith(".") for p in parts)


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else text


def _op(op_id: str, move: Move, entry_text: str, status: str, reason: str = "") -> OpResult:
    proposal = Proposal(op=move.kind, file=move.source, target=_first_line(entry_text), reason=move.reason)
    size = len(move.text) if status == "applied" else 0
    return OpResult(op_id, proposal, status, reason, file=move.target, chars_removed=size, chars_inserted=size)


@dataclass
class _Planned:
    op_id: str
    move: Move
    piece: str
    probe: str  # the entry as it stands in the destination
    entry_hash: str
    text: str  # the entry (for the report)


def _restore_moves(founds: dict[str, list[Found]], plan: staleness.Plan, texts: dict[str, str]) -> list[tuple[str, Move, str, Found]]:
    by_hash = {id(r.block): r for r in plan.restores}
    out = []
    for path, found in founds.items():
        for f in found:
            r = by_hash.get(id(f.block))
            if r is None:
                continue
            why = (f"retrieved {iso(r.retrieved_at)} after its invalidation ({iso(f.block.invalid_at)}): "
                   f"back to {f.block.origin}")
            move = Move(kind=RESTORE_KIND, start=f.start, end=f.end, text=texts[path][f.start : f.end], target=f.block.origin,
                        heading_path=(), reason=why, source=path)
            out.append((path, move, "\n" + f.body, f))
    return out


def _settings_note(agent: AgentConfig) -> str:
    st = agent.dreaming.staleness
    return f"staleTtlDays {st.stale_ttl_days}, minRetrievalKeep {st.min_retrieval_keep}, keepImportance {st.keep_importance}"


async def run_gc(agent: AgentConfig, index: Index, run_id: str, at: str, mode: str, first_op: int,
                 now: Callable[[], float], written: Sequence[str] = (MEMORY_FILE,)) -> GcOutcome:
    """The GC of one run (module docstring); op numbers from ``first_op``. Raises only
    CancelledError: a KB that cannot answer is a note, and the run goes on.

    ``written``: the sources this run wrote before the GC. The KB reindexes them and whatever its
    file watch has already seen, without waiting for the watch's barrier: a source changed too
    recently for the watch is not as indexed, and step 2 leaves it for a later run."""
    out = GcOutcome()
    settings = agent.dreaming.staleness
    if not settings.enabled:
        return out
    out.ran = True
    if not agent.knowledge.archive.enabled:
        out.notes.append("Staleness GC not run: the knowledge archive is off for this agent.")
        return out
    try:
        await index.refresh(agent.id, list(written)[:MAX_NAMED] or [MEMORY_FILE])
        await index.fold(agent.id)
        listing = await index.entries(agent.id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the KB could not answer: nothing is moved
        out.notes.append(f"Staleness GC not run: the KB could not list the archive ({exc}).")
        return out
    moment = now()
    files = await asyncio.to_thread(_read, agent, {p: s.content_hash for p, s in listing.sources.items()})
    entries = [_entry(e, files) for e in listing.entries if e.path in files.texts]
    per_file: dict[str, list[IndexedEntry]] = {}
    for entry in entries:
        per_file.setdefault(entry.path, []).append(entry)
    founds: dict[str, list[Found]] = {p: [f for f in parse(files.texts[p], per_file.get(p, [])) if _restorable_origin(f.block.origin)]
              for p in STALE_FILES if p in files.texts}
    plan = staleness.plan(entries, [f.block for fs in founds.values() for f in fs], settings, moment)
    if files.unread:
        out.notes.append(f"Staleness GC left {len(files.unread)} source(s) alone: not as indexed (changed since, a link, "
                         f"or not UTF-8): {', '.join(sorted(files.unread)[:5])}{' …' if len(files.unread) > 5 else ''}.")
    planned, skipped = _plan_moves(agent, plan, founds, files, per_file, run_id, first_op, moment)
    out.ops = len(planned) + len(skipped)
    out.results = [_op(op, m, text, "skipped", why) for op, m, text, why in skipped]
    if plan.waiting:
        out.notes.append(f"Staleness GC: {len(plan.waiting)} more entries are due and wait for later runs "
                         f"(maxInvalidationsPerRun is {settings.max_invalidations_per_run}; oldest idle first).")
    if mode == PROPOSE:
        why = "would be moved by a run in auto mode; not a proposal to accept"
        out.results = [_op(p.op_id, p.move, p.text, "proposed", why) for p in planned] + out.results
        return out
    done, applied = await asyncio.to_thread(_write, agent, planned, files.texts, run_id, at)
    out.results = [
        _op(p.op_id, p.move, p.text, "applied") if p.op_id in applied else _op(p.op_id, p.move, p.text, "skipped", _aborted(done, p))
        for p in planned
    ] + out.results
    applied_ops = [p for p in planned if p.op_id in applied]
    if applied_ops:
        restored = await _recall(agent, index, run_id, at, done, applied_ops, out)
        applied_ops = [p for p in applied_ops if p.op_id not in restored]
    await _record(agent, index, plan, applied_ops, moment, out)
    moved = sum(1 for p in applied_ops if p.move.kind == STALE_KIND)
    back = sum(1 for p in applied_ops if p.move.kind == RESTORE_KIND)
    if moved or back:
        out.notes.append(f"Staleness GC: {moved} entries moved to the stale archive, {back} restored after a retrieval.")
    return out


def _aborted(done: list[Relocated], p: _Planned) -> str:
    for d in done:
        if d.source == p.move.source and d.aborted:
            return f"aborted: {d.aborted}"
    return "aborted: not written"


def _plan_moves(agent: AgentConfig, plan: staleness.Plan, founds: dict[str, list[Found]], files: _Files,
                per_file: dict[str, list[IndexedEntry]], run_id: str, first_op: int,
                moment: float) -> tuple[list[_Planned], list[tuple[str, Move, str, str]]]:
    """The numbered moves of the plan (restores first), and the invalidations that cannot move alone."""
    planned: list[_Planned] = []
    skipped: list[tuple[str, Move, str, str]] = []
    number = first_op
    for _path, move, piece, found in _restore_moves(founds, plan, files.texts):
        planned.append(_Planned(f"{run_id}/{number}", move, piece, found.body, found.block.entry.entry_hash, found.block.entry.text))
        number += 1
    note = _settings_note(agent)
    spans: dict[str, list[tuple[tuple[int, int], staleness.Invalidation, str]]] = {}
    for inv in plan.invalidations:
        entry = inv.entry
        earlier = [e.end_line for e in per_file[entry.path] if e.end_line < entry.start_line]
        span = entry_span(files.lines[entry.path], entry.start_line, entry.end_line, max(earlier, default=0))
        op_id = f"{run_id}/{number}"
        number += 1
        if isinstance(span, str):
            stub = Move(kind=STALE_KIND, start=0, end=0, text="", target=target_for(entry.provenance), heading_path=(),
                        reason=why_text(inv, note), source=entry.path)
            skipped.append((op_id, stub, entry.text, f"not moved: {span}"))
        else:
            spans.setdefault(entry.path, []).append((span, inv, op_id))
    for path, group in spans.items():
        group.sort(key=lambda item: item[0])
        text, offsets = files.texts[path], files.offsets[path]
        chain = sections.heading_chains(text)
        starts = [c[-1].start for c in chain]
        for (first, end), (_, inv, op_id) in zip(with_blanks(files.lines[path], [g[0] for g in group]), group, strict=True):
            start, stop = offsets[first], offsets[end]
            at = bisect_right(starts, start) - 1
            heading_path = tuple(h.text for h in chain[at]) if at >= 0 else ()
            move = Move(kind=STALE_KIND, start=start, end=stop, text=text[start:stop], target=target_for(inv.entry.provenance),
                        heading_path=heading_path, reason=why_text(inv, note), source=path)
            piece = block_text(inv, move.text, heading_path, run_id, op_id, moment, note)
            planned.append(_Planned(op_id, move, piece, inv.entry.text, inv.entry.entry_hash, inv.entry.text))
    return planned, skipped


def _write(agent: AgentConfig, planned: Sequence[_Planned], texts: dict[str, str], run_id: str,
           at: str) -> tuple[list[Relocated], set[str]]:
    """Relocate restores (per stale file), then invalidations (per source). Returns what each
    relocate wrote and the op ids applied."""
    done: list[Relocated] = []
    applied: set[str] = set()
    ws = agent.workspace
    if any(p.move.target == STALE_UNTRUSTED for p in planned):
        with contextlib.suppress(Unsafe, OSError):  # its relocate then reports why it could not write
            path = confined(ws, STALE_UNTRUSTED)
            if not path.exists() or not path.read_bytes().strip():
                append_text(path, UNTRUSTED_FRONTMATTER)
    order: dict[str, list[_Planned]] = {}
    for p in planned:
        order.setdefault(p.move.source, []).append(p)
    sources = [s for s in order if s in STALE_FILES] + [s for s in order if s not in STALE_FILES]
    for source in sources:
        group = order[source]
        pieces = {id(p.move): p.piece for p in group}
        try:
            current = read_text(ws, source)
        except (Unsafe, OSError) as exc:
            done.append(Relocated(source=source, aborted=str(exc)))
            continue
        planned_from = texts[source]
        if current != planned_from and current.startswith(planned_from):
            planned_from = current  # a restore of this run appended to it: the spans still stand
        moved = relocate(ws, source, planned_from, [(p.op_id, p.move) for p in group], run_id, at,
                         render=lambda moves, _run, _date: [(m, pieces[id(m)]) for m in moves])
        done.append(moved)
        if not moved.aborted:
            applied.update(p.op_id for p in group)
    return done, applied


STALE_MOVES = Check("the recall check of the stale moves", "moved entry", together=True)


async def _recall(agent: AgentConfig, index: Index, run_id: str, at: str, done: list[Relocated],
                  applied: list[_Planned], out: GcOutcome) -> set[str]:
    """Every moved entry must be found in its destination, else the GC's sources get their
    pre-images back. Returns the op ids undone; raises CancelledError, the sources put back, when
    the run is cancelled before the check's answer."""
    paths = sorted({d.source for d in done if not d.aborted} | {p.move.target for p in applied})
    written = [Written(d.source, d.before, d.after, tuple(op for op, _ in d.ops), tuple(sorted({m.target for _, m in d.ops})))
               for d in done if not d.aborted and d.ops]
    check = recall.check_moves(index, agent.id, [(p.op_id, p.move.target, p.probe) for p in applied],
                               paths if len(paths) <= MAX_NAMED else [])
    verdict = await verify(agent.workspace, run_id, at, written, check, STALE_MOVES)
    out.results = verdict.applied_to(out.results)
    out.notes += verdict.notes if verdict.lost else [
        f"Stale moves recall-checked: all {len(applied)} moved entries are found through the index in their destinations."]
    if verdict.cancelled:
        raise asyncio.CancelledError
    return set(verdict.undone)


async def _record(agent: AgentConfig, index: Index, plan: staleness.Plan, applied: Sequence[_Planned],
                  moment: float, out: GcOutcome) -> None:
    updates = [LifecycleUpdate(h, invalid_at=v) for h, v in plan.set_invalid.items()]
    updates += [LifecycleUpdate(h, clear_invalid=True) for h in plan.clear_invalid]
    updates += [LifecycleUpdate(h, supersedes_key=k) for h, k in plan.keys.items()]
    for p in applied:
        if p.move.kind == STALE_KIND:
            updates.append(LifecycleUpdate(p.entry_hash, invalid_at=moment))
        else:
            updates.append(LifecycleUpdate(p.entry_hash, clear_invalid=True, restored_at=moment))
    if not updates:
        return
    try:
        await index.update_lifecycle(agent.id, updates)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - the KB could not record them: the next run repairs them
        out.notes.append(f"Staleness GC could not record its decisions in the KB ({exc}); the next run repairs them.")
