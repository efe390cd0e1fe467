"""Pending proposals: what propose mode proposed and accepting would still do, read from audit.jsonl.

A proposal's id is a stable hash of its op (``model.Proposal.id``): the same op
proposed on another night, or proposed and applied by a run in auto mode, has
the same id. A proposal is **pending** when a run in propose mode proposed it
and all of these hold:

- **Not applied.** No run applied its id since it was proposed: a run in auto
  mode that made the same op, or an accept. An applied id stays applied until a
  revert undoes the op that applied it (an op the recall check restored was
  never applied). A revert also ends the pending state of any proposal made
  before it (the operator undid that op): only a proposal made after the
  revert is pending again.
- **Not already in effect** in the file now (``applier.already_done``): an add
  whose text is there, a replace whose anchor is gone and whose new text is
  there, a remove whose anchor is gone. Accepting it would change nothing.
- **An op of the applier** (add, replace, remove). The moves of the compactor,
  the route-out and the staleness GC are listed by propose mode as what an
  auto run would do; they are never accepted.

A proposal can also be **rejected** (``RejectProposals``, ``gateway dream reject``): a
``rejected`` record says who rejected it and when; it leaves the pending list,
and a later run drops a reviewer proposal of the same op whose normalized text
(``rejection_key``) matches, as ``skipped`` with the rejection as its reason.

The status (``gateway dream status``, GetDreamStatus), the accept, and a run in
propose mode (which records a proposal that is applied or already in effect as
``skipped``, saying why, never as ``proposed``) all use this one rule, so they
and DREAMS.md agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gateway.config import AgentConfig
from services.dreaming.apply.applier import Plan, plan
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import MEMORY_FILES, OPS, OpResult, Proposal
from services.dreaming.records import audit

NOT_PENDING = "not a pending proposal"


@dataclass(frozen=True)
class Applied:
    """The op that applied an id: its run and op id, and whether that run was an accept."""

    run: str
    op: str
    accepted: bool = False

    def says(self) -> str:
        if self.accepted:
            return f"already accepted (run {self.run})"
        return f"already applied by run {self.run} as {self.op}"


@dataclass(frozen=True)
class Proposed:
    """A proposal waiting to be accepted: the run (and its op id) that proposed it last, and what
    the applier says of it (then, as recorded; or now, from ``pending``)."""

    proposal: Proposal
    run: str
    op: str
    note: str


@dataclass(frozen=True)
class Rejected:
    """A rejection: when (ISO 8601, UTC) and by which key label."""

    at: str
    by: str

    def says(self) -> str:
        return f"rejected on {self.at[:10]} by {self.by}"


def rejection_key(proposal: Proposal) -> str:
    """The op and its text (the content, or the target of a remove), case and spacing folded:
    a rejected proposal is not proposed again for the same key."""
    text = proposal.content if proposal.content.strip() else proposal.target
    return f"{proposal.op}:{' '.join(text.split()).casefold()}"


@dataclass
class Ledger:
    """What audit.jsonl says of each proposal id (module docstring)."""

    proposed: dict[str, Proposed] = field(default_factory=dict)  # proposed, not applied or reverted since
    applied: dict[str, Applied] = field(default_factory=dict)  # applied, not reverted since
    reverted: dict[str, str] = field(default_factory=dict)  # id → the run whose op on it was reverted
    moves: set[str] = field(default_factory=set)  # ids of the passes' moves listed by propose mode
    rejected: dict[str, Rejected] = field(default_factory=dict)  # id → its rejection
    rejected_texts: dict[str, Rejected] = field(default_factory=dict)  # rejection_key → its rejection


def read_ledger(records: list[audit.Record]) -> Ledger:
    """The ledger of ``records`` (audit.jsonl, oldest first)."""
    out = Ledger()
    by_op: dict[str, str] = {}  # op id → proposal id, of every applied op
    for record in records:
        kind, pid = record.get("kind"), str(record.get("id", ""))
        run, op = str(record.get("run", "")), str(record.get("op", ""))
        if kind == "op" and record.get("status") == "proposed" and isinstance(record.get("proposal"), dict):
            proposal = audit.proposal_from_json(record["proposal"])
            if proposal.op not in OPS:
                out.moves.add(pid)
            elif pid not in out.applied:
                out.proposed[pid] = Proposed(proposal, run, op, str(record.get("reason", "")))
        elif kind == "rejected" and pid in out.proposed:
            rejection = Rejected(str(record.get("at", "")), str(record.get("by", "")))
            out.rejected[pid] = out.rejected_texts[rejection_key(out.proposed.pop(pid).proposal)] = rejection
        elif kind == "op" and record.get("status") == "applied":
            by_op[op] = pid
            out.applied[pid] = Applied(run, op)
            out.proposed.pop(pid, None)
            out.reverted.pop(pid, None)
        elif kind == "accepted":
            prior = out.applied.get(pid)
            out.applied[pid] = Applied(run, prior.op if prior is not None else "", accepted=True)
            out.proposed.pop(pid, None)
        elif kind == "revert":
            for undone in record.get("ops") or []:
                undone_pid = by_op.get(str(undone), "")
                if undone_pid in out.applied and out.applied[undone_pid].op == undone:
                    del out.applied[undone_pid]
                    out.proposed.pop(undone_pid, None)
                    out.reverted[undone_pid] = run
    return out


def current_texts(agent: AgentConfig) -> dict[str, str] | None:
    """MEMORY.md and USER.md as they are now; None when one cannot be read (a link, not UTF-8)."""
    try:
        return {name: read_text(agent.workspace, name) for name in MEMORY_FILES}
    except (Unsafe, OSError):
        return None


def pending(ledger: Ledger, texts: Mapping[str, str] | None, budgets: Budgets) -> dict[str, Proposed]:
    """Id → proposal, for every pending proposal (module docstring), in the order they were
    proposed, each with what the applier would do with it now. With ``texts`` None (the files
    cannot be read) the recorded notes stand and nothing is judged in effect."""
    out: dict[str, Proposed] = {}
    for pid, item in ledger.proposed.items():
        if texts is None:
            out[pid] = item
            continue
        result = plan(texts, [(item.op, item.proposal)], budgets)
        if item.op in result.done:
            continue
        fate = result.results[0]
        out[pid] = replace(item, note="" if fate.status == "applied" else f"the applier would skip it now: {fate.reason}")
    return out


def why_not(ledger: Ledger, pid: str, texts: Mapping[str, str] | None, budgets: Budgets) -> str:
    """Why ``pid`` is not pending ("" when nothing is known of it): for an accept's answer."""
    if pid in ledger.applied:
        return ledger.applied[pid].says()
    if pid in ledger.rejected:
        return f"already {ledger.rejected[pid].says()}"
    if pid in ledger.proposed and texts is not None:
        item = ledger.proposed[pid]
        result = plan(texts, [(item.op, item.proposal)], budgets)
        if item.op in result.done:
            return result.results[0].reason
    if pid in ledger.reverted:
        return (f"applied, then reverted (run {ledger.reverted[pid]}); it is pending again only once a run "
                "proposes it again")
    if pid in ledger.moves:
        return ("a move of the deterministic passes, not a proposal to accept (a run in auto mode, or "
                "gateway migrate-memory --apply, makes it)")
    return ""


