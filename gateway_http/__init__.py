"""The REST shim (HTTP :10850): transcodes REST to gRPC from the protos' http annotations.

It also mounts MCP over streamable HTTP at ``/mcp/agents/{agentId}`` (``mcp_mount``).
"""
