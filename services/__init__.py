"""The suite's gRPC services, one package each.

A service imports ``gateway`` and its own modules only: never another service (they talk through the
``gateway.v1`` protos), the shim, the MCP server or ``gateway_cli``.
"""
