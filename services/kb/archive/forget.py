"""A forget in an agent's archive (docs/concepts/archive.md "Forget").

The archive indexes workspace files the KB does not write (dreaming rewrites them, with the marker
in place of each match, before it calls the KB). Here, on the archive's writer, with the archive to
itself (``Archives.exclusive``):

1. **Dry run**: the sources whose indexed text holds the target, with counts and lines
   (``purge.index_places``), and those whose own path holds it (``purge.named``).
2. **Apply**: those sources and the files dreaming names as changed are reindexed from disk (with
   ``secure_delete`` on, so the pages the old rows leave are zeroed); a source that is not a plain
   file (a link) makes it a walk. What the index still holds afterwards is a file that still holds
   the target on disk, or a path that does: reported as ``left``, never rewritten or renamed here.
   Old paths the index keeps of files gone (``kb_paths``, the retrieval log) are scrubbed
   (``purge.scrub_old_paths``). Then the archive's connections are closed (the reader's snapshot
   must not keep the WAL) and its bytes purged (``purge.purge_bytes``).

Running it again is harmless: a reindex of an unchanged file only refreshes its stat, and the purge of
a clean file only rewrites it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import apsw

from gateway.forgetting import Target
from services.kb.archive.archive_state import ArchiveState
from services.kb.archive.archives import EVENT_BATCH, Archives
from services.kb.file_watch import plain_source
from services.kb.index import indexer, purge
from services.kb.resources.threads import until_done

STORE = "archive"


def forget_in(state: ArchiveState, target: Target, tombstone_id: str, changed: Iterable[str],
              apply: bool) -> purge.StoreForget:
    """The archive's places and, on ``apply``, its reindex (module docstring), in a worker thread inside
    ``Archives.exclusive``; the purge is ``forget``'s next step."""
    result = purge.StoreForget(STORE)
    if not state.agent.kb_path.is_file():
        return result  # no archive was ever built: nothing of it holds anything
    if not apply:
        reader = state.open_reader()
        if reader is not None:
            result.places = purge.index_places(reader, target) + purge.named(_sources(reader), target)
        return result
    writer = state.open_writer()
    result.places = purge.index_places(writer, target)
    names = purge.named(_sources(writer), target)
    workspace = Path(state.agent.workspace)
    due = sorted({*changed, *(p.where for p in result.places), *(p.where for p in names)})  # a renamed one: pruned
    plain = [rel for rel in due if plain_source(workspace, rel)]
    settings = state.agent.knowledge.archive
    was = ("OFF", "ON", "FAST")[int(str(writer.execute("PRAGMA secure_delete").fetchall()[0][0]))]
    writer.execute("PRAGMA secure_delete=ON").fetchall()
    try:
        for start in range(0, len(plain), EVENT_BATCH):
            indexer.reindex_paths(writer, workspace, plain[start : start + EVENT_BATCH], settings)
        if len(plain) < len(due):  # a link among them: the walk's confinement rules decide
            indexer.refresh(writer, workspace, settings)
        result.left = purge.index_places(writer, target)
        purge.scrub_old_paths(writer, target, tombstone_id)
    finally:
        writer.execute(f"PRAGMA secure_delete={was}").fetchall()
    result.places += names
    result.left += purge.named(_sources(writer), target)  # renaming a workspace file is dreaming's
    return result


def _sources(conn: apsw.Connection) -> list[str]:
    return [str(path) for (path,) in conn.execute("SELECT path FROM kb_sources ORDER BY path")]


async def forget(archives: Archives, agent_id: str, target: Target, tombstone_id: str, changed: list[str],
                 apply: bool) -> purge.StoreForget:
    """The archive's part of a forget (module docstring), with the archive to itself (``Archives.exclusive``).
    Its connections are taken out on the event loop (no search is using them there) and closed, and the
    file purged, in a worker thread."""
    loop = asyncio.get_running_loop()
    async with archives.exclusive(agent_id) as state:
        result = await until_done(loop.run_in_executor(archives.executor, forget_in, state, target, tombstone_id, changed,
                                                          apply))
        if apply and state.agent.kb_path.is_file():
            close, path = state.detach(), state.agent.kb_path

            def purge_file() -> purge.Purge:
                close()
                return purge.purge_bytes(path)

            result.purge = await until_done(loop.run_in_executor(archives.executor, purge_file))
    return result
