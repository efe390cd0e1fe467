"""The OpenAPI document: valid OpenAPI 3.0, documented from the protos' comments, named as the docs name them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openapi_spec_validator import OpenAPIV30SpecValidator, validate

from gateway_http.descriptors import all_routes
from gateway_http.openapi import openapi_document
from gateway_http.proto_docs import clean, comments

ROOT = Path(__file__).resolve().parents[2]


def document() -> dict[str, Any]:
    return openapi_document(all_routes())


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def test_the_document_is_valid_openapi_3_0() -> None:
    doc = document()
    validate(doc, cls=OpenAPIV30SpecValidator)  # raises with the offending pointer
    assert doc["servers"] == [{"url": "/", "description": "the REST shim that serves this document"}]


def test_every_operation_has_the_rpcs_comment_as_summary() -> None:
    doc = document()
    for path, method, op in operations(doc):
        assert op.get("summary"), f"{method.upper()} {path} has no summary: comment its rpc in protos/"
    search = doc["paths"]["/api/v1/agents/{agentId}/memory:search"]["get"]
    assert search["summary"] == "Keyword search over the archive (memory_search). Never fails on the query's syntax."
    create = doc["paths"]["/api/v1/agents/{agentId}/shared/notes"]["post"]
    assert create["summary"] == "Create a shared note, unless similar notes exist."
    assert create["description"].startswith("Fails on an exact-name collision (ALREADY_EXISTS).")


def test_fields_and_parameters_carry_their_comments_and_required_marks() -> None:
    doc = document()
    search = doc["paths"]["/api/v1/agents/{agentId}/memory:search"]["get"]
    params = {p["name"]: p for p in search["parameters"]}
    assert params["agentId"]["in"] == "path" and params["agentId"]["required"] is True
    assert params["query"]["required"] is True and "query is required" in params["query"]["description"]
    assert params["limit"] == {"name": "limit", "in": "query", "required": False,
                               "schema": {"type": "integer", "format": "int32"}, "description": "6 by default, at most 20."}
    schemas = doc["components"]["schemas"]
    assert "4 decimals" in schemas["gateway.v1.SearchHit"]["properties"]["score"]["description"]
    body = schemas["gateway.v1.RegisterSessionRequest.Body"]
    assert set(body["properties"]) == {"sessionId", "state"} and body["required"] == ["state"]
    assert body["properties"]["sessionId"]["description"].startswith("Optional")
    pending = schemas["gateway.v1.Session"]["properties"]["pending"]  # a described $ref is wrapped in allOf
    assert pending == {"allOf": [{"$ref": "#/components/schemas/gateway.v1.Directive"}],
                       "description": "The directive the session has not acted on yet, if any."}
    register = doc["paths"]["/api/v1/agents/{agentId}/sessions"]["post"]
    fold = doc["paths"]["/api/v1/agents/{agentId}/memory:fold-retrievals"]["post"]
    assert register["requestBody"]["required"] is True and fold["requestBody"]["required"] is False  # empty body = {}


def test_path_parameters_are_named_as_the_docs_name_them() -> None:
    doc = document()
    declared: set[str] = set()
    for path, _, op in operations(doc):
        in_path = set(re.findall(r"\{([^}]+)\}", path))
        assert in_path == {p["name"] for p in op["parameters"] if p["in"] == "path"}, path
        declared |= in_path
    assert declared == {"agentId", "filename", "name", "project", "sessionId", "tombstoneId"}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    routes = re.findall(r"(?:/api/v1/|…/)[^\s`\"'|]*", text)
    used = {name for route in routes for name in re.findall(r"\{([A-Za-z_]+)\}", route)}
    assert used and used <= declared, f"the docs name path parameters {sorted(used - declared)} the API does not"


def test_comments_are_read_from_the_descriptor_set() -> None:
    assert clean("  First line\n second line.\n\n Next paragraph. \n") == ["First line second line.", "Next paragraph."]
    notes = comments()
    assert notes["gateway.v1.Sessions.RegisterSession"][0].startswith("An agent runtime announces a live session")
    assert notes["gateway.v1.SessionState"] == []  # no comment, no text
    assert notes["gateway.v1.DirectiveKind.DIRECTIVE_KIND_RESTART_NOW"] == [
        "Idle session: restart now so the next message sees the new CLAUDE.md."
    ]


def test_every_status_the_shim_answers_is_documented_with_the_error_body() -> None:
    """No "default" response: each status is listed, so an undocumented one is caught (test_schemathesis)."""
    doc = document()
    with_body = {(path, method) for path, method, op in operations(doc) if "requestBody" in op}
    assert with_body and len(with_body) < len(operations(doc))
    errors = {"400", "401", "403", "404", "409", "429", "500", "503", "504"}
    for path, method, op in operations(doc):
        expected = {"200"} | errors | ({"413"} if (path, method) in with_body else set())
        assert set(op["responses"]) == expected, f"{method.upper()} {path}"
        for status in expected - {"200"}:
            response = op["responses"][status]
            assert response["description"]
            assert response["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/gateway.Error"}}}


def test_request_body_fields_may_be_null_and_replies_are_not() -> None:
    """protojson reads a null field as one left out, so the document says a body field may be null."""
    schemas = document()["components"]["schemas"]
    body = schemas["gateway.v1.RegisterSessionRequest.Body"]["properties"]
    assert body["state"]["nullable"] is True and body["state"]["enum"][-1] is None
    assert body["sessionId"]["nullable"] is True and body["sessionId"]["type"] == "string"
    for name, schema in schemas.items():
        nullable = [key for key, prop in schema.get("properties", {}).items() if prop.get("nullable")]
        if name.endswith(".Body"):
            assert nullable == list(schema["properties"]), name
        else:
            assert nullable == [], name
