"""The Workspace File API through the REST shim, against real processes."""

from __future__ import annotations

import hashlib
import http.client
import json
import shutil
import socket
import subprocess
import threading

import httpx
import pytest
from openapi_spec_validator import OpenAPIV30SpecValidator, validate
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, wait_until, workspace

from gateway_http.descriptors import all_routes
from gateway_http.openapi import openapi_document

pytestmark = pytest.mark.integration

SOUL = "# Soul\n\nAlfred is warm, helpful, and precise."
FILES_URL = "/api/v1/agents/{agent}/files/{name}"
ALLOWED = ["SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "HEARTBEAT.md", "IDENTITY.md"]


def url(agent: str = "alfred", name: str = "SOUL.md") -> str:
    return FILES_URL.format(agent=agent, name=name)


def put(http: httpx.Client, content: object, *, key: str = ADMIN_KEY, agent: str = "alfred", name: str = "SOUL.md") -> httpx.Response:
    return http.put(url(agent, name), headers={"X-Api-Key": key}, json={"content": content})


def assert_error(response: httpx.Response, status: int, grpc_code: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message", "details", "error"}
    assert body["code"] == grpc_code
    assert body["details"] == []
    assert body["error"] == body["message"]
    for fragment in fragments:
        assert fragment in body["message"]


# --- the README's curl examples, verbatim -----------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_spec_curl_examples_verbatim(suite: Suite) -> None:
    base = f"http://localhost:{suite.http_port}"
    put_out = subprocess.run(
        [
            "curl", "-s", "-X", "PUT",
            "-H", "X-Api-Key: admin-key-456",
            "-H", "Content-Type: application/json",
            "-d", '{"content": "# Soul\\n\\nAlfred is warm, helpful, and precise."}',
            f"{base}/api/v1/agents/alfred/files/SOUL.md",
        ],
        capture_output=True, check=True, timeout=30,
    ).stdout
    sha256 = hashlib.sha256(SOUL.encode()).hexdigest()
    assert json.loads(put_out) == {"filename": "SOUL.md", "message": "File saved. CLAUDE.md will auto-reload.", "sha256": sha256,
                                   "warnings": []}
    get_out = subprocess.run(
        ["curl", "-s", "-H", "X-Api-Key: my-secret-key-123", f"{base}/api/v1/agents/alfred/files/SOUL.md"],
        capture_output=True, check=True, timeout=30,
    ).stdout
    assert json.loads(get_out) == {"filename": "SOUL.md", "content": SOUL, "sha256": sha256}
    assert list(json.loads(get_out)) == ["filename", "content", "sha256"]
    assert (workspace(suite, "alfred") / "SOUL.md").read_text() == SOUL


def test_get_missing_file_reads_empty(http: httpx.Client) -> None:
    response = http.get(url(name="HEARTBEAT.md"), headers={"X-Api-Key": READER_KEY})
    assert response.status_code == 200
    assert response.json() == {"filename": "HEARTBEAT.md", "content": "", "sha256": hashlib.sha256(b"").hexdigest()}


def test_every_allowed_name_round_trips(http: httpx.Client, suite: Suite) -> None:
    for name in ALLOWED:
        body = f"# {name}\n\nünïcödé ✓ 記憶\n"
        assert put(http, body, name=name).status_code == 200
        got = http.get(url(name=name), headers={"Authorization": f"Bearer {READER_KEY}"})
        assert got.json() == {"filename": name, "content": body, "sha256": hashlib.sha256(body.encode()).hexdigest()}
        assert (workspace(suite, "alfred") / name).read_text(encoding="utf-8") == body


# --- docs/concepts/apis.md "REST API": the errors -------------------------------------------


@pytest.mark.parametrize("name", ["CLAUDE.md", "NOTES.md", "soul.md"])
def test_name_not_in_allowed_list_is_400_with_the_list(http: httpx.Client, name: str) -> None:
    response = http.get(url(name=name), headers={"X-Api-Key": ADMIN_KEY})
    assert_error(response, 400, 3, "not allowed", *ALLOWED)
    assert_error(put(http, "x", name=name), 400, 3, "not allowed")


@pytest.mark.parametrize("name", ["SOUL.txt", "SOUL.md.bak", "SOUL", ".SOUL.md", "SO UL.md", "SOUL.md~"])
def test_invalid_format_is_400(http: httpx.Client, name: str) -> None:
    assert_error(put(http, "x", name=name), 400, 3, "SOUL.md")


@pytest.mark.parametrize("content", [5, 1.5, True, ["a"], {"a": 1}])
def test_content_not_a_string_is_400(http: httpx.Client, content: object) -> None:
    assert_error(put(http, content), 400, 3, "content")


def test_missing_or_null_content_is_400(http: httpx.Client) -> None:
    for body in ({}, {"content": None}):
        response = http.put(url(), headers={"X-Api-Key": ADMIN_KEY}, json=body)
        assert_error(response, 400, 3, "content is required")
    # a body with no known field at all names the field it lacks
    response = http.put(url(), headers={"X-Api-Key": ADMIN_KEY}, json={"other": "x"})
    assert_error(response, 400, 3, "request body has no field of PutFileRequest (got: other); accepted: content")


def test_empty_content_is_a_valid_write(http: httpx.Client, suite: Suite) -> None:
    assert put(http, "", name="IDENTITY.md").status_code == 200
    assert (workspace(suite, "alfred") / "IDENTITY.md").read_bytes() == b""


def test_read_only_key_cannot_write_403(http: httpx.Client, suite: Suite) -> None:
    before = http.get(url(), headers={"X-Api-Key": READER_KEY}).json()["content"]
    assert_error(put(http, "overwrite", key=READER_KEY), 403, 7, "write access")
    assert http.get(url(), headers={"X-Api-Key": READER_KEY}).json()["content"] == before


def test_unknown_agent_is_404_for_a_key_whose_scope_covers_it(http: httpx.Client) -> None:
    assert_error(http.get(url(agent="zed"), headers={"X-Api-Key": ADMIN_KEY}), 404, 5, "zed")
    assert_error(put(http, "x", agent="zed"), 404, 5, "not found")
    # a key that names carol explicitly, but carol is not configured: 403, as for any agent it does not cover
    assert_error(http.get(url(agent="carol"), headers={"X-Api-Key": CAROL_KEY}), 403, 7, "no access to agent 'carol'")


# --- the 401 / 403 / 404 matrix ---------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"X-Api-Key": ""}, 401),
        ({"X-Api-Key": "not-a-key-at-all"}, 401),
        ({"Authorization": "Bearer not-a-key-at-all"}, 401),
        ({"Authorization": "Basic bXk6a2V5"}, 401),
        ({"Authorization": f"Bearer {READER_KEY}"}, 200),
        ({"X-Api-Key": READER_KEY}, 200),
        ({"X-Api-Key": ADMIN_KEY}, 200),
        ({"X-Api-Key": BOB_WRITER_KEY}, 403),
    ],
)
def test_auth_matrix_on_alfred(http: httpx.Client, headers: dict[str, str], status: int) -> None:
    response = http.get(url(), headers=headers)
    assert response.status_code == status, response.text


