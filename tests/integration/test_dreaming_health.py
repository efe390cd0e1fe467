"""The last run's op counts and the run health through real processes, with a scripted reviewer:
GetDreamStatus (REST ``dream:status`` and gRPC) and the console's ListAgents (REST and gRPC) give
the ops applied, skipped and proposed, the failed runs of the last 7 days with the last one's
reason, and why the last run promoted nothing to the shared vault; `gateway dream status` prints
them. Auth: a read-only key reads them, a key scoped to another agent does not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from dreaming_support import add, cli, client, dreaming, replies, reviewer, run_ok, start_suite, write_reply
from suite_support import BOB_WRITER_KEY, READER_KEY, Suite, wait_until

from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, watcher_pb2, watcher_pb2_grpc

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The office plants need water on Mondays.\n"
FACT = "- The harbour office opens at 07:00 on weekdays."


@pytest.fixture(scope="module")
def hsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dhealth")
    answer = tmp / "home" / "replies" / "alfred.json"  # replies() of the home start_suite makes
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", answer), maxChangesPerRun=2),
               "knowledge": {"shared": {"project": "health"}}}, {"id": "bob"}]
    running = start_suite(tmp, agents, files={"alfred": {"MEMORY.md": MEMORY}})
    replies(running.home)
    try:
        yield running
    finally:
        running.stop_all()


def reply(suite: Suite, *proposals: dict[str, Any]) -> None:
    write_reply(replies(suite.home) / "alfred.json", proposals)


def rest_status(suite: Suite, key: str = READER_KEY) -> dict[str, Any]:
    with client(suite, key) as http:
        response = http.get("/api/v1/agents/alfred/dream:status")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def grpc_status(suite: Suite, key: str = READER_KEY) -> dreaming_pb2.DreamStatus:
    with grpc.insecure_channel(suite.address("dreaming")) as channel:
        status: dreaming_pb2.DreamStatus = dreaming_pb2_grpc.DreamingStub(channel).GetDreamStatus(
            dreaming_pb2.GetDreamStatusRequest(agent_id="alfred"), timeout=10, metadata=(("x-api-key", key),))
    return status


def listed(suite: Suite) -> tuple[dict[str, Any], watcher_pb2.DreamSummary]:
    """alfred's dream summary from ListAgents over REST and gRPC, with the read-only key."""
    with client(suite, READER_KEY) as http:
        rows = {a["agentId"]: a for a in http.get("/api/v1/agents").json()["agents"]}
    with grpc.insecure_channel(suite.address("watcher")) as channel:
        answer = watcher_pb2_grpc.SessionsStub(channel).ListAgents(
            watcher_pb2.ListAgentsRequest(), timeout=10, metadata=(("x-api-key", READER_KEY),))
    return rows["alfred"]["dream"], next(a.dream for a in answer.agents if a.agent_id == "alfred")


def settled(suite: Suite, run_id: str) -> tuple[dict[str, Any], watcher_pb2.DreamSummary]:
    """ListAgents once its summary (kept for 2 s) has caught up with run ``run_id``."""
    wait_until(lambda: listed(suite)[0]["lastRunId"] == run_id, 10, f"ListAgents showing run {run_id}")
    return listed(suite)


def test_a_failed_reviewer_counts_as_a_failure_and_its_reason_is_shown(hsuite: Suite) -> None:
    (replies(hsuite.home) / "alfred.json").write_text("the reviewer rambles and prints no JSON")
    report = run_ok(hsuite, "alfred", "propose")
    assert report["reviewer"]["ok"] is False
    health = rest_status(hsuite)["health"]
    assert (health["failuresLast7Days"], health["lastFailureReason"]) == (1, report["reason"])
    assert health["lastFailureAt"][:10] == report["startedAt"][:10]
    assert grpc_status(hsuite).health.failures_last_7_days == 1
    rest, grpc_row = settled(hsuite, report["runId"])
    assert (rest["failuresLast7Days"], rest["lastFailureReason"]) == (1, report["reason"])
    assert (grpc_row.failures_last_7_days, grpc_row.last_failure_at) == (1, health["lastFailureAt"])
    shown = cli(hsuite, "status", "alfred")
    assert shown.returncode == 0, shown.stderr
    assert f"  health: 1 failed run(s) in the last 7 days; the last at {health['lastFailureAt']}: {report['reason']}" in shown.stdout


def test_the_counts_and_why_nothing_was_promoted_follow_the_last_run(hsuite: Suite) -> None:
    reply(hsuite, add(FACT, topic="harbour-hours"))
    applied = run_ok(hsuite, "alfred", "auto")
    assert applied["status"] == "applied", applied
    status = rest_status(hsuite)
    last, health = status["lastRun"], status["health"]
    assert (last["opsApplied"], last["opsSkipped"], last["opsProposed"]) == (1, 0, 0)
    assert (health["promoted"], health["notPromoted"]) == (1, "")

    reply(hsuite, add("- Mara keeps the spare keys."), add("- Jan prefers email."), add("- Quay 4 has a crane."))
    proposed = run_ok(hsuite, "alfred", "propose")
    why = "a propose run promotes nothing"
    status = rest_status(hsuite)
    last, health = status["lastRun"], status["health"]
    assert (last["runId"], last["opsApplied"], last["opsSkipped"], last["opsProposed"]) == (proposed["runId"], 0, 1, 2)
    assert (health["promoted"], health["notPromoted"]) == (0, why)
    by_grpc = grpc_status(hsuite)
    assert (by_grpc.last_run.ops_skipped, by_grpc.last_run.ops_proposed, by_grpc.health.not_promoted) == (1, 2, why)
    rest, grpc_row = settled(hsuite, proposed["runId"])
    assert (rest["opsApplied"], rest["opsSkipped"], rest["opsProposed"], rest["notPromoted"]) == (0, 1, 2, why)
    assert (grpc_row.ops_skipped, grpc_row.ops_proposed, grpc_row.not_promoted, grpc_row.promoted) == (1, 2, why, 0)
    shown = cli(hsuite, "status", "alfred").stdout
    assert "    ops: 0 applied, 1 skipped, 2 proposed" in shown and f"  shared vault: the last run promoted nothing: {why}" in shown


def test_a_key_scoped_to_another_agent_reads_no_health(hsuite: Suite) -> None:
    with client(hsuite, BOB_WRITER_KEY) as http:
        assert http.get("/api/v1/agents/alfred/dream:status").status_code == 403
        assert [a["agentId"] for a in http.get("/api/v1/agents").json()["agents"]] == ["bob"]
    with pytest.raises(grpc.RpcError) as refused:
        grpc_status(hsuite, BOB_WRITER_KEY)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
