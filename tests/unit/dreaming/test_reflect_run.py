"""One run of the vault's reflection against a KB and a reviewer at their seams (services/dreaming/reflect/run.py):
auto and propose, noop and busy, contradictions left, a hostile reply confined to its cluster, guards'
refusals and a note changed mid-run recorded, the KB's refusal of a request, decide (accept, reject, stale)."""

from __future__ import annotations

import asyncio
import json

import pytest
from reflect_fakes import FakeKb, ScriptedReviewer, sha, vault

from gateway.errors import Aborted, NotFound
from gateway.metrics import REGISTRY
from gateway.v1 import kb_pb2
from services.dreaming.records.metrics import refusal_guard
from services.dreaming.reflect import run as reflect_run

NOTES = {
    "deploy steps": "# Deploy\n- run make deploy\n- [[deploying the app]]\n",
    "deploying the app": "# Deploying\n- run make deploy\n- check /healthz\n",
    "api keys": "# API keys\n- rotate monthly\n",
    "billing": "# Billing\n- invoices on the 1st\n- [[api keys]]\n",
}
PAIR = ("deploy steps", "deploying the app")
OTHER = ("api keys", "billing")
MERGED = "# Deploy\n- run make deploy\n- check /healthz\n"


def merge_reply(name: str = "deploy steps", replaces: tuple[str, ...] = PAIR) -> dict[str, object]:
    return {"decision": "merge", "name": name, "content": MERGED, "replaces": list(replaces), "reason": "same steps"}


def reflect(kb: FakeKb, reviewer: ScriptedReviewer, mode: str = "auto", run_id: str = "R-20261206T040000Z-abc123") -> kb_pb2.VaultReflectionRun:
    return asyncio.run(reflect_run.reflect(vault(mode=mode), kb, reviewer, mode=mode, trigger="manual", run_id=run_id,
                                           started_at=1.0))


def outcomes(run: kb_pb2.VaultReflectionRun) -> list[tuple[list[str], str]]:
    return [(list(c.notes), c.outcome) for c in run.clusters]


def test_auto_merges_a_cluster_with_the_plans_hashes_and_leaves_the_other() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    reviewer = ScriptedReviewer({"deploy steps": merge_reply()})
    run = reflect(kb, reviewer)
    assert run.status == "ok" and outcomes(run) == [(list(PAIR), "merged"), (list(OTHER), "left")]
    assert run.clusters[0].merge_id == "M-000000000001"
    [merge] = kb.merges
    assert not merge.dry_run and merge.max_drop_share == 0.5 and list(merge.replaces) == list(PAIR)
    assert dict(merge.expected_sha256) == {n: sha(NOTES[n]) for n in PAIR}
    assert kb.notes["deploy steps"] == MERGED and "stale__deploying the app" in kb.notes
    assert len(reviewer.prompts) == 2 and kb.plans[0].max_clusters == 20
    assert "- check /healthz" in reviewer.prompts[0] and "rotate monthly" in reviewer.prompts[1]


def test_propose_checks_the_merge_writes_nothing_and_records_a_pending_proposal() -> None:
    kb = FakeKb(dict(NOTES), [PAIR])
    run = reflect(kb, ScriptedReviewer({"deploy steps": merge_reply()}), mode="propose")
    assert outcomes(run) == [(list(PAIR), "proposed")] and kb.merges[0].dry_run
    assert kb.notes == NOTES
    [proposal] = run.proposals
    assert (proposal.state, proposal.name, proposal.content, list(proposal.replaces)) == ("pending", "deploy steps", MERGED, list(PAIR))
    assert set(proposal.expected_sha256) == set(PAIR) and kb.records[0].mode == "propose"


def test_an_unchanged_vault_is_a_noop_that_asks_no_reviewer() -> None:
    kb = FakeKb(dict(NOTES), [PAIR], unchanged=True)
    reviewer = ScriptedReviewer({"deploy steps": merge_reply()})
    run = reflect(kb, reviewer)
    assert run.status == "noop" and "not changed" in run.reason and reviewer.prompts == [] and kb.merges == []


def test_a_busy_vault_is_aborted_with_the_holder_and_nothing_recorded() -> None:
    kb = FakeKb(dict(NOTES), [PAIR], busy_with="R-20261206T040000Z-ffffff")
    with pytest.raises(Aborted, match="R-20261206T040000Z-ffffff"):
        reflect(kb, ScriptedReviewer())
    assert kb.records == []


