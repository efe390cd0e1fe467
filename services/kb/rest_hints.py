"""What the KB's gRPC replies tell a caller to do next, in the terms of the REST API.

The vault (``vault``) reports what happened without naming a tool, a route or
a field. The REST shim passes the gRPC message through unchanged, so the
servicer words the next step here: the REST route to call (read from the
RPC's own ``google.api.http`` annotation, so it cannot drift from the route
the shim serves) and the ``confirm`` field, which has the same name in gRPC.
The MCP server words the same facts in terms of its tools (``gateway_mcp.render``).
"""

from __future__ import annotations

from urllib.parse import quote

from google.api import annotations_pb2

from gateway.v1 import kb_pb2

_KNOWLEDGE = kb_pb2.DESCRIPTOR.services_by_name["Knowledge"]


def route(method: str, **params: str) -> str:
    """``"PUT /api/v1/agents/alfred/shared/notes/a%20b"``: the RPC's REST route with the named
    path parameters filled in (percent-encoded); the others stay as ``{field}``."""
    rule = _KNOWLEDGE.methods_by_name[method].GetOptions().Extensions[annotations_pb2.http]
    verb = rule.WhichOneof("pattern")
    template = str(getattr(rule, verb))
    for field, value in params.items():
        template = template.replace("{" + field + "}", quote(value, safe=""))
    return f"{verb.upper()} {template}"


def create_held_back(agent_id: str, message: str, related: list[str]) -> str:
    """A create that found similar notes and wrote nothing: update one, or create with confirm."""
    target = route("UpdateSharedNote", agent_id=agent_id, **({"name": related[0]} if len(related) == 1 else {}))
    return (
        f"{message}. Update {'it' if len(related) == 1 else 'one of them'} with {target}, or send "
        f"{route('CreateSharedNote', agent_id=agent_id)} again with \"confirm\": true to create this note "
        f"linked to {'it' if len(related) == 1 else 'them'}."
    )


def update_held_back(agent_id: str, name: str, warning: str) -> str:
    """An update the line-drop guard held back: edit the current note, or replace it with confirm."""
    return (
        f"{warning}. Edit the note rather than replacing it ({route('GetSharedNote', agent_id=agent_id, name=name)} "
        f"gives its current content), or send the same {route('UpdateSharedNote', agent_id=agent_id, name=name)} "
        "again with \"confirm\": true."
    )


def note_exists(agent_id: str, message: str, name: str) -> str:
    """A create whose name is taken."""
    return f"{message}; update it with {route('UpdateSharedNote', agent_id=agent_id, name=name)}"


def note_missing(agent_id: str, message: str) -> str:
    """An update of a note that does not exist."""
    return f"{message}; create it with {route('CreateSharedNote', agent_id=agent_id)}"
