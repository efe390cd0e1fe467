"""A journal entry cannot revert a forget: reverting a run after its text was forgotten puts back
the marker the forget left in the journal, never the text."""

from __future__ import annotations

import asyncio
from pathlib import Path

from forget_stage import FACT, FACT_LINE, TARGET, leftovers, plant

from gateway.forgetting import marker
from services.dreaming.forget import apply_agent
from services.dreaming.records import journal

ID = "F-0123456789ab"


def test_reverting_the_runs_that_held_the_fact_brings_back_only_the_marker(tmp_path: Path) -> None:
    p = plant(tmp_path)
    apply_agent(p.agent, TARGET, ID, by="ops-key", at="2026-12-07T02:00:00Z")
    memory = p.workspace / "MEMORY.md"
    assert FACT_LINE not in memory.read_text()
    newest, oldest = p.runs[-1], p.runs[0]
    done = asyncio.run(p.dreamer.revert(p.agent, newest, None))  # it removed the fact's line: the line comes back, scrubbed
    assert len(done.reverted) == 3
    assert FACT_LINE.replace(FACT, marker(ID)) + "\n" in memory.read_text()
    done = asyncio.run(p.dreamer.revert(p.agent, oldest, None))  # its context was cut from the fact: scrubbed alike, so found
    assert done.reverted and "- The office opens at 7." in memory.read_text()
    undone = {(r["run"], r["op"]) for r in journal.read(p.workspace) if r.get("kind") == "revert"}
    assert {run for run, _ in undone} == {newest, oldest}
    assert leftovers(tmp_path) == ["agents/alfred/sessions/s1.jsonl"]
