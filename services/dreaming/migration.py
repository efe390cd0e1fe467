"""``gateway migrate-memory WORKSPACE [--apply]``: drain an overgrown MEMORY.md once, without a model.

The same two passes a nightly run makes before its reviewer: the compactor,
then the route-out when MEMORY.md is still over its budget. No running suite
is needed: it reads and writes the workspace's files only.

- **Plan** (no ``--apply``): ``.dreaming/migration-plan.md`` lists, entry by
  entry, what would move where, why, and MEMORY.md's size before and after;
  it records the SHA-256 of MEMORY.md it was made from. Nothing else changes.
- **Apply** (``--apply``): when a plan made from another MEMORY.md is waiting
  (the file changed since), it refuses. Otherwise it moves exactly what the
  plan says (the plan is deterministic: the same text gives the same moves),
  through the same writer as a nightly run: the journal's intent first, the
  destinations, a backup, a compare-and-swap of MEMORY.md (``gateway dream
  revert`` undoes it like a run), and a DREAMS.md entry and audit records. A
  migration a kill cut short is finished (forward or back) by the next one, or
  by dreaming's next start or run. Then every moved
  entry is checked to stand byte for byte in its destination. The plan file is
  marked applied; applying again finds nothing to move.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from gateway.atomic import write_atomic
from gateway.forget_guard import Check, nothing_forgotten
from services.dreaming.apply import intent
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.model.budgets import over_budget
from services.dreaming.model.edit import sha256
from services.dreaming.model.values import MEMORY_FILE, FileChange, OpResult, RunReport, new_run_id
from services.dreaming.passes.compactor import compact
from services.dreaming.passes.deterministic import as_op
from services.dreaming.passes.moves import Move, take
from services.dreaming.passes.relocate import relocate
from services.dreaming.passes.routeout import route_out
from services.dreaming.records import audit
from services.dreaming.schedule.state import Busy, StateStore

PLAN_FILE = ".dreaming/migration-plan.md"
MIGRATE = "migrate"
_HEADER = re.compile(r"<!-- migration-plan sha256=([0-9a-f]{64}) moves=(\d+) status=(planned|applied) -->")


@dataclass(frozen=True)
class Settings:
    budget: int = 8000
    episodic_dir: str = "memory"
    route_out: bool = True
    forgotten: Check = nothing_forgotten  # the agent's tombstones: a block that holds forgotten text stays


@dataclass
class Plan:
    source_sha: str
    before: str
    compacted: list[Move] = field(default_factory=list)
    routed: list[Move] = field(default_factory=list)
    after: str = ""
    budget: int = 0

    @property
    def moves(self) -> list[Move]:
        return [*self.compacted, *self.routed]


def make_plan(text: str, settings: Settings) -> Plan:
    """What the migration would move from MEMORY.md ``text`` (deterministic)."""
    compacted = compact(text)
    middle = take(text, compacted)
    routed = route_out(middle, settings.budget, settings.episodic_dir, forgotten=settings.forgotten) if settings.route_out and over_budget(middle, settings.budget) else []
    return Plan(sha256(text), text, compacted, routed, take(middle, routed), settings.budget)


def _row(number: int, move: Move) -> str:
    first = " ".join(move.text.split())
    first = (first[:80] + "…") if len(first) > 81 else first
    where = " › ".join(move.heading_path) or "(top)"
    cell = first.replace("|", "\\|")
    return f"| {number} | {where} | {move.target} | {len(move.text):,} | {move.reason} | {cell} |"


def render(plan: Plan, workspace: Path, planned_at: str, status: str = "planned") -> str:
    lines = [
        "# Migration plan for MEMORY.md", "",
        f"<!-- migration-plan sha256={plan.source_sha} moves={len(plan.moves)} status={status} -->", "",
        f"Made {planned_at[:16].replace('T', ' ')} UTC from MEMORY.md at {len(plan.before):,} chars; after the moves: "
        f"{len(plan.after):,} chars (budget {plan.budget:,}{', fits' if not over_budget(plan.after, plan.budget) else ', still over'}).",
    ]
    if status == "applied":
        lines.append("Applied: these moves were made. `gateway dream revert` with the run id in DREAMS.md undoes them.")
    else:
        lines.append(f"`gateway migrate-memory {workspace} --apply` moves exactly these entries, and refuses if MEMORY.md "
                     "changes before it runs.")
    number = 0
    for title, moves in (("Compactor: terminal entries", plan.compacted), ("Route-out: episodic blocks, oldest first", plan.routed)):
        lines += ["", f"## {title} ({len(moves)})", ""]
        if not moves:
            lines.append("Nothing.")
            continue
        lines += ["| # | from | to | chars | rule | entry |", "|---:|---|---|---:|---|---|"]
        for move in moves:
            number += 1
            lines.append(_row(number, move))
    return "\n".join(lines) + "\n"


def waiting_plan(workspace: Path) -> tuple[str, int, str] | None:
    """``(sha256, moves, status)`` of the plan file, or None when there is none (or it is not ours)."""
    try:
        head = (workspace / PLAN_FILE).read_text(encoding="utf-8", errors="replace")[:4096]
    except FileNotFoundError:
        return None
    match = _HEADER.search(head)
    return (match.group(1), int(match.group(2)), match.group(3)) if match else None


def write_plan(workspace: Path, text: str) -> None:
    (workspace / PLAN_FILE).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(workspace / PLAN_FILE, text.encode("utf-8"), mode=0o600, durable=False)


class Refused(Exception):
    """The migration must not run (the file changed since the plan, a move could not be written)."""


@contextmanager
def agent_lock(home: Path, agent_id: str | None) -> Iterator[None]:
    """Hold ``agent_id``'s dreaming run lock while the migration runs (no lock for a workspace that is
    no configured agent's). Raises Refused while a run of the agent is in progress."""
    if agent_id is None:
        yield
        return
    lock = StateStore(home).lock(agent_id)
    try:
        lock.acquire()
    except Busy as exc:
        raise Refused(str(exc)) from None
    try:
        yield
    finally:
        lock.release()


