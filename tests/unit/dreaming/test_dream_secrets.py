"""The secret guard in dreaming (docs/concepts/secrets.md): the applier, the route-out and the shared
promotion skip text that holds a secret, naming the detector, and nothing they record keeps the value."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from dreaming_helpers import agent_with_memory, dream
from secret_samples import AWS_KEY, GITHUB_TOKEN, NEAR_MISSES, PRIVATE_KEY_BLOCK, SECRETS
from test_dream_promotion import FakeKb, agent_in

from services.dreaming.apply.applier import plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import EPISODIC, PROPOSE, OpResult, Proposal
from services.dreaming.passes.routeout import route_out
from services.dreaming.vault import kept
from services.dreaming.vault.promotion import SKIPPED, promote_applied

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
FILLER = "".join(f"- Quay {n} has a crane.\n" for n in range(20))
MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + FILLER
AT = "2026-12-01T03:00:00+00:00"


def add(content: str, **extra: str) -> Proposal:
    return Proposal(op="add", file="MEMORY.md", content=content, reason="new fact", **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize("detector", sorted(SECRETS))
def test_the_applier_skips_an_add_with_each_kind_of_secret_naming_the_detector(detector: str) -> None:
    result = plan({"MEMORY.md": MEMORY, "USER.md": ""}, [("r/1", add(f"- Jan's note\n{SECRETS[detector]}"))], BUDGETS)
    (r,) = result.results
    assert r.status == "skipped" and r.reason == f"secret: {detector} (line 2)"
    assert result.texts["MEMORY.md"] == MEMORY and result.withheld == {"r/1"}


@pytest.mark.parametrize("kind", sorted(NEAR_MISSES))
def test_the_applier_applies_an_add_with_a_near_miss(kind: str) -> None:
    result = plan({"MEMORY.md": MEMORY, "USER.md": ""}, [("r/1", add(NEAR_MISSES[kind]))], BUDGETS)
    assert [r.status for r in result.results] == ["applied"] and NEAR_MISSES[kind] in result.texts["MEMORY.md"]


def test_a_replace_and_an_episodic_add_with_a_secret_are_skipped_a_remove_of_one_applies() -> None:
    memory = MEMORY + f"- CI token {GITHUB_TOKEN}\n"
    ops = [
        ("r/1", Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.",
                         content=f"- The ferry leaves at one. Key {AWS_KEY}")),
        ("r/2", Proposal(op="add", tier=EPISODIC, topic="keys", content=PRIVATE_KEY_BLOCK)),
        ("r/3", Proposal(op="remove", file="MEMORY.md", target=f"- CI token {GITHUB_TOKEN}")),
        ("r/4", add("- Jan prefers email.")),
    ]
    result = plan({"MEMORY.md": memory, "USER.md": ""}, ops, BUDGETS)
    assert [(r.status, r.reason.split(" (")[0]) for r in result.results] == [
        ("skipped", "secret: AWS Access Key"), ("skipped", "secret: Private Key"), ("applied", ""), ("applied", "")]
    assert result.appends == [] and GITHUB_TOKEN not in result.texts["MEMORY.md"]
    assert "- Jan prefers email." in result.texts["MEMORY.md"]


def test_the_op_recorded_holds_no_secret_in_its_text_anchor_or_reason() -> None:
    p = Proposal(op="replace", file="MEMORY.md", target=f"- key {AWS_KEY}", content=f"- key {AWS_KEY} (rotated)",
                 reason=f"keeps {AWS_KEY}")
    (r,) = plan({"MEMORY.md": MEMORY + f"- key {AWS_KEY}\n", "USER.md": ""}, [("r/1", p)], BUDGETS).results
    recorded = json.dumps(r.proposal.to_json())
    assert AWS_KEY not in recorded and "[withheld by the secret guard: AWS Access Key]" in recorded
    clean = Proposal(op="add", file="MEMORY.md", content=f"- a {AWS_KEY}", reason="a fact", target="- The ferry leaves at noon.")
    (r,) = plan({"MEMORY.md": MEMORY, "USER.md": ""}, [("r/1", clean)], BUDGETS).results
    assert (r.proposal.target, r.proposal.reason) == (clean.target, clean.reason)  # only what holds a secret is cut


def test_a_run_audits_the_skip_with_the_detector_and_never_the_value(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    report = dream(agent, "auto", add(f"- Deploy key:\n{PRIVATE_KEY_BLOCK}"), add("- Jan prefers email."), run_id="r1")
    assert [(r.status, r.reason.split(" (")[0]) for r in report.ops] == [("skipped", "secret: Private Key"), ("applied", "")]
    dreaming = agent.workspace / ".dreaming"
    records = [json.loads(line) for line in (dreaming / "audit.jsonl").read_text().splitlines()]
    op = next(r for r in records if r["kind"] == "op" and r["status"] == "skipped")
    assert op["reason"] == "secret: Private Key (line 2)"
    for path in [*dreaming.rglob("*"), agent.workspace / "MEMORY.md"]:
        if path.is_file():
            assert "PRIVATE KEY" not in path.read_text(), path


def test_an_op_left_out_by_the_selection_is_recorded_without_its_secret(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    agent = dataclasses.replace(agent, dreaming=dataclasses.replace(agent.dreaming, max_changes_per_run=1))
    report = dream(agent, "auto", add("- Jan prefers email."), add(f"- CI uses {GITHUB_TOKEN}"), run_id="r1")
    assert [r.status for r in report.ops] == ["applied", "skipped"] and "maxChangesPerRun" in report.ops[1].reason
    assert report.ops[1].proposal.content == "[withheld by the secret guard: GitHub Token]"
    assert GITHUB_TOKEN not in (agent.workspace / ".dreaming" / "audit.jsonl").read_text()


def test_in_propose_mode_an_op_with_a_secret_is_skipped_not_proposed(tmp_path: Path) -> None:
    agent = agent_with_memory(tmp_path, MEMORY)
    report = dream(agent, PROPOSE, add(f"- {SECRETS['Slack Token']}"), add("- Jan prefers email."), run_id="r1")
    assert [(r.status, r.reason.split(" (")[0]) for r in report.ops] == [("skipped", "secret: Slack Token"), ("proposed", "")]


def dated(n: int, extra: str = "") -> str:
    return f"- 2026-11-{n:02d} deployed release {n}.{extra}\n"


def test_the_route_out_leaves_a_block_with_a_secret_where_it_is() -> None:
    text = "# Memory\n\n" + dated(1) + dated(2, f" Used {AWS_KEY}.") + dated(3) + "\n## Facts\n\n- Jan prefers email.\n"
    moves = route_out(text, 1, "memory")
    assert [m.text.strip() for m in moves] == [dated(1).strip(), dated(3).strip()]
    assert all(AWS_KEY not in m.text for m in moves)


def test_the_route_out_moves_what_it_would_without_a_secret() -> None:
    text = "# Memory\n\n" + dated(1) + dated(2) + dated(3) + "\n## Facts\n\n- Jan prefers email.\n"
    assert [m.text.strip() for m in route_out(text, 1, "memory")] == [dated(n).strip() for n in (1, 2, 3)]


def test_a_run_notes_the_block_the_route_out_left_for_its_secret(tmp_path: Path) -> None:
    memory = "# Memory\n\n" + dated(1) + dated(2, f" Used {AWS_KEY}.") + dated(3) + "\n## Facts\n\n- Jan prefers email.\n"
    agent = agent_with_memory(tmp_path, memory)
    agent = dataclasses.replace(agent, memory=dataclasses.replace(agent.memory, memory_budget_chars=40),
                                dreaming=dataclasses.replace(agent.dreaming, auto_route_out=True))
    report = dream(agent, "auto", run_id="r1")
    assert "route-out" in report.steps
    assert ("The route-out left a block in MEMORY.md: secret: AWS Access Key (line 4); it is never copied into another "
            "file") in report.notes
    copies = list((agent.workspace / "memory").rglob("*.md"))  # where the route-out's moves land
    assert copies and all(AWS_KEY not in p.read_text() for p in copies)


def test_promotion_skips_a_fact_with_a_secret_without_asking_or_keeping_it(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    ops = [OpResult("r1/1", add(f"- The CI token is {GITHUB_TOKEN}"), "applied", file="MEMORY.md"),
           OpResult("r1/2", add("- Jan prefers email."), "applied", file="MEMORY.md")]
    kb = FakeKb()
    step = asyncio.run(promote_applied(agent, kb, "r1", AT, ops))
    assert [c[3] for c in kb.calls] == ["- Jan prefers email."]
    first = step.promotions[0]
    assert (first.outcome, first.reason) == (SKIPPED, "secret: GitHub Token (line 1)")
    assert step.notes[0] == "Shared promotion of r1/1: skipped: secret: GitHub Token (line 1)"
    assert kept.read(agent.workspace) == []
