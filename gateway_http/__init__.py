"""The REST shim (HTTP :10850): transcodes REST to gRPC from the protos' http annotations, and mounts MCP
over streamable HTTP at ``/mcp/agents/{agentId}`` (``mcp_mount``).

It imports ``gateway`` only: never a service (it reaches them over gRPC) nor ``gateway_mcp`` (the CLI hands it the MCP host).

The package loads uvicorn without its ``__init__`` (``gateway.lean_import``): the shim runs uvicorn's
``Server`` from code, never its command line (click) or its process supervisors (multiprocessing),
which that ``__init__`` imports (about 1.5 MiB).
"""

from gateway.lean_import import without_init

without_init("uvicorn", {"Config": "uvicorn.config", "Server": "uvicorn.server"})
