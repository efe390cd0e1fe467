"""Requests for the auth matrix (``test_auth_matrix.py``): one minimal valid request per RPC.

The matrix sends the same request in every column (only the key and the agent
change), so a refusal is about the key and never about the body. When a column
is expected to be *allowed*, the request is made to really succeed: ``Prep``
first creates what it needs through the internal token (a note to read, a
session to report on, a dream run to revert, a proposal to accept or reject), under a
fresh name each time. An RPC with no entry in ``REQUESTS`` (one added later)
is still in the matrix, with only its agent id set: its allowed cases may then
be a 4xx for the body, which the matrix accepts (not 401/403) and reports.

``ACCESS`` is the read/write split per RPC (docs/architecture.md "Auth and the internal token"): a read key may call a read
RPC of an agent in its scope, and only a write key a write RPC. It is the one
hand-kept table (access is a decision per RPC, not something to infer), and
``test_auth_matrix`` fails when an RPC of the descriptors is missing from it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import descriptor
from suite_support import wait_until

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import (
    dreaming_pb2,
    dreaming_pb2_grpc,
    files_pb2,
    files_pb2_grpc,
    kb_pb2,
    kb_pb2_grpc,
    watcher_pb2,
    watcher_pb2_grpc,
)
from gateway_http.descriptors import proto_modules

READ, WRITE = "read", "write"
ACCESS: dict[str, str] = {
    "gateway.v1.Dreaming.RunNow": WRITE,
    "gateway.v1.Dreaming.GetDreamStatus": READ,
    "gateway.v1.Dreaming.GetDreamSummaries": READ,
    "gateway.v1.Dreaming.ListDreamRuns": READ,
    "gateway.v1.Dreaming.AcceptProposals": WRITE,
    "gateway.v1.Dreaming.RejectProposals": WRITE,
    "gateway.v1.Dreaming.RevertDream": WRITE,
    "gateway.v1.Dreaming.ExplainEntry": READ,
    "gateway.v1.Dreaming.Forget": WRITE,  # a dry run too: its report says where an agent keeps a text
    "gateway.v1.Dreaming.ListTombstones": WRITE,  # a key that may forget sees the tombstones
    "gateway.v1.Dreaming.LiftTombstone": WRITE,
    "gateway.v1.Dreaming.ReflectVault": WRITE,
    "gateway.v1.Dreaming.GetVaultReflections": READ,
    "gateway.v1.Dreaming.DecideVaultMerges": WRITE,
    "gateway.v1.Dreaming.UndoVaultReflection": WRITE,
    "gateway.v1.WorkspaceFiles.GetFile": READ,
    "gateway.v1.WorkspaceFiles.PutFile": WRITE,
    "gateway.v1.Knowledge.Refresh": READ,  # re-indexing derives the index from the files: no write to them
    "gateway.v1.Knowledge.Search": READ,
    "gateway.v1.Knowledge.Get": READ,
    "gateway.v1.Knowledge.FoldRetrievals": WRITE,
    "gateway.v1.Knowledge.ProbeRecall": READ,
    "gateway.v1.Knowledge.ListArchiveEntries": READ,
    "gateway.v1.Knowledge.UpdateEntryLifecycle": WRITE,
    "gateway.v1.Knowledge.ForgetText": WRITE,
    "gateway.v1.Knowledge.ShareTombstones": WRITE,
    "gateway.v1.Knowledge.GetIndexStatus": READ,
    "gateway.v1.Knowledge.CreateSharedNote": WRITE,
    "gateway.v1.Knowledge.GetSharedNote": READ,
    "gateway.v1.Knowledge.ListSharedNotes": READ,
    "gateway.v1.Knowledge.GetVaultGraph": READ,
    "gateway.v1.Knowledge.UpdateSharedNote": WRITE,
    "gateway.v1.Knowledge.DeleteSharedNote": WRITE,
    "gateway.v1.Knowledge.RetireSharedNote": WRITE,
    "gateway.v1.Knowledge.RestoreSharedNote": WRITE,
    "gateway.v1.Knowledge.CollectVault": WRITE,
    "gateway.v1.Knowledge.PromoteFact": WRITE,
    "gateway.v1.Knowledge.UndoPromotion": WRITE,
    "gateway.v1.Knowledge.PlanVaultReflection": WRITE,
    "gateway.v1.Knowledge.MergeVaultNotes": WRITE,
    "gateway.v1.Knowledge.RecordVaultReflection": WRITE,
    "gateway.v1.Knowledge.ListVaultReflections": READ,
    "gateway.v1.Knowledge.RevertVaultReflection": WRITE,
    "gateway.v1.Sessions.RegisterSession": WRITE,
    "gateway.v1.Sessions.ReportState": WRITE,
    "gateway.v1.Sessions.EndSession": WRITE,
    "gateway.v1.Sessions.WatchDirectives": READ,
    "gateway.v1.Sessions.GetActivity": READ,
    "gateway.v1.Sessions.PreviewClaudeMd": READ,
    "gateway.v1.Sessions.GetLineage": READ,
    "gateway.v1.Sessions.ListAgents": READ,
}
# RPCs about no one agent (the console's list): they answer the agents the key's scope names, so
# any accepted key is allowed (what it sees is checked by test_console_api.py), and only a missing
# or wrong key is refused.
SCOPE_FILTERED = frozenset({"gateway.v1.Sessions.ListAgents"})
# RPCs about many agents that name an agent not configured in the reply instead of refusing the
# call (an agent just removed must not fail the others): for a key whose scope covers every id,
# the unknown agent is allowed. An id outside a scoped key's scope still fails the call (403).
UNKNOWN_ANSWERED = frozenset({"gateway.v1.Dreaming.GetDreamSummaries"})
# RPCs only the suite's own services may call (the vault's weekly reflection steps, which name a
# project, not an agent): every API key is refused (403) whatever its scope; the internal token is allowed.
INTERNAL_ONLY = frozenset({
    "gateway.v1.Knowledge.PlanVaultReflection", "gateway.v1.Knowledge.MergeVaultNotes",
    "gateway.v1.Knowledge.RecordVaultReflection", "gateway.v1.Knowledge.ListVaultReflections",
    "gateway.v1.Knowledge.RevertVaultReflection", "gateway.v1.Knowledge.ShareTombstones",
})

# RPCs about a whole vault (the weekly reflection's public calls, which name a project, not an agent):
# only a key whose scope is "*" may make them (and a write key for all but the list); every scoped key is
# refused (403) whatever agents it names.
VAULT_WIDE = frozenset({
    "gateway.v1.Dreaming.ReflectVault", "gateway.v1.Dreaming.GetVaultReflections",
    "gateway.v1.Dreaming.DecideVaultMerges", "gateway.v1.Dreaming.UndoVaultReflection",
})

NOTE = "# Matrix note\n\n- first line of the note\n- second line of the note\n"
ABSENT_RUN = "20260101T000000Z-abcd"  # well-formed ids of nothing: a denied case never reaches the lookup
ABSENT_PROPOSAL = "p-000000000000"
ABSENT_TOMBSTONE = "F-000000000000"


def all_methods() -> Iterator[tuple[descriptor.MethodDescriptor, Any]]:
    """Every RPC of every service in the descriptors, with the generated stub class of its service."""
    for module in proto_modules():
        grpc_module = __import__(module.__name__ + "_grpc", fromlist=["_"])
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield method, getattr(grpc_module, f"{service.name}Stub")


def access(method: descriptor.MethodDescriptor) -> str:
    """READ or WRITE; an RPC missing from ACCESS is taken for a write (the stricter expectation)."""
    return ACCESS.get(method.full_name, WRITE)


@dataclass
class Prep:
    """Preconditions made through the internal token, so that allowed cases really succeed."""

    home: Path
    addresses: dict[str, str]
    reply_file: Path

    def __post_init__(self) -> None:
        self.metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(self.home)),)
        self._channels = {name: grpc.insecure_channel(address) for name, address in self.addresses.items()}
        self.kb = kb_pb2_grpc.KnowledgeStub(self._channels["kb"])
        self.sessions = watcher_pb2_grpc.SessionsStub(self._channels["watcher"])
        self.dreaming = dreaming_pb2_grpc.DreamingStub(self._channels["dreaming"])
        self.files = files_pb2_grpc.WorkspaceFilesStub(self._channels["file_api"])
        self._n = 0

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def unique(self, stem: str) -> str:
        self._n += 1
        return f"{stem}-{self._n}"

    def note(self, agent: str, *, retired: bool = False) -> str:
        name = self.unique("matrix-note")
        self.kb.CreateSharedNote(kb_pb2.CreateSharedNoteRequest(agent_id=agent, name=name, content=NOTE, confirm=True),
                                 metadata=self.metadata, timeout=30)
        if retired:
            self.kb.RetireSharedNote(kb_pb2.RetireSharedNoteRequest(agent_id=agent, name=name, reason="matrix"),
                                     metadata=self.metadata, timeout=30)
        return name

    def session(self, agent: str, *, busy: bool = False) -> str:
        state = watcher_pb2.SESSION_STATE_BUSY if busy else watcher_pb2.SESSION_STATE_IDLE
        session_id = self.unique("matrix-session")
        self.sessions.RegisterSession(watcher_pb2.RegisterSessionRequest(agent_id=agent, session_id=session_id, state=state),
                                      metadata=self.metadata, timeout=30)
        return session_id

    def _dream(self, agent: str, mode: str) -> dreaming_pb2.DreamReport:
        fact = f"- {self.unique('matrix fact')} learned by {agent}"
        reply = {"summary": "matrix", "proposals": [{"op": "add", "file": "MEMORY.md", "content": fact, "reason": "matrix"}]}
        self.reply_file.write_text(json.dumps(reply), encoding="utf-8")
        report: dreaming_pb2.DreamReport = self.dreaming.RunNow(
            dreaming_pb2.RunNowRequest(agent_id=agent, mode=mode), metadata=self.metadata, timeout=60)
        return report

    def applied_run(self, agent: str) -> str:
        """The id of a run that applied one op (something to revert)."""
        report = self._dream(agent, "auto")
        assert [op.status for op in report.ops] == ["applied"], report
        return report.run_id

    def proposal(self, agent: str) -> str:
        """The id of a pending proposal of a propose-mode run."""
        report = self._dream(agent, "propose")
        assert [op.status for op in report.ops] == ["proposed"], report
        return report.ops[0].proposal_id

    def tombstone(self, agent: str) -> str:
        """The id of a tombstone of the agent (a forget of a text it does not hold)."""
        reply = self.dreaming.Forget(dreaming_pb2.ForgetRequest(agent_id=agent, text=self.unique("matrix forgotten words"),
                                                                apply=True), metadata=self.metadata, timeout=120)
        assert reply.tombstones == 1, reply
        return str(reply.tombstone_id)

    def pending_directive(self, agent: str) -> None:
        """A busy session with a directive pending, so that WatchDirectives answers at once when allowed."""
        session_id = self.session(agent, busy=True)
        self.files.PutFile(files_pb2.PutFileRequest(agent_id=agent, filename="HEARTBEAT.md", content=f"# Heartbeat {secrets.token_hex(4)}\n"),
                           metadata=self.metadata, timeout=30)

        def pending() -> bool:
            activity = self.sessions.GetActivity(watcher_pb2.GetActivityRequest(agent_id=agent), metadata=self.metadata, timeout=30)
            return any(s.session_id == session_id and s.HasField("pending") for s in activity.sessions)

        wait_until(pending, 20, f"a pending directive for {agent}")


Builder = Callable[[Prep, str, bool], dict[str, Any]]


def _note_or_absent(p: Prep, agent: str, ready: bool, retired: bool = False) -> str:
    return p.note(agent, retired=retired) if ready else "matrix-absent"


REQUESTS: dict[str, Builder] = {
    "gateway.v1.Dreaming.RunNow": lambda p, a, r: {},
    "gateway.v1.Dreaming.GetDreamStatus": lambda p, a, r: {},
    "gateway.v1.Dreaming.GetDreamSummaries": lambda p, a, r: {"agent_ids": [a]},
    "gateway.v1.Dreaming.ListDreamRuns": lambda p, a, r: {},
    "gateway.v1.Dreaming.AcceptProposals": lambda p, a, r: {"ids": [p.proposal(a) if r else ABSENT_PROPOSAL]},
    "gateway.v1.Dreaming.RejectProposals": lambda p, a, r: {"ids": [p.proposal(a) if r else ABSENT_PROPOSAL]},
    "gateway.v1.Dreaming.RevertDream": lambda p, a, r: {"run_id": p.applied_run(a) if r else ABSENT_RUN},
    "gateway.v1.Dreaming.ExplainEntry": lambda p, a, r: {"query": "matrix"},
    "gateway.v1.Dreaming.Forget": lambda p, a, r: {"text": "matrix forget words"},  # a dry run
    "gateway.v1.Dreaming.ListTombstones": lambda p, a, r: {},
    "gateway.v1.Dreaming.LiftTombstone": lambda p, a, r: {"tombstone_id": p.tombstone(a) if r else ABSENT_TOMBSTONE},
    # the vault of project global: a propose-mode run (the matrix's reviewer), the list, a decision and a
    # revert of a run that does not exist (NOT_FOUND: a 4xx for the body, not for the key)
    "gateway.v1.Dreaming.ReflectVault": lambda p, a, r: {"project": "global", "mode": "propose"},
    "gateway.v1.Dreaming.GetVaultReflections": lambda p, a, r: {"project": "global"},
    "gateway.v1.Dreaming.DecideVaultMerges": lambda p, a, r: {"project": "global", "run_id": "R-matrix-absent",
                                                              "reject": ["C-000000000000"]},
    "gateway.v1.Dreaming.UndoVaultReflection": lambda p, a, r: {"project": "global", "run_id": "R-matrix-absent"},
    "gateway.v1.WorkspaceFiles.GetFile": lambda p, a, r: {"filename": "SOUL.md"},
    "gateway.v1.WorkspaceFiles.PutFile": lambda p, a, r: {"filename": "USER.md", "content": f"- {p.unique('matrix put')}\n"},
    "gateway.v1.Knowledge.Refresh": lambda p, a, r: {},
    "gateway.v1.Knowledge.Search": lambda p, a, r: {"query": "matrix"},
    "gateway.v1.Knowledge.Get": lambda p, a, r: {"path": "MEMORY.md"},
    "gateway.v1.Knowledge.FoldRetrievals": lambda p, a, r: {},
    "gateway.v1.Knowledge.ProbeRecall": lambda p, a, r: {},
    "gateway.v1.Knowledge.ListArchiveEntries": lambda p, a, r: {},
    "gateway.v1.Knowledge.UpdateEntryLifecycle": lambda p, a, r: {},
    "gateway.v1.Knowledge.ForgetText": lambda p, a, r: {"text": "matrix forget words"},  # a dry run
    "gateway.v1.Knowledge.ShareTombstones": lambda p, a, r: {},  # nothing to keep or lift
    "gateway.v1.Knowledge.GetIndexStatus": lambda p, a, r: {},
    "gateway.v1.Knowledge.CreateSharedNote": lambda p, a, r: {"name": p.unique("matrix-new"), "content": NOTE, "confirm": True},
    "gateway.v1.Knowledge.GetSharedNote": lambda p, a, r: {"name": _note_or_absent(p, a, r)},
    "gateway.v1.Knowledge.ListSharedNotes": lambda p, a, r: {},
    "gateway.v1.Knowledge.GetVaultGraph": lambda p, a, r: {},
    "gateway.v1.Knowledge.UpdateSharedNote": lambda p, a, r: {"name": _note_or_absent(p, a, r), "content": NOTE + "- a third line\n"},
    "gateway.v1.Knowledge.DeleteSharedNote": lambda p, a, r: {"name": _note_or_absent(p, a, r)},
    "gateway.v1.Knowledge.RetireSharedNote": lambda p, a, r: {"name": _note_or_absent(p, a, r), "reason": "matrix"},
    "gateway.v1.Knowledge.RestoreSharedNote": lambda p, a, r: {"name": _note_or_absent(p, a, r, retired=True)},
    "gateway.v1.Knowledge.CollectVault": lambda p, a, r: {},
    "gateway.v1.Knowledge.PromoteFact": lambda p, a, r: {"topic": p.unique("matrix-topic"), "content": "- the matrix promoted this fact"},
    "gateway.v1.Knowledge.UndoPromotion": lambda p, a, r: {"write": kb_pb2.PromotionWrite(  # a note that is not there: gone
        note=p.unique("matrix-unpromoted"), project="global", kind="created", added="- x\n", block="- x\n", hash_after="0" * 64)},
    # the reflection's steps on the vault of project global: a claim that lapses at once, a merge its run
    # does not hold the claim for (FAILED_PRECONDITION), a no-op run recorded, the list, no run to revert
    "gateway.v1.Knowledge.PlanVaultReflection": lambda p, a, r: {"project": "global", "run_id": p.unique("R-matrix"),
                                                                 "claim_seconds": 1, "max_clusters": 1},
    "gateway.v1.Knowledge.MergeVaultNotes": lambda p, a, r: {
        "project": "global", "run_id": "R-matrix-absent", "cluster_id": "C-000000000000", "name": "matrix-merged",
        "content": NOTE, "replaces": ["matrix-merged"], "expected_sha256": {"matrix-merged": "0" * 64}, "dry_run": True},
    "gateway.v1.Knowledge.RecordVaultReflection": lambda p, a, r: {"project": "global", "run_id": p.unique("R-matrix"),
                                                                   "mode": "auto", "trigger": "manual", "status": "noop"},
    "gateway.v1.Knowledge.ListVaultReflections": lambda p, a, r: {"project": "global"},
    "gateway.v1.Knowledge.RevertVaultReflection": lambda p, a, r: {"project": "global", "run_id": "R-matrix-absent"},
    "gateway.v1.Sessions.RegisterSession": lambda p, a, r: {"session_id": p.unique("matrix-new-session"), "state": watcher_pb2.SESSION_STATE_IDLE},
    "gateway.v1.Sessions.ReportState": lambda p, a, r: {"session_id": p.session(a) if r else "matrix-absent", "state": watcher_pb2.SESSION_STATE_BUSY},
    "gateway.v1.Sessions.EndSession": lambda p, a, r: {"session_id": p.session(a) if r else "matrix-absent"},
    "gateway.v1.Sessions.WatchDirectives": lambda p, a, r: {},
    "gateway.v1.Sessions.GetActivity": lambda p, a, r: {},
    "gateway.v1.Sessions.PreviewClaudeMd": lambda p, a, r: {},
    "gateway.v1.Sessions.GetLineage": lambda p, a, r: {},
}


def request_fields(prep: Prep, method: descriptor.MethodDescriptor, agent: str, ready: bool) -> dict[str, Any]:
    """The fields of ``method``'s request for ``agent``; ``ready``: made to succeed (preconditions first)."""
    build = REQUESTS.get(method.full_name)
    about = {"agent_id": agent} if "agent_id" in method.input_type.fields_by_name else {}
    return {**about, **(build(prep, agent, ready) if build is not None else {})}
