"""docs/reference/rest.md: every route of the REST shim, rendered from its OpenAPI document.

The document is ``gateway_http.openapi.openapi_document`` over the shim's own routes, exactly
what ``GET /openapi.json`` serves: summaries, parameters and fields are the protos' comments.
Access (read or write) is what the servicer checks (``access``); messages link to grpc.md.
"""

from __future__ import annotations

from typing import Any

from gateway_cli.docs_reference.access import WRITE, rpc_access
from gateway_cli.docs_reference.grpc_page import route_anchor, rpc_anchor, type_link
from gateway_cli.docs_reference.markdown import code, heading, page, paragraphs, prose, slug, table
from gateway_http.descriptors import Route, all_routes
from gateway_http.openapi import ERROR_RESPONSES, ERROR_SCHEMA, TOO_LARGE, openapi_document, openapi_path

SCHEMAS = "#/components/schemas/"
GRPC_PAGE = "grpc.md"
ACCESS = {
    "read": "any key whose scope covers the agent",
    "write": "a key whose scope covers the agent, with write access",
}


def _ref(schema: dict[str, Any]) -> str | None:
    """The component a schema points to (through a described ``allOf``), or None."""
    if "allOf" in schema:
        schema = schema["allOf"][0]
    ref = schema.get("$ref")
    return ref.removeprefix(SCHEMAS) if isinstance(ref, str) else None


def schema_type(schema: dict[str, Any]) -> str:
    """A property's or parameter's JSON type in words, a message linked to the gRPC page."""
    ref = _ref(schema)
    if ref is not None:
        return type_link(ref.removesuffix(".Body"), GRPC_PAGE)
    if schema.get("type") == "array":
        return f"array of {schema_type(schema['items'])}"
    if "enum" in schema:
        values = [code(str(v)) for v in schema["enum"] if v is not None and not str(v).endswith("_UNSPECIFIED")]
        return "string, one of " + ", ".join(values)
    shown = code(str(schema.get("type", "object")))
    return f"{shown} ({schema['format']})" if "format" in schema else shown


def _fields(schema: dict[str, Any], *, request: bool) -> list[tuple[str, ...]]:
    """Rows of a message schema's properties: name, type, (for a request) required, description."""
    needed = set(schema.get("required", ()))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        marks = ("yes" if name in needed else "",) if request else ()
        rows.append((code(name), schema_type(prop), *marks, prose(prop.get("description", ""))))
    return rows


def _operation(route: Route, op: dict[str, Any], schemas: dict[str, Any], anchor: str) -> list[str]:
    method = route.method
    path = openapi_path(route)
    lines = heading(3, code(f"{route.http_method} {path}"), anchor)
    lines += paragraphs([op.get("summary", ""), op.get("description", "")])
    grpc = f"[{code(method.containing_service.name + '.' + method.name)}]({GRPC_PAGE}#{rpc_anchor(method)})"
    lines += [f"- **Access**: {ACCESS[rpc_access(method)]}", f"- **RPC**: {grpc}", ""]
    for where, title in (("path", "Path parameters"), ("query", "Query parameters")):
        params = [p for p in op["parameters"] if p["in"] == where]
        if params:
            rows = [(code(p["name"]), schema_type(p["schema"]), "yes" if p["required"] else "",
                     prose(p.get("description", "") or p["schema"].get("description", ""))) for p in params]
            lines += [f"**{title}**", "", *table(("name", "type", "required", "description"), rows)]
    if "requestBody" in op:
        body = schemas[_ref(op["requestBody"]["content"]["application/json"]["schema"]) or ""]
        needed = "required" if op["requestBody"]["required"] else "optional: no body reads as `{}`"
        lines += [f"**Request body** (JSON, {needed}; any field may be `null`, read as left out)", ""]
        lines += table(("field", "type", "required", "description"), _fields(body, request=True)) if body.get("properties") else ["`{}`: no fields.", ""]
    answer = _ref(op["responses"]["200"]["content"]["application/json"]["schema"]) or ""
    lines += [f"**Answer** `200`: {type_link(answer, GRPC_PAGE)}", ""]
    if schemas[answer].get("properties"):
        lines += table(("field", "type", "description"), _fields(schemas[answer], request=False))
    return lines


def render() -> str:
    """The whole page."""
    routes = all_routes()
    doc = openapi_document(routes)
    schemas = doc["components"]["schemas"]
    headers = [s.get("name", "Authorization: Bearer") for s in doc["components"]["securitySchemes"].values()]
    seen: set[str] = set()
    index: list[tuple[str, ...]] = []
    body: list[str] = []
    service = ""
    for route in routes:
        method = route.method
        path = openapi_path(route)
        op = doc["paths"][path][route.http_method.lower()]
        anchor = route_anchor(method)
        if anchor in seen:  # a second binding of one RPC
            anchor = slug(anchor, route.http_method)
        seen.add(anchor)
        if method.containing_service.name != service:
            service = method.containing_service.name
            body += heading(2, service, slug("service", service))
        index.append((f"[{code(route.http_method + ' ' + path)}](#{anchor})", prose(op.get("summary", "")),
                      "**write**" if rpc_access(method) == WRITE else "read"))
        body += _operation(route, op, schemas, anchor)
    statuses = sorted({**ERROR_RESPONSES, TOO_LARGE[0]: TOO_LARGE[1]}.items())
    intro = [
        "Every route of the REST shim, from the same document it serves at `GET /openapi.json`. "
        "Bodies and answers are JSON, named as protojson names them (`agentId`); a 64-bit integer is a string. "
        f"Each call presents an API key, as {' or '.join(code(h) for h in headers)}; "
        "its scope must cover the `agentId` of the path, and a route marked **write** also needs a key with write access. "
        "MCP over HTTP is on [its own page](mcp.md).",
        "",
        *table(("route", "summary", "access"), index),
        *heading(2, "Errors", "errors"),
        f"Every error answer has a JSON body with the fields {', '.join(code(f) for f in ERROR_SCHEMA['properties'])}: "
        f"{prose(str(ERROR_SCHEMA['description']))} The statuses every route may answer:",
        "",
        *table(("status", "when"), [(code(status), prose(text)) for status, text in statuses]),
        f"{code(TOO_LARGE[0])} is answered only by routes that take a request body.",
        "",
    ]
    return page("REST API", "the HTTP rules and comments of the `.proto` files in `protos/gateway/v1/`", intro, body)
