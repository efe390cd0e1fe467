"""One run of a vault's reflection, and the decisions on a propose run (docs/concepts/vault.md "Weekly reflection").

``reflect`` claims and plans the run in the KB (``PlanVaultReflection``): busy is ``Aborted``;
unchanged since the watermark is a ``noop`` recorded without a reviewer call. Each cluster, in the
plan's order: one with contradicting frontmatter claims is left for a person (no reviewer call);
else one reviewer call (``decision.parse_decision`` reads it strictly), and a merge goes to
``MergeVaultNotes`` with the plan's SHA-256 of each replaced note (compare-and-swap): applied in
``auto`` mode, checked only (``dry_run``) and recorded as a pending proposal in ``propose`` mode.
``RecordVaultReflection`` ends the run with every cluster's result, and releases the claim; a run
that fails on the way is recorded ``failed`` with what it did so far.

``decide`` accepts or rejects the pending proposals of a propose run as a run of its own (its
reason names the run decided, ``DECIDES``): each accepted one merged with every guard checked again
(a note changed since makes it ``stale``).

The KB is a seam (``VaultPeer``, over gRPC in ``peer_client``); so is the reviewer (``Ask``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gateway.errors import Aborted, GatewayError, NotFound
from gateway.v1 import kb_pb2
from services.dreaming.model.values import MANUAL, PROPOSE
from services.dreaming.records.metrics import observe_reflection, refusal_guard
from services.dreaming.reflect.decision import parse_decision
from services.dreaming.reflect.prompt import PromptNote, build_prompt
from services.dreaming.reflect.vaults import Vault
from services.dreaming.review.reviewer import CommandOutcome

MERGED, PROPOSED, LEFT, REFUSED, CHANGED = "merged", "proposed", "left", "refused", "changed"
UNREVIEWED = "unreviewed"  # the reviewer failed: asked again at the next run, not left for good
PENDING, ACCEPTED, REJECTED, STALE = "pending", "accepted", "rejected", "stale"
DECIDES = "decided proposals of run "  # the opening of a decide run's reason, then the run id
_DECIDES = re.compile(re.escape(DECIDES) + r"(\S+)")
FAILURE_RECORD_S = 5.0  # how long a stopped run waits to record itself
MAX_CLUSTER_BYTES = 60_000  # notes' content per cluster shown to the reviewer (the KB's default)

Ask = Callable[[Vault, str], Awaitable[CommandOutcome]]


class VaultPeer(Protocol):
    """The KB's reflection calls (``peer_client.KbIndex``). Each raises the GatewayError of a refusal
    (InvalidArgument, FailedPrecondition, NotFound) or PeerUnavailable."""

    async def plan_reflection(self, request: kb_pb2.PlanVaultReflectionRequest) -> kb_pb2.VaultReflectionPlan: ...

    async def merge_notes(self, request: kb_pb2.MergeVaultNotesRequest) -> kb_pb2.MergeVaultNotesResponse: ...

    async def record_reflection(self, request: kb_pb2.RecordVaultReflectionRequest) -> kb_pb2.VaultReflectionRun: ...

    async def list_reflections(self, project: str, limit: int) -> kb_pb2.ListVaultReflectionsResponse: ...

    async def revert_reflection(self, request: kb_pb2.RevertVaultReflectionRequest) -> kb_pb2.RevertVaultReflectionResponse: ...


@dataclass
class _Tally:
    """What a run did so far, for its record and its metrics."""

    results: list[kb_pb2.VaultClusterResult] = field(default_factory=list)
    proposals: list[kb_pb2.VaultMergeProposal] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # guard labels
    calls_ok: int = 0
    calls_failed: int = 0

    def add(self, cluster_id: str, notes: Sequence[str], outcome: str, reason: str = "", merge_id: str = "") -> None:
        self.results.append(kb_pb2.VaultClusterResult(cluster_id=cluster_id, notes=list(notes), outcome=outcome,
                                                      reason=reason, merge_id=merge_id))

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)


def contradiction_reason(contradiction: str) -> str:
    return (f"left for a person: the notes' frontmatter claims contradict ({contradiction[:200]}); "
            "see the vault's contradictions report (reports/contradictions)")


async def _merge(peer: VaultPeer, tally: _Tally, request: kb_pb2.MergeVaultNotesRequest,
                 notes: Sequence[str]) -> kb_pb2.MergeVaultNotesResponse | None:
    """``MergeVaultNotes``; a refusal of the request itself (a name the KB will not take, say) is
    a refused cluster (None), never the run's failure."""
    try:
        return await peer.merge_notes(request)
    except GatewayError as exc:
        if isinstance(exc, Aborted):
            raise
        tally.add(request.cluster_id, notes, REFUSED, f"the KB refused the merge: {exc.message[:200]}")
        tally.refused.append("other")
        return None


