"""The web console's API and files on the real suite: GET /api/v1/agents (ListAgents) over REST and
gRPC with each kind of key, the forget calls of the Memory page with the fields it reads, the vault
calls of the Shared vault page's reflection section, and /ui/
over a real socket (headers, raw traversal paths)."""

from __future__ import annotations

import socket

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, wait_until

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import watcher_pb2, watcher_pb2_grpc
from gateway_http.console_files import CSP

pytestmark = pytest.mark.integration


def agents(http: httpx.Client, key: str) -> dict[str, dict]:  # type: ignore[type-arg]
    reply = http.get("/api/v1/agents", headers={"X-Api-Key": key})
    assert reply.status_code == 200, reply.text
    return {a["agentId"]: a for a in reply.json()["agents"]}


def test_each_key_sees_only_its_agents_and_whether_it_may_write(http: httpx.Client) -> None:
    assert {k: a["writable"] for k, a in agents(http, ADMIN_KEY).items()} == {"alfred": True, "bob": True}
    assert {k: a["writable"] for k, a in agents(http, READER_KEY).items()} == {"alfred": False}
    assert {k: a["writable"] for k, a in agents(http, BOB_WRITER_KEY).items()} == {"bob": True}
    assert agents(http, CAROL_KEY) == {}  # its one agent is not configured


@pytest.mark.parametrize("headers", [{}, {"X-Api-Key": "not-a-key"}, {"Authorization": "Bearer not-a-key"}])
def test_a_missing_or_unknown_key_is_401(http: httpx.Client, headers: dict[str, str]) -> None:
    reply = http.get("/api/v1/agents", headers=headers)
    assert reply.status_code == 401 and "agents" not in reply.json()


def test_a_row_has_budgets_sessions_and_the_dream_summary(http: httpx.Client, suite: Suite) -> None:
    put = http.put("/api/v1/agents/alfred/files/MEMORY.md", headers={"X-Api-Key": ADMIN_KEY},
                   json={"content": "# Memory\n\n- the console reads this size\n"})
    assert put.status_code == 200, put.text
    register = http.post("/api/v1/agents/alfred/sessions", headers={"X-Api-Key": ADMIN_KEY},
                         json={"sessionId": "console-s1", "state": "SESSION_STATE_BUSY"})
    assert register.status_code == 200, register.text
    alfred = agents(http, READER_KEY)["alfred"]
    files = {f["name"]: f for f in alfred["files"]}
    assert list(files) == ["MEMORY.md", "USER.md", "CLAUDE.md"]
    assert files["MEMORY.md"]["chars"] == str(len("# Memory\n\n- the console reads this size\n"))
    assert int(files["MEMORY.md"]["budget"]) > 0 and int(files["CLAUDE.md"]["budget"]) == 150_000
    assert [(s["sessionId"], s["state"]) for s in alfred["sessions"]] == [("console-s1", "SESSION_STATE_BUSY")]
    assert int(alfred["lastActivityMs"]) > 0
    dream = alfred["dream"]
    assert dream["known"] and not dream["scheduled"] and dream["pendingProposals"] == 0, dream
    never = (dream["opsApplied"], dream["opsSkipped"], dream["opsProposed"], dream["failuresLast7Days"], dream["promoted"])
    assert never == (0, 0, 0, 0, 0) and dream["notPromoted"] == "" and dream["lastFailureReason"] == "", dream


def test_grpc_list_agents_with_the_internal_token_and_with_a_key(suite: Suite) -> None:
    with grpc.insecure_channel(suite.address("watcher")) as channel:
        stub = watcher_pb2_grpc.SessionsStub(channel)
        internal = stub.ListAgents(watcher_pb2.ListAgentsRequest(), timeout=10,
                                   metadata=((INTERNAL_TOKEN_HEADER, read_internal_token(suite.home)),))
        assert [a.agent_id for a in internal.agents] == ["alfred", "bob"]
        scoped = stub.ListAgents(watcher_pb2.ListAgentsRequest(), timeout=10, metadata=(("x-api-key", BOB_WRITER_KEY),))
        assert [a.agent_id for a in scoped.agents] == ["bob"]
        with pytest.raises(grpc.RpcError) as refused:
            stub.ListAgents(watcher_pb2.ListAgentsRequest(), timeout=10, metadata=(("x-api-key", "nope"),))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_the_forget_calls_answer_what_the_memory_page_reads(http: httpx.Client) -> None:
    """docs/how-to/console.md "Forget a text": the dry run's places (store, path, count, lines),
    the tombstones list, and a message in each refusal the page shows."""
    fact = "Ptolemy Granthorpe parks the blue van behind the chapel"
    put = http.put("/api/v1/agents/bob/files/MEMORY.md", headers={"X-Api-Key": ADMIN_KEY}, json={"content": f"# Memory\n\n- {fact}\n"})
    assert put.status_code == 200, put.text
    dry = http.post("/api/v1/agents/bob/memory:forget", headers={"X-Api-Key": BOB_WRITER_KEY}, json={"text": fact}, timeout=60)
    assert dry.status_code == 200, dry.text
    report = dry.json()
    assert not report.get("applied") and not report.get("tombstoneId") and int(report["matches"]) >= 1, report
    memory = [p for p in report["places"] if (p["store"], p["path"]) == ("workspace", "MEMORY.md")]
    assert [(int(p["count"]), [int(n) for n in p["lines"]]) for p in memory] == [(1, [3])], report
    assert "Granthorpe" not in dry.text  # the page shows the report whole: it never holds the text
    listed = http.get("/api/v1/agents/bob/tombstones", headers={"X-Api-Key": BOB_WRITER_KEY})
    assert listed.status_code == 200 and listed.json().get("tombstones", []) == [], listed.text
    refusals = [
        http.get("/api/v1/agents/alfred/tombstones", headers={"X-Api-Key": READER_KEY}),
        http.post("/api/v1/agents/alfred/memory:forget", headers={"X-Api-Key": READER_KEY}, json={"text": fact}),
        http.post("/api/v1/agents/bob/memory:forget", headers={"X-Api-Key": BOB_WRITER_KEY}, json={"text": fact, "shared": True}),
    ]
    assert [(r.status_code, bool(r.json().get("message"))) for r in refusals] == [(403, True)] * 3, [r.text for r in refusals]
    bad = http.post("/api/v1/agents/bob/memory:forget", headers={"X-Api-Key": BOB_WRITER_KEY}, json={"pattern": "x*"})
    assert bad.status_code == 400 and "empty string" in bad.json()["message"], bad.text
    assert fact in http.get("/api/v1/agents/bob/files/MEMORY.md", headers={"X-Api-Key": ADMIN_KEY}).json()["content"]


