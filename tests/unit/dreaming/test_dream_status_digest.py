"""A dream status keeps what it read of audit.jsonl (``history/digest.py``) while the file is
unchanged, and answers exactly what reading the file again would."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from dreaming_stage import MEMORY, Stage, config_in, dream, dreamer_on

from gateway.config import AgentConfig
from services.dreaming.dreamer import Dreamer, Status
from services.dreaming.history.digest import AuditDigests
from services.dreaming.model.values import PROPOSE, Proposal
from services.dreaming.records import audit, jsonl
from services.dreaming.vault.promotion import PromotionReply

TEA = Proposal(op="add", file="MEMORY.md", content="- Jan drinks tea.", reason="learned")
FERRY = Proposal(op="add", file="MEMORY.md", content="- The ferry leaves at noon.", reason="learned")
CRANE = Proposal(op="add", file="MEMORY.md", content="- Quay 4 has a crane.", reason="learned")
GULL = Proposal(op="add", file="MEMORY.md", content="- Gulls nest on the quay.", reason="learned")


def pair(home: Path) -> tuple[Dreamer, Dreamer, AgentConfig, Stage, AuditDigests]:
    """One agent seen by a dreamer that keeps digests and by one that keeps none (reads every time)."""
    config = config_in(home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text(MEMORY)
    stage = Stage(replies=[PromotionReply("created", "note", "no similar shared note", "created")] * 20)
    digests = AuditDigests()
    return dreamer_on(config, home, stage, digests), dreamer_on(config, home, stage, AuditDigests(kept=0)), agent, stage, digests


def same(cached: Dreamer, fresh: Dreamer, agent: AgentConfig) -> Status:
    status = cached.status(agent)
    assert status == fresh.status(agent)
    assert cached.status(agent) == status  # asked again: kept
    return status


def test_the_kept_digest_answers_as_reading_the_file_again_through_runs_accepts_rejects_and_a_trim(tmp_path: Path) -> None:
    cached, fresh, agent, stage, digests = pair(tmp_path)
    assert same(cached, fresh, agent).last_run is None
    reads = digests.reads  # no audit yet: nothing kept

    dream(cached, agent, stage, TEA, FERRY, CRANE, mode=PROPOSE)
    status = same(cached, fresh, agent)
    assert [r.proposal.id for r in status.pending] == [TEA.id, FERRY.id, CRANE.id]
    assert (status.last_ops.proposed, digests.reads) == (3, reads + 1)

    stage.now += timedelta(minutes=5)
    asyncio.run(cached.accept(agent, [TEA.id]))
    assert [r.proposal.id for r in same(cached, fresh, agent).pending] == [FERRY.id, CRANE.id]

    asyncio.run(cached.reject(agent, [FERRY.id], "tester"))
    assert [r.proposal.id for r in same(cached, fresh, agent).pending] == [CRANE.id]

    stage.now += timedelta(minutes=5)
    dream(cached, agent, stage, failure="the reviewer timed out")
    status = same(cached, fresh, agent)
    assert status.health.failures == 1 and status.health.last_failure_reason == "the reviewer timed out"

    stage.now += timedelta(minutes=5)
    dream(cached, agent, stage, GULL)
    assert same(cached, fresh, agent).health.promoted == 1

    reads = digests.reads
    memory = agent.workspace / "MEMORY.md"
    memory.write_text(memory.read_text() + CRANE.content + "\n")  # the proposal is in effect now: not pending
    stage.now += timedelta(days=8)  # the failure is out of the 7-day window
    status = same(cached, fresh, agent)
    assert (status.pending, status.health.failures, digests.reads) == ([], 0, reads)

    path = agent.workspace / audit.AUDIT
    jsonl.trim(path, path.stat().st_size // 3)  # keeps the newest whole lines: the accept and the proposals are gone
    status = same(cached, fresh, agent)
    assert digests.reads == reads + 1 and status.last_ops.applied == 1


def test_an_append_to_the_audit_is_read_and_a_status_of_the_same_file_is_not(tmp_path: Path) -> None:
    cached, _, agent, stage, digests = pair(tmp_path)
    dream(cached, agent, stage, TEA, FERRY, mode=PROPOSE)
    assert len(cached.status(agent).pending) == 2
    reads = digests.reads
    for _ in range(3):
        cached.status(agent)
    assert digests.reads == reads
    audit.append_records(agent.workspace, [{"kind": "rejected", "id": TEA.id, "at": "2026-12-01T04:00:00Z", "by": "x"}])
    assert [r.proposal.id for r in cached.status(agent).pending] == [FERRY.id]
    assert digests.reads == reads + 1


def test_at_most_kept_agents_are_kept_the_least_recently_used_dropped_first(tmp_path: Path) -> None:
    digests = AuditDigests(kept=2)
    workspaces = {}
    for name in ("a", "b", "c"):
        workspaces[name] = tmp_path / name
        audit.append_records(workspaces[name], [{"kind": "run", "run": f"r-{name}", "status": "nothing"}])
    digests.get("a", workspaces["a"], "r-a")
    digests.get("b", workspaces["b"], "r-b")
    digests.get("a", workspaces["a"], "r-a")  # a is now the most recent
    digests.get("c", workspaces["c"], "r-c")  # b goes
    assert (len(digests), digests.reads) == (2, 3)
    digests.get("a", workspaces["a"], "r-a")
    assert digests.reads == 3
    digests.get("b", workspaces["b"], "r-b")
    assert (len(digests), digests.reads) == (2, 4)


def test_a_new_last_run_is_a_new_digest_and_a_missing_audit_is_never_kept(tmp_path: Path) -> None:
    digests = AuditDigests()
    assert digests.get("a", tmp_path, "").facts.ops.applied == 0 and len(digests) == 0
    audit.append_records(tmp_path, [{"kind": "op", "run": "r1", "status": "applied"},
                                    {"kind": "op", "run": "r2", "status": "skipped"}])
    assert digests.get("a", tmp_path, "r1").facts.ops.applied == 1
    assert digests.get("a", tmp_path, "r2").facts.ops.skipped == 1
    assert digests.reads == 3
