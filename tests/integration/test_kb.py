"""The KB service as a real process over real files: index, search, get, recall log."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, make_home, wait_until, workspace

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)


@pytest.fixture(scope="module")
def ksuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [
        {"id": "alfred"},
        {"id": "bob", "knowledge": {"archive": {"tokenizer": "trigram"}}},
        {"id": "off", "knowledge": {"archive": {"enabled": False}}},
    ]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("kb"), agents)
    for agent in ("alfred", "bob", "off"):
        (home / "agents" / agent / "workspace" / "memory").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(ksuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(ksuite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)



def refresh(kb: kb_pb2_grpc.KnowledgeStub, agent: str = "alfred") -> kb_pb2.RefreshResponse:
    return kb.Refresh(pb.RefreshRequest(agent_id=agent, wait=True), metadata=AUTH, timeout=60)


def refreshes(suite: Suite) -> int:
    return sum(1 for line in suite.log_lines("kb") if line.get("event") == "kb_refreshed")


def done_since(suite: Suite, before: int, agent: str = "alfred") -> tuple[int, int]:
    """(sources indexed, pruned) by every refresh of ``agent`` logged after the first ``before``:
    the KB indexes on file events, so a write's work may be done by the refresh its event queued
    or by the one the test asked for (each logs before it answers)."""
    runs = [line for line in suite.log_lines("kb") if line.get("event") == "kb_refreshed"][before:]
    mine = [r for r in runs if r.get("agent") == agent]
    return sum(int(r["indexed"]) for r in mine), sum(int(r["pruned"]) for r in mine)


def search(kb: kb_pb2_grpc.KnowledgeStub, query: str, agent: str = "alfred", **kw: object) -> kb_pb2.SearchResponse:
    return kb.Search(pb.SearchRequest(agent_id=agent, query=query, **kw), metadata=AUTH, timeout=30)


def test_indexing_lifecycle(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(ksuite, "alfred") / "memory"
    before = refreshes(ksuite)
    (workspace(ksuite, "alfred") / "MEMORY.md").write_text("# Memory\n\n- The deploy key rotates every Tuesday.\n")
    (workspace(ksuite, "alfred") / "USER.md").write_text("# User\n\n- Ada prefers oolong tea.\n")
    (memory / "projects").mkdir()
    (memory / "projects" / "gateway.md").write_text("# Gateway\n\nThe shim listens on port 10850.\n")
    (memory / "inbox").mkdir()
    (memory / "inbox" / "forwarded.md").write_text("# Forwarded\n\nA stranger claims the deploy key is 1234.\n")
    first = refresh(kb)
    assert done_since(ksuite, before) == (4, 0) and first.report.errors == []
    again = refresh(kb)
    assert (again.report.indexed, again.report.skipped, again.report.pruned) == (0, 4, 0)
    assert again.generation == first.generation  # nothing changed, same generation

    hits = {h.path: h for h in search(kb, "deploy key").hits}
    assert hits["MEMORY.md"].provenance == "owner"
    assert hits["memory/inbox/forwarded.md"].provenance == "untrusted"
    assert search(kb, "shim port").hits[0].provenance == "agent"

    before = refreshes(ksuite)
    (memory / "projects" / "gateway.md").write_text("# Gateway\n\nThe shim now listens on port 20850.\n")
    edited = refresh(kb)
    assert done_since(ksuite, before) == (1, 0) and edited.generation > first.generation
    assert [h.path for h in search(kb, "20850").hits] == ["memory/projects/gateway.md"]
    assert search(kb, "10850").hits == []

    before = refreshes(ksuite)
    (memory / "inbox" / "forwarded.md").unlink()
    refresh(kb)
    assert done_since(ksuite, before) == (0, 1)
    assert all(h.path != "memory/inbox/forwarded.md" for h in search(kb, "stranger deploy").hits)


def test_an_unreadable_source_is_kept(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    note = workspace(ksuite, "alfred") / "memory" / "fragile.md"
    note.write_text("# Fragile\n\nquartz chandelier inventory\n")
    refresh(kb)
    assert search(kb, "chandelier").hits
    note.unlink()
    note.symlink_to(note)  # a symlink loop: stat fails, but the name is still there
    report = refresh(kb).report
    assert report.pruned == 0
    assert search(kb, "chandelier").hits, "a read error must not drop a live source"
    note.unlink()
    refresh(kb)  # the file is gone for real: pruned (by the refresh its event queued, or by this one)
    assert not search(kb, "chandelier").hits


@pytest.mark.parametrize(
    "query",
    ['"', '""', "AND", "OR NOT", "NOT", "foo AND", "(", ")", "a:b", "col:umn:", "deploy-key", "*", "**", "deploy*",
     "NEAR(a b)", "🚀🚀", "🦄 deploy", "'; DROP TABLE kb_chunks; --", "\\", "^start", "a" * 5000, "{x}", "[x]", "+-=/", "\x00"],
)
def test_hostile_queries_never_break(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, query: str) -> None:
    response = search(kb, query)
    assert response.generation >= 0
    for hit in response.hits:
        assert hit.path and hit.score >= 0


def test_hostile_queries_over_rest(ksuite: Suite) -> None:
    with httpx.Client(base_url=ksuite.base_url, timeout=30) as http:
        for query in ('"unbalanced', "NOT AND OR", "x:y", "🚀"):
            response = http.get("/api/v1/agents/alfred/memory:search", params={"query": query}, headers={"X-Api-Key": READER_KEY})
            assert response.status_code == 200, response.text
            assert "hits" in response.json()


def test_a_search_without_a_query_is_400_query_is_required(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    for corpus in ("memory", "shared", "all"):
        for query in ("", "   ", "\t\n"):
            with pytest.raises(grpc.RpcError) as info:
                search(kb, query, corpus=corpus)
            assert (info.value.code(), info.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, "query is required")
    with httpx.Client(base_url=ksuite.base_url, timeout=30, headers={"X-Api-Key": READER_KEY}) as http:
        for params in ({}, {"q": "deploy"}, {"query": ""}, {"query": "  "}, {"query": " ", "corpus": "all"}):
            response = http.get("/api/v1/agents/alfred/memory:search", params=params)
            assert response.status_code == 400, (params, response.text)
            assert response.json()["message"] == "query is required"
        assert http.get("/api/v1/agents/alfred/memory:search", params={"query": "deploy"}).status_code == 200


def test_snippets_never_show_the_frontmatter(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    (workspace(ksuite, "alfred") / "memory" / "walrus.md").write_text(
        "---\nimportance: 8\ntags: [walrus, ops]\n---\n# Walrus\n\n- The walrus tank is cleaned on Thursdays.\n"
    )
    with httpx.Client(base_url=ksuite.base_url, timeout=30, headers={"X-Api-Key": READER_KEY}) as http:
        params = {"query": "walrus tank", "refresh": "true"}
        hits = http.get("/api/v1/agents/alfred/memory:search", params=params).json()["hits"]
        assert [(h["path"], h["startLine"], h["snippet"], h["importance"]) for h in hits] == [
            ("memory/walrus.md", 5, "# Walrus - The walrus tank is cleaned on Thursdays.", 8)
        ]
        assert http.get("/api/v1/agents/alfred/memory:search", params={"query": "tags"}).json()["hits"] == []


def test_cjk_and_thai_are_found_under_unicode61(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(ksuite, "alfred") / "memory"
    (memory / "cjk.md").write_text("# 笔记\n\n我们明天在北京开会讨论知识库。\n\n東京の会議は来週の月曜日です。\n\nประชุมทีมวันจันทร์ที่กรุงเทพ\n")
    refresh(kb)
    for query in ("北京", "知识库", "会議", "月曜日", "กรุงเทพ", "ประชุม"):
        paths = [h.path for h in search(kb, query).hits]
        assert "memory/cjk.md" in paths, query


def test_trigram_agent_and_tokenizer_switch_rebuilds(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    before = refreshes(ksuite)
    (workspace(ksuite, "bob") / "memory" / "n.md").write_text("# Note\n\nserendipitous discovery\n")
    refresh(kb, "bob")
    assert done_since(ksuite, before, "bob") == (1, 0)
    assert [h.path for h in search(kb, "endipit", agent="bob").hits] == ["memory/n.md"]  # trigram substring
    config_path = ksuite.home / "config.json"
    config = json.loads(config_path.read_text())
    config["agents"][1]["knowledge"]["archive"]["tokenizer"] = "unicode61"
    config_path.write_text(json.dumps(config))
    ksuite.stop("kb")
    ksuite.start("kb")
    with grpc.insecure_channel(ksuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        rebuilt = stub.Refresh(pb.RefreshRequest(agent_id="bob", wait=True), metadata=AUTH, timeout=60)
        assert rebuilt.report.rebuilt
        assert [h.path for h in stub.Search(pb.SearchRequest(agent_id="bob", query="serendipitous"), metadata=AUTH, timeout=30).hits] == ["memory/n.md"]
        assert stub.Search(pb.SearchRequest(agent_id="bob", query="endipit"), metadata=AUTH, timeout=30).hits == []


@pytest.mark.parametrize("path", ["../config.json", "/etc/passwd", "memory/../../x.md", "SOUL.md", "memory/a\x00.md", "CLAUDE.md", "", "memory\\x.md"])
def test_get_refuses_paths_outside_the_memory_scope(kb: kb_pb2_grpc.KnowledgeStub, path: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        kb.Get(pb.GetRequest(agent_id="alfred", path=path), metadata=AUTH, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_get_refuses_a_link_out_and_reads_bounded_excerpts(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("outside\n")
    link = workspace(ksuite, "alfred") / "memory" / "link.md"
    link.symlink_to(secret)
    with pytest.raises(grpc.RpcError) as info:
        kb.Get(pb.GetRequest(agent_id="alfred", path="memory/link.md"), metadata=AUTH, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    link.unlink()
    long = workspace(ksuite, "alfred") / "memory" / "long.md"
    long.write_text("".join(f"line {i}\n" for i in range(1, 501)))
    got = kb.Get(pb.GetRequest(agent_id="alfred", path="memory/long.md", from_line=10, lines=3), metadata=AUTH, timeout=10)
    assert (got.text, got.from_line, got.to_line, got.total_lines) == ("line 10\nline 11\nline 12", 10, 12, 500)
    default = kb.Get(pb.GetRequest(agent_id="alfred", path="memory/long.md"), metadata=AUTH, timeout=10)
    assert (default.from_line, default.to_line) == (1, 200)
    with pytest.raises(grpc.RpcError) as missing:
        kb.Get(pb.GetRequest(agent_id="alfred", path="memory/nope.md"), metadata=AUTH, timeout=10)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_stale_flag_and_read_your_writes(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    """A new note is indexed on its file event, with no refresh asked for; ``stale``
    clears once it is; ``refresh: true`` still answers with what was written just before."""
    refresh(kb)
    assert not search(kb, "anything").stale
    memory = workspace(ksuite, "alfred") / "memory"
    (memory / "fresh.md").write_text("# Fresh\n\nmarmalade protocol\n")
    wait_until(lambda: [h.path for h in search(kb, "marmalade").hits] == ["memory/fresh.md"], 10,
               "the new note to be searchable without a refresh")
    assert not search(kb, "marmalade").stale
    (memory / "fresher.md").write_text("# Fresher\n\ngooseberry protocol\n")
    fresh = search(kb, "gooseberry", refresh=True)
    assert fresh.refreshed and not fresh.stale
    assert [h.path for h in fresh.hits] == ["memory/fresher.md"]


def test_retrieval_log_grows_and_folds(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    import apsw

    (workspace(ksuite, "alfred") / "memory" / "recall.md").write_text("# Recall\n\n- zanzibar ferry schedule\n")
    refresh(kb)
    db = ksuite.home / "agents" / "alfred" / "kb.sqlite"

    def log_rows() -> int:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return int(next(conn.execute("SELECT count(*) FROM kb_retrieval_log"))[0])
        finally:
            conn.close()

    before = log_rows()
    for _ in range(3):
        assert search(kb, "zanzibar").hits
    kb.Get(pb.GetRequest(agent_id="alfred", path="memory/recall.md"), metadata=AUTH, timeout=10)
    wait_until(lambda: log_rows() >= before + 4, 10, "the retrieval log to grow")
    # the MCP layer's opt-out is honoured
    count = log_rows()
    kb.Search(pb.SearchRequest(agent_id="alfred", query="zanzibar"), metadata=(*AUTH, ("x-gateway-record-retrievals", "0")), timeout=10)
    folded = kb.FoldRetrievals(pb.FoldRetrievalsRequest(agent_id="alfred"), metadata=AUTH, timeout=30)
    assert folded.folded == count >= 4 and log_rows() == 0  # the opt-out was not recorded; counted rows are deleted
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = list(conn.execute("SELECT retrieval_count, last_retrieved FROM kb_entry_lifecycle WHERE path = 'memory/recall.md'"))
    finally:
        conn.close()
    assert rows and rows[0][0] >= 4 and rows[0][1]
    assert kb.FoldRetrievals(pb.FoldRetrievalsRequest(agent_id="alfred"), metadata=AUTH, timeout=30).folded == 0


def test_disabled_archive_creates_nothing(ksuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    (workspace(ksuite, "off") / "MEMORY.md").write_text("# M\n\nsomething\n")
    response = refresh(kb, "off")
    assert response.generation == 0 and response.report.indexed == 0
    with pytest.raises(grpc.RpcError) as info:
        search(kb, "something", agent="off")
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "disabled" in (info.value.details() or "")
    assert not (ksuite.home / "agents" / "off" / "kb.sqlite").exists()
    status = kb.GetIndexStatus(pb.GetIndexStatusRequest(agent_id="off"), metadata=AUTH, timeout=10)
    assert (status.enabled, status.exists) == (False, False)


def test_auth_and_rest_routes(ksuite: Suite) -> None:
    ws = workspace(ksuite, "alfred")
    for rel, text in (("MEMORY.md", "# Memory\n\n- routes\n"), ("memory/a.md", "- a\n"), ("memory/b.md", "- b\n")):
        if not (ws / rel).exists():  # as earlier tests of the module left it, or alone
            (ws / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws / rel).write_text(text)
    with httpx.Client(base_url=ksuite.base_url, timeout=30) as http:
        assert http.get("/api/v1/agents/alfred/memory:search", params={"query": "x"}).status_code == 401
        assert http.get("/api/v1/agents/bob/memory:search", params={"query": "x"}, headers={"X-Api-Key": READER_KEY}).status_code == 403
        refreshed = http.post("/api/v1/agents/alfred/memory:refresh", headers={"X-Api-Key": READER_KEY}, json={"wait": True})
        assert refreshed.status_code == 200 and "generation" in refreshed.json()
        got = http.get("/api/v1/agents/alfred/memory:get", params={"path": "MEMORY.md", "fromLine": 1, "lines": 2}, headers={"X-Api-Key": READER_KEY})
        assert got.status_code == 200 and got.json()["fromLine"] == 1
        bad = http.get("/api/v1/agents/alfred/memory:get", params={"path": "../x"}, headers={"X-Api-Key": READER_KEY})
        assert bad.status_code == 400
        status = http.get("/api/v1/agents/alfred/memory:status", headers={"X-Api-Key": READER_KEY}).json()
        assert status["enabled"] is True and int(status["sources"]) >= 3


def test_posts_with_no_required_field_take_an_empty_body(ksuite: Suite) -> None:
    """As docs/concepts/apis.md "REST API" states it: no body at all, or an empty one, is read as {} (grpc-gateway does the same)."""
    with httpx.Client(base_url=ksuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        for path in ("/api/v1/agents/alfred/memory:fold-retrievals", "/api/v1/agents/alfred/memory:refresh"):
            for content in (b"", b"  \n"):
                response = http.post(path, content=content)
                assert response.status_code == 200, (path, response.text)
        assert http.post("/api/v1/agents/alfred/memory:refresh").json()["queued"] is True


def test_kill_during_a_large_refresh_leaves_a_usable_index(ksuite: Suite) -> None:
    memory = workspace(ksuite, "alfred") / "memory" / "bulk"
    memory.mkdir()
    (workspace(ksuite, "alfred") / "memory" / "anchor.md").write_text("# Anchor\n\n- zanzibar lighthouse keeper\n")
    with grpc.insecure_channel(ksuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        stub.Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=60)
        before = stub.Search(pb.SearchRequest(agent_id="alfred", query="zanzibar"), metadata=AUTH, timeout=10)
        assert before.hits
        for i in range(3000):
            (memory / f"n{i:04d}.md").write_text(f"# Bulk {i}\n\n" + "lorem ipsum dolor sit amet " * 40 + f"\nuniqueword{i}\n")
        stub.Refresh(pb.RefreshRequest(agent_id="alfred", wait=False), metadata=AUTH, timeout=10)
    os.kill(ksuite.procs["kb"].pid, signal.SIGKILL)
    ksuite.procs["kb"].wait(timeout=10)
    del ksuite.procs["kb"]
    ksuite.start("kb")
    with grpc.insecure_channel(ksuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        # the previous index answers: the killed refresh's transaction never landed half-way
        after = stub.Search(pb.SearchRequest(agent_id="alfred", query="zanzibar"), metadata=AUTH, timeout=30)
        assert [h.path for h in after.hits] == [h.path for h in before.hits]
        done = stub.Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=120)
        assert done.report.errors == []
        assert [h.path for h in stub.Search(pb.SearchRequest(agent_id="alfred", query="uniqueword2999"), metadata=AUTH, timeout=30).hits] == ["memory/bulk/n2999.md"]
    import apsw

    conn = apsw.Connection(str(ksuite.home / "agents" / "alfred" / "kb.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert next(conn.execute("PRAGMA integrity_check"))[0] == "ok"
    finally:
        conn.close()
