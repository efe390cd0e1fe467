"""Entry point of the file API process."""

from __future__ import annotations

import grpc

from gateway.auth import Authenticator
from gateway.config import Config
from gateway.grpc_server import serve
from gateway.home import read_internal_token
from gateway.v1 import files_pb2, files_pb2_grpc
from services.file_api.servicer import WorkspaceFiles


async def run(config: Config) -> None:
    """Serve gateway.v1.WorkspaceFiles on the configured address until SIGTERM."""
    auth = Authenticator(config.api.keys, read_internal_token(config.home))

    def register(server: grpc.aio.Server) -> list[str]:
        files_pb2_grpc.add_WorkspaceFilesServicer_to_server(WorkspaceFiles(config, auth), server)
        return [files_pb2.DESCRIPTOR.services_by_name["WorkspaceFiles"].full_name]

    await serve("file_api", config.grpc.bind_address("file_api"), register)