def in_propose_mode(ledger: Ledger, proposal: Proposal, done: str) -> str:
    """Why a proposal a run in propose mode makes now is not pending ("" when it is): ``done`` is
    the applier's reason when it found the op already in effect, else ""."""
    applied = ledger.applied.get(proposal.id)
    if done and applied is not None:
        return f"{done} ({applied.says()}); {NOT_PENDING}"
    if done:
        return f"{done}; {NOT_PENDING}"
    if applied is not None:
        return f"{applied.says()} and not reverted since; {NOT_PENDING}"
    return ""


def proposed(result: Plan, ledger: Ledger) -> list[OpResult]:
    """A run in propose mode: each op of ``result`` as a proposal, with what the applier would say
    now; one that a run already applied, or that is already in effect, is ``skipped`` and says why,
    and so is one the secret guard withheld (``applier.Plan.withheld``)."""
    out = []
    for r in result.results:
        if r.op_id in result.withheld:  # the secret guard: never proposed, its text is not recorded
            out.append(r)
            continue
        why_not = in_propose_mode(ledger, r.proposal, r.reason if r.op_id in result.done else "")
        if why_not:
            out.append(replace(r, status="skipped", reason=why_not, chars_removed=0, chars_inserted=0))
            continue
        reason = "" if r.status == "applied" else f"the applier would skip it now: {r.reason}"
        out.append(replace(r, status="proposed", reason=reason, chars_removed=0, chars_inserted=0))
    return out


def drop_rejected(ledger: Ledger, proposals: list[Proposal]) -> tuple[list[Proposal], list[tuple[Proposal, str]]]:
    """``proposals`` split into those kept and those whose text was rejected, each with the rejection."""
    kept: list[Proposal] = []
    dropped: list[tuple[Proposal, str]] = []
    for p in proposals:
        rejection = ledger.rejected_texts.get(rejection_key(p))
        if rejection is None:
            kept.append(p)
        else:
            dropped.append((p, rejection.says()))
    return kept, dropped
