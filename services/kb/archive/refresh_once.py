"""One refresh of an archive, in a worker thread, on its writer: targeted or a walk (``archives`` runs it)."""

from __future__ import annotations

from services.kb.archive.archive_state import ArchiveState
from services.kb.archive.forgotten import flag_indexed
from services.kb.file_watch import plain_source
from services.kb.index import indexer, meta


def refresh_once(state: ArchiveState, paths: list[str] | None = None) -> tuple[indexer.RefreshReport, bool]:
    """Run one refresh: targeted at ``paths`` when they are all plain sources, else a walk; the
    sources it (re)indexed that bring back forgotten text are flagged (``forgotten.flag_indexed``).
    Returns the report and whether it was targeted."""
    report, targeted = _refresh(state, paths)
    flag_indexed(state.agent, report.paths)
    return report, targeted


def _refresh(state: ArchiveState, paths: list[str] | None) -> tuple[indexer.RefreshReport, bool]:
    agent = state.agent
    if not agent.knowledge.archive.enabled:
        return indexer.RefreshReport(generation=0, indexed=0, skipped=0, pruned=0, errors=[], seconds=0.0, rebuilt=False), False
    writer = state.open_writer()
    try:
        if (
            not state.ready  # first use since start (or a settings change): reconciled by a full walk
            or paths is None
            or not all(plain_source(agent.workspace, rel) for rel in paths)
            or meta.get_meta(writer, "lifecycle_backfill") is not None  # only a walk backfills
        ):
            report = indexer.refresh(writer, agent.workspace, agent.knowledge.archive)
            state.ready = True
            return report, False
        if paths:
            report = indexer.reindex_paths(writer, agent.workspace, paths, agent.knowledge.archive)
        else:
            report = indexer.RefreshReport(generation=meta.generation(writer))
        # As a walk would report it: every stored source that was not (re)indexed is unchanged.
        sources = int(str(writer.execute("SELECT count(*) FROM kb_sources").fetchall()[0][0]))
        report.skipped = sources - report.indexed
        return report, True
    finally:
        state.release_memory()
