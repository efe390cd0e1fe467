"""GetLineage's answer: ``lineage.LineageView`` as gateway.v1 messages."""

from __future__ import annotations

from gateway.v1 import watcher_pb2
from services.watcher import origins
from services.watcher.lineage_view import LineageView, SessionView, SourceView
from services.watcher.lineage_store import CompositionEntry, SourceEntry

pb = watcher_pb2

_KINDS = {
    origins.PUT: pb.ORIGIN_KIND_PUT,
    origins.DREAM: pb.ORIGIN_KIND_DREAM,
    origins.UNKNOWN: pb.ORIGIN_KIND_UNKNOWN,
    origins.MISSING: pb.ORIGIN_KIND_MISSING,
}


def revision_pb(entry: SourceEntry) -> watcher_pb2.SourceRevision:
    o = entry.origin
    origin = pb.SourceOrigin(
        kind=_KINDS.get(o.kind, pb.ORIGIN_KIND_UNSPECIFIED), at_ms=o.at_ms, run_id=o.run_id, description=o.describe()
    )
    return pb.SourceRevision(name=entry.name, sha256=entry.sha256 or "", origin=origin)


def composition_pb(entry: CompositionEntry) -> watcher_pb2.LineageComposition:
    return pb.LineageComposition(
        id=entry.id, composed_at_ms=entry.at_ms, claude_md_sha256=entry.claude_md_sha256,
        sources=[revision_pb(s) for s in entry.sources],
    )


def _source_pb(view: SourceView) -> watcher_pb2.SourceLineage:
    return pb.SourceLineage(
        name=view.name, revision=revision_pb(view.revision), today=revision_pb(view.today), differs=view.differs,
        diff=view.diff, diff_truncated=view.diff_truncated, diff_unavailable=view.diff_unavailable,
    )


def _session_pb(view: SessionView) -> watcher_pb2.SessionLineage:
    out = pb.SessionLineage(
        session_id=view.session.session_id,
        state=pb.SESSION_STATE_BUSY if view.session.busy else pb.SESSION_STATE_IDLE,
        sources=[_source_pb(s) for s in view.sources],
    )
    if view.composition is not None:
        out.composition.CopyFrom(composition_pb(view.composition))
    return out


def lineage_pb(agent_id: str, view: LineageView) -> watcher_pb2.Lineage:
    return pb.Lineage(
        agent_id=agent_id,
        sessions=[_session_pb(s) for s in view.sessions],
        compositions=[composition_pb(e) for e in view.compositions],
    )