def read_memory(workspace: Path) -> str:
    """The workspace's MEMORY.md ("" when missing). Raises Refused for a link or bytes not UTF-8."""
    try:
        return read_text(workspace, MEMORY_FILE)
    except Unsafe as exc:
        raise Refused(str(exc)) from None


def apply(workspace: Path, plan: Plan, now: datetime, progress: Callable[[str], None]) -> RunReport:
    """Make ``plan``'s moves (module docstring) as one run, its id new at ``now``. Raises Refused,
    with nothing lost."""
    run_id = new_run_id(now)
    at = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    for line in intent.notes(intent.recover(workspace, at)):  # a migration or run a kill cut short
        progress(line)
    results: list[OpResult] = []
    number = 0
    for moves, planned_from in ((plan.compacted, plan.before), (plan.routed, take(plan.before, plan.compacted))):
        if not moves:
            continue
        numbered = [(f"{run_id}/{number + i + 1}", m) for i, m in enumerate(moves)]
        number += len(moves)
        progress(f"moving {len(moves):,} {'terminal' if moves[0].kind == 'compact' else 'episodic'} entries "
                 f"to {', '.join(sorted({m.target for m in moves}))}")
        done = relocate(workspace, MEMORY_FILE, planned_from, numbered, run_id, at)
        if done.aborted:
            raise Refused(done.aborted + (f" (the {len(results)} moves before were made; run id {run_id})" if results else ""))
        results += [as_op(op, m, "applied") for op, m in numbered]
    for move in plan.moves:  # every byte that left MEMORY.md stands in its destination
        if move.text not in read_text(workspace, move.target):
            raise Refused(f"a moved entry is not in {move.target}; MEMORY.md's pre-image is in .dreaming/backups/ (run {run_id})")
    report = RunReport(
        run_id=run_id, agent_id="", mode="auto", trigger=MIGRATE, status="applied" if results else "nothing", started_at=at,
        finished_at=at, ops=tuple(results), files=(FileChange(MEMORY_FILE, len(plan.before), len(plan.after)),),
        steps=("compactor", *(("route-out",) if plan.routed else ()), "audit"),
        notes=(f"MEMORY.md {len(plan.before):,} → {len(plan.after):,} chars (budget {plan.budget:,}).",),
    )
    audit.write_entry(workspace, audit.render(report))
    audit.append_records(workspace, audit.run_records(report))
    write_plan(workspace, render(plan, workspace, at, status="applied"))
    return report
