"""Entry point of the KB process: the only process that opens a kb.sqlite."""

from __future__ import annotations

import asyncio

import grpc

from gateway.auth import Authenticator
from gateway.config import Config
from gateway.grpc_server import serve
from gateway.home import read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb.archives import Archives
from services.kb.freshness import Root, SourceWatch, archive_folder, archive_source, vault_source
from services.kb.servicer import Knowledge
from services.kb.vaults import Vaults


SYNC_DIR = ".kb-sync"  # under the home: the file watch's barrier markers (freshness.SourceWatch)


async def run(config: Config) -> None:
    """Serve gateway.v1.Knowledge until SIGTERM."""
    roots: dict[str, Root] = {}
    watch = SourceWatch(lambda: roots, config.home / SYNC_DIR)
    archives = Archives(config.agents, sync=watch.sync)
    vaults = Vaults(config.agents, archives.executor)
    auth = Authenticator(config.api.keys, read_internal_token(config.home))

    for path, agent_id in archives.roots().items():
        roots[path] = Root(
            archive_source,
            lambda rel, a=agent_id: archives.mark_dirty(a, rel),  # type: ignore[misc]
            may_hold_sources=archive_folder,
            rescan=lambda a=agent_id: archives.rescan(a),  # type: ignore[misc]
        )
    for path, vault_dir in vaults.roots().items():
        roots[path] = Root(vault_source, lambda rel, d=vault_dir: vaults.note_changed(d, rel))  # type: ignore[misc]

    def register(server: grpc.aio.Server) -> list[str]:
        kb_pb2_grpc.add_KnowledgeServicer_to_server(Knowledge(archives, vaults, auth), server)
        return [kb_pb2.DESCRIPTOR.services_by_name["Knowledge"].full_name]

    async def background(stop: asyncio.Event) -> None:
        try:
            await watch.run(stop)
        finally:
            await vaults.settle()
            vaults.close()
            archives.close()

    await serve("kb", config.grpc.bind_address("kb"), register, background=background)