async def _cluster(vault: Vault, peer: VaultPeer, ask: Ask, tally: _Tally, cluster: kb_pb2.VaultCluster, *,
                   run_id: str, propose: bool) -> None:
    names = [n.name for n in cluster.notes]
    if cluster.contradiction:
        tally.add(cluster.id, names, LEFT, contradiction_reason(cluster.contradiction))
        return
    prompt = build_prompt(vault.project, [PromptNote(n.name, n.content) for n in cluster.notes], cluster.joined_by)
    answer = await ask(vault, prompt)
    if not answer.ok:
        tally.calls_failed += 1
        tally.add(cluster.id, names, UNREVIEWED, f"the reviewer failed: {answer.reason}"[:300])
        return
    tally.calls_ok += 1
    decision = parse_decision(answer.stdout, names)
    if not decision.merge:
        tally.add(cluster.id, names, LEFT, decision.reason)
        return
    sha = {n.name: n.sha256 for n in cluster.notes}
    request = kb_pb2.MergeVaultNotesRequest(
        project=vault.project, run_id=run_id, cluster_id=cluster.id, name=decision.name, content=decision.content,
        replaces=list(decision.replaces), expected_sha256={n: sha[n] for n in decision.replaces},
        max_drop_share=vault.settings.max_drop_share, reason=decision.reason, dry_run=propose,
    )
    reply = await _merge(peer, tally, request, names)
    if reply is None:
        return
    if reply.outcome == kb_pb2.MERGE_OUTCOME_MERGED:
        if propose:
            tally.add(cluster.id, names, PROPOSED, decision.reason)
            tally.proposals.append(kb_pb2.VaultMergeProposal(
                cluster_id=cluster.id, name=decision.name, content=decision.content, replaces=list(decision.replaces),
                expected_sha256=dict(request.expected_sha256), reason=decision.reason, state=PENDING))
        else:
            tally.add(cluster.id, names, MERGED, decision.reason, reply.merge_id)
    elif reply.outcome == kb_pb2.MERGE_OUTCOME_CHANGED:
        tally.add(cluster.id, names, CHANGED, reply.reason or "a note changed since the plan: left alone")
        tally.refused.append(refusal_guard(reply.reason, changed=True))
    else:
        tally.add(cluster.id, names, REFUSED, reply.reason or "refused by a guard")
        tally.refused.append(refusal_guard(reply.reason))


async def _record(peer: VaultPeer, vault: Vault, run_id: str, mode: str, trigger: str, tally: _Tally, status: str,
                  reason: str, started_at: float, remaining: int = 0) -> kb_pb2.VaultReflectionRun:
    """``RecordVaultReflection``, and the run counted in the metrics (``failed`` when it could not be recorded)."""
    recorded = "failed"
    try:
        run = await peer.record_reflection(kb_pb2.RecordVaultReflectionRequest(
            project=vault.project, run_id=run_id, mode=mode, trigger=trigger, clusters=tally.results,
            proposals=tally.proposals, status=status, reason=reason, started_at=started_at, remaining=remaining,
        ))
        recorded = status
    finally:
        observe_reflection(recorded, merged=tally.count(MERGED), proposed=tally.count(PROPOSED),
                           refused=tuple(tally.refused), calls_ok=tally.calls_ok, calls_failed=tally.calls_failed)
    return run


async def _claim(peer: VaultPeer, vault: Vault, run_id: str, max_clusters: int) -> kb_pb2.VaultReflectionPlan:
    plan = await peer.plan_reflection(kb_pb2.PlanVaultReflectionRequest(
        project=vault.project, run_id=run_id, max_clusters=max_clusters, max_cluster_bytes=MAX_CLUSTER_BYTES))
    if plan.busy:
        observe_reflection("busy")
        raise Aborted(f"a reflection of vault {vault.project!r} is in progress ({plan.busy_with or 'another run'}); "
                      "try again when it has finished")
    return plan


async def reflect(vault: Vault, peer: VaultPeer, ask: Ask, *, mode: str, trigger: str, run_id: str,
                  started_at: float) -> kb_pb2.VaultReflectionRun:
    """Run the vault's reflection (module docstring). Raises Aborted when another run holds the vault,
    the GatewayError of the KB's refusal of the plan, or PeerUnavailable."""
    plan = await _claim(peer, vault, run_id, vault.settings.max_clusters_per_run)
    tally = _Tally()
    if plan.unchanged:
        return await _record(peer, vault, run_id, mode, trigger, tally, "noop",
                             "the vault has not changed since the last run: no reviewer call", started_at)
    try:
        for cluster in plan.clusters:
            await _cluster(vault, peer, ask, tally, cluster, run_id=run_id, propose=mode == PROPOSE)
    except (Exception, asyncio.CancelledError) as exc:
        await _record_failure(_record(peer, vault, run_id, mode, trigger, tally, "failed", f"the run stopped: {_why(exc)}"[:300],
                                      started_at, plan.remaining + len(plan.clusters) - len(tally.results)))
        raise
    return await _record(peer, vault, run_id, mode, trigger, tally, "ok", "", started_at, plan.remaining)


