"""A KB that answers the vault reflection's calls from a dict of notes (the ``VaultPeer`` seam), and a
scripted reviewer (the ``Ask`` seam) that answers per cluster and counts its calls."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from gateway.config import VaultReflectionSettings
from gateway.errors import InvalidArgument
from gateway.v1 import kb_pb2
from services.dreaming.reflect.vaults import Vault
from services.dreaming.review.reviewer import CommandOutcome


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vault(project: str = "team", mode: str = "auto", max_clusters: int = 20) -> Vault:
    settings = VaultReflectionSettings(mode=mode, max_clusters_per_run=max_clusters)
    return Vault(project, ("alfred",), settings, ("reviewer",), 30, 0)


@dataclass
class FakeKb:
    notes: dict[str, str]
    clusters: list[tuple[str, ...]] = field(default_factory=list)
    contradictions: dict[str, str] = field(default_factory=dict)  # cluster id -> claims
    unchanged: bool = False
    busy_with: str = ""
    refuse: str = ""  # a guard's reason every merge is refused with
    edit_before_merge: dict[str, str] = field(default_factory=dict)  # a note changed once the plan is made
    merges: list[kb_pb2.MergeVaultNotesRequest] = field(default_factory=list)
    records: list[kb_pb2.RecordVaultReflectionRequest] = field(default_factory=list)
    plans: list[kb_pb2.PlanVaultReflectionRequest] = field(default_factory=list)
    claim: str = ""

    @staticmethod
    def cluster_id(names: tuple[str, ...]) -> str:
        return "C-" + hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12]

    async def plan_reflection(self, request: kb_pb2.PlanVaultReflectionRequest) -> kb_pb2.VaultReflectionPlan:
        self.plans.append(request)
        if self.busy_with:
            return kb_pb2.VaultReflectionPlan(project=request.project, busy=True, busy_with=self.busy_with)
        self.claim = request.run_id
        if self.unchanged:
            return kb_pb2.VaultReflectionPlan(project=request.project, revision="r1", watermark="r1", unchanged=True)
        clusters = [
            kb_pb2.VaultCluster(id=self.cluster_id(names), joined_by="links",
                                contradiction=self.contradictions.get(self.cluster_id(names), ""),
                                notes=[kb_pb2.ClusterNote(name=n, content=self.notes[n], sha256=sha(self.notes[n])) for n in names])
            for names in self.clusters if all(n in self.notes for n in names)
        ]
        cap = request.max_clusters or 20
        self.notes.update(self.edit_before_merge)
        return kb_pb2.VaultReflectionPlan(project=request.project, revision="r2", watermark="r1", clusters=clusters[:cap],
                                          remaining=max(0, len(clusters) - cap), notes=len(self.notes))

    async def merge_notes(self, request: kb_pb2.MergeVaultNotesRequest) -> kb_pb2.MergeVaultNotesResponse:
        assert request.run_id == self.claim, "a merge outside the claimed run"
        self.merges.append(request)
        if request.name.startswith("bad"):
            raise InvalidArgument("a shared note name must not contain 'x'")
        changed = [n for n in request.replaces if sha(self.notes.get(n, "")) != request.expected_sha256[n]]
        if changed:
            return kb_pb2.MergeVaultNotesResponse(outcome=kb_pb2.MERGE_OUTCOME_CHANGED, reason=f"{changed[0]} changed since the plan")
        if self.refuse:
            return kb_pb2.MergeVaultNotesResponse(outcome=kb_pb2.MERGE_OUTCOME_REFUSED, reason=self.refuse)
        retired = [n for n in request.replaces if n != request.name]
        if not request.dry_run:
            for n in retired:
                self.notes["stale__" + n] = self.notes.pop(n)
            self.notes[request.name] = request.content
        return kb_pb2.MergeVaultNotesResponse(outcome=kb_pb2.MERGE_OUTCOME_MERGED, retired=retired,
                                              merge_id="" if request.dry_run else "M-000000000001")

    async def record_reflection(self, request: kb_pb2.RecordVaultReflectionRequest) -> kb_pb2.VaultReflectionRun:
        assert request.run_id == self.claim, "a record outside the claimed run"
        self.claim = ""
        self.records.append(request)
        return self._run(request)

    @staticmethod
    def _run(r: kb_pb2.RecordVaultReflectionRequest) -> kb_pb2.VaultReflectionRun:
        return kb_pb2.VaultReflectionRun(project=r.project, run_id=r.run_id, mode=r.mode, trigger=r.trigger, status=r.status,
                                         reason=r.reason, started_at=r.started_at, clusters=r.clusters,
                                         proposals=r.proposals, remaining=r.remaining)

    async def list_reflections(self, project: str, limit: int) -> kb_pb2.ListVaultReflectionsResponse:
        return kb_pb2.ListVaultReflectionsResponse(runs=[self._run(r) for r in reversed(self.records)][: limit or 20])

    async def revert_reflection(self, request: kb_pb2.RevertVaultReflectionRequest) -> kb_pb2.RevertVaultReflectionResponse:
        return kb_pb2.RevertVaultReflectionResponse(run_id=request.run_id or "last")


@dataclass
class ScriptedReviewer:
    """Answers the cluster whose first note's name it finds in the prompt with ``replies[name]``
    (a dict turned into JSON, or a raw string); a leave otherwise."""

    replies: dict[str, object] = field(default_factory=dict)
    fail: bool = False
    prompts: list[str] = field(default_factory=list)

    async def __call__(self, _vault: Vault, prompt: str) -> CommandOutcome:
        self.prompts.append(prompt)
        if self.fail:
            return CommandOutcome(False, reason="timed out after 30 s")
        for name, reply in self.replies.items():
            if f'1. "{name}"' in prompt:
                return CommandOutcome(True, stdout=reply if isinstance(reply, str) else json.dumps(reply))
        return CommandOutcome(True, stdout='{"decision": "leave", "reason": "unrelated"}')
