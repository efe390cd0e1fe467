"""The runs list and rejecting proposals against real processes, with a scripted reviewer: a propose
run's proposals listed with before and after; reject one and accept another; the next propose run
does not offer the rejected text again; over REST, gRPC and the CLI, auth included (a read-only key
may list but not reject, a key scoped to another agent may do neither)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from dreaming_support import add, audit, cli, client, dreaming, rest_accept, reviewer, run_ok, start_suite, write_reply
from dreaming_support import replace as replace_op
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite

from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + "".join(f"- Quay {n} has a crane.\n" for n in range(12))
EMAIL = "- Jan prefers email over phone."
TEA = "- Jan drinks tea."


@pytest.fixture(scope="module")
def rsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dreject")
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", tmp / "reply.json"))}, {"id": "bob"}]
    running = start_suite(tmp, agents, files={"alfred": {"MEMORY.md": MEMORY}})
    try:
        yield running
    finally:
        running.stop_all()


def propose(suite: Suite, proposals: list[dict[str, Any]]) -> dict[str, Any]:
    write_reply(suite.home.parent / "reply.json", proposals)
    return run_ok(suite, "alfred", "propose")


def runs(suite: Suite, key: str = ADMIN_KEY, **params: Any) -> dict[str, Any]:
    with client(suite, key) as http:
        response = http.get("/api/v1/agents/alfred/dream:runs", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def reject(suite: Suite, ids: list[str], key: str = ADMIN_KEY, agent: str = "alfred") -> Any:
    with client(suite, key) as http:
        return http.post(f"/api/v1/agents/{agent}/dream:reject", json={"ids": ids})


def by_id(report: dict[str, Any]) -> dict[str, str]:
    return {op["content"] or op["target"]: op["proposalId"] for op in report["ops"]}


def test_proposals_listed_rejected_accepted_and_not_offered_again(rsuite: Suite) -> None:
    report = propose(rsuite, [add(EMAIL), add(TEA), replace_op("- The ferry leaves at noon.", "- The ferry leaves at one.")])
    ids = by_id(report)
    listed = runs(rsuite)["runs"][0]
    assert (listed["runId"], listed["mode"], listed["trigger"], listed["opsTotal"]) == (report["runId"], "propose", "manual", 3)
    ops = {op["proposalId"]: op for op in listed["ops"]}
    assert all(op["status"] == "proposed" and op["pending"] for op in ops.values())
    assert ops[ids[EMAIL]]["changes"] == [{"file": "MEMORY.md", "before": "", "after": EMAIL, "startLine": 0, "endLine": 0, "cut": False}]
    ferry = ops[ids["- The ferry leaves at one."]]["changes"][0]
    assert (ferry["before"], ferry["after"], ferry["startLine"], ferry["endLine"]) == (
        "- The ferry leaves at noon.", "- The ferry leaves at one.", 3, 3)

    rejected = reject(rsuite, [ids[EMAIL]])
    assert rejected.status_code == 200, rejected.text
    (one,) = rejected.json()["rejected"]
    assert (one["proposalId"], one["rejectedBy"], one["text"]) == (ids[EMAIL], "admin", EMAIL)
    assert any(r.get("kind") == "rejected" and r.get("by") == "admin" for r in audit(rsuite, "alfred"))
    assert rest_accept(rsuite, "alfred", [ids[TEA]]).status_code == 200

    page = runs(rsuite)["runs"]
    accept_run, propose_run = page[0], page[1]
    assert accept_run["trigger"] == "accept" and accept_run["ops"][0]["status"] == "applied"
    applied = accept_run["ops"][0]["changes"][0]
    assert applied["after"].strip() == TEA and applied["startLine"] > 0
    statuses = {op["proposalId"]: (op["status"], op.get("decidedBy", "")) for op in propose_run["ops"]}
    assert statuses[ids[EMAIL]] == ("rejected", "admin")
    assert statuses[ids[TEA]] == ("accepted", accept_run["runId"])

    again = propose(rsuite, [add("- jan prefers  EMAIL over phone.")])
    (op,) = again["ops"]
    assert op["status"] == "skipped" and op["reason"].startswith("rejected on ") and op["reason"].endswith(" by admin")
    with client(rsuite) as http:
        pending = http.get("/api/v1/agents/alfred/dream:status").json().get("pending", [])
    assert ids[EMAIL] not in [p["proposalId"] for p in pending]


def test_unknown_or_decided_ids_are_refused_naming_them_and_nothing_changes(rsuite: Suite) -> None:
    report = propose(rsuite, [add("- The office closes at five.")])
    pid = report["ops"][0]["proposalId"]
    before = audit(rsuite, "alfred")
    unknown = reject(rsuite, [pid, "p-000000000000"])
    assert unknown.status_code == 404 and "p-000000000000" in unknown.text
    assert audit(rsuite, "alfred") == before
    assert reject(rsuite, [pid]).status_code == 200
    decided = reject(rsuite, [pid])
    assert decided.status_code == 400 and pid in decided.text and "already rejected" in decided.text


def test_a_read_only_key_lists_but_cannot_reject_and_a_scoped_key_sees_no_other_agent(rsuite: Suite) -> None:
    report = propose(rsuite, [add("- The crane on quay 3 is new.")])
    pid = report["ops"][0]["proposalId"]
    assert runs(rsuite, READER_KEY)["runs"][0]["runId"] == report["runId"]
    assert reject(rsuite, [pid], READER_KEY).status_code == 403
    with client(rsuite, BOB_WRITER_KEY) as http:
        assert http.get("/api/v1/agents/alfred/dream:runs").status_code == 403
    assert reject(rsuite, [pid], BOB_WRITER_KEY).status_code == 403
    with grpc.insecure_channel(rsuite.address("dreaming")) as channel:
        stub = dreaming_pb2_grpc.DreamingStub(channel)
        page = stub.ListDreamRuns(dreaming_pb2.ListDreamRunsRequest(agent_id="alfred", page_size=1), timeout=10,
                                  metadata=(("x-api-key", READER_KEY),))
        assert [r.run_id for r in page.runs] == [report["runId"]] and page.next_page_token
        with pytest.raises(grpc.RpcError) as denied:
            stub.RejectProposals(dreaming_pb2.RejectProposalsRequest(agent_id="alfred", ids=[pid]), timeout=10,
                                 metadata=(("x-api-key", READER_KEY),))
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as scoped:
            stub.ListDreamRuns(dreaming_pb2.ListDreamRunsRequest(agent_id="alfred"), timeout=10,
                               metadata=(("x-api-key", BOB_WRITER_KEY),))
        assert scoped.value.code() == grpc.StatusCode.PERMISSION_DENIED
    done = cli(rsuite, "reject", "alfred", pid)
    assert done.returncode == 0, done.stderr
    assert f"{pid} add MEMORY.md" in done.stdout and "by internal" in done.stdout
    refused = cli(rsuite, "reject", "alfred", pid)
    assert refused.returncode == 1 and "already rejected" in refused.stderr