def test_keys_cannot_probe_agent_names(http: httpx.Client) -> None:
    """A key without access gets the same 403 for an existing and a missing agent."""
    existing = http.get(url(agent="bob"), headers={"X-Api-Key": READER_KEY})
    missing = http.get(url(agent="zed"), headers={"X-Api-Key": READER_KEY})
    assert existing.status_code == missing.status_code == 403
    assert existing.json()["message"].replace("bob", "X") == missing.json()["message"].replace("zed", "X")


def test_scoped_writer_writes_its_agent_only(http: httpx.Client, suite: Suite) -> None:
    assert put(http, "bob soul", key=BOB_WRITER_KEY, agent="bob").status_code == 200
    assert (workspace(suite, "bob") / "SOUL.md").read_text() == "bob soul"
    assert_error(put(http, "x", key=BOB_WRITER_KEY, agent="alfred"), 403, 7)


# --- the 1 MiB boundary ------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "ok"),
    [
        ("a" * 1_048_576, True),
        ("a" * 1_048_577, False),
        ("é" * 524_288, True),  # 2 bytes each: exactly 1,048,576 bytes
        ("é" * 524_288 + "a", False),
        ("€" * 349_525 + "a", True),  # 3 × 349,525 + 1 = 1,048,576
        ("€" * 349_526, False),
        ("😀" * 262_144, True),  # 4 bytes each
        ("😀" * 262_144 + "a", False),
    ],
)
def test_one_mebibyte_boundary_counts_utf8_bytes(http: httpx.Client, suite: Suite, content: str, ok: bool) -> None:
    response = put(http, content, name="MEMORY.md")
    if ok:
        assert response.status_code == 200, response.text
        assert (workspace(suite, "alfred") / "MEMORY.md").read_text(encoding="utf-8") == content
    else:
        assert_error(response, 400, 3, "1048576")
        assert (workspace(suite, "alfred") / "MEMORY.md").read_text(encoding="utf-8") != content


