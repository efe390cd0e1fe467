"""Session lineage with real processes: a PUT, a session, another PUT, a restart directive, GetLineage over REST and gRPC."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, make_home, wait_claude, wait_until, workspace
from test_watcher import DirectiveStream, put

from gateway.v1 import watcher_pb2, watcher_pb2_grpc

pytestmark = pytest.mark.integration

pb = watcher_pb2


@pytest.fixture(scope="module")
def lsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("lineage"), [{"id": "alfred"}, {"id": "bob"}])
    for agent in ("alfred", "bob"):
        (home / "agents" / agent / "workspace").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "watcher", "http")
        yield running
    finally:
        running.stop_all()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lineage(suite: Suite, agent: str = "alfred", key: str = READER_KEY) -> httpx.Response:
    return httpx.get(f"{suite.base_url}/api/v1/agents/{agent}/lineage", headers={"X-Api-Key": key}, timeout=10)


def register(suite: Suite, session: str) -> None:
    response = httpx.post(f"{suite.base_url}/api/v1/agents/alfred/sessions", headers={"X-Api-Key": ADMIN_KEY},
                          json={"sessionId": session, "state": "SESSION_STATE_IDLE"}, timeout=10)
    assert response.status_code == 200, response.text


def newest(suite: Suite, agent: str) -> dict[str, Any]:
    compositions = lineage(suite, agent, ADMIN_KEY).json()["compositions"]
    return compositions[0] if compositions else {"sources": [{}] * 6}


def soul(composition: dict[str, Any]) -> dict[str, Any]:
    return composition["sources"][0]  # SOUL.md: sources come in section order


def source(session: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in session["sources"] if s["name"] == name)


def test_lineage_names_the_sessions_revision_until_a_restart_directive_and_a_new_registration(lsuite: Suite) -> None:
    old, new = "# Memory\n\n- the user likes tea\n", "# Memory\n\n- the user likes coffee\n"
    put(lsuite, "alfred", "MEMORY.md", old)
    wait_claude(lsuite, "alfred", "likes tea")
    register(lsuite, "s1")
    stream = DirectiveStream(lsuite, "alfred")
    try:
        put(lsuite, "alfred", "MEMORY.md", new)  # a memory write: no directive, s1 keeps its CLAUDE.md
        wait_claude(lsuite, "alfred", "likes coffee")
        answer = lineage(lsuite)
        assert answer.status_code == 200, answer.text
        (s1,) = answer.json()["sessions"]
        memory = source(s1, "MEMORY.md")
        assert s1["sessionId"] == "s1" and memory["differs"] is True
        assert memory["revision"]["sha256"] == sha(old) and memory["today"]["sha256"] == sha(new)
        assert memory["revision"]["origin"]["kind"] == "ORIGIN_KIND_PUT"
        assert memory["revision"]["origin"]["description"].startswith("PUT at ")
        assert "-- the user likes tea\n" in memory["diff"] and "+- the user likes coffee\n" in memory["diff"]
        # The composition is recorded just after CLAUDE.md is written: newest first, sources in section order.
        wait_until(lambda: newest(lsuite, "alfred")["sources"][4]["sha256"] == sha(new), 10, "the new composition")
        assert any(c["id"] == s1["composition"]["id"] for c in lineage(lsuite).json()["compositions"][1:])

        put(lsuite, "alfred", "HEARTBEAT.md", "beat\n")  # restart now for the idle session
        directive = stream.next()
        assert directive.session_id == "s1" and directive.kind == pb.DIRECTIVE_KIND_RESTART_NOW
    finally:
        stream.close()
    register(lsuite, "s1")  # the runtime restarted it on the new CLAUDE.md
    (s1,) = lineage(lsuite).json()["sessions"]
    assert source(s1, "MEMORY.md")["revision"]["sha256"] == sha(new)
    assert not any(s.get("differs") for s in s1["sources"])
    assert source(s1, "HEARTBEAT.md")["revision"]["origin"]["kind"] == "ORIGIN_KIND_PUT"


def test_a_file_edited_on_disk_has_an_unknown_origin(lsuite: Suite) -> None:
    (workspace(lsuite, "bob") / "SOUL.md").write_text("# Soul\n\nedited by hand\n", encoding="utf-8")
    wait_claude(lsuite, "bob", "edited by hand")
    wait_until(lambda: soul(newest(lsuite, "bob"))["sha256"] == sha("# Soul\n\nedited by hand\n"), 10, "bob's new composition")
    origin = soul(newest(lsuite, "bob"))["origin"]
    assert (origin["kind"], origin["description"]) == ("ORIGIN_KIND_UNKNOWN", "unknown (edited on disk)")
    assert (lsuite.home / "agents" / "bob" / "lineage" / "revisions" / sha("# Soul\n\nedited by hand\n")).is_file()


@pytest.mark.parametrize(("key", "status"), [(READER_KEY, 200), (ADMIN_KEY, 200), (BOB_WRITER_KEY, 403), (CAROL_KEY, 403), ("", 401)])
def test_lineage_over_rest_is_a_read_of_an_agent_in_the_keys_scope(lsuite: Suite, key: str, status: int) -> None:
    assert lineage(lsuite, key=key).status_code == status
    assert lineage(lsuite, "nobody", ADMIN_KEY).status_code == 404


@pytest.mark.parametrize(("key", "code"), [(READER_KEY, None), (BOB_WRITER_KEY, grpc.StatusCode.PERMISSION_DENIED),
                                           ("nope", grpc.StatusCode.UNAUTHENTICATED)])
def test_lineage_over_grpc_with_each_key(lsuite: Suite, key: str, code: grpc.StatusCode | None) -> None:
    with grpc.insecure_channel(lsuite.address("watcher")) as channel:
        stub = watcher_pb2_grpc.SessionsStub(channel)
        request = pb.GetLineageRequest(agent_id="alfred")
        if code is None:
            assert stub.GetLineage(request, metadata=(("x-api-key", key),), timeout=10).agent_id == "alfred"
            return
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetLineage(request, metadata=(("x-api-key", key),), timeout=10)
        assert caught.value.code() == code


def test_a_put_whose_record_cannot_be_written_is_saved_all_the_same(lsuite: Suite) -> None:
    (lsuite.home / "agents" / "bob" / "puts").write_text("a file where the records' folder goes\n")
    put(lsuite, "bob", "USER.md", "# User\n\nName: Bob\n")
    wait_claude(lsuite, "bob", "Name: Bob")
    wait_until(lambda: newest(lsuite, "bob")["sources"][3].get("sha256") == sha("# User\n\nName: Bob\n"), 10, "bob's USER.md")
    assert newest(lsuite, "bob")["sources"][3]["origin"]["kind"] == "ORIGIN_KIND_UNKNOWN"
