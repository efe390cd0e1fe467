"""The last run's op counts and the run health of ``dream status``: failed runs of the last 7 days by
the dreaming clock, and why the last run promoted nothing to the shared vault (audited as
``notPromoted``)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import NOW
from dreaming_stage import dream, dreamer_in

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming.model.values import PROPOSE, OpResult, Promotion, Proposal, iso
from services.dreaming.render import status_text
from services.dreaming.schedule.state import RunSummary, StateStore
from services.dreaming.servicer import status_pb
from services.dreaming.vault import kept
from services.dreaming.vault.promotion import PromotionReply, not_promoted

TEA = Proposal(op="add", file="MEMORY.md", content="- Jan drinks tea.", reason="learned")
FERRY = Proposal(op="add", file="MEMORY.md", content="- The ferry leaves at noon.", reason="learned")
CRANE = Proposal(op="add", file="MEMORY.md", content="- Quay 4 has a crane.", reason="learned")


def audited_runs(agent: AgentConfig) -> list[dict[str, Any]]:
    lines = (agent.workspace / ".dreaming" / "audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "run"]


# --- the last run's ops -------------------------------------------------------------------------


def test_the_last_runs_ops_are_counted_by_status(tmp_path: Path) -> None:
    dreamer, agent, stage = dreamer_in(tmp_path, maxChangesPerRun=2)
    dream(dreamer, agent, stage, TEA, FERRY, CRANE, mode=PROPOSE)
    status = dreamer.status(agent)
    assert (status.last_ops.applied, status.last_ops.skipped, status.last_ops.proposed) == (0, 1, 2)
    last = status_pb(status).last_run
    assert (last.ops_applied, last.ops_skipped, last.ops_proposed) == (0, 1, 2)
    assert "    ops: 0 applied, 1 skipped, 2 proposed\n" in status_text(status)

    stage.now += timedelta(minutes=5)
    stage.replies = [PromotionReply("created", "tea", "no similar shared note", "created 'tea'")]
    dream(dreamer, agent, stage, TEA)
    status = dreamer.status(agent)
    assert (status.last_ops.applied, status.last_ops.skipped, status.last_ops.proposed) == (1, 0, 0)
    assert "    ops: 1 applied, 0 skipped\n" in status_text(status)


# --- failures over the last 7 nights ------------------------------------------------------------


def test_failed_runs_of_the_last_7_days_are_counted_by_the_dreaming_clock(tmp_path: Path) -> None:
    dreamer, agent, stage = dreamer_in(tmp_path)
    nights = [(8, "the reviewer exited with code 1"), (6, "the reviewer timed out after 600 s"), (2, ""),
              (1, "the reviewer printed no JSON")]
    for days, failure in nights:
        stage.now = NOW - timedelta(days=days)
        dream(dreamer, agent, stage, failure=failure)
    stage.now = NOW
    health = dreamer.status(agent).health
    assert (health.failures, health.last_failure_at, health.last_failure_reason) == (
        2, iso(NOW - timedelta(days=1)), "the reviewer printed no JSON")
    text = status_text(dreamer.status(agent))
    assert (f"  health: 2 failed run(s) in the last 7 days; the last at {iso(NOW - timedelta(days=1))}: "
            "the reviewer printed no JSON\n") in text
    assert status_pb(dreamer.status(agent)).health.failures_last_7_days == 2

    stage.now = NOW + timedelta(days=5, hours=1)  # the night 6 days before NOW is now 11 days old
    assert dreamer.status(agent).health.failures == 1
    stage.now = NOW + timedelta(days=6, hours=1)
    assert dreamer.status(agent).health.failures == 0
    assert "  health: no failed run in the last 7 days\n" in status_text(dreamer.status(agent))


def test_a_failure_only_the_state_file_knows_counts_too(tmp_path: Path) -> None:
    dreamer, agent, stage = dreamer_in(tmp_path)
    dream(dreamer, agent, stage)
    raised = RunSummary(run_id="20261201T040000Z-abcd", trigger="schedule", mode="auto", status="failed",
                        reason="the run raised RuntimeError", started_at=(NOW + timedelta(hours=1)).isoformat())
    lock = StateStore(tmp_path).lock(agent.id)
    lock.acquire()
    try:
        lock.record_run(raised)
    finally:
        lock.release()
    stage.now = NOW + timedelta(hours=2)
    health = dreamer.status(agent).health
    assert (health.failures, health.last_failure_reason) == (1, "the run raised RuntimeError")
    assert health.last_failure_at == iso(NOW + timedelta(hours=1))


# --- why nothing was promoted --------------------------------------------------------------------


def _applied(*proposals: Proposal) -> list[OpResult]:
    return [OpResult(f"r1/{n}", p, "applied", file=p.file) for n, p in enumerate(proposals, 1)]


def agent_with(home: Path, shared: dict[str, Any]) -> AgentConfig:
    return build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred", "knowledge": {"shared": shared}}]},
                 home).agents[0]


@pytest.mark.parametrize(("shared", "mode", "results", "promotions", "why"), [
    ({"enabled": False}, "auto", _applied(TEA), [], "shared promotion is off for this agent (knowledge.shared.enabled is false)"),
    ({"mode": "propose"}, "auto", _applied(TEA), [], "shared promotion is off for this agent (knowledge.shared.mode is 'propose')"),
    ({}, PROPOSE, [], [], "a propose run promotes nothing"),
    ({}, "auto", [OpResult("r1/1", TEA, "skipped", "over the limit")], [],
     "no candidate: the run applied no durable add to MEMORY.md or USER.md"),
    ({}, "auto", _applied(TEA, FERRY), [Promotion("r1/1", "p1", "unchanged", "tea", "already there"),
                                        Promotion("r1/2", "p2", "unchanged", "ferry", "already there")],
     "none of its 2 candidate(s) landed: 2 already in the shared vault"),
    ({}, "auto", _applied(TEA, FERRY), [Promotion("r1/1", "p1", "skipped", "", "pointers"),
                                        Promotion("r1/2", "p2", "declined", "ferry", "the note-size cap refuses it")],
     "none of its 2 candidate(s) landed: 1 skipped (no fact, a secret or forgotten text), 1 refused "
     "(the first refusal: the note-size cap refuses it)"),
    ({}, "auto", _applied(TEA, FERRY), [Promotion("r1/1", "p1", "unchanged", "tea", ""),
                                        Promotion("r1/2", "p2", "merged", "ferry", "")], ""),
])
def test_why_a_run_promoted_nothing(tmp_path: Path, shared: dict[str, Any], mode: str, results: list[OpResult],
                                    promotions: list[Promotion], why: str) -> None:
    assert not_promoted(agent_with(tmp_path, shared), object(), mode, results, promotions) == why  # type: ignore[arg-type]


def test_a_run_that_promoted_nothing_audits_why_and_the_status_shows_it(tmp_path: Path) -> None:
    dreamer, agent, stage = dreamer_in(tmp_path)
    stage.replies = [PromotionReply("unchanged", "tea", "the note already holds it", "unchanged 'tea'"),
                     PromotionReply("declined", "ferry", "the vault kept changing", "declined")]
    dream(dreamer, agent, stage, TEA, FERRY)
    why = "none of its 2 candidate(s) landed: 1 already in the shared vault, 1 refused (the first refusal: the vault kept changing)"
    assert audited_runs(agent)[-1]["notPromoted"] == why
    status = dreamer.status(agent)
    assert (status.health.promoted, status.health.not_promoted) == (0, why)
    assert status_pb(status).health.not_promoted == why
    assert f"  shared vault: the last run promoted nothing: {why}\n" in status_text(status)

    stage.now += timedelta(minutes=5)
    stage.replies = [PromotionReply("created", "crane", "no similar shared note", "created 'crane'")]
    dream(dreamer, agent, stage, CRANE)
    assert audited_runs(agent)[-1]["notPromoted"] == ""
    status = dreamer.status(agent)
    assert (status.health.promoted, status.health.not_promoted) == (1, "")
    assert "  shared vault: the last run promoted 1 note(s)\n" in status_text(status)


def test_a_run_that_failed_before_promotion_says_so(tmp_path: Path) -> None:
    dreamer, agent, stage = dreamer_in(tmp_path)
    (agent.workspace / "MEMORY.md").unlink()
    (agent.workspace / "MEMORY.md").symlink_to(tmp_path / "elsewhere.md")
    dream(dreamer, agent, stage, TEA)
    run = audited_runs(agent)[-1]
    assert run["status"] == "failed" and run["notPromoted"] == "the run ended (failed) before its promotion step"
    health = dreamer.status(agent).health
    assert health.failures == 1 and health.not_promoted == run["notPromoted"]


def test_the_status_counts_the_promotions_kept_on_the_host(tmp_path: Path) -> None:
    dreamer, agent, _ = dreamer_in(tmp_path)
    assert dreamer.status(agent).kept_promotions == 0 and "kept on this host" not in status_text(dreamer.status(agent))
    kept.add(agent.workspace, [kept.Kept(f"alfred/r1/{n}", "r1", f"r1/{n}", "p", "t", "", "- f", "at", "down") for n in (1, 2)])
    status = dreamer.status(agent)
    assert status.kept_promotions == 2 and status_pb(status).kept_promotions == 2
    assert "  shared vault: 2 promotion(s) kept on this host (the KB or its vault was unavailable); the next run " \
           "retries them\n" in status_text(status)
