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
from services.kb.freshness import watch_sources
from services.kb.servicer import Knowledge


async def run(config: Config) -> None:
    """Serve gateway.v1.Knowledge until SIGTERM."""
    archives = Archives(config.agents)
    auth = Authenticator(config.api.keys, read_internal_token(config.home))

    def register(server: grpc.aio.Server) -> list[str]:
        kb_pb2_grpc.add_KnowledgeServicer_to_server(Knowledge(archives, auth), server)
        return [kb_pb2.DESCRIPTOR.services_by_name["Knowledge"].full_name]

    async def background(stop: asyncio.Event) -> None:
        try:
            await watch_sources(archives.roots, archives.mark_dirty, stop)
        finally:
            archives.close()

    await serve("kb", config.grpc.bind_address("kb"), register, background=background)
