"""Watcher service (gRPC :50052): the file watch over identity files, CLAUDE.md composition, sessions.

It imports ``gateway`` and its own modules only: no other service, not the shim, the MCP server or ``gateway_cli``.
"""
