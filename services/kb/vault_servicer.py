"""The read views of the shared vault in gateway.v1.Knowledge: ListSharedNotes and GetVaultGraph.

A mixin of the ``servicer.Knowledge`` class, kept apart so the servicer stays one screen of
note writes and archive calls: each method parses the request, checks read access to the
agent as every shared route does, calls ``SharedVaults`` and maps the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from gateway.errors import InvalidArgument
from gateway.rpc import unary
from gateway.v1 import kb_pb2
from services.kb.graph.view import Finding, view
from services.kb.vault.store import Authors, Writer
from services.kb.vault.listing import NoteFacts
from services.kb.vault.registry_base import SharedVaults

pb = kb_pb2


def _writer(w: Writer | None) -> kb_pb2.NoteWrite | None:
    return None if w is None else pb.NoteWrite(agent_id=w.agent_id, key=w.key, run_id=w.run_id, at=w.at)


def _note(f: NoteFacts, written: Authors | None) -> kb_pb2.SharedNoteInfo:
    return pb.SharedNoteInfo(
        name=f.name, title=f.title, updated_at=f.updated_at, size_bytes=f.size_bytes, retired=f.retired,
        provenance=f.provenance, retired_at=f.retired_at, retired_reason=f.retired_reason,
        created=_writer(written.created if written else None), changed=_writer(written.changed if written else None),
    )


def _findings(found: list[Finding]) -> list[kb_pb2.VaultFinding]:
    return [pb.VaultFinding(notes=list(f.notes), text=f.text) for f in found]


class VaultViews:
    """ListSharedNotes and GetVaultGraph; the class that mixes it in gives ``_vaults`` and ``_check``."""

    _vaults: SharedVaults[Any]
    _check: Callable[..., object]  # (context, agent_id, *, write=False): the caller; raises when it may not

    @unary
    async def ListSharedNotes(self, request: kb_pb2.ListSharedNotesRequest, context: grpc.aio.ServicerContext) -> kb_pb2.ListSharedNotesResponse:  # noqa: N802
        self._check(context, request.agent_id)
        if request.page_size < 0:
            raise InvalidArgument(f"page_size: {request.page_size} is negative; send 0 for the default page or a size up to 500")
        page, written = await self._vaults.list_notes(request.agent_id, request.page_size, request.page_token,
                                                      request.include_retired)
        return pb.ListSharedNotesResponse(notes=[_note(f, written.get(f.name)) for f in page.notes],
                                          next_page_token=page.next_token, total=page.total)

    @unary
    async def GetVaultGraph(self, request: kb_pb2.GetVaultGraphRequest, context: grpc.aio.ServicerContext) -> kb_pb2.VaultGraph:  # noqa: N802
        self._check(context, request.agent_id)
        shown = view(await self._vaults.graph(request.agent_id))
        return pb.VaultGraph(
            nodes=[pb.VaultGraphNode(name=n.name, title=n.title, retired=n.retired, missing=n.missing) for n in shown.nodes],
            edges=[pb.VaultGraphEdge(from_name=a, to_name=b) for a, b in shown.edges],
            contradictions=_findings(shown.contradictions), stale=_findings(shown.stale),
            dangling=_findings(shown.dangling), low_confidence=_findings(shown.low_confidence),
            problems=_findings(shown.problems), total_nodes=shown.total_nodes, total_edges=shown.total_edges,
            truncated=bool(shown.cut), message=shown.message,
        )
