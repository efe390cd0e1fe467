"""Entry point of the file API process."""

from __future__ import annotations

import asyncio

import grpc

from gateway.config import Config
from gateway.grpc_server import serve
from gateway.live_config import LiveConfig
from gateway.put_record import puts_dir
from gateway.temp_sweep import Folder, sweep_at_start
from gateway.v1 import files_pb2, files_pb2_grpc
from services.file_api.servicer import WorkspaceFiles


def temp_folders(config: Config) -> list[Folder]:
    """Where the file API writes (each workspace's top level, each agent's PUT records): swept at start
    (gateway.temp_sweep)."""
    return [folder for agent in config.agents for folder in (Folder(agent.workspace), Folder(puts_dir(agent.agent_dir)))]


async def run(live: LiveConfig, instance: str | None = None) -> None:
    """Serve gateway.v1.WorkspaceFiles on the configured address until SIGTERM, following config.json."""
    await asyncio.to_thread(sweep_at_start, temp_folders(live.current))  # before SERVING: no temp file a crash left

    def register(server: grpc.aio.Server) -> list[str]:
        files_pb2_grpc.add_WorkspaceFilesServicer_to_server(WorkspaceFiles(live), server)
        return [files_pb2.DESCRIPTOR.services_by_name["WorkspaceFiles"].full_name]

    async def background(stop: asyncio.Event) -> None:
        await live.follow(stop)

    config = live.current
    await serve(
        "file_api", config.grpc.bind_address("file_api"), register, background=background, instance=instance,
        metrics=config.metrics.address("file_api"), unix=config.grpc.unix_socket("file_api"),
    )
