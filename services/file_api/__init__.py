"""File API service (gRPC :50051): reads and writes of the six identity files.

It imports ``gateway`` and its own modules only: no other service, not the shim, the MCP server or ``gateway_cli``.
"""