def decided_run(run: kb_pb2.VaultReflectionRun) -> str:
    """The run whose proposals ``run`` decided ("" when it is not a decide run)."""
    found = _DECIDES.match(run.reason)
    return found.group(1) if found else ""


def with_decisions(runs: Sequence[kb_pb2.VaultReflectionRun]) -> list[kb_pb2.VaultReflectionRun]:
    """``runs`` (newest first) with each proposal's state as the latest decide run about it left it."""
    decided: dict[tuple[str, str], str] = {}
    for run in reversed(runs):  # oldest first: a later decision wins
        target = decided_run(run)
        for p in run.proposals if target else ():
            decided[(target, p.cluster_id)] = p.state
    out = []
    for run in runs:
        copy = kb_pb2.VaultReflectionRun()
        copy.CopyFrom(run)
        for p in copy.proposals:
            if p.state == PENDING and (run.run_id, p.cluster_id) in decided:
                p.state = decided[(run.run_id, p.cluster_id)]
        out.append(copy)
    return out


async def decide(vault: Vault, peer: VaultPeer, *, target: str, accept: Sequence[str], reject: Sequence[str],
                 run_id: str, started_at: float, history: Sequence[kb_pb2.VaultReflectionRun]) -> kb_pb2.VaultReflectionRun:
    """Accept or reject pending proposals of run ``target`` (``history``: the vault's runs, newest
    first) as run ``run_id``. Raises NotFound for an unknown run or a cluster id that is not one of
    its proposals, InvalidArgument... from the KB, Aborted when busy."""
    runs = {r.run_id: r for r in with_decisions(history)}
    if target not in runs:
        raise NotFound(f"no reflection run {target!r} of vault {vault.project!r} (gateway vault reflections --project {vault.project})")
    proposals = {p.cluster_id: p for p in runs[target].proposals}
    unknown = [c for c in (*accept, *reject) if c not in proposals]
    if unknown:
        raise NotFound(f"run {target} has no proposal for cluster {unknown[0]!r}")
    not_pending = [c for c in (*accept, *reject) if proposals[c].state != PENDING]
    tally = _Tally()
    await _claim(peer, vault, run_id, 1)  # the claim is the vault's run lock; a decide run plans one cluster at most
    try:
        for cluster_id in accept:
            p = proposals[cluster_id]
            if cluster_id in not_pending:
                tally.add(cluster_id, list(p.replaces), LEFT, f"already {p.state}")
                continue
            request = kb_pb2.MergeVaultNotesRequest(
                project=vault.project, run_id=run_id, cluster_id=cluster_id, name=p.name, content=p.content,
                replaces=list(p.replaces), expected_sha256=dict(p.expected_sha256),
                max_drop_share=vault.settings.max_drop_share, reason=p.reason)
            reply = await _merge(peer, tally, request, list(p.replaces))
            state = STALE
            if reply is not None and reply.outcome == kb_pb2.MERGE_OUTCOME_MERGED:
                tally.add(cluster_id, list(p.replaces), MERGED, p.reason, reply.merge_id)
                state = ACCEPTED
            elif reply is not None:
                outcome = CHANGED if reply.outcome == kb_pb2.MERGE_OUTCOME_CHANGED else REFUSED
                tally.add(cluster_id, list(p.replaces), outcome, reply.reason)
                tally.refused.append(refusal_guard(reply.reason, changed=outcome == CHANGED))
            tally.proposals.append(_decided(p, state))
        for cluster_id in reject:
            p = proposals[cluster_id]
            if cluster_id not in not_pending:
                tally.add(cluster_id, list(p.replaces), LEFT, "rejected")
                tally.proposals.append(_decided(p, REJECTED))
    except (Exception, asyncio.CancelledError) as exc:
        await _record_failure(_record(peer, vault, run_id, "auto", MANUAL, tally, "failed",
                                      f"{DECIDES}{target}: stopped: {_why(exc)}"[:300], started_at))
        raise
    return await _record(peer, vault, run_id, "auto", MANUAL, tally, "ok", f"{DECIDES}{target}", started_at)


def _why(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled (the dreaming service stopped, or the caller went away)"
    return getattr(exc, "message", None) or str(exc) or type(exc).__name__


async def _record_failure(record: Awaitable[kb_pb2.VaultReflectionRun]) -> None:
    """Record a run that stopped, so that its claim is released at once, within ``FAILURE_RECORD_S``;
    when the KB is the trouble (or does not answer in time) the claim expires on its own."""
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(record, FAILURE_RECORD_S)


def _decided(p: kb_pb2.VaultMergeProposal, state: str) -> kb_pb2.VaultMergeProposal:
    out = kb_pb2.VaultMergeProposal()
    out.CopyFrom(p)
    out.state = state
    return out
