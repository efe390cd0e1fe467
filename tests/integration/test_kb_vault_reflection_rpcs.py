"""The vault's weekly reflection, the KB's side, through the real KB process and the internal token
(docs/concepts/vault.md "Weekly reflection"): plan → merge → record → list → revert, the notes put back
byte for byte; a merged content holding a secret refused; an API key refused; a project with no vault
and bad input answered with the right codes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from secret_samples import AWS_KEY
from suite_support import ADMIN_KEY, Suite, make_home

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)
A = "# tide tables\n\nHigh tide at the quillfeather pier is at 06:10 on Mondays.\nThe harbour master posts the tables weekly.\n"
B = "# pier tides\n\nMondays: quillfeather pier high tide 06:10.\nTables are posted by the harbour master each week.\n"
OTHER = "# kiln\n\nThe pottery kiln fires at 1200 degrees on Thursdays.\n"


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("reflect"), [{"id": "alfred"}])
    running = Suite(home, http_port, ports)
    try:
        running.start("kb")
        yield running
    finally:
        running.stop_all()


@pytest.fixture(scope="module")
def kb(suite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(suite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)


def internal(suite: Suite) -> tuple[tuple[str, str], ...]:
    return ((INTERNAL_TOKEN_HEADER, read_internal_token(suite.home)),)


def notes_dir(suite: Suite) -> Path:
    return suite.home / "shared" / "kb" / "global" / "notes"


def snapshot(suite: Suite) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(notes_dir(suite).glob("*.md")) if p.name != "pruned__archive.md"}


def create(kb: kb_pb2_grpc.KnowledgeStub, name: str, content: str) -> None:
    made = kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name=name, content=content, confirm=True),
                               metadata=AUTH, timeout=30)
    assert made.created, made


def test_plan_merge_record_list_and_revert_exactly(suite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    token = internal(suite)
    create(kb, "tide tables", A)
    create(kb, "pier tides", B)  # linked to its near-duplicate by the create (confirm)
    create(kb, "kiln", OTHER)
    before = snapshot(suite)
    plan = kb.PlanVaultReflection(pb.PlanVaultReflectionRequest(project="global", run_id="R-it-1"),
                                  metadata=token, timeout=60)
    assert not plan.busy and not plan.unchanged and plan.notes == 3 and plan.watermark == "" and plan.revision
    [cluster] = plan.clusters
    assert sorted(n.name for n in cluster.notes) == ["pier tides", "tide tables"] and cluster.id.startswith("C-")
    busy = kb.PlanVaultReflection(pb.PlanVaultReflectionRequest(project="global", run_id="R-it-2"),
                                  metadata=token, timeout=60)
    assert busy.busy and busy.busy_with == "R-it-1" and not busy.clusters
    shas = {n.name: n.sha256 for n in cluster.notes}
    merged = A + "Related facts were merged from the pier tides note.\n"
    request = pb.MergeVaultNotesRequest(project="global", run_id="R-it-1", cluster_id=cluster.id, name="tide tables",
                                        content=merged, replaces=["tide tables", "pier tides"], expected_sha256=shas,
                                        reason="the same tide facts")
    secret = pb.MergeVaultNotesRequest()
    secret.CopyFrom(request)
    secret.content = merged + f"aws key {AWS_KEY}\n"
    refused = kb.MergeVaultNotes(secret, metadata=token, timeout=60)
    assert refused.outcome == pb.MERGE_OUTCOME_REFUSED and "secret" in refused.reason
    assert AWS_KEY not in refused.reason and snapshot(suite) == before
    done = kb.MergeVaultNotes(request, metadata=token, timeout=60)
    assert done.outcome == pb.MERGE_OUTCOME_MERGED and list(done.retired) == ["pier tides"], done
    assert done.merge_id.startswith("M-") and done.pruned_lines >= 2 and done.distinct_lines >= 4
    assert (notes_dir(suite) / "tide tables.md").read_bytes() == merged.encode()
    assert (notes_dir(suite) / "stale__pier tides.md").exists() and not (notes_dir(suite) / "pier tides.md").exists()
    found = kb.Search(pb.SearchRequest(agent_id="alfred", query="Tables are posted by the harbour master each week",
                                       corpus="shared", limit=10), metadata=AUTH, timeout=30)
    assert "notes/pruned__archive.md" in [h.path for h in found.hits]
    listed = kb.ListSharedNotes(pb.ListSharedNotesRequest(agent_id="alfred", include_retired=True), metadata=AUTH, timeout=30)
    assert "pruned__archive" not in [n.name for n in listed.notes]
    run = kb.RecordVaultReflection(pb.RecordVaultReflectionRequest(
        project="global", run_id="R-it-1", mode="auto", trigger="manual", status="ok", started_at=1.0,
        clusters=[pb.VaultClusterResult(cluster_id=cluster.id, notes=sorted(shas), outcome="merged",
                                        merge_id=done.merge_id)]), metadata=token, timeout=60)
    assert run.run_id == "R-it-1" and run.revision and run.finished_at > 0
    again = kb.PlanVaultReflection(pb.PlanVaultReflectionRequest(project="global", run_id="R-it-2"),
                                   metadata=token, timeout=60)
    assert again.unchanged and again.revision == again.watermark == run.revision and not again.clusters
    kb.RecordVaultReflection(pb.RecordVaultReflectionRequest(project="global", run_id="R-it-2", mode="auto",
                                                             trigger="schedule", status="noop"), metadata=token, timeout=60)
    reverted = kb.RevertVaultReflection(pb.RevertVaultReflectionRequest(project="global", last=True),
                                        metadata=token, timeout=60)
    assert reverted.run_id == "R-it-1" and list(reverted.restored) == ["pier tides", "tide tables"]
    assert not reverted.left and snapshot(suite) == before
    runs = kb.ListVaultReflections(pb.ListVaultReflectionsRequest(project="global"), metadata=token, timeout=30).runs
    assert [r.run_id for r in runs] == ["R-it-2", "R-it-1"] and runs[1].reverted_at > 0 and runs[0].status == "noop"
    assert runs[1].clusters[0].merge_id == done.merge_id


def test_the_calls_are_internal_and_check_their_input(suite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    token = internal(suite)
    with pytest.raises(grpc.RpcError) as denied:
        kb.ListVaultReflections(pb.ListVaultReflectionsRequest(project="global"), metadata=AUTH, timeout=30)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as absent:
        kb.PlanVaultReflection(pb.PlanVaultReflectionRequest(project="elsewhere", run_id="R-x"), metadata=token, timeout=30)
    assert absent.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "elsewhere" in (absent.value.details() or "")
    for bad, field in [
        (pb.PlanVaultReflectionRequest(project="", run_id="R-x"), "project"),
        (pb.PlanVaultReflectionRequest(project="global", run_id="bad id"), "run_id"),
        (pb.PlanVaultReflectionRequest(project="global", run_id="R-x", max_clusters=-1), "max_clusters"),
    ]:
        with pytest.raises(grpc.RpcError) as invalid:
            kb.PlanVaultReflection(bad, metadata=token, timeout=30)
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in (invalid.value.details() or "")
    with pytest.raises(grpc.RpcError) as big:
        kb.MergeVaultNotes(pb.MergeVaultNotesRequest(
            project="global", run_id="R-x", cluster_id="C-000000000000", name="n", content="x" * 102_401,
            replaces=["n"], expected_sha256={"n": "0" * 64}), metadata=token, timeout=30)
    assert big.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "102,400" in (big.value.details() or "")
    with pytest.raises(grpc.RpcError) as both:
        kb.RevertVaultReflection(pb.RevertVaultReflectionRequest(project="global", run_id="R-x", last=True),
                                 metadata=token, timeout=30)
    assert both.value.code() == grpc.StatusCode.INVALID_ARGUMENT
