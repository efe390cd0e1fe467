"""Entry point of the REST shim process."""

from __future__ import annotations

import uvicorn

from gateway.config import Config
from gateway_http.app import ShimApp

BACKENDS = ("file_api", "watcher", "kb", "dreaming")


def run(config: Config, port: int | None = None) -> None:
    """Serve the shim on ``api.host:port`` until SIGTERM/SIGINT (uvicorn handles both)."""
    app = ShimApp({name: config.grpc.address(name) for name in BACKENDS})
    uvicorn.run(
        app,
        host=config.api.host,
        port=port if port is not None else config.api.port,
        loop="asyncio",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
