"""Entry point of the KB process: the only process that opens a kb.sqlite."""

from __future__ import annotations

import asyncio
import sys

import grpc

from gateway.config import Config
from gateway.grpc_server import serve
from gateway.live_config import ConfigChange, LiveConfig
from gateway.temp_sweep import Folder, sweep_at_start
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb.archive.archives import Archives
from services.kb.file_watch import Root, SourceWatch, archive_folder, archive_source, vault_source
from services.kb.metrics import register_index_sizes
from services.kb.servicer import Knowledge
from services.kb.vault.names import NOTES_DIR
from services.kb.vault.note_index import REPORTS_DIR
from services.kb.vault.registry import Vaults

SYNC_DIR = ".kb-sync"  # under the home: the file watch's barrier markers (file_watch.SourceWatch)
# Refreshes parse in worker threads while searches run on the event loop: with the default 5 ms
# the loop waits up to 5 ms for the GIL at every step of a search during a burst (issue 15).
SWITCH_INTERVAL_S = 0.0005


def temp_folders(config: Config) -> list[Folder]:
    """Where the KB writes files (each shared vault's notes/ and the graph's reports/; the
    kb.sqlite files are SQLite's business): swept at start."""
    vaults = dict.fromkeys(a.knowledge.shared.vault_dir for a in config.agents if a.knowledge.shared.enabled)
    return [Folder(vault / sub) for vault in vaults for sub in (NOTES_DIR, REPORTS_DIR)]


async def run(live: LiveConfig, instance: str | None = None) -> None:
    """Serve gateway.v1.Knowledge until SIGTERM, following config.json."""
    config = live.current
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    await asyncio.to_thread(sweep_at_start, temp_folders(config))  # before SERVING: no temp file a crash left
    roots: dict[str, Root] = {}
    watch = SourceWatch(lambda: roots, config.home / SYNC_DIR)
    archives = Archives(config.agents, sync=watch.sync)
    vaults = Vaults(config.agents, archives.executor)

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
        plan_roots()

    plan_roots()
    live.subscribe(on_config)
    register_index_sizes(lambda: live.current.agents)

    def register(server: grpc.aio.Server) -> list[str]:
        kb_pb2_grpc.add_KnowledgeServicer_to_server(Knowledge(archives, vaults, lambda: live.auth), server)
        return [kb_pb2.DESCRIPTOR.services_by_name["Knowledge"].full_name]

    async def background(stop: asyncio.Event) -> None:
        try:
            await asyncio.gather(watch.run(stop), live.follow(stop))
        finally:
            await vaults.settle()
            vaults.close()
            archives.close()

    await serve(
        "kb", config.grpc.bind_address("kb"), register, background=background, instance=instance,
        metrics=config.metrics.address("kb"),
    )
