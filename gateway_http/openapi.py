"""OpenAPI 3 document generated from the same routes the shim serves.

Operation summaries and descriptions, and the descriptions of fields and
parameters, are the protos' comments (``proto_docs``); a field marked
``(google.api.field_behavior) = REQUIRED`` is a required property or query
parameter, as grpc-gateway's generator marks it. Path parameters are
named by their JSON names (``{agentId}``), as the docs write them; the shim
matches the same segments whatever the name.
"""

from __future__ import annotations

from typing import Any

from google.api import field_behavior_pb2
from google.protobuf import descriptor

from gateway.files_limits import MAX_BODY_BYTES
from gateway_http.descriptors import Route
from gateway_http.proto_docs import comments

FD = descriptor.FieldDescriptor

_SCALARS: dict[int, dict[str, Any]] = {
    FD.TYPE_STRING: {"type": "string"},
    FD.TYPE_BYTES: {"type": "string", "format": "byte"},
    FD.TYPE_BOOL: {"type": "boolean"},
    FD.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FD.TYPE_FLOAT: {"type": "number", "format": "float"},
    FD.TYPE_INT32: {"type": "integer", "format": "int32"},
    FD.TYPE_SINT32: {"type": "integer", "format": "int32"},
    FD.TYPE_SFIXED32: {"type": "integer", "format": "int32"},
    FD.TYPE_UINT32: {"type": "integer", "format": "int64"},
    FD.TYPE_FIXED32: {"type": "integer", "format": "int64"},
    # protojson writes 64-bit integers as strings
    FD.TYPE_INT64: {"type": "string", "format": "int64"},
    FD.TYPE_SINT64: {"type": "string", "format": "int64"},
    FD.TYPE_SFIXED64: {"type": "string", "format": "int64"},
    FD.TYPE_UINT64: {"type": "string", "format": "uint64"},
    FD.TYPE_FIXED64: {"type": "string", "format": "uint64"},
}

ERROR_SCHEMA = {
    "type": "object",
    "description": "grpc-gateway's error body; 'error' repeats 'message' for clients of the documented API.",
    "properties": {
        "code": {"type": "integer", "description": "gRPC status code"},
        "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}},
        "error": {"type": "string"},
    },
    "required": ["code", "message", "details", "error"],
}


# Every status the shim answers for a documented operation, and when (docs/architecture.md "REST mapping"; the
# gRPC → HTTP table is gateway_http/errors.py). Listed one by one, rather than as a "default"
# response, so that a client, and the schemathesis test, can tell an undocumented status.
ERROR_RESPONSES: dict[str, str] = {
    "400": "Invalid input (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE): the message names what was wrong.",
    "401": "No API key, or a key the gateway does not know (UNAUTHENTICATED).",
    "403": "The key does not cover this agent, or is read-only and the call writes (PERMISSION_DENIED).",
    "404": "No such agent, or no such thing of the agent's (NOT_FOUND).",
    "409": "A name that exists already (ALREADY_EXISTS), or a concurrent operation in the way (ABORTED).",
    "429": "A limit was reached (RESOURCE_EXHAUSTED).",
    "500": "A bug in the gateway, never the input (INTERNAL, UNKNOWN, DATA_LOSS); the detail is in the service's log.",
    "503": "The backend service is not reachable; try again shortly (UNAVAILABLE).",
    "504": "The backend did not answer in time (DEADLINE_EXCEEDED).",
}
CHALLENGE_HEADER = {
    "description": 'RFC 6750\'s challenge: Bearer realm="claude-gateway", with error="invalid_token" and '
                   "error_description when the key was refused, bare when none was sent.",
    "schema": {"type": "string"},
}
TOO_LARGE = (
    "413",
    f"The request body is larger than {MAX_BODY_BYTES} bytes (room for a 1 MB content, escaped); refused before it is read whole.",
)


def _error_responses(with_body: bool) -> dict[str, Any]:
    """The documented error responses of an operation; 413 only where the route reads a body."""
    texts = dict(ERROR_RESPONSES)
    if with_body:
        texts[TOO_LARGE[0]] = TOO_LARGE[1]
    ref = {"$ref": "#/components/schemas/gateway.Error"}
    out: dict[str, Any] = {status: {"description": texts[status], "content": {"application/json": {"schema": ref}}}
                           for status in sorted(texts)}
    out["401"]["headers"] = {"WWW-Authenticate": CHALLENGE_HEADER}
    return out


def _required(field: descriptor.FieldDescriptor) -> bool:
    """Whether the proto marks ``field`` as REQUIRED (google.api.field_behavior)."""
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviors


def _text(full_name: str) -> str:
    """The comment of a proto element as one string, paragraphs separated by blank lines ("" if none)."""
    return "\n\n".join(comments().get(full_name, []))


