"""The MCP stdio server of the memory tools (docs/concepts/mcp.md "MCP: stdio and streamable HTTP").

A thin client of the KB service (docs/architecture.md "Processes"): ``gateway mcp --agent
ID`` serves, for one agent over stdio with the official ``mcp`` SDK, the
read-only ``memory_search`` / ``memory_get`` tools and the shared-vault tools
``memory_shared_create`` / ``_get`` / ``_update`` / ``_delete`` (docs/concepts/vault.md
"Shared vault"), forwarding every call to ``gateway.v1.Knowledge`` over gRPC.
The same tools are served over streamable HTTP inside the REST shim
(``streamable_http``). Nothing under ``services/`` imports this package.
"""
