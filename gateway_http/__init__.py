"""The REST shim (HTTP :10850): transcodes REST to gRPC from the protos' http annotations, and mounts MCP
over streamable HTTP at ``/mcp/agents/{agentId}`` (``mcp_mount``).

It imports ``gateway`` only: never a service (it reaches them over gRPC) nor ``gateway_mcp`` (the CLI hands it the MCP host).
"""
