"""Rejecting pending proposals: a ``rejected`` audit record per id, with who and when.

A rejection is all or nothing: every id must be pending (``history/pending.py``) or none is
recorded. Once rejected, a proposal leaves the pending list and a later run drops a reviewer
proposal of the same normalized text (``pending.drop_rejected``); see docs/concepts/proposals.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import AgentConfig
from gateway.errors import FailedPrecondition, NotFound
from services.dreaming.history import pending
from services.dreaming.model.budgets import budgets_of
from services.dreaming.model.values import Proposal
from services.dreaming.records import audit


@dataclass(frozen=True)
class Rejection:
    """One rejected proposal: its id, the proposal, when (ISO 8601, UTC) and by which key label."""

    proposal_id: str
    proposal: Proposal
    at: str
    by: str


def reject(agent: AgentConfig, ids: list[str], by: str, at: str) -> list[Rejection]:
    """Record the rejection of ``ids`` by ``by`` at ``at``, in the order given (duplicates once).
    Raises, naming each id that is not pending and why, and recording nothing: NotFound when one
    was never proposed, else FailedPrecondition (already applied, rejected, in effect…)."""
    ledger = pending.read_ledger(audit.read_records(agent.workspace))
    texts = pending.current_texts(agent)
    waiting = pending.pending(ledger, texts, budgets_of(agent))
    wanted = list(dict.fromkeys(ids))
    refused = [i for i in wanted if i not in waiting]
    if refused:
        budgets = budgets_of(agent)
        why = {i: pending.why_not(ledger, i, texts, budgets) for i in refused}
        said = "; ".join(f"{i}: {reason or 'never proposed'}" for i, reason in why.items())
        error = NotFound if not all(why.values()) else FailedPrecondition
        raise error(f"not a pending proposal of agent {agent.id!r}: {said}; nothing was rejected")
    out = [Rejection(i, waiting[i].proposal, at, by) for i in wanted]
    audit.append_records(agent.workspace, [
        {"kind": "rejected", "id": r.proposal_id, "at": r.at, "by": r.by, "file": r.proposal.file} for r in out
    ])
    return out
