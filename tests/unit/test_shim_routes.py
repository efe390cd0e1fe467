"""Routes, path matching and transcoding of the REST shim, without a network."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest

from gateway.channels import DEFAULT_DEADLINE_S, DREAM_RUN_DEADLINE_S, FORGET_DEADLINE_S, KB_FORGET_DEADLINE_S
from gateway.files_limits import MAX_BODY_BYTES, MAX_CONTENT_BYTES
from gateway.v1 import files_pb2
from gateway_http.app import LONG_DEADLINES, deadline
from gateway_http.descriptors import all_routes
from gateway_http.errors import HTTP_STATUS, error_body
from gateway_http.openapi import openapi_document
from gateway_http.router import BadPath, Router, split_path
from gateway_http.transcode import BadRequest, build_request, parse_body, render

import grpc


def route(method: str):  # type: ignore[no-untyped-def]
    [found] = [r for r in all_routes() if r.method.name == method]
    return found


# The expectation is read from the .proto text itself, not through the descriptors the shim uses,
# so a route the shim drops, invents or misreads (method, template, body, backend) shows up here.
PROTO_DIR = Path(__file__).resolve().parents[2] / "protos" / "gateway" / "v1"
BACKEND_OF_FILE = {"files.proto": "file_api", "watcher.proto": "watcher", "kb.proto": "kb", "dreaming.proto": "dreaming"}
_SERVICE = re.compile(r"^service (\w+) \{(.*?)^\}", re.S | re.M)
_RPC = re.compile(r"\brpc (\w+)\s*\([^)]*\)\s*returns\s*\([^)]*\)\s*(\{.*?\n  \}|;)", re.S)
_HTTP = re.compile(r'option \(google\.api\.http\) = \{\s*(get|put|post|delete|patch): "([^"]+)"(?:\s*body: "([^"]*)")?\s*\};')


def proto_text_routes() -> set[tuple[str, str, str, str, str]]:
    """(full RPC name, HTTP method, template, body, backend) of every annotated RPC, from the .proto files."""
    found = set()
    for path in sorted(PROTO_DIR.glob("*.proto")):
        text = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8"))
        package = re.search(r"^package ([\w.]+);", text, re.M)
        for service, body in _SERVICE.findall(text):
            for rpc, block in _RPC.findall(body):
                rule = _HTTP.search(block)
                if rule and package:
                    verb, template, http_body = rule.groups()
                    found.add((f"{package.group(1)}.{service}.{rpc}", verb.upper(), template, http_body or "",
                               BACKEND_OF_FILE[path.name]))
    return found


def test_every_annotated_rpc_has_a_route_and_a_backend() -> None:
    expected = proto_text_routes()
    assert len(expected) == 37  # 2 files, 7 watcher, 14 KB, 14 dreaming: a parser that finds nothing fails here
    routed = {(r.method.full_name, r.http_method, r.template, r.body, r.backend) for r in all_routes()}
    assert routed == expected


def test_file_routes_come_from_the_annotations() -> None:
    get, put = route("GetFile"), route("PutFile")
    assert (get.http_method, get.template, get.body) == ("GET", "/api/v1/agents/{agent_id}/files/{filename}", "")
    assert (put.http_method, put.body, put.backend) == ("PUT", "*", "file_api")
    assert put.grpc_path == "/gateway.v1.WorkspaceFiles/PutFile"


def test_a_dreaming_run_gets_the_deadline_of_a_run_and_other_calls_the_default() -> None:
    # RunNow waits for the reviewer (120 s by default): the default deadline would cut it short.
    assert deadline(route("RunNow")) == deadline(route("AcceptProposals")) == DREAM_RUN_DEADLINE_S
    assert deadline(route("RevertDream")) == deadline(route("GetDreamStatus")) == DEFAULT_DEADLINE_S
    assert deadline(route("PutFile")) == DEFAULT_DEADLINE_S
    # A forget waits for the KB's reindex and VACUUM, longer than the KB's own deadline for it.
    assert deadline(route("Forget")) == FORGET_DEADLINE_S > KB_FORGET_DEADLINE_S
    assert deadline(route("ListTombstones")) == DEFAULT_DEADLINE_S
    assert set(LONG_DEADLINES) <= {r.grpc_path for r in all_routes()}  # no typo in the table


def test_router_matches_and_reports_allowed_methods() -> None:
    router = Router(all_routes())
    match, _ = router.match("GET", ["api", "v1", "agents", "alfred", "files", "SOUL.md"])
    assert match is not None and match.params == {"agent_id": "alfred", "filename": "SOUL.md"}
    none, allowed = router.match("DELETE", ["api", "v1", "agents", "alfred", "files", "SOUL.md"])
    assert none is None and allowed == ["GET", "PUT"]
    assert router.match("GET", ["api", "v1", "agents", "alfred", "files"]) == (None, [])
    assert router.match("GET", ["api", "v1", "agents", "", "files", "SOUL.md"]) == (None, [])


def test_split_path_decodes_per_segment() -> None:
    assert split_path(b"/a/b%2Fc/d") == ["a", "b/c", "d"]
    assert split_path(b"/a/b/") == ["a", "b"]
    for bad in (b"/a/../b", b"/a/%2e%2e/b", b"/a/./b", b"/a/b%00", b"/a/%ff", "/a/é".encode()):
        with pytest.raises(BadPath):
            split_path(bad)


def test_build_request_path_wins_and_unknown_fields_are_ignored() -> None:
    message = build_request(route("PutFile"), {"agent_id": "alfred", "filename": "SOUL.md"},
                            {"content": "x", "agentId": "bob", "unknown": [1]}, [])
    assert isinstance(message, files_pb2.PutFileRequest)
    assert (message.agent_id, message.filename, message.content) == ("alfred", "SOUL.md", "x")


@pytest.mark.parametrize(("body", "fragment"), [({"content": 1}, "content: must be a string, got a number"),
                                                ({"content": True}, "got a boolean"), ({"content": {}}, "got an object"),
                                                ([], "must be a JSON object")])
def test_build_request_names_the_bad_field(body: object, fragment: str) -> None:
    with pytest.raises(BadRequest, match=fragment):
        build_request(route("PutFile"), {"agent_id": "a", "filename": "SOUL.md"}, body, [])


def test_parse_body_errors() -> None:
    assert parse_body(b'{"a": 1}') == {"a": 1}
    assert parse_body(b"") == parse_body(b" \r\n") == {}  # an empty body is {}, as grpc-gateway reads it
    for raw, fragment in ((b"{", "invalid JSON at line 1"), (b"\xff", "UTF-8")):
        with pytest.raises(BadRequest, match=fragment):
            parse_body(raw)


def test_render_is_protojson_with_empty_fields_printed() -> None:
    assert render(files_pb2.GetFileResponse(filename="SOUL.md")) == b'{"filename":"SOUL.md","content":"","sha256":""}'
    assert json.loads(render(files_pb2.GetFileResponse(filename="a", content="é"))) == {"filename": "a", "content": "é", "sha256": ""}


def test_status_table_is_grpc_gateways() -> None:
    expected = {"INVALID_ARGUMENT": 400, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
                "ALREADY_EXISTS": 409, "FAILED_PRECONDITION": 400, "RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503,
                "DEADLINE_EXCEEDED": 504, "INTERNAL": 500, "UNKNOWN": 500}
    for name, status in expected.items():
        assert HTTP_STATUS[grpc.StatusCode[name]] == status


def test_error_body_shape() -> None:
    body = json.loads(error_body(grpc.StatusCode.NOT_FOUND, "agent 'x' not found"))
    assert body == {"code": 5, "message": "agent 'x' not found", "details": [], "error": "agent 'x' not found"}


def test_body_limit_fits_a_worst_case_escaped_megabyte() -> None:
    worst = json.dumps({"content": "\x01" * MAX_CONTENT_BYTES})
    assert len(worst.encode()) <= MAX_BODY_BYTES < 8 * 1024 * 1024


def test_openapi_covers_every_route() -> None:
    doc = openapi_document(all_routes())
    # grpc-gateway names a path variable by its field's JSON name: {agent_id} -> {agentId}.
    camel = functools.partial(re.sub, r"_([a-z])", lambda m: m.group(1).upper())
    expected = {(camel(template), method.lower()) for _, method, template, _, _ in proto_text_routes()}
    documented = {(path, verb) for path, item in doc["paths"].items() for verb in item
                  if verb in {"get", "put", "post", "delete", "patch"}}
    assert documented == expected
    assert "gateway.v1.GetFileResponse" in doc["components"]["schemas"]


def test_lone_surrogates_are_refused_not_stored() -> None:
    with pytest.raises(BadRequest, match="lone surrogate"):  # by the decode step, before any message
        parse_body(b'{"content": "bad \\ud800 half"}')


def test_non_string_bodies_take_the_general_parser() -> None:
    message = build_request(route("Refresh"), {"agent_id": "a"}, {"wait": True}, [])
    assert message.wait is True and message.agent_id == "a"


def test_custom_verbs_match_before_plain_variables() -> None:
    router = Router(all_routes())
    retire, _ = router.match("POST", ["api", "v1", "agents", "a", "shared", "notes", "my note:retire"])
    assert retire is not None and retire.route.method.name == "RetireSharedNote"
    assert retire.params == {"agent_id": "a", "name": "my note"}
    get, _ = router.match("GET", ["api", "v1", "agents", "a", "shared", "notes", "my note"])
    assert get is not None and get.route.method.name == "GetSharedNote"
    none, _ = router.match("POST", ["api", "v1", "agents", "a", "shared", "notes", ":retire"])
    assert none is None