def test_a_contradicting_cluster_is_left_for_a_person_without_a_reviewer_call() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    kb.contradictions[FakeKb.cluster_id(PAIR)] = "port: 8080 vs 9090"
    reviewer = ScriptedReviewer({"deploy steps": merge_reply()})
    run = reflect(kb, reviewer)
    assert outcomes(run)[0] == (list(PAIR), "left") and "contradictions" in run.clusters[0].reason
    assert "port: 8080 vs 9090" in run.clusters[0].reason
    assert len(reviewer.prompts) == 1 and kb.merges == []


def test_a_hostile_reply_naming_notes_outside_its_cluster_changes_nothing() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    everything = merge_reply(replaces=(*PAIR, *OTHER))
    run = reflect(kb, ScriptedReviewer({"deploy steps": everything}))
    assert outcomes(run) == [(list(PAIR), "left"), (list(OTHER), "left")]
    assert "outside this cluster" in run.clusters[0].reason and kb.merges == [] and kb.notes == NOTES


def test_a_refusal_and_a_note_changed_mid_run_are_recorded_with_the_guards_reason() -> None:
    kb = FakeKb(dict(NOTES), [PAIR], refuse="bounded: the merge drops 3 of 4 distinct lines (over maxDropShare 0.5)")
    run = reflect(kb, ScriptedReviewer({"deploy steps": merge_reply()}))
    assert outcomes(run) == [(list(PAIR), "refused")] and "maxDropShare" in run.clusters[0].reason
    kb = FakeKb(dict(NOTES), [PAIR], edit_before_merge={"deploying the app": "# edited by a person\n"})
    run = reflect(kb, ScriptedReviewer({"deploy steps": merge_reply()}))
    assert outcomes(run) == [(list(PAIR), "changed")] and "changed since the plan" in run.clusters[0].reason
    assert kb.notes["deploying the app"] == "# edited by a person\n" and "stale__deploying the app" not in kb.notes


def test_the_kbs_refusal_of_a_request_refuses_the_cluster_not_the_run() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    run = reflect(kb, ScriptedReviewer({"deploy steps": merge_reply(name="bad name"), "api keys": merge_reply("api keys", OTHER)}))
    assert run.status == "ok" and outcomes(run) == [(list(PAIR), "refused"), (list(OTHER), "merged")]
    assert "the KB refused the merge" in run.clusters[0].reason


def test_a_failed_reviewer_leaves_the_cluster_unreviewed_with_its_reason() -> None:
    kb = FakeKb(dict(NOTES), [PAIR])
    run = reflect(kb, ScriptedReviewer(fail=True))
    assert outcomes(run) == [(list(PAIR), "unreviewed")] and "the reviewer failed: timed out" in run.clusters[0].reason


def test_the_cap_is_passed_to_the_plan_and_the_rest_are_remaining() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    run = asyncio.run(reflect_run.reflect(vault(max_clusters=1), kb, ScriptedReviewer(), mode="auto", trigger="schedule",
                                          run_id="R-20261206T040000Z-abc123", started_at=1.0))
    assert kb.plans[0].max_clusters == 1 and len(run.clusters) == 1 and run.remaining == 1 and run.trigger == "schedule"


def test_a_run_that_fails_midway_is_recorded_failed_and_the_error_raised() -> None:
    class Broken(FakeKb):
        async def merge_notes(self, request: kb_pb2.MergeVaultNotesRequest) -> kb_pb2.MergeVaultNotesResponse:
            raise RuntimeError("kb went away")

    kb = Broken(dict(NOTES), [PAIR, OTHER])
    with pytest.raises(RuntimeError):
        reflect(kb, ScriptedReviewer({"deploy steps": merge_reply()}))
    [record] = kb.records
    assert record.status == "failed" and "kb went away" in record.reason and record.remaining == 2


def propose_then(kb: FakeKb) -> str:
    run = reflect(kb, ScriptedReviewer({"deploy steps": merge_reply(), "api keys": merge_reply("api keys", OTHER)}),
                  mode="propose")
    assert [p.state for p in run.proposals] == ["pending"] * len(kb.clusters)
    return run.run_id


def decide(kb: FakeKb, target: str, accept: list[str], reject: list[str], run_id: str) -> kb_pb2.VaultReflectionRun:
    history = asyncio.run(kb.list_reflections("team", 200)).runs
    return asyncio.run(reflect_run.decide(vault(), kb, target=target, accept=accept, reject=reject, run_id=run_id,
                                          started_at=2.0, history=list(history)))


