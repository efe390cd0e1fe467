"""docs/reference/mcp.md: every MCP memory tool, its arguments and the access it needs.

The tools are listed by the server itself (``gateway_mcp.server.build_server``, the one
implementation behind stdio and HTTP), as an MCP client would list them: names, titles,
descriptions, argument schemas and annotations. Nothing here declares a tool again.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import Tool

from gateway_cli.docs_reference.markdown import code, heading, page, prose, slug, table
from gateway_http.mcp_mount import ROUTE
from gateway_mcp.client import KnowledgeClient
from gateway_mcp.server import build_server


def _no_client(_ctx: Context) -> KnowledgeClient:
    raise RuntimeError("the reference lists the tools; it never calls one")


def server() -> MCPServer:
    """The tools' server, built as the transports build it, acting for no agent."""
    return build_server(lambda _request: None, _no_client)


def tools() -> list[Tool]:
    """The tools as the server lists them to a client, by name."""
    listed = asyncio.run(server().list_tools())
    return sorted(listed, key=lambda tool: tool.name)


def _type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(code(repr(v).replace("'", '"')) for v in schema["enum"])
    kind = code(str(schema.get("type", "any")))
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"))
              if key in schema]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(schema: dict[str, Any]) -> str:
    if "default" not in schema:
        return ""
    value = schema["default"]
    return code("true" if value is True else "false" if value is False else f'"{value}"' if isinstance(value, str) else str(value))


def _access(tool: Tool) -> str:
    read_only = tool.annotations is not None and tool.annotations.read_only_hint
    return "read (any key covering the agent)" if read_only else "**write** (a key covering the agent, with write access)"


def _tool(tool: Tool) -> list[str]:
    lines = heading(2, code(tool.name), slug(tool.name))
    hints = tool.annotations
    flags = [name for name, on in (("read-only", hints and hints.read_only_hint),
                                   ("destructive", hints and hints.destructive_hint),
                                   ("idempotent", hints and hints.idempotent_hint)) if on]
    lines += [f"- **Title**: {prose(tool.title or tool.name)}", f"- **Access**: {_access(tool)}",
              f"- **Hints**: {', '.join(flags) if flags else 'none'}", ""]
    schema = tool.input_schema
    needed = set(schema.get("required", ()))
    rows = [(code(name), _type(prop), "yes" if name in needed else "", _default(prop), prose(prop.get("description", "")))
            for name, prop in schema.get("properties", {}).items()]
    lines += ["**Arguments**", "", *table(("name", "type", "required", "default", "description"), rows)]
    # The description is what the model reads: shown whole, as written, in a block.
    lines += ["**Description given to the model**", "", "```text", *(tool.description or "").splitlines(), "```", ""]
    return lines


def render() -> str:
    """The whole page."""
    listed = tools()
    built = server()
    intro = [
        f"The memory tools of MCP server {code(built.name)}, as the server lists them to a client. "
        "The same tools are served two ways:",
        "",
        f"- over streamable HTTP by the REST shim at {code('POST ' + ROUTE)}, each call acting for the agent "
        "of the URL with the caller's API key (`X-Api-Key` or `Authorization: Bearer`);",
        "- over stdio by `gateway mcp --agent ID` ([CLI](cli.md)), for one agent, with the home's internal token.",
        "",
        "Over HTTP the key must cover the agent; a tool marked **write** also needs a key with write access "
        "(the KB refuses a read-only key's write, and the tool answers with an error saying so).",
        "",
        *table(("tool", "title", "access"),
               [(f"[{code(t.name)}](#{slug(t.name)})", prose(t.title or ""), _access(t).split(" (")[0]) for t in listed]),
        "**Instructions the server gives a session**", "",
        "```text", *(built.instructions or "").splitlines(), "```", "",
    ]
    body: list[str] = []
    for tool in listed:
        body += _tool(tool)
    return page("MCP tools", "the tools `gateway_mcp/server.py` registers, as the server lists them", intro, body)
