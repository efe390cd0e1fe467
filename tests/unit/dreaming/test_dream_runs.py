"""The runs list (``history/runs.py``): newest first, each op's status now and what it changed,
paged and bounded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from dreaming_helpers import NOW, QuietIndex, agent_with_memory, dream

from gateway.config import AgentConfig
from gateway.errors import InvalidArgument
from services.dreaming import nightly
from services.dreaming.history import runs
from services.dreaming.history.reject import reject
from services.dreaming.history.revert import revert_run
from services.dreaming.model.values import ACCEPT, AUTO, MANUAL, PROPOSE, Proposal

MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + "".join(f"- Quay {n} has a crane.\n" for n in range(20))
FACT = Proposal(op="add", file="MEMORY.md", content="- Jan prefers email over phone.", reason="said so")
TEA = Proposal(op="add", file="MEMORY.md", content="- Jan drinks tea.", reason="seen twice")
FERRY = Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.", content="- The ferry leaves at one.")


def agent_in(home: Path) -> AgentConfig:
    return agent_with_memory(home, MEMORY)


def ops_of(page: runs.Page, n: int = 0) -> list[tuple[str, str, bool]]:
    return [(o.proposal_id, o.status, o.pending) for o in page.runs[n].ops]


def test_a_propose_run_lists_its_proposals_with_before_and_after(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    dream(agent, PROPOSE, FACT, FERRY, run_id="20261201T030000Z-aaaa")
    page = runs.list_runs(agent, 20, "")
    run = page.runs[0]
    assert (run.record["run"], run.record["mode"], run.ops_total) == ("20261201T030000Z-aaaa", PROPOSE, 2)
    assert ops_of(page) == [(FACT.id, "proposed", True), (FERRY.id, "proposed", True)]
    fact, ferry = run.ops
    assert fact.changes == (runs.Change("MEMORY.md", "", FACT.content),)
    assert ferry.changes == (runs.Change("MEMORY.md", FERRY.target, FERRY.content, 3, 3),)
    assert ferry.proposal_reason == "" and fact.proposal_reason == "said so"
    assert page.next_token == "" and page.cut == []


def test_decisions_show_on_the_proposals_they_decided(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    dream(agent, PROPOSE, FACT, TEA, run_id="20261201T030000Z-aaaa")
    reject(agent, [FACT.id], "ops-key", "2026-12-01T09:00:00Z")
    deps = nightly.Deps(index=QuietIndex(), review=None, now=lambda: NOW)  # type: ignore[arg-type]  # an accept asks no reviewer
    asyncio.run(nightly.run(agent, deps, mode=AUTO, trigger=ACCEPT, accepted=[TEA], run_id="20261201T030001Z-cccc"))
    page = runs.list_runs(agent, 20, "")
    assert [r.record["trigger"] for r in page.runs] == [ACCEPT, MANUAL]
    assert ops_of(page, 1) == [(FACT.id, "rejected", False), (TEA.id, "accepted", False)]
    fact, tea = page.runs[1].ops
    assert (fact.decided_by, fact.decided_at) == ("ops-key", "2026-12-01T09:00:00Z")
    assert tea.decided_by == "20261201T030001Z-cccc"
    assert ops_of(page, 0) == [(TEA.id, "applied", False)]


def test_an_applied_op_shows_the_journal_and_a_revert_marks_it(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    dream(agent, AUTO, FACT, run_id="20261201T030000Z-bbbb")
    page = runs.list_runs(agent, 20, "")
    (op,) = page.runs[0].ops
    assert (op.status, op.changes[0].before, op.changes[0].after.strip()) == ("applied", "", FACT.content)
    assert op.changes[0].start_line > 0 and op.changes[0].end_line >= op.changes[0].start_line
    lines = (agent.workspace / "MEMORY.md").read_text().splitlines()
    assert lines[op.changes[0].start_line - 1] == FACT.content
    asyncio.run(revert_run(agent, None, "20261201T030000Z-bbbb", None, NOW))
    page = runs.list_runs(agent, 20, "")
    assert [r.record["run"] for r in page.runs] == ["20261201T030000Z-bbbb"]  # a revert is no run
    assert page.runs[0].ops[0].status == "reverted" and page.runs[0].ops[0].changes[0].start_line == 0


def test_pages_go_newest_first_and_end(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    ids = [f"20261201T03000{n}Z-aaaa" for n in range(5)]
    for n, run_id in enumerate(ids):
        dream(agent, PROPOSE, Proposal(op="add", file="MEMORY.md", content=f"- fact {n}"), run_id=run_id)
    seen, token = [], ""
    while True:
        page = runs.list_runs(agent, 2, token)
        seen += [r.record["run"] for r in page.runs]
        token = page.next_token
        if not token:
            break
    assert seen == ids[::-1]
    with pytest.raises(InvalidArgument, match="names no run"):
        runs.list_runs(agent, 2, "20200101T000000Z-dead")


def test_the_page_size_is_bounded() -> None:
    assert runs.page_size(0) == 20 and runs.page_size(100) == 100
    for bad in (-1, 101):
        with pytest.raises(InvalidArgument, match="at most 100"):
            runs.page_size(bad)


def test_long_texts_and_big_pages_are_cut_and_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = agent_in(tmp_path)
    dream(agent, PROPOSE, Proposal(op="add", file="MEMORY.md", content="- " + "x" * 5000), run_id="20261201T030000Z-aaaa")
    dream(agent, PROPOSE, Proposal(op="add", file="MEMORY.md", content="- " + "y" * 5000), run_id="20261201T030001Z-aaaa")
    monkeypatch.setattr(runs, "MAX_PAGE_CHARS", 100)
    page = runs.list_runs(agent, 20, "")
    assert len(page.runs) == 1 and page.next_token == "20261201T030000Z-aaaa"
    change = page.runs[0].ops[0].changes[0]
    assert change.cut and len(change.after) == runs.MAX_TEXT
    assert any("cut at 4000" in line for line in page.cut) and any("page ended" in line for line in page.cut)
