"""Entry point of the KB process: the only process that opens a kb.sqlite."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Mapping
from typing import Any

import grpc
import structlog

from gateway.config import Config
from gateway.dependencies import DEPENDENCIES
from gateway.grpc_server import serve
from gateway.live_config import ConfigChange, LiveConfig
from gateway.resources import FILE_TABLE, OPEN_FILES, SHORTAGES, open_files_limit
from gateway.temp_sweep import Folder, sweep_at_start
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb.archive.archives import Archives
from services.kb.file_watch import Root, SourceWatch, archive_folder, archive_source, vault_source
from services.kb.metrics import register_index_sizes, register_open_archives
from services.kb.resources.handles import OpenHandles, default_cap, files_needed
from services.kb.resources.heap import PAGE_BUFFER_THRESHOLD, keep_pages_off_heap
from services.kb.resources.memory_trace import TraceSettings
from services.kb.resources.memory_trace import start as start_memory_trace
from services.kb.resources.page_caches import keep_within
from services.kb.servicer import Knowledge
from services.kb.vault.names import NOTES_DIR
from services.kb.vault.note_index import REPORTS_DIR
from services.kb.vault.registry import Vaults
from services.kb.vault.registry_base import SharedVaults
from services.kb.index.search import forget_memos
from services.kb.vault.tombstone_mirror import Mirror
from services.kb.vault.store import require_built_in

log = structlog.get_logger()

SYNC_DIR = ".kb-sync"  # under the home: the file watch's barrier markers (file_watch.SourceWatch)
# Refreshes parse in worker threads while searches run on the event loop: with the default 5 ms
# the loop would wait up to 5 ms for the GIL at every step of a search during a burst.
SWITCH_INTERVAL_S = 0.0005


def open_archives_cap(config: Config) -> int:
    """How many archives and vaults may be open at once: ``gateway.knowledge.maxOpenArchives``, else
    derived from the open-files limit (``handles.default_cap``). Logged, with a warning when the
    configured figure needs more files than the limit allows (a shortage is then answered 503)."""
    limit = open_files_limit()
    configured = config.knowledge.max_open_archives
    cap = configured or default_cap(limit)
    needed = files_needed(cap)
    log.info("kb_open_archives", cap=cap, configured=configured or None, open_files_limit=limit, files_needed=needed)
    if configured and 0 < limit < needed:
        log.warning("kb_open_archives_over_limit", detail=(
            f"gateway.knowledge.maxOpenArchives {configured} needs about {needed} open files, more than the limit of "
            f"{limit}: raise the limit (ulimit -n, LimitNOFILE) or set maxOpenArchives to 0 (derived: {default_cap(limit)})"))
    return cap


def temp_folders(config: Config) -> list[Folder]:
    """Where the KB writes files (each shared vault's notes/ on the SQLite backend, the graph's reports/ on
    both; the kb.sqlite files are SQLite's business): swept at start."""
    subs = (NOTES_DIR, REPORTS_DIR) if config.knowledge.shared.backend == "sqlite" else (REPORTS_DIR,)
    vaults = dict.fromkeys(a.knowledge.shared.vault_dir for a in config.agents if a.knowledge.shared.enabled)
    return [Folder(vault / sub) for vault in vaults for sub in subs]


def mirror_every_s(config: Config) -> float | None:
    """How often the KB checks the vault's tombstones: ``postgres.tombstonesEveryS`` on a PostgreSQL vault
    that some agent shares (other hosts write it); never on SQLite (this host's alone: the forgets and lifts
    through this KB refresh the mirror)."""
    shared = config.knowledge.shared
    if shared.backend != "postgres" or not any(a.knowledge.shared.enabled for a in config.agents):
        return None
    return shared.postgres.tombstones_every_s


def open_vaults(config: Config, archives: Archives, handles: OpenHandles, environ: Mapping[str, str]) -> SharedVaults[Any]:
    """The shared vaults on the backend ``gateway.knowledge.shared.backend`` names (chosen once, here)."""
    shared = config.knowledge.shared
    if shared.backend == "postgres":
        # Only here: psycopg and libpq cost a KB on SQLite some 11 MiB (docs/operations.md "Memory at rest").
        from services.kb.vault_pg.registry import PostgresVaults

        log.info("kb_vault_backend", backend="postgres")
        vaults = PostgresVaults(config.agents, archives.executor, shared.postgres, environ,
                                applied_by=socket.gethostname())
        DEPENDENCIES.add(vaults.health)  # the KB's health says when its server cannot be reached
        return vaults
    return Vaults(config.agents, archives.executor, handles=handles)


async def run(live: LiveConfig, instance: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Serve gateway.v1.Knowledge until SIGTERM, following config.json (``environ``: the process's
    environment, for the opt-in memory trace and a ``postgres.dsnEnv``)."""
    config = live.current
    require_built_in(config.knowledge.shared.backend)  # chosen once, here: a reload never changes it
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if (trace := TraceSettings.from_environ(environ or {})) is not None:  # a diagnostic, off by default
        start_memory_trace(trace)
        log.info("kb_memory_trace", path=str(trace.path), every_s=trace.every_s, frames=trace.frames)
    if keep_pages_off_heap():  # before any page cache: SQLite's page buffers are mappings of their own
        log.info("kb_page_buffers_off_heap", threshold_bytes=PAGE_BUFFER_THRESHOLD)
    await asyncio.to_thread(sweep_at_start, temp_folders(config))  # before SERVING: no temp file a crash left
    roots: dict[str, Root] = {}
    watch = SourceWatch(lambda: roots, config.home / SYNC_DIR)
    capped = [config.knowledge.max_open_archives]  # the configured cap in force (0: derived)
    handles = OpenHandles(open_archives_cap(config), on_release=forget_memos)  # the memos go with the page caches
    archives = Archives(config.agents, sync=watch.sync, handles=handles)
    vaults = open_vaults(config, archives, handles, environ or {})
    mirror = Mirror(vaults)  # the vault's tombstones, mirrored into the home (docs/concepts/forget.md)

    def plan_roots() -> None:
        """The watch's roots from the agents served now (the watch re-plans when they change)."""
        fresh: dict[str, Root] = {}
        for path, agent_id in archives.roots().items():
            fresh[path] = Root(
                archive_source,
                lambda rel, a=agent_id: archives.mark_dirty(a, rel),  # type: ignore[misc]
                may_hold_sources=archive_folder,
                rescan=lambda a=agent_id: archives.rescan(a),  # type: ignore[misc]
            )
        for path, vault_dir in vaults.roots().items():
            fresh[path] = Root(vault_source, lambda rel, d=vault_dir: vaults.note_changed(d, rel))  # type: ignore[misc]
        roots.clear()
        roots.update(fresh)

    def on_config(fresh: Config, change: ConfigChange) -> None:
        archives.update_agents(fresh.agents)
        vaults.update_agents(fresh.agents)
        if fresh.knowledge.max_open_archives != capped[0]:  # a cap lowered after a shortage holds till then
            capped[0] = fresh.knowledge.max_open_archives
            handles.cap = open_archives_cap(fresh)
        plan_roots()

    plan_roots()
    live.subscribe(on_config)
    register_index_sizes(lambda: live.current.agents)
    register_open_archives(handles)

    def on_shortage(what: str) -> None:
        if what in (OPEN_FILES, FILE_TABLE):  # fewer archives open from now on (handles.shed)
            handles.shed()

    SHORTAGES.listeners.append(on_shortage)

    def register(server: grpc.aio.Server) -> list[str]:
        knowledge = Knowledge(archives, vaults, lambda: live.auth, mirror)
        mirror.on_change = knowledge.rewrite_reflection_reports
        kb_pb2_grpc.add_KnowledgeServicer_to_server(knowledge, server)
        return [kb_pb2.DESCRIPTOR.services_by_name["Knowledge"].full_name]

    async def background(stop: asyncio.Event) -> None:
        try:
            await asyncio.gather(watch.run(stop), live.follow(stop), handles.run(stop), keep_within(stop, handles.until_open),
                                 mirror.run(stop, mirror_every_s(config)))
        finally:
            await vaults.settle()
            vaults.close()
            archives.close()
            handles.close_all()  # every archive and vault closed, each WAL checkpointed to 0 bytes

    await serve(
        "kb", config.grpc.bind_address("kb"), register, background=background, instance=instance,
        metrics=config.metrics.address("kb"), unix=config.grpc.unix_socket("kb"),
    )