def raw_get(suite: Suite, target: str) -> tuple[int, bytes]:
    """GET ``target`` exactly as written (httpx would resolve dot segments): status and raw answer."""
    with socket.create_connection(("127.0.0.1", suite.http_port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize("target", [
    "/ui/../pyproject.toml", "/ui/../../gateway_http/app.py", "/ui/%2e%2e/app.py", "/ui/..%2f..%2fpyproject.toml",
    "/ui/js/../../console_files.py", "/ui/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/ui/....//app.py",
])
def test_no_raw_path_leaves_the_console(suite: Suite, target: str) -> None:
    status, data = raw_get(suite, target)
    assert status in (400, 404), data[:300]
    assert b"import " not in data and b"root:" not in data and b"[project]" not in data


def test_the_console_is_served_with_its_security_headers(http: httpx.Client, suite: Suite) -> None:
    wait_until(lambda: http.get("/healthz").status_code == 200, 10, "the shim")
    redirect = http.get("/ui")
    assert redirect.status_code == 308 and redirect.headers["location"] == "/ui/"
    page = http.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-content-type-options"] == "nosniff" and page.headers["referrer-policy"] == "no-referrer"
    script = http.get("/ui/js/main.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert http.get("/ui/js/main.js", headers={"If-None-Match": script.headers["etag"]}).status_code == 304
    head = http.head("/ui/")  # through the real server: the GET's length, no body
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(page.content))


def test_the_vault_calls_answer_what_the_reflection_section_reads(http: httpx.Client) -> None:
    """docs/how-to/console.md "Vault reflection": the notes' listing names the vault's project, the
    runs list answers ``runs`` to a "*" key, and a scoped key's refusal is a 403 with a message (the
    page explains it instead of the runs)."""
    listed = http.get("/api/v1/agents/alfred/shared/notes", headers={"X-Api-Key": READER_KEY})
    assert listed.status_code == 200 and listed.json()["project"] == "global", listed.text
    runs = http.get("/api/v1/vaults/global/reflection:runs", headers={"X-Api-Key": ADMIN_KEY})
    assert runs.status_code == 200 and runs.json().get("runs", []) == [], runs.text
    refusals = [
        http.get("/api/v1/vaults/global/reflection:runs", headers={"X-Api-Key": READER_KEY}),
        http.post("/api/v1/vaults/global/reflection:run", headers={"X-Api-Key": BOB_WRITER_KEY}, json={"mode": "propose"}),
        http.post("/api/v1/vaults/global/reflection:revert", headers={"X-Api-Key": BOB_WRITER_KEY}, json={"last": True}),
    ]
    assert [(r.status_code, bool(r.json().get("message"))) for r in refusals] == [(403, True)] * 3, [r.text for r in refusals]


def test_a_dreaming_service_that_is_down_leaves_only_the_dream_fields_unknown(http: httpx.Client, suite: Suite) -> None:
    suite.stop("dreaming")  # the module's last test: nothing after it needs dreaming

    def unknown() -> bool:  # the summaries are kept two seconds
        listed = agents(http, ADMIN_KEY)
        return all(not a["dream"]["known"] for a in listed.values())

    wait_until(unknown, 10, "the dream summaries to say the dreaming service is down")
    listed = agents(http, ADMIN_KEY)
    assert set(listed) == {"alfred", "bob"}
    for row in listed.values():
        assert row["dream"]["reason"].startswith("the dreaming service answered UNAVAILABLE"), row["dream"]
        assert [f["name"] for f in row["files"]] == ["MEMORY.md", "USER.md", "CLAUDE.md"]

