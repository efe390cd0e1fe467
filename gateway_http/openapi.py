"""OpenAPI 3 document generated from the same routes the shim serves."""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor

from gateway_http.descriptors import Route

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


def _field_schema(field: descriptor.FieldDescriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    if field.type == FD.TYPE_MESSAGE:
        _message_schema(field.message_type, schemas)
        item: dict[str, Any] = {"$ref": f"#/components/schemas/{field.message_type.full_name}"}
    elif field.type == FD.TYPE_ENUM:
        item = {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    else:
        item = dict(_SCALARS[field.type])
    if field.is_repeated:
        return {"type": "array", "items": item}
    return item


def _message_schema(message: descriptor.Descriptor, schemas: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    name = message.full_name if not skip else f"{message.full_name}.Body"
    if name in schemas:
        return name
    schemas[name] = {}  # placeholder against recursion
    props = {f.json_name: _field_schema(f, schemas) for f in message.fields if f.name not in skip}
    schemas[name] = {"type": "object", "properties": props}
    return name


def openapi_document(routes: tuple[Route, ...]) -> dict[str, Any]:
    """The OpenAPI 3.0 description of ``routes``, with the API-key security schemes."""
    schemas: dict[str, Any] = {"gateway.Error": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for route in routes:
        method = route.method
        path = route.template.replace("=**}", "}")  # {name}:verb stays as written, like grpc-gateway
        operation: dict[str, Any] = {
            "operationId": f"{method.containing_service.name}_{method.name}",
            "tags": [method.containing_service.name],
            "parameters": [
                {"name": f, "in": "path", "required": True, "schema": {"type": "string"}} for f in route.path_fields
            ],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{_message_schema(method.output_type, schemas)}"}
                        }
                    },
                },
                "default": {
                    "description": "Error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/gateway.Error"}}},
                },
            },
        }
        if route.body == "*":
            body_name = _message_schema(method.input_type, schemas, skip=route.path_fields)
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body_name}"}}},
            }
        elif not route.body:
            for field in method.input_type.fields:
                if field.name in route.path_fields or field.type == FD.TYPE_MESSAGE:
                    continue
                operation["parameters"].append(
                    {"name": field.json_name, "in": "query", "required": False, "schema": _field_schema(field, schemas)}
                )
        paths.setdefault(path, {})[route.http_method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "Claude gateway REST API", "version": "v1"},
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
