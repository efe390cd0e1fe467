"""Step 10 of a run: a scheduled run in auto mode asks the KB for the shared vault's GC, notes its
answer, and is never failed by it (a stand-in KB and reviewer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import NOW, record, write_session

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.model.values import ACCEPT, MANUAL, SCHEDULE, Proposal, ReviewerOutcome, ReviewerReply
from services.dreaming.peer_client import PeerUnavailable

ANSWER = "Shared vault GC ('global'): retired 1 note(s) idle over 180 days ('relay')."


class Index:
    """A KB whose archive finds nothing and is never asked here (the reviewer proposes an add)."""

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        return None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        return [True] * len(probes)


class Vault:
    """The KB's CollectVault: records who asked; answers, fails, or hangs as told."""

    def __init__(self, answer: str | Exception = ANSWER, hang: bool = False) -> None:
        self.asked: list[str] = []
        self.answer = answer
        self.hang = hang
        self.waiting = asyncio.Event()

    async def collect_vault(self, agent_id: str) -> str:
        self.asked.append(agent_id)
        if self.hang:
            self.waiting.set()
            await asyncio.Event().wait()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def agent_in(home: Path, **shared: Any) -> AgentConfig:
    entry: dict[str, Any] = {"id": "alfred", "knowledge": {"shared": shared}} if shared else {"id": "alfred"}
    agent = build({"configVersion": CURRENT_VERSION, "agents": [entry]}, home).agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text("# Memory\n\n- The harbour opens at 7.\n")
    write_session(agent.transcripts_dir, "today.jsonl", [record("user", "The ferry leaves at 9.")])  # not a quiet night
    return agent


async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
    return ReviewerOutcome(ReviewerReply("one add", (Proposal(op="add", file="MEMORY.md", content="- The ferry leaves at 9."),)), ok=True)


def dream(agent: AgentConfig, vault: Vault | None, *, trigger: str = SCHEDULE, mode: str = "auto") -> Any:
    deps = nightly.Deps(index=Index(), review=review, now=lambda: NOW.astimezone(UTC), vault=vault)
    accepted = [Proposal(op="add", file="MEMORY.md", content="- Accepted.")] if trigger == ACCEPT else None
    return asyncio.run(nightly.run(agent, deps, mode=mode, trigger=trigger, run_id="r1", accepted=accepted))


def run_record(agent: AgentConfig) -> dict[str, Any]:
    lines = (agent.workspace / ".dreaming" / "audit.jsonl").read_text().splitlines()
    record: dict[str, Any] = json.loads(lines[0])
    return record


def test_a_scheduled_auto_run_asks_for_the_vault_gc_after_the_applier_and_notes_the_answer(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    vault = Vault()
    report = dream(agent, vault)
    assert vault.asked == ["alfred"] and report.status == "applied"
    assert report.notes[-1] == ANSWER
    assert report.steps[-3:] == ("applier", "vault-gc", "audit")
    record = run_record(agent)
    assert record["notes"][-1] == ANSWER and record["steps"][-2:] == ["vault-gc", "audit"]
    assert ANSWER in (agent.workspace / ".dreaming" / "DREAMS.md").read_text()


def test_a_quiet_night_still_asks(tmp_path: Path) -> None:
    """No transcripts and nothing over budget: the reviewer is not paid for, the vault's GC still runs."""
    agent = agent_in(tmp_path)
    (agent.transcripts_dir / "today.jsonl").unlink()
    vault = Vault()
    report = dream(agent, vault)
    assert report.status == "nothing" and "reviewer was not called" in report.reason
    assert vault.asked == ["alfred"] and report.notes[-1] == ANSWER


@pytest.mark.parametrize(("trigger", "mode"), [(MANUAL, "auto"), (ACCEPT, "auto"), (SCHEDULE, "propose")])
def test_manual_runs_accepts_and_propose_mode_never_ask(tmp_path: Path, trigger: str, mode: str) -> None:
    agent = agent_in(tmp_path)
    vault = Vault()
    report = dream(agent, vault, trigger=trigger, mode=mode)
    assert vault.asked == [] and "vault-gc" not in report.steps and not any("vault GC" in n for n in report.notes)


def test_an_agent_with_the_shared_kb_off_never_asks(tmp_path: Path) -> None:
    agent = agent_in(tmp_path, enabled=False)
    vault = Vault()
    dream(agent, vault)
    assert vault.asked == []


def test_a_kb_that_cannot_answer_is_a_note_and_the_run_stands(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    report = dream(agent, Vault(PeerUnavailable("kb: UNAVAILABLE: connection refused")))
    assert report.status == "applied" and "- The ferry leaves at 9." in (agent.workspace / "MEMORY.md").read_text()
    assert report.notes[-1].startswith("Shared vault GC not run: the KB could not answer (kb: UNAVAILABLE")
    assert run_record(agent)["status"] == "applied"


def test_a_run_cancelled_while_the_kb_collects_is_audited_interrupted(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    vault = Vault(hang=True)

    async def main() -> None:
        deps = nightly.Deps(index=Index(), review=review, now=lambda: NOW.astimezone(UTC), vault=vault)
        task = asyncio.ensure_future(nightly.run(agent, deps, mode="auto", trigger=SCHEDULE, run_id="r1"))
        await asyncio.wait_for(vault.waiting.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)

    asyncio.run(main())
    record = run_record(agent)
    assert record["status"] == "interrupted" and "shared vault's GC" in record["reason"]
    assert record["steps"][-2:] == ["vault-gc", "audit"]
    assert "- The ferry leaves at 9." in (agent.workspace / "MEMORY.md").read_text()  # the run's work stands
