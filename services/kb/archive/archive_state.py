"""One agent's archive inside the KB process: its connections and the state of its refreshes.

The connections are opened lazily and only inside ``OpenHandles.use`` (``services.kb.resources.handles``),
which may close them (``detach``) whenever the archive is not in use; everything else here
outlives a close: the generation, the file events not yet indexed, whether the next refresh
must walk. An archive opened again needs no walk (``ready``): the events that arrived while it
was closed are in ``changed``, as they would be while it was open. The rows queued for the
retrieval log are written first at a close (``detach``): before the writer's last checkpoint
(``retrieval_log``). Work in a
worker thread reads on the archive's reader too (``Archives._on_reader``), holding ``read_lock``
that searches take on the loop: a connection of its own, closed while the others are open, would
leave its descriptor behind in SQLite, one more for every archive a dream or a listing had read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import apsw

from gateway.config import AgentConfig
from gateway.errors import NotFound
from services.kb.archive.retrieval_log import Recorder
from services.kb.index import indexer, schema
from services.kb.index.index_files import close_connections, close_quietly, idle_or_closed, release_caches
from services.kb.index.search import tune_reader


@dataclass(eq=False)  # a key of the open-handles LRU: by identity
class ArchiveState:
    agent: AgentConfig
    recorder: Recorder | None = None  # the retrieval log's writer: its queued rows are written before a close
    writer: apsw.Connection | None = None
    reader: apsw.Connection | None = None
    read_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # the reader: a search, or a worker's read
    next_run: asyncio.Future[indexer.RefreshReport] | None = None
    drain: asyncio.Task[None] | None = None
    dirty: bool | None = None  # None: unknown until first checked
    recheck: set[str] = field(default_factory=set)  # events seen while a refresh ran
    changed: set[str] = field(default_factory=set)  # sources named by events since the last refresh began
    rescan: bool = True  # the next refresh walks the whole tree
    generation: int = 0
    last_report: indexer.RefreshReport | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    reopen: bool = False  # the archive settings changed: the writer reopens before the next refresh
    ready: bool = False  # a walk has reconciled the index with the settings since start (or their change)
    barrier: bool = False  # a waiter of the next refresh wants every earlier change (the watch's barrier)
    named: set[str] = field(default_factory=set)  # sources callers of the next refresh said they wrote
    indexing: bool = False  # the running refresh carries changes that made the archive stale
    runs: int = 0  # refreshes run (targeted batches count once per refresh): coalescing is visible

    def open_writer(self) -> apsw.Connection:
        """The writer, opened (and the index file created) when it is not, or when the one open still
        holds a transaction (``index_files.idle_or_closed``) (in a worker thread, under the agent's
        lock, inside a use)."""
        if self.reopen:
            self.reopen = self.ready = False
            if self.writer is not None:
                close_quietly(self.writer)
                self.writer = None
        self.writer = idle_or_closed(self.writer, self.agent.kb_path)
        if self.writer is None:
            self.writer = schema.open_index(self.agent.kb_path, self.agent.knowledge.archive, create=True)
        return self.writer

    def open_reader(self) -> apsw.Connection | None:
        """The search connection (on the event loop, inside a use); None before the index exists."""
        if self.reader is None:
            try:
                self.reader = schema.open_reader(self.agent.kb_path)
            except NotFound:
                return None
            tune_reader(self.reader)
        return self.reader

    def release_memory(self) -> None:
        """Hand the writer's page cache back (after a refresh or a fold: its next use reads the few
        pages it needs again, from the system's file cache)."""
        if self.writer is not None:
            self.writer.execute("PRAGMA shrink_memory")

    def release_caches(self) -> None:
        """``handles.Holder``: the page caches of the reader and the writer, handed back."""
        release_caches(self.reader, self.writer)

    def detach(self) -> Callable[[], None]:
        """``handles.Holder``: the connections, taken out; what closes them (the WAL emptied)."""
        writer, reader, self.writer, self.reader = self.writer, self.reader, None, None
        path, recorder = self.agent.kb_path, self.recorder

        def close() -> None:
            if recorder is not None:
                recorder.release(path)  # the rows queued for it written before the writer's checkpoint
            close_connections(path, writer, reader)

        return close