def test_accept_merges_a_proposal_and_reject_records_it_and_the_list_shows_both() -> None:
    kb = FakeKb(dict(NOTES), [PAIR, OTHER])
    target = propose_then(kb)
    pair, other = FakeKb.cluster_id(PAIR), FakeKb.cluster_id(OTHER)
    run = decide(kb, target, [pair], [other], "R-20261206T050000Z-abc124")
    assert run.reason == f"decided proposals of run {target}"
    assert outcomes(run) == [(list(PAIR), "merged"), (list(OTHER), "left")]
    assert kb.notes["deploy steps"] == MERGED and "api keys" in kb.notes and not kb.merges[-1].dry_run
    listed = reflect_run.with_decisions(asyncio.run(kb.list_reflections("team", 20)).runs)
    original = next(r for r in listed if r.run_id == target)
    assert {p.cluster_id: p.state for p in original.proposals} == {pair: "accepted", other: "rejected"}
    again = decide(kb, target, [pair], [], "R-20261206T060000Z-abc125")
    assert outcomes(again) == [(list(PAIR), "left")] and again.clusters[0].reason == "already accepted"


def test_accepting_a_proposal_whose_note_changed_since_makes_it_stale() -> None:
    kb = FakeKb(dict(NOTES), [PAIR])
    target = propose_then(kb)
    kb.notes["deploying the app"] = "# edited since\n"
    run = decide(kb, target, [FakeKb.cluster_id(PAIR)], [], "R-20261206T050000Z-abc124")
    assert outcomes(run) == [(list(PAIR), "changed")] and [p.state for p in run.proposals] == ["stale"]
    assert kb.notes["deploying the app"] == "# edited since\n"


def test_decide_names_an_unknown_run_or_cluster() -> None:
    kb = FakeKb(dict(NOTES), [PAIR])
    target = propose_then(kb)
    with pytest.raises(NotFound, match="no reflection run"):
        decide(kb, "R-20261206T010000Z-000000", ["C-000000000000"], [], "R-20261206T050000Z-abc124")
    with pytest.raises(NotFound, match="no proposal for cluster 'C-000000000000'"):
        decide(kb, target, ["C-000000000000"], [], "R-20261206T050000Z-abc124")
    assert json.dumps([r.status for r in kb.records]) == '["ok"]'


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_run_counts_its_status_merges_refusals_and_reviewer_calls() -> None:
    runs_ok, merges = sample("gateway_vault_reflection_runs_total", status="ok"), sample("gateway_vault_reflection_merges_total", result="merged")
    changed = sample("gateway_vault_reflection_refusals_total", guard="changed")
    calls = sample("gateway_vault_reflection_reviewer_calls_total", result="ok")
    kb = FakeKb(dict(NOTES), [PAIR, OTHER], edit_before_merge={"billing": "# edited\n"})
    reflect(kb, ScriptedReviewer({"deploy steps": merge_reply(), "api keys": merge_reply("api keys", OTHER)}))
    assert sample("gateway_vault_reflection_runs_total", status="ok") == runs_ok + 1
    assert sample("gateway_vault_reflection_merges_total", result="merged") == merges + 1
    assert sample("gateway_vault_reflection_refusals_total", guard="changed") == changed + 1
    assert sample("gateway_vault_reflection_reviewer_calls_total", result="ok") == calls + 2
    noops, busy = sample("gateway_vault_reflection_runs_total", status="noop"), sample("gateway_vault_reflection_runs_total", status="busy")
    reflect(FakeKb(dict(NOTES), [PAIR], unchanged=True), ScriptedReviewer())
    with pytest.raises(Aborted):
        reflect(FakeKb(dict(NOTES), [PAIR], busy_with="R-x"), ScriptedReviewer())
    assert sample("gateway_vault_reflection_runs_total", status="noop") == noops + 1
    assert sample("gateway_vault_reflection_runs_total", status="busy") == busy + 1


@pytest.mark.parametrize(("reason", "guard"), [
    ("contradicting claims: port", "contradiction"),
    ("bounded: the merge drops 3 of 4 distinct lines", "drop_share"),
    ("recall probe: the dropped line 'x' was not found by vault search", "recall"),
    ("secret: an API key on line 2", "secret"),
    ("something new", "other"),
])
def test_a_refusals_guard_label_is_read_from_its_reason(reason: str, guard: str) -> None:
    assert refusal_guard(reason) == guard
    assert refusal_guard(reason, changed=True) == "changed"


def test_a_run_cancelled_midway_records_itself_failed_so_the_claim_is_released() -> None:
    kb = FakeKb(dict(NOTES), [PAIR])
    asked = asyncio.Event()

    async def hang(_vault: object, _prompt: str) -> object:
        asked.set()
        await asyncio.Event().wait()  # a reviewer that never answers
        raise AssertionError("unreachable")

    async def go() -> None:
        task = asyncio.create_task(reflect_run.reflect(vault(), kb, hang, mode="auto", trigger="schedule",  # type: ignore[arg-type]
                                                       run_id="R-20261206T040000Z-abc123", started_at=1.0))
        await asked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    [record] = kb.records
    assert record.status == "failed" and "cancelled" in record.reason and kb.claim == ""
