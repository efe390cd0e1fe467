"""The shared vault through the real KB process: CRUD rules, search, retire, graph, two writers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, free_port, free_ports, make_home, wait_until

from gateway.home import ensure_home
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)

DEPLOY = """# Staging deploys
- Staging deploys go through the blue-green switch on the gateway cluster.
- The rollback window for staging deploys is fifteen minutes.
- Deploy approvals come from the platform on-call engineer.
"""
REWORDED = """# How we deploy to staging
- The platform on-call engineer approves every deploy.
- We use the blue-green switch on the gateway cluster for staging.
- Staging deploys can be rolled back within fifteen minutes.
"""


@pytest.fixture(scope="module")
def ssuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [
        {"id": "alfred", "knowledge": {"shared": {"graph": True}}},
        {"id": "bob"},
        {"id": "hermit", "knowledge": {"shared": {"enabled": False}}},
        {"id": "teamb", "knowledge": {"shared": {"project": "team-b"}}},
    ]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("shared"), agents)
    for agent in ("alfred", "bob", "hermit", "teamb"):
        (home / "agents" / agent / "workspace" / "memory").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(ssuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(ssuite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)


def vault(suite: Suite, project: str = "global") -> Path:
    return suite.home / "shared" / "kb" / project


def create(kb: kb_pb2_grpc.KnowledgeStub, name: str, content: str, agent: str = "alfred", confirm: bool = False) -> kb_pb2.CreateSharedNoteResponse:
    return kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id=agent, name=name, content=content, confirm=confirm), metadata=AUTH, timeout=30)


def code(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def test_create_get_collision_and_immediate_search(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    made = create(kb, "staging deploys", DEPLOY)
    assert made.created and made.related == []
    assert (vault(ssuite) / "notes" / "staging deploys.md").read_text() == DEPLOY
    got = kb.GetSharedNote(pb.GetSharedNoteRequest(agent_id="bob", name="staging deploys"), metadata=AUTH, timeout=10)
    assert got.content == DEPLOY  # any agent of the project reads it
    with pytest.raises(grpc.RpcError) as info:
        create(kb, "staging deploys", "other", agent="bob")
    assert info.value.code() == grpc.StatusCode.ALREADY_EXISTS and "update" in (info.value.details() or "")
    hits = kb.Search(pb.SearchRequest(agent_id="bob", query="rollback window", corpus="shared"), metadata=AUTH, timeout=10).hits
    assert [(h.path, h.corpus, h.provenance) for h in hits][:1] == [("notes/staging deploys.md", "shared", "agent")]


def test_near_duplicates_are_returned_then_linked_on_confirm(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    nudged = create(kb, "deploying to staging", REWORDED, agent="bob")
    assert not nudged.created and [r.name for r in nudged.related] == ["staging deploys"]
    assert not (vault(ssuite) / "notes" / "deploying to staging.md").exists()
    unrelated = create(kb, "berlin office", "# Berlin\n- The office moved to Kreuzberg in March.\n- Wifi password rotates monthly.\n")
    assert unrelated.created and unrelated.related == []
    confirmed = create(kb, "deploying to staging", REWORDED, agent="bob", confirm=True)
    assert confirmed.created and list(confirmed.linked) == ["staging deploys"]
    assert "[[staging deploys]]" in (vault(ssuite) / "notes" / "deploying to staging.md").read_text()


def test_update_rules(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        kb.UpdateSharedNote(pb.UpdateSharedNoteRequest(agent_id="alfred", name="no such note", content="x"), metadata=AUTH, timeout=10)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and "create" in (info.value.details() or "")
    lines = [f"- fact number {i}" for i in range(10)]
    create(kb, "facts", "\n".join(lines) + "\n", confirm=True)
    keep_six = "\n".join(lines[:6]) + "\n- a new fact\n"  # drops 4 of 10 lines: fine
    ok = kb.UpdateSharedNote(pb.UpdateSharedNoteRequest(agent_id="alfred", name="facts", content=keep_six), metadata=AUTH, timeout=10)
    assert ok.updated and ok.warning == ""
    clobber = "- only this\n"  # drops 6 of 7 lines: held back
    held = kb.UpdateSharedNote(pb.UpdateSharedNoteRequest(agent_id="alfred", name="facts", content=clobber), metadata=AUTH, timeout=10)
    assert not held.updated and held.warning and (held.dropped_lines, held.total_lines) == (7, 7)
    assert (vault(ssuite) / "notes" / "facts.md").read_text() == keep_six
    forced = kb.UpdateSharedNote(pb.UpdateSharedNoteRequest(agent_id="alfred", name="facts", content=clobber, confirm=True), metadata=AUTH, timeout=10)
    assert forced.updated and (vault(ssuite) / "notes" / "facts.md").read_text() == clobber


def test_delete_names_and_size_cap(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    create(kb, "temp note", "# Temp\n- ephemeral xylophone\n", confirm=True)
    assert kb.DeleteSharedNote(pb.DeleteSharedNoteRequest(agent_id="alfred", name="temp note"), metadata=AUTH, timeout=10).deleted
    assert kb.Search(pb.SearchRequest(agent_id="alfred", query="xylophone", corpus="shared"), metadata=AUTH, timeout=10).hits == []
    assert code(lambda: kb.DeleteSharedNote(pb.DeleteSharedNoteRequest(agent_id="alfred", name="temp note"), metadata=AUTH, timeout=10)) == grpc.StatusCode.NOT_FOUND
    for bad in ("../escape", "a/b", ".hidden", "stale__x", "x" * 121, "", "nul\x00"):
        assert code(lambda: create(kb, bad, "x")) == grpc.StatusCode.INVALID_ARGUMENT, bad
    assert code(lambda: create(kb, "huge", "a" * 102_401, confirm=True)) == grpc.StatusCode.INVALID_ARGUMENT
    assert create(kb, "just fits", "a" * 102_400, confirm=True).created


def test_corpus_all_merges_memory_and_shared(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    (ssuite.home / "agents" / "alfred" / "workspace" / "memory" / "mine.md").write_text("# Mine\n- quasar telescope schedule for alfred\n")
    create(kb, "observatory", "# Observatory\n- the quasar telescope is booked on Fridays\n", confirm=True)
    hits = kb.Search(pb.SearchRequest(agent_id="alfred", query="quasar telescope", corpus="all", refresh=True), metadata=AUTH, timeout=30).hits
    assert {h.corpus for h in hits} == {"memory", "shared"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_projects_are_separate_and_disabled_is_clear(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    create(kb, "team b only", "# B\n- zeppelin hangar keys\n", agent="teamb", confirm=True)
    assert (vault(ssuite, "team-b") / "notes" / "team b only.md").exists()
    assert kb.Search(pb.SearchRequest(agent_id="alfred", query="zeppelin", corpus="shared"), metadata=AUTH, timeout=10).hits == []
    with pytest.raises(grpc.RpcError) as info:
        create(kb, "anything", "x", agent="hermit")
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "shared KB disabled" in (info.value.details() or "")


def test_retire_and_restore(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    body = "# Old\n- the fax machine lives in room 12\n"
    create(kb, "fax machine", body, confirm=True)
    moved = kb.RetireSharedNote(pb.RetireSharedNoteRequest(agent_id="alfred", name="fax machine", reason="unused for a year"), metadata=AUTH, timeout=10)
    assert moved.to_name == "stale__fax machine"
    retired = (vault(ssuite) / "notes" / "stale__fax machine.md").read_text()
    assert "unused for a year" in retired.splitlines()[0] and retired.endswith(body)
    hits = kb.Search(pb.SearchRequest(agent_id="alfred", query="fax machine room", corpus="shared"), metadata=AUTH, timeout=10).hits
    assert [h.path for h in hits][:1] == ["notes/stale__fax machine.md"]  # retired notes stay searchable
    kb.RestoreSharedNote(pb.RestoreSharedNoteRequest(agent_id="alfred", name="fax machine"), metadata=AUTH, timeout=10)
    assert (vault(ssuite) / "notes" / "fax machine.md").read_text() == body


def test_graph_reports_follow_shared_writes(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    create(kb, "graph a", "---\ntitle: A\nconfidence: 0.3\n---\n# A\n- links to [[graph b]] and [[nowhere]]\n", confirm=True)
    create(kb, "graph b", "# B\n- plain note about gardening\n", confirm=True)
    reports = vault(ssuite) / "reports"

    def built() -> bool:  # the reports of one build land one after another
        try:
            graph = (reports / "relationship-graph.md").read_text()
            low = (reports / "low-confidence.md").read_text()
            back = (reports / "backlinks.md").read_text()
        except FileNotFoundError:
            return False
        return "`graph a` → `graph b`" in graph and "`graph a`" in low and "nowhere" in back

    wait_until(built, 20, "the graph reports")
    before = {p.name: p.read_bytes() for p in reports.iterdir()}
    assert set(before) >= {"relationship-graph.md", "backlinks.md", "contradictions.md", "stale-pages.md", "low-confidence.md"}
    hits = kb.Search(pb.SearchRequest(agent_id="alfred", query="gardening", corpus="shared", refresh=True), metadata=AUTH, timeout=30).hits
    assert all(not h.path.startswith("reports/") for h in hits)


def test_rest_routes_and_auth(ssuite: Suite) -> None:
    with httpx.Client(base_url=ssuite.base_url, timeout=30) as http:
        url = "/api/v1/agents/alfred/shared/notes"
        assert http.post(url, headers={"X-Api-Key": READER_KEY}, json={"name": "ro", "content": "x"}).status_code == 403
        created = http.post(url, headers={"X-Api-Key": ADMIN_KEY}, json={"name": "rest note", "content": "# R\n- via rest\n", "confirm": True})
        assert created.status_code == 200 and created.json()["created"] is True
        clash = http.post(url, headers={"X-Api-Key": ADMIN_KEY}, json={"name": "rest note", "content": "x"})
        assert clash.status_code == 409 and "update" in clash.json()["message"]
        got = http.get(f"{url}/rest%20note", headers={"X-Api-Key": READER_KEY})
        assert got.status_code == 200 and got.json()["content"] == "# R\n- via rest\n"
        assert http.get(f"{url}/nope", headers={"X-Api-Key": READER_KEY}).status_code == 404
        retired = http.post(f"{url}/rest%20note:retire", headers={"X-Api-Key": ADMIN_KEY}, json={"reason": "test"})
        assert retired.status_code == 200 and retired.json()["toName"] == "stale__rest note"
        assert http.delete(f"{url}/stale__rest%20note", headers={"X-Api-Key": ADMIN_KEY}).json()["deleted"] is True


def test_retire_and_restore_take_an_empty_body(ssuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    create(kb, "empty body note", "# E\n- retired without a body\n", confirm=True)
    with httpx.Client(base_url=ssuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        url = "/api/v1/agents/alfred/shared/notes/empty%20body%20note"
        retired = http.post(f"{url}:retire")
        assert retired.status_code == 200 and retired.json()["toName"] == "stale__empty body note", retired.text
        restored = http.post(f"{url}:restore", content=b"")
        assert restored.status_code == 200 and restored.json()["toName"] == "empty body note", restored.text


SIMILAR = """# Lighthouse rota
- The lighthouse keeper rota changes every Monday at noon.
- Keepers swap lantern duty with the harbour master.
"""
SIMILAR_REWORDED = """# Who keeps the lighthouse
- Every Monday at noon the lighthouse keeper rota changes.
- Lantern duty is swapped between keepers and the harbour master.
"""


def test_rest_answers_that_wrote_nothing_name_the_rest_route_and_confirm(ssuite: Suite) -> None:
    url = "/api/v1/agents/alfred/shared/notes"
    with httpx.Client(base_url=ssuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        first = http.post(url, json={"name": "lighthouse rota", "content": SIMILAR})
        assert first.status_code == 200 and first.json()["created"] is True  # 200, as grpc-gateway answers a write
        nudged = http.post(url, json={"name": "lighthouse keepers", "content": SIMILAR_REWORDED})
        assert nudged.status_code == 200, nudged.text
        body = nudged.json()
        assert body["created"] is False and [r["name"] for r in body["related"]] == ["lighthouse rota"]
        assert body["message"] == (
            "nothing was written: 1 similar shared note(s) exist ('lighthouse rota'). Update it with "
            "PUT /api/v1/agents/alfred/shared/notes/lighthouse%20rota, or send POST /api/v1/agents/alfred/shared/notes "
            'again with "confirm": true to create this note linked to it.'
        )
        assert not (vault(ssuite) / "notes" / "lighthouse keepers.md").exists()

        held = http.put(f"{url}/lighthouse%20rota", json={"content": "- only this line\n"})
        assert held.status_code == 200, held.text
        body = held.json()
        assert body["updated"] is False and (body["droppedLines"], body["totalLines"]) == ("3", "3")
        assert body["warning"] == body["message"] == (
            "nothing was written: this update would drop 3 of the note's 3 non-blank lines (50% or more). Edit the "
            "note rather than replacing it (GET /api/v1/agents/alfred/shared/notes/lighthouse%20rota gives its current "
            "content), or send the same PUT /api/v1/agents/alfred/shared/notes/lighthouse%20rota again with "
            '"confirm": true.'
        )
        assert (vault(ssuite) / "notes" / "lighthouse rota.md").read_text() == SIMILAR

        clash = http.post(url, json={"name": "lighthouse rota", "content": "x", "confirm": True})
        assert clash.status_code == 409 and clash.json()["message"] == (
            "a shared note named 'lighthouse rota' already exists; update it with "
            "PUT /api/v1/agents/alfred/shared/notes/lighthouse%20rota"
        )
        missing = http.put(f"{url}/no%20such%20note", json={"content": "x"})
        assert missing.status_code == 404 and missing.json()["message"] == (
            "no shared note named 'no such note'; create it with POST /api/v1/agents/alfred/shared/notes"
        )
        for reply in (nudged, held, clash, missing):
            assert "memory_shared" not in reply.text  # MCP tool names stay in the MCP server


def test_shared_snippets_never_show_the_frontmatter(ssuite: Suite) -> None:
    note = "---\ntitle: Narwhal feeding\nconfidence: 0.9\n---\n# Narwhal feeding\n- Narwhals are fed herring at dawn by the keeper.\n"
    again = "---\ntitle: Feeding narwhals\n---\n# Feeding narwhals\n- The keeper feeds the narwhals herring at dawn.\n"
    url = "/api/v1/agents/alfred/shared/notes"
    with httpx.Client(base_url=ssuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        assert http.post(url, json={"name": "narwhal feeding", "content": note}).json()["created"] is True
        params = {"query": "narwhal herring", "corpus": "shared"}
        hits = http.get("/api/v1/agents/alfred/memory:search", params=params).json()["hits"]
        assert hits and hits[0]["snippet"] == "# Narwhal feeding - Narwhals are fed herring at dawn by the keeper."
        nudged = http.post(url, json={"name": "feeding narwhals", "content": again}).json()
        assert [(r["name"], r["snippet"]) for r in nudged["related"]] == [
            ("narwhal feeding", "# Narwhal feeding - Narwhals are fed herring at dawn by the keeper.")
        ]


def test_two_kb_processes_writing_one_vault_lose_nothing(ssuite: Suite, tmp_path: Path) -> None:
    """A second KB process (another home, same vault root) writes beside the first."""
    other = tmp_path / "other"
    other.mkdir()
    ports = dict(zip(("fileApi", "watcher", "kb", "dreaming"), free_ports(4), strict=True))
    config = {
        "gateway": {"grpc": {"host": "127.0.0.1", **ports},
                    "api": {"keys": [{"key": ADMIN_KEY, "agents": "*", "write": True}]},
                    "knowledge": {"shared": {"root": str(ssuite.home / "shared" / "kb")}},
                    "metrics": {"enabled": False}},
        "agents": [{"id": "zed"}],
    }
    (other / "config.json").write_text(json.dumps(config))
    ensure_home(other)
    second = Suite(other, free_port(), ports)
    second.start("kb")
    errors: list[str] = []

    def writer(address: str, agent: str, prefix: str) -> None:
        with grpc.insecure_channel(address) as channel:
            stub = kb_pb2_grpc.KnowledgeStub(channel)
            for i in range(30):
                try:
                    stub.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id=agent, name=f"{prefix} {i}", content=f"# {prefix} {i}\n- unique{prefix}{i} word\n", confirm=True), metadata=AUTH, timeout=30)
                except grpc.RpcError as exc:
                    errors.append(f"{prefix} {i}: {exc.details()}")

    try:
        threads = [threading.Thread(target=writer, args=(ssuite.address("kb"), "bob", "one")),
                   threading.Thread(target=writer, args=(second.address("kb"), "zed", "two"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        second.stop_all()
    assert errors == []
    notes = vault(ssuite) / "notes"
    assert len([p for p in notes.glob("one *.md")]) == 30 and len([p for p in notes.glob("two *.md")]) == 30
    conn = apsw.Connection(str(vault(ssuite) / "kb.sqlite"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert next(conn.execute("PRAGMA integrity_check"))[0] == "ok"
        indexed = {r[0] for r in conn.execute("SELECT path FROM kb_sources WHERE path LIKE 'notes/one %' OR path LIKE 'notes/two %'")}
    finally:
        conn.close()
    assert len(indexed) == 60


def test_a_note_that_links_out_of_the_vault_is_never_followed(ssuite: Suite, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("# Not the vault's\n- the outside file's words\n")
    notes = vault(ssuite) / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "linked out.md").symlink_to(outside)
    url = "/api/v1/agents/alfred/shared/notes"
    with httpx.Client(base_url=ssuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
        got = http.get(f"{url}/linked%20out")
        updated = http.put(f"{url}/linked%20out", json={"content": "# x\n", "confirm": True})
        retired = http.post(f"{url}/linked%20out:retire", json={"reason": "test"})
    for answer in (got, updated, retired):
        assert answer.status_code == 400 and "outside the vault" in answer.json()["message"], answer.text
        assert "outside file's words" not in answer.text
    assert outside.read_text() == "# Not the vault's\n- the outside file's words\n" and (notes / "linked out.md").is_symlink()
