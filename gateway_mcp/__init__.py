"""The MCP stdio server of SPEC.md's ``memory_search`` / ``memory_get`` tools.

A thin client of the KB service (DESIGN.md "Processes"): ``gateway mcp --agent
ID`` serves the two read-only tools for one agent over stdio with the official
``mcp`` SDK and forwards every call to ``gateway.v1.Knowledge`` over gRPC.
Nothing under ``services/`` imports this package.
"""