def test_oversized_body_is_413_before_it_is_read(suite: Suite) -> None:
    """Headers claiming a huge body get 413 at once; the body is never sent."""
    with socket.create_connection(("127.0.0.1", suite.http_port), timeout=10) as sock:
        sock.sendall(
            b"PUT /api/v1/agents/alfred/files/SOUL.md HTTP/1.1\r\nHost: x\r\n"
            b"X-Api-Key: admin-key-456\r\nContent-Type: application/json\r\n"
            b"Content-Length: 104857600\r\n\r\n"
        )
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 413"), head[:100]


def test_oversized_chunked_body_is_413(suite: Suite) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"content": "'
        for _ in range(8):
            yield b"a" * 1_048_576
        yield b'"}'

    with httpx.Client(base_url=suite.base_url, timeout=30) as client:
        response = client.put(url(), headers={"X-Api-Key": ADMIN_KEY}, content=chunks())
    assert_error(response, 413, 8, "larger than")


# --- traversal ---------------------------------------------------------------


@pytest.mark.parametrize(
    "raw_name",
    ["..%2F..%2Fconfig.json", "..%2fSOUL.md", "%2e%2e", "..%5CSOUL.md", "SOUL.md%00", "%2Fetc%2Fpasswd", "SOUL%2Emd%2F", "%252e%252e%252fSOUL.md"],
)
def test_traversal_names_are_400(suite: Suite, raw_name: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", suite.http_port, timeout=10)
    conn.request("GET", f"/api/v1/agents/alfred/files/{raw_name}", headers={"X-Api-Key": ADMIN_KEY})
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 400, (raw_name, body)
    assert body["code"] == 3


@pytest.mark.parametrize("raw_path", ["/api/v1/agents/alfred/files/../SOUL.md", "/api/v1/agents/../agents/alfred/files/SOUL.md", "/api/v1/agents/alfred/files/./SOUL.md"])
def test_dot_segments_in_the_path_are_400(suite: Suite, raw_path: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", suite.http_port, timeout=10)
    conn.request("PUT", raw_path, body=b'{"content":"x"}', headers={"X-Api-Key": ADMIN_KEY})
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 400, body
    assert not (suite.home / "agents" / "SOUL.md").exists()


# --- shim behaviour ----------------------------------------------------------


def test_unknown_fields_are_ignored(http: httpx.Client, suite: Suite) -> None:
    response = http.put(url(name="AGENTS.md"), headers={"X-Api-Key": ADMIN_KEY}, json={"content": "agents", "mood": "happy", "agentId": "bob"})
    assert response.status_code == 200
    assert (workspace(suite, "alfred") / "AGENTS.md").read_text() == "agents"  # the path wins over the body
    assert not (workspace(suite, "bob") / "AGENTS.md").exists()


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_invalid_json_is_400(http: httpx.Client, body: bytes) -> None:
    response = http.put(url(), headers={"X-Api-Key": ADMIN_KEY, "Content-Type": "application/json"}, content=body)
    assert_error(response, 400, 3)


def test_unknown_route_is_404_json(http: httpx.Client) -> None:
    for path in ("/nope", "/api/v1/agents/alfred", "/api/v1/agents/alfred/files", "/api/v2/agents/alfred/files/SOUL.md"):
        assert_error(http.get(path, headers={"X-Api-Key": ADMIN_KEY}), 404, 5, "no route")


def test_wrong_method_is_405_with_allow(http: httpx.Client) -> None:
    response = http.post(url(), headers={"X-Api-Key": ADMIN_KEY}, json={"content": "x"})
    assert_error(response, 405, 12)
    assert response.headers["allow"] == "GET, PUT"
    assert http.delete(url(), headers={"X-Api-Key": ADMIN_KEY}).status_code == 405


def test_healthz_reports_backends(http: httpx.Client) -> None:
    response = http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "backends": {"dreaming": "SERVING", "file_api": "SERVING", "kb": "SERVING", "watcher": "SERVING"}}


def test_openapi_is_generated_from_the_protos(http: httpx.Client) -> None:
    served = http.get("/openapi.json")
    assert served.status_code == 200 and served.headers["content-type"] == "application/json"
    doc = served.json()
    validate(doc, cls=OpenAPIV30SpecValidator)  # what is really served is valid OpenAPI 3.0
    assert doc == openapi_document(all_routes())
    assert doc["openapi"].startswith("3.") and doc["servers"][0]["url"] == "/"
    ops = doc["paths"]["/api/v1/agents/{agentId}/files/{filename}"]
    assert set(ops) == {"get", "put"}
    assert ops["get"]["operationId"] == "WorkspaceFiles_GetFile"
    assert ops["get"]["summary"] == 'Read a workspace file. A file that does not exist yet reads as "".'
    body_ref = ops["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body_schema = doc["components"]["schemas"][body_ref.rsplit("/", 1)[-1]]
    assert set(body_schema["properties"]) == {"content", "expectedSha256"}
    assert doc["components"]["securitySchemes"]["ApiKeyAuth"] == {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
    assert {"ApiKeyAuth": []} in doc["security"]


def test_concurrent_puts_leave_exactly_one_whole_content(suite: Suite) -> None:
    contents = [f"writer {i}\n" + chr(0x41 + i) * 300_000 for i in range(12)]
    errors: list[str] = []

    def writer(content: str) -> None:
        with httpx.Client(base_url=suite.base_url, timeout=30) as client:
            for _ in range(3):
                response = client.put(url(name="MEMORY.md"), headers={"X-Api-Key": ADMIN_KEY}, json={"content": content})
                if response.status_code != 200:
                    errors.append(response.text)

    threads = [threading.Thread(target=writer, args=(c,)) for c in contents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = (workspace(suite, "alfred") / "MEMORY.md").read_text()
    assert final in contents
    # the file API's own temp files (the watcher may be mid-write of CLAUDE.md)
    leftovers = [p.name for p in workspace(suite, "alfred").iterdir() if p.name.startswith(".MEMORY.md.")]
    assert leftovers == []


def test_rpc_log_lines_never_contain_keys(http: httpx.Client, suite: Suite) -> None:
    http.get(url(), headers={"X-Api-Key": READER_KEY})
    put(http, "logged?", name="USER.md")
    http.get(url(), headers={"X-Api-Key": "wrong-key-should-not-be-logged"})

    def refused_call_logged() -> bool:
        return any(
            line.get("event") == "rpc" and line["method"] == "GetFile" and line["code"] == "UNAUTHENTICATED"
            for line in suite.log_lines("file_api")
        )

    wait_until(refused_call_logged, 10, "the refused call's log line")  # logged just after the reply
    raw = suite.log_path("file_api").read_text() + suite.log_path("http").read_text()
    for secret in (READER_KEY, ADMIN_KEY, "wrong-key-should-not-be-logged", "logged?"):
        assert secret not in raw
    rpc_lines = [line for line in suite.log_lines("file_api") if line.get("event") == "rpc"]
    refused = [l for l in rpc_lines if l["code"] == "UNAUTHENTICATED" and l["method"] == "GetFile"][-1]
    assert {"method", "agent", "code", "ms", "service", "timestamp"} <= set(refused)
    assert refused["agent"] == "alfred" and refused["service"] == "file_api"