def _field_schema(field: descriptor.FieldDescriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    if field.type == FD.TYPE_MESSAGE:
        _message_schema(field.message_type, schemas)
        item: dict[str, Any] = {"$ref": f"#/components/schemas/{field.message_type.full_name}"}
    elif field.type == FD.TYPE_ENUM:
        item = {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    else:
        item = dict(_SCALARS[field.type])
    schema = {"type": "array", "items": item} if field.is_repeated else item
    about = _text(field.full_name)
    if about:
        # OpenAPI 3.0 ignores siblings of $ref: a described reference is wrapped in allOf.
        schema = {"allOf": [schema], "description": about} if "$ref" in schema else {**schema, "description": about}
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes ``null``: protojson reads a ``null`` field as the field left out.

    OpenAPI 3.0 has ``nullable``; an ``enum`` must list ``null`` itself for it to be valid.
    """
    out = {**schema, "nullable": True}
    if "enum" in out:
        out["enum"] = [*out["enum"], None]
    return out


def _message_schema(
    message: descriptor.Descriptor, schemas: dict[str, Any], skip: tuple[str, ...] = (), *, request: bool = False
) -> str:
    """The component name of ``message``'s schema, added to ``schemas`` with the messages it uses.

    ``request`` is a request body (``<message>.Body``, without the ``skip`` fields that come
    from the path): there, every field may also be ``null``, which the shim reads as absent.
    """
    name = f"{message.full_name}.Body" if request else message.full_name
    if name in schemas:
        return name
    schemas[name] = {}  # placeholder against recursion
    fields = [f for f in message.fields if f.name not in skip]
    properties = {f.json_name: _field_schema(f, schemas) for f in fields}
    if request:
        properties = {key: _nullable(value) for key, value in properties.items()}
    schemas[name] = {"type": "object", "properties": properties}
    if required := [f.json_name for f in fields if _required(f)]:
        schemas[name]["required"] = required
    if about := _text(message.full_name):
        schemas[name]["description"] = about
    return name


def openapi_path(route: Route) -> str:
    """The route's path template with each variable named by its field's JSON name (``{agentId}``);
    ``{field=**}`` becomes ``{field}`` and a ``:verb`` stays as written, like grpc-gateway."""
    fields = route.method.input_type.fields_by_name
    parts = []
    for seg in route.segments:
        if seg.literal is not None:
            parts.append(seg.literal)
        else:
            parts.append("{" + fields[seg.field or ""].json_name + "}" + (f":{seg.verb}" if seg.verb else ""))
    return "/" + "/".join(parts)


def _parameter(field: descriptor.FieldDescriptor, where: str, schemas: dict[str, Any]) -> dict[str, Any]:
    schema = _field_schema(field, schemas)
    about = schema.pop("description", "") if "allOf" not in schema else ""
    required = where == "path" or _required(field)
    out: dict[str, Any] = {"name": field.json_name, "in": where, "required": required, "schema": schema}
    if about:
        out["description"] = about
    return out


def _documented(operation: dict[str, Any], method: descriptor.MethodDescriptor) -> dict[str, Any]:
    """``operation`` with the RPC's comment: its first paragraph as summary, the rest as description."""
    paragraphs = comments().get(method.full_name, [])
    if paragraphs:
        operation = {"summary": paragraphs[0], **operation}
    if len(paragraphs) > 1:
        operation["description"] = "\n\n".join(paragraphs[1:])
    return operation


def openapi_document(routes: tuple[Route, ...]) -> dict[str, Any]:
    """The OpenAPI 3.0 description of ``routes``, with the API-key security schemes."""
    schemas: dict[str, Any] = {"gateway.Error": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for route in routes:
        method = route.method
        inputs = method.input_type.fields_by_name
        operation: dict[str, Any] = {
            "operationId": f"{method.containing_service.name}_{method.name}",
            "tags": [method.containing_service.name],
            "parameters": [_parameter(inputs[f], "path", schemas) for f in route.path_fields],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{_message_schema(method.output_type, schemas)}"}
                        }
                    },
                },
                **_error_responses(bool(route.body)),
            },
        }
        if route.body == "*":
            body_name = _message_schema(method.input_type, schemas, skip=route.path_fields, request=True)
            operation["requestBody"] = {
                # The shim reads a missing body as {}, like grpc-gateway: it is needed only for a required field.
                "required": bool(schemas[body_name].get("required")),
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body_name}"}}},
            }
        elif not route.body:
            for field in method.input_type.fields:
                if field.name in route.path_fields or field.type == FD.TYPE_MESSAGE:
                    continue
                operation["parameters"].append(_parameter(field, "query", schemas))
        paths.setdefault(openapi_path(route), {})[route.http_method.lower()] = _documented(operation, method)
    return {
        "openapi": "3.0.3",
        "info": {"title": "Claude gateway REST API", "version": "v1"},
        "servers": [{"url": "/", "description": "the REST shim that serves this document"}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "ApiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "BearerAuth": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"ApiKeyAuth": []}, {"BearerAuth": []}],
    }
