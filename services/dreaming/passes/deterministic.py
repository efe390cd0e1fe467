"""The deterministic passes of a run, before the reviewer: the compactor, the staleness GC, the route-out.

1. **Compactor** (``compactor.compact``): terminal entries of MEMORY.md move to
   ``memory/archive/completed.md``.
2. **Staleness GC** (``staleness_run.run_gc``, when ``dreaming.staleness.enabled``):
   superseded and aged-out entries of ``memory/**`` move to
   ``memory/archive/stale.md``, and stale entries retrieved since go back; it
   asks the KB for the archive's entries and lifecycle rows, and checks the
   recall of its own moves.
3. **Route-out** (``routeout.route_out``), only when ``autoRouteOut`` is on
   and MEMORY.md is still over its budget after the compactor: episodic blocks
   move to ``<episodicArchiveDir>/<topic>.md``, oldest first, until it fits.

None is limited by ``maxChangesPerRun``. Each pass writes through
``relocate`` (the journal's intent, destination, backup, compare-and-swap), so
``gateway dream revert`` undoes it; each moved entry is one op of the run.
Then the recall check of the compactor's and the route-out's moves: the KB
reindexes what the passes wrote and every moved entry must be found through
the index in its destination (one ``ProbeRecall`` call for all of them:
Search's query rules, so thousands of moves cost a second, not a Search
each), else MEMORY.md gets its pre-image back (the copies in the destinations
stay, with a line saying so). In propose mode nothing is written: the moves
are listed as what a run in auto mode would do (they are not proposals to
accept; an auto run or ``gateway migrate-memory --apply`` makes them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gateway.config import AgentConfig
from gateway.forget_guard import checker
from services.dreaming.apply import recall
from services.dreaming.apply.restore import Check, Written, verify
from services.dreaming.model.archive import Index
from services.dreaming.model.budgets import over_budget
from services.dreaming.model.values import DURABLE, EPISODIC, MEMORY_FILE, PROPOSE, OpResult, Proposal
from services.dreaming.passes.compactor import compact
from services.dreaming.passes.moves import COMPACT, Move, take
from services.dreaming.passes.relocate import Relocated, relocate
from services.dreaming.passes.routeout import route_out
from services.dreaming.passes.staleness_run import run_gc


@dataclass
class PassOutcome:
    text: str  # MEMORY.md as the reviewer will see it
    results: list[OpResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    ops: int = 0  # op numbers used


def as_op(op_id: str, move: Move, status: str, reason: str = "") -> OpResult:
    """A move in the report: an op of kind ``compact`` or ``route`` whose file is its destination."""
    first = move.text.strip().splitlines()[0] if move.text.strip() else move.text
    topic = move.target.rsplit("/", 1)[-1].removesuffix(".md")
    proposal = Proposal(op=move.kind, file=move.source, target=first, reason=move.reason, topic=topic,
                        tier=DURABLE if move.kind == COMPACT else EPISODIC)
    return OpResult(op_id, proposal, status, reason, file=move.target,
                    chars_removed=len(move.text) if status == "applied" else 0,
                    chars_inserted=len(move.text) if status == "applied" else 0)


def _number(run_id: str, first: int, moves: Sequence[Move]) -> list[tuple[str, Move]]:
    return [(f"{run_id}/{first + i}", move) for i, move in enumerate(moves)]


async def run_passes(agent: AgentConfig, index: Index, run_id: str, at: str, text: str, mode: str,
                     now: Callable[[], float] = time.time) -> PassOutcome:
    """The passes over MEMORY.md ``text`` and the archive (module docstring); op numbers from 1.
    ``now``: the time the staleness GC ages entries against (Unix seconds)."""
    out = PassOutcome(text=text, steps=["compactor"])
    compacted_moves = _number(run_id, 1, compact(text))
    compacted = take(text, [m for _, m in compacted_moves])
    done: list[Relocated] = []
    current = text
    if compacted_moves and mode == PROPOSE:
        out.results += [as_op(op, m, "proposed", _WOULD) for op, m in compacted_moves]
    elif compacted_moves:
        current = _write(agent, text, compacted_moves, run_id, at, done, out)
    written = sorted({MEMORY_FILE} | {d.source for d in done if not d.aborted} | {m.target for d in done for _, m in d.ops})
    gc = await run_gc(agent, index, run_id, at, mode, len(compacted_moves) + 1, now, written)
    if gc.ran:
        out.steps.append("staleness-gc")
    out.results += gc.results
    out.notes += gc.notes
    routed_moves: list[tuple[str, Move]] = []
    budget = agent.memory.memory_budget_chars
    if agent.dreaming.auto_route_out and over_budget(compacted, budget):
        out.steps.append("route-out")
        first = len(compacted_moves) + gc.ops + 1
        held: list[str] = []  # blocks holding a secret or forgotten text stay (docs/concepts/secrets.md, forget.md)
        routed_moves = _number(run_id, first, route_out(compacted, budget, agent.memory.episodic_archive_dir, held,
                                                        checker(agent.home, agent.id)))
        out.notes += [f"The route-out left a block in MEMORY.md: {why}; it is never copied into another file" for why in held]
    out.ops = len(compacted_moves) + gc.ops + len(routed_moves)
    if routed_moves and mode == PROPOSE:
        out.results += [as_op(op, m, "proposed", _WOULD) for op, m in routed_moves]
    elif routed_moves and current != compacted:  # the compactor's write did not happen: plan nothing on top of it
        out.results += [as_op(op, m, "skipped", "not moved: the compactor's moves before it were not written") for op, m in routed_moves]
    elif routed_moves:
        current = _write(agent, compacted, routed_moves, run_id, at, done, out)
    out.text = current
    if done:
        out.steps.append("recall-check")
        await _recall(agent, index, run_id, at, text, done, out)
    return out


_WOULD = "would be moved by a run in auto mode (or gateway migrate-memory --apply); not a proposal to accept"


def _write(agent: AgentConfig, planned_from: str, numbered: list[tuple[str, Move]], run_id: str, at: str,
           done: list[Relocated], out: PassOutcome) -> str:
    """Relocate one pass's moves of MEMORY.md; the text MEMORY.md has after it."""
    moved = relocate(agent.workspace, MEMORY_FILE, planned_from, numbered, run_id, at)
    if moved.aborted:
        out.notes.append(f"MEMORY.md left alone by the {numbered[0][1].kind} pass: {moved.aborted}")
        out.results += [as_op(op, m, "skipped", f"aborted: {moved.aborted}") for op, m in numbered]
        return planned_from
    done.append(moved)
    out.results += [as_op(op, m, "applied") for op, m in numbered]
    return moved.after


