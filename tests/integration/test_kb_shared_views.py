"""The shared vault's read views on the real KB and shim: ListSharedNotes and GetVaultGraph over REST
and gRPC, who wrote each note, paging, retired notes, the graph's findings, and auth (a key outside the
agent's scope is refused, a read-only key reads)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, CAROL_KEY, READER_KEY, Suite, make_home

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
NOTES = "/api/v1/agents/alfred/shared/notes"
GRAPH = "/api/v1/agents/alfred/shared/graph"


@pytest.fixture(scope="module")
def vsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [{"id": "alfred"}, {"id": "bob"}, {"id": "hermit", "knowledge": {"shared": {"enabled": False}}}]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("views"), agents)
    for agent in ("alfred", "bob", "hermit"):
        (home / "agents" / agent / "workspace" / "memory").mkdir(parents=True)
    running = Suite(home, http_port, ports)
    try:
        running.start("kb", "http")
        with httpx.Client(base_url=running.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as http:
            for name, content in (
                ("harbour", "---\ntitle: Harbour\nclaims:\n  - id: tide\n    text: high tide at six\n---\n[[ferry]] and [[lighthouse]]\n"),
                ("ferry", "---\nclaims:\n  - id: tide\n    text: high tide at nine\n---\n# Ferry times\n[[harbour]]\n"),
                ("old rota", "# Old rota\n- nobody reads this\n"),
            ):
                assert http.post(NOTES, json={"name": name, "content": content, "confirm": True}).status_code == 200
        with httpx.Client(base_url=running.base_url, timeout=30, headers={"X-Api-Key": BOB_WRITER_KEY}) as http:
            changed = http.put("/api/v1/agents/bob/shared/notes/ferry", json={
                "content": "---\nclaims:\n  - id: tide\n    text: high tide at nine\n---\n# Ferry times\n[[harbour]]\n- Sundays too\n"})
            assert changed.status_code == 200 and changed.json()["updated"], changed.text
            assert http.post("/api/v1/agents/bob/shared/notes/old%20rota:retire", json={"reason": "unused"}).status_code == 200
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(vsuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(vsuite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)


def get(suite: Suite, path: str, key: str, **params: object) -> httpx.Response:
    with httpx.Client(base_url=suite.base_url, timeout=30) as http:
        return http.get(path, headers={"X-Api-Key": key}, params=params)


def test_rest_lists_notes_with_who_wrote_them(vsuite: Suite) -> None:
    reply = get(vsuite, NOTES, READER_KEY)
    assert reply.status_code == 200, reply.text
    notes = {n["name"]: n for n in reply.json()["notes"]}
    assert list(notes) == ["ferry", "harbour"] and reply.json()["total"] == "2"
    ferry = notes["ferry"]
    assert ferry["title"] == "Ferry times" and ferry["provenance"] == "agent" and int(ferry["sizeBytes"]) > 0
    assert (ferry["created"]["agentId"], ferry["created"]["key"]) == ("alfred", "admin")
    assert (ferry["changed"]["agentId"], ferry["changed"]["key"]) == ("bob", "bob-writer")
    assert ferry["changed"]["at"] >= ferry["created"]["at"] and ferry["updatedAt"] > 0
    assert notes["harbour"]["changed"]["agentId"] == "alfred" and notes["harbour"]["title"] == "Harbour"


def test_rest_pages_and_includes_retired_notes(vsuite: Suite) -> None:
    first = get(vsuite, NOTES, READER_KEY, pageSize=1, includeRetired="true").json()
    assert [n["name"] for n in first["notes"]] == ["ferry"] and first["nextPageToken"] == "ferry" and first["total"] == "3"
    rest = get(vsuite, NOTES, READER_KEY, pageSize=5, pageToken="ferry", includeRetired="true").json()
    assert [n["name"] for n in rest["notes"]] == ["harbour", "stale__old rota"] and not rest["nextPageToken"]
    retired = rest["notes"][1]
    assert retired["retired"] and retired["retiredReason"] == "unused" and retired["retiredAt"] > 0
    assert retired["created"]["agentId"] == "alfred"  # the record follows the note into retirement
    assert get(vsuite, NOTES, READER_KEY, pageSize=-1).status_code == 400


def test_rest_graph_has_nodes_edges_and_findings(vsuite: Suite) -> None:
    reply = get(vsuite, GRAPH, READER_KEY)
    assert reply.status_code == 200, reply.text
    graph = reply.json()
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert set(nodes) == {"ferry", "harbour", "stale__old rota", "lighthouse"}
    assert nodes["lighthouse"].get("missing") and nodes["stale__old rota"].get("retired")
    edges = {(e["fromName"], e["toName"]) for e in graph["edges"]}
    assert edges == {("harbour", "ferry"), ("harbour", "lighthouse"), ("ferry", "harbour")}
    assert graph["dangling"] == [{"notes": ["harbour", "lighthouse"], "text": "links to [[lighthouse]], which no note is"}]
    [contradiction] = graph["contradictions"]
    assert contradiction["notes"] == ["ferry", "harbour"] and "high tide at six" in contradiction["text"]
    assert not graph.get("truncated") and graph["totalNodes"] == "4"


@pytest.mark.parametrize("path", [NOTES, GRAPH])
def test_rest_auth(vsuite: Suite, path: str) -> None:
    assert get(vsuite, path, "not-a-key").status_code == 401
    assert get(vsuite, path, BOB_WRITER_KEY).status_code == 403  # a key outside alfred's scope
    assert get(vsuite, path, CAROL_KEY).status_code == 403
    assert get(vsuite, path.replace("alfred", "bob"), BOB_WRITER_KEY).status_code == 200
    assert get(vsuite, path.replace("alfred", "nobody"), ADMIN_KEY).status_code == 404
    assert get(vsuite, path.replace("alfred", "hermit"), ADMIN_KEY).status_code == 400  # shared KB off: FAILED_PRECONDITION


def test_grpc_views_and_auth(kb: kb_pb2_grpc.KnowledgeStub) -> None:
    listed = kb.ListSharedNotes(pb.ListSharedNotesRequest(agent_id="bob"), metadata=(("x-api-key", BOB_WRITER_KEY),), timeout=30)
    assert [n.name for n in listed.notes] == ["ferry", "harbour"] and listed.notes[0].changed.key == "bob-writer"
    graph = kb.GetVaultGraph(pb.GetVaultGraphRequest(agent_id="alfred"), metadata=(("x-api-key", READER_KEY),), timeout=30)
    assert len(graph.nodes) == 4 and len(graph.edges) == 3 and len(graph.dangling) == 1
    for call, request in ((kb.ListSharedNotes, pb.ListSharedNotesRequest(agent_id="alfred")),
                          (kb.GetVaultGraph, pb.GetVaultGraphRequest(agent_id="alfred"))):
        with pytest.raises(grpc.RpcError) as outside:
            call(request, metadata=(("x-api-key", BOB_WRITER_KEY),), timeout=30)
        assert outside.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as anonymous:
            call(request, timeout=30)
        assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
