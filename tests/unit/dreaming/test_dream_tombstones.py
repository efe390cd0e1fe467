"""The tombstones in dreaming (docs/concepts/forget.md "Where tombstones are checked"): the applier,
the route-out and the shared promotion skip text a forget took out, naming the forget, and nothing
they record keeps the text; a proposal a forget scrubbed (it holds the marker) is never applied."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from dreaming_helpers import agent_with_memory, dream
from test_dream_promotion import FakeKb, agent_in

from gateway.forget_guard import checker
from gateway.forgetting import SHARED_SCOPE, Tombstones, marker
from services.dreaming.apply.applier import plan
from services.dreaming.migration import Settings, make_plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import EPISODIC, PROPOSE, OpResult, Proposal
from services.dreaming.passes.routeout import route_out
from services.dreaming.records.metrics import reason_code
from services.dreaming.vault import kept
from services.dreaming.vault.kept import Kept
from services.dreaming.vault.promotion import SKIPPED, promote_applied

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
FILLER = "".join(f"- Quay {n} has a crane.\n" for n in range(20))
MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + FILLER
FORGOTTEN = "Dana Whitlock's locker code is 4471"
AT = "2026-12-01T03:00:00+00:00"


def forget(home: Path, text: str = FORGOTTEN, scope: str = "alfred", tombstone_id: str = "F-0a1b2c3d4e5f") -> str:
    Tombstones(home).add(tombstone_id, [text], scope=scope, at=AT, by="admin", places=1)
    return tombstone_id


def add(content: str, **extra: str) -> Proposal:
    return Proposal(op="add", file="MEMORY.md", content=content, reason="new fact", **extra)  # type: ignore[arg-type]


def test_the_applier_skips_an_add_a_replace_and_an_episodic_add_of_forgotten_text(tmp_path: Path) -> None:
    tid = forget(tmp_path)
    ops = [
        ("r/1", add("- Remember: dana WHITLOCK'S locker\ncode is 4471 (ask her).")),
        ("r/2", Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.",
                         content=f"- The ferry leaves at noon. {FORGOTTEN}.")),
        ("r/3", Proposal(op="add", tier=EPISODIC, topic="lockers", content=f"- {FORGOTTEN}")),
        ("r/4", Proposal(op="remove", file="MEMORY.md", target="- Quay 3 has a crane.")),
        ("r/5", add("- Dana's locker is on deck 2.")),
    ]
    result = plan({"MEMORY.md": MEMORY, "USER.md": ""}, ops, BUDGETS, forgotten=checker(tmp_path, "alfred"))
    assert [(r.status, r.reason) for r in result.results] == [
        ("skipped", f"forgotten: {tid}"), ("skipped", f"forgotten: {tid}"), ("skipped", f"forgotten: {tid}"),
        ("applied", ""), ("applied", "")]
    assert result.withheld == {"r/1", "r/2", "r/3"} and result.appends == []
    assert "4471" not in result.texts["MEMORY.md"] and "- Dana's locker is on deck 2." in result.texts["MEMORY.md"]
    assert reason_code(result.results[0].reason) == "forgotten"


def test_the_op_recorded_holds_the_marker_not_the_text(tmp_path: Path) -> None:
    tid = forget(tmp_path)
    p = Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.", content=f"- {FORGOTTEN}",
                 reason=f"the user said {FORGOTTEN}")
    (r,) = plan({"MEMORY.md": MEMORY, "USER.md": ""}, [("r/1", p)], BUDGETS, forgotten=checker(tmp_path, "alfred")).results
    assert (r.proposal.content, r.proposal.reason, r.proposal.target) == (marker(tid), marker(tid), p.target)


def test_another_agents_tombstone_does_not_apply_a_shared_one_does(tmp_path: Path) -> None:
    forget(tmp_path, scope="bob")
    ops = [("r/1", add(f"- {FORGOTTEN}"))]
    texts = {"MEMORY.md": MEMORY, "USER.md": ""}
    assert plan(texts, ops, BUDGETS, forgotten=checker(tmp_path, "alfred")).results[0].status == "applied"
    forget(tmp_path, scope=SHARED_SCOPE, tombstone_id="F-00000000000a")
    assert plan(texts, ops, BUDGETS, forgotten=checker(tmp_path, "alfred")).results[0].reason == "forgotten: F-00000000000a"


def test_a_proposal_holding_a_forget_marker_is_skipped_one_keeping_its_anchors_marker_applies() -> None:
    memory = MEMORY + f"- Dana's locker: {marker('F-0a1b2c3d4e5f')}\n"
    ops = [
        ("r/1", add(f"- Dana's locker code is {marker('F-0a1b2c3d4e5f')}")),
        ("r/2", Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.",
                         content=f"- The ferry leaves at {marker('F-00000000000b')}.")),
        ("r/3", Proposal(op="replace", file="MEMORY.md", target=f"- Dana's locker: {marker('F-0a1b2c3d4e5f')}",
                         content=f"- Dana's locker (deck 2): {marker('F-0a1b2c3d4e5f')}")),
    ]
    result = plan({"MEMORY.md": memory, "USER.md": ""}, ops, BUDGETS)
    assert [(r.status, r.reason.split(" (")[0]) for r in result.results] == [
        ("skipped", "forgotten: F-0a1b2c3d4e5f"), ("skipped", "forgotten: F-00000000000b"), ("applied", "")]
    assert "its marker" in result.results[0].reason and result.withheld == {"r/1", "r/2"}


def test_a_run_audits_the_skip_with_the_forget_and_never_the_text(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    tid = forget(agent.home)
    report = dream(agent, "auto", add(f"- {FORGOTTEN}"), add("- Jan prefers email."), run_id="r1")
    assert [(r.status, r.reason) for r in report.ops] == [("skipped", f"forgotten: {tid}"), ("applied", "")]
    dreaming = agent.workspace / ".dreaming"
    records = [json.loads(line) for line in (dreaming / "audit.jsonl").read_text().splitlines()]
    op = next(r for r in records if r["kind"] == "op" and r["status"] == "skipped")
    assert op["reason"] == f"forgotten: {tid}"
    for path in [*dreaming.rglob("*"), agent.workspace / "MEMORY.md"]:
        if path.is_file():
            assert "4471" not in path.read_text(), path


def test_an_op_left_out_by_the_selection_is_recorded_without_the_text(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    agent = dataclasses.replace(agent, dreaming=dataclasses.replace(agent.dreaming, max_changes_per_run=1))
    tid = forget(agent.home)
    report = dream(agent, "auto", add("- Jan prefers email."), add(f"- Note: {FORGOTTEN}"), run_id="r1")
    assert [r.status for r in report.ops] == ["applied", "skipped"] and "maxChangesPerRun" in report.ops[1].reason
    assert report.ops[1].proposal.content == marker(tid)
    assert "4471" not in (agent.workspace / ".dreaming" / "audit.jsonl").read_text()


def test_in_propose_mode_an_op_of_forgotten_text_is_skipped_not_proposed(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    tid = forget(agent.home)
    report = dream(agent, PROPOSE, add(f"- {FORGOTTEN}"), add("- Jan prefers email."), run_id="r1")
    assert [(r.status, r.reason) for r in report.ops] == [("skipped", f"forgotten: {tid}"), ("proposed", "")]


def dated(n: int, extra: str = "") -> str:
    return f"- 2026-11-{n:02d} deployed release {n}.{extra}\n"


def test_the_route_out_leaves_a_block_of_forgotten_text_where_it_is(tmp_path: Path) -> None:
    tid = forget(tmp_path)
    text = "# Memory\n\n" + dated(1) + dated(2, f" {FORGOTTEN}.") + dated(3) + "\n## Facts\n\n- Jan prefers email.\n"
    held: list[str] = []
    moves = route_out(text, 1, "memory", held, checker(tmp_path, "alfred"))
    assert [m.text.strip() for m in moves] == [dated(1).strip(), dated(3).strip()]
    assert held == [f"forgotten: {tid}"]
    assert [m.text.strip() for m in route_out(text, 1, "memory")] == [dated(n, f" {FORGOTTEN}." if n == 2 else "").strip()
                                                                      for n in (1, 2, 3)]  # no check, no hold


def test_promotion_skips_a_fact_of_forgotten_text_and_a_kept_one_leaves_the_queue(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, {"enabled": True, "mode": "auto"})
    tid = forget(agent.home)
    kept.add(agent.workspace, [Kept("alfred/r0/1", "r0", "r0/1", "p0", "lockers", "lockers", f"- {FORGOTTEN}", AT, "")])
    ops = [OpResult("r1/1", add(f"- The code: {FORGOTTEN}"), "applied", file="MEMORY.md"),
           OpResult("r1/2", add("- Jan prefers email."), "applied", file="MEMORY.md")]
    kb = FakeKb()
    step = asyncio.run(promote_applied(agent, kb, "r1", AT, ops))
    assert [c[3] for c in kb.calls] == ["- Jan prefers email."]
    assert [(p.op_id, p.outcome, p.reason) for p in step.promotions[:2]] == [
        ("r0/1", SKIPPED, f"forgotten: {tid}"), ("r1/1", SKIPPED, f"forgotten: {tid}")]
    assert kept.read(agent.workspace) == []


@pytest.mark.parametrize("content", [f"- {FORGOTTEN}", f"- The code is {marker('F-0a1b2c3d4e5f')}"])
def test_promotion_never_sends_forgotten_text_nor_a_marker(tmp_path: Path, content: str) -> None:
    agent = agent_in(tmp_path, {"enabled": True, "mode": "auto"})
    forget(agent.home)
    kb = FakeKb()
    step = asyncio.run(promote_applied(agent, kb, "r1", AT, [OpResult("r1/1", add(content), "applied", file="MEMORY.md")]))
    assert kb.calls == [] and step.promotions[0].reason.startswith("forgotten: F-0a1b2c3d4e5f")


def test_migrate_memory_leaves_a_block_of_forgotten_text_where_it_is(tmp_path: Path) -> None:
    forget(tmp_path)
    text = "# Memory\n\n" + dated(1) + dated(2, f" {FORGOTTEN}.") + dated(3) + "\n## Facts\n\n- Jan prefers email.\n"
    held = make_plan(text, Settings(budget=1, forgotten=checker(tmp_path, "alfred")))
    assert [m.text.strip() for m in held.routed] == [dated(1).strip(), dated(3).strip()]
    assert FORGOTTEN in held.after