MOVES = Check("the recall check of the moves", "moved entry", together=True)


async def _recall(agent: AgentConfig, index: Index, run_id: str, at: str, original: str,
                  done: list[Relocated], out: PassOutcome) -> None:
    """Every moved entry must be found by Search; else MEMORY.md goes back to ``original``. Raises
    CancelledError, MEMORY.md put back, when the run is cancelled before the check's answer."""
    moved = [(op, m.target, m.text) for d in done for op, m in d.ops]
    targets = tuple(sorted({m.target for d in done for _, m in d.ops}))
    if not agent.knowledge.archive.enabled:
        out.notes.append("Moves not recall-checked: the knowledge archive is off for this agent; the entries are in " + ", ".join(targets) + ".")
        return
    written = [Written(MEMORY_FILE, original, done[-1].after, tuple(op for d in done for op, _ in d.ops), targets)]
    check = recall.check_moves(index, agent.id, moved, [MEMORY_FILE, *targets])
    verdict = await verify(agent.workspace, run_id, at, written, check, MOVES)
    if verdict.undone:
        out.text = original
        out.results = verdict.applied_to(out.results)
    out.notes += verdict.notes if verdict.lost else [
        f"Moves recall-checked: all {len(moved)} moved entries are found through the index in their destinations."]
    if verdict.cancelled:
        raise asyncio.CancelledError
