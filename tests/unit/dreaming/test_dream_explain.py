"""``explain``: an entry's history from the lifecycle rows and the journal (in-process KB)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dreaming_kb import LocalKb
from test_dream_staleness_run import NOW, agent_in, gc, write

from services.dreaming.apply.applier import plan
from services.dreaming.apply.commit import commit
from services.dreaming.history.explain import explain, render
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import Proposal
from services.dreaming.passes.staleness import DAY_S


def test_a_stale_entry_says_when_it_was_seen_moved_why_and_restored(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    write(agent, "memory/notes.md", "# Notes\n\n- the ferry leaves at nine\n- the tide tables live in the red binder\n")
    kb = LocalKb(agent, now=NOW)
    try:
        gc(agent, kb)
        [item] = asyncio.run(explain(agent, kb, "ferry leaves nine"))
        assert [(p.path, p.state) for p in item.places] == [("memory/archive/stale.md", "stale")]
        assert item.text == "- the ferry leaves at nine" and item.life is not None and item.life.first_path == "memory/notes.md"
        kinds = [e.kind for e in item.events]
        assert kinds == ["first-seen", "invalidated", "moved"] or kinds == ["first-seen", "moved", "invalidated"]
        [moved] = [e for e in item.events if e.kind == "moved"]
        assert (moved.run_id, moved.op_id, moved.file, moved.to_file) == ("r1", moved.op_id, "memory/notes.md", "memory/archive/stale.md")
        assert "aged out: idle 200 days, retrieved 0 times" in moved.detail
        kb.retrieve("ferry leaves nine", at=NOW + 10)
        gc(agent, kb, "r2", NOW + DAY_S)
        [item] = asyncio.run(explain(agent, kb, "ferry leaves nine"))
        assert [p.state for p in item.places] == ["live"]
        assert [e.kind for e in item.events][-2:] == ["retrieved", "restored"] or "restored" in [e.kind for e in item.events]
        shown = render("alfred", "ferry leaves nine", [item])
        assert "stands in memory/notes.md" in shown and "memory/archive/stale.md → memory/notes.md" in shown
        assert "memory/notes.md → memory/archive/stale.md: aged out" in shown
    finally:
        kb.close()


def test_a_pruned_entry_names_the_op_that_removed_it(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, enabled=False)
    memory = "# Memory\n\n- Ticket 41 (login bug) is still open\n" + "".join(f"- The harbour office {n} opens at seven\n" for n in range(9))
    (agent.workspace / "MEMORY.md").write_text(memory)
    remove = Proposal(op="remove", file="MEMORY.md", target="- Ticket 41 (login bug) is still open", reason="closed")
    commit(agent.workspace, plan({"MEMORY.md": memory, "USER.md": ""}, [("r9/1", remove)], Budgets(10_000, 10_000, False)),
           "r9", "2026-12-01T03:00:00Z")
    kb = LocalKb(agent, now=NOW)
    try:
        [item] = asyncio.run(explain(agent, kb, "ticket login bug"))
        assert [p.state for p in item.places] == ["pruned"]
        [edited] = [e for e in item.events if e.kind == "edited"]
        assert (edited.op_id, edited.file) == ("r9/1", "MEMORY.md") and "took it out of MEMORY.md: closed" in edited.detail
        assert asyncio.run(explain(agent, kb, "nothing like this anywhere")) == []
        assert "no entry of alfred matches" in render("alfred", "x", [])
    finally:
        kb.close()
