"""The MCP memory tools (docs/concepts/mcp.md): ``memory_search``, ``memory_get`` and the shared-vault tools, over
stdio (``server``) and streamable HTTP (``streamable_http``), each call forwarded to the KB over gRPC.

It imports ``gateway`` only: never a service (the KB is a gRPC peer) nor the shim; only ``gateway_cli`` imports it.
"""
