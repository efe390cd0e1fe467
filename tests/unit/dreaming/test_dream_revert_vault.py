"""A revert reaches the shared vault (vault_undo, Dreamer.revert): each promotion's write is journaled,
a revert of the run or of the op undoes it through the KB, a note that cannot be undone is left and
named, a KB that cannot answer leaves the local revert standing, and reverting twice changes nothing.

The KB is a stand-in that runs the KB's own vault code in this process (no gRPC)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import NOW

from gateway.config import AgentConfig, Config, build
from gateway.config_migrations import CURRENT_VERSION
from gateway.promotion_write import PromotionWrite
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.dreamer import Dreamer
from services.dreaming.history.revert import RevertResult
from services.dreaming.model.values import MANUAL, Proposal, ReviewerOutcome, ReviewerReply, VaultUndo
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.render import revert_text
from services.dreaming.schedule.quiet import Activity
from services.dreaming.schedule.state import StateStore
from services.dreaming.vault import undo as vault_undo
from services.dreaming.vault.promotion import PromotionReply, UndoReply
from services.kb.vault import promotion as kb_promotion
from services.kb.vault import unpromote
from services.kb.vault.note_index import open_vault_index, search_vault
from services.kb.vault.notes import update
from services.kb.vault.sqlite_store import SqliteVaultStore

MEMORY = "# Memory\n\n- The office plants need water on Mondays.\n"
JAN = "- Jan prefers email over phone."
FERRY = "- The ferry leaves pier 4 at 08:15."


class VaultKb:
    """A ``Promoter`` (and recall ``Index``) over a real vault, with the KB's own code; ``down``:
    every undo fails as an unreachable KB does."""

    def __init__(self, vault_dir: Path) -> None:
        self.dir = vault_dir
        self.conn = open_vault_index(vault_dir)
        self.down = False
        self.undos: list[tuple[str, str]] = []

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str = "") -> PromotionReply:
        r = kb_promotion.promote(SqliteVaultStore(self.dir, self.conn), agent_id=agent_id, topic=topic, reason=reason, content=content, run_id=run_id)
        return PromotionReply(r.outcome, r.name, r.reason, r.message, r.name_from, r.passed_over, r.linked, r.folded,
                              r.twin_kept, r.write)

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite | None,
                             request_id: str = "") -> UndoReply:
        self.undos.append((op_id, write.note))
        if self.down:
            raise PeerUnavailable("kb: UNAVAILABLE: connection refused", "UNAVAILABLE")
        r = unpromote.undo(SqliteVaultStore(self.dir, self.conn), unpromote.check_write(write))
        return UndoReply(r.outcome, r.note, r.reason, r.deleted)

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        return None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        return [True] * len(probes)

    def notes(self) -> dict[str, str]:
        return {p.name.removesuffix(".md"): p.read_text() for p in sorted((self.dir / "notes").glob("*.md"))}

    def found(self, query: str) -> list[str]:
        return [h.path for h in search_vault(self.conn, query, 10).hits]


class NoWatcher:
    async def activity(self, agent_id: str) -> Activity:
        raise AssertionError("not called")


def reviewer(*proposals: Proposal) -> nightly.Review:
    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        return ReviewerOutcome(ReviewerReply("scripted", tuple(proposals)), ok=True)

    return review


class Setup:
    def __init__(self, home: Path, *proposals: Proposal) -> None:
        self.config: Config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, home)
        self.agent = self.config.agents[0]
        self.agent.workspace.mkdir(parents=True)
        (self.agent.workspace / "MEMORY.md").write_text(MEMORY)
        self.kb = VaultKb(self.agent.knowledge.shared.vault_dir)
        self.deps = nightly.Deps(index=self.kb, review=reviewer(*proposals), now=lambda: NOW, promoter=self.kb)
        self.dreamer = Dreamer(lambda: self.config, StateStore(home), self.deps, NoWatcher())

    def dream(self, run_id: str) -> None:
        report = asyncio.run(nightly.run(self.agent, self.deps, mode="auto", trigger=MANUAL, run_id=run_id))
        assert report.status == "applied", report

    def revert(self, run_id: str, op_id: str | None = None) -> RevertResult:
        return asyncio.run(self.dreamer.revert(self.agent, run_id, op_id))

    def memory(self) -> str:
        return (self.agent.workspace / "MEMORY.md").read_text()

    def records(self, name: str, kind: str) -> list[dict[str, Any]]:
        lines = (self.agent.workspace / ".dreaming" / name).read_text().splitlines()
        return [r for r in map(json.loads, lines) if r.get("kind") == kind]

    def dreams(self) -> str:
        return (self.agent.workspace / ".dreaming" / "DREAMS.md").read_text()


def test_a_promotion_is_journaled_and_reverting_the_run_takes_it_out_of_the_vault(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact preference", topic="jan-contact"))
    s.dream("r1")
    assert list(s.kb.notes()) == ["jan-contact"] and s.kb.found("email") == ["notes/jan-contact.md"]
    [written] = s.records("journal.jsonl", "promotion")
    assert {k: written[k] for k in ("run", "op", "note", "project", "write", "offset", "removed", "hashBefore")} == {
        "run": "r1", "op": "r1/1", "note": "jan-contact", "project": "global", "write": "created", "offset": 0,
        "removed": "", "hashBefore": ""}
    assert written["added"] == written["block"] == f"<!-- promoted: agent alfred run r1 -->\n{JAN}\n"
    result = s.revert("r1")
    assert result.reverted == ["r1/1"] and s.memory() == MEMORY
    assert result.vault == [VaultUndo("r1/1", "jan-contact", "global", "undone", "deleted the note this promotion created", True)]
    assert s.kb.notes() == {} and s.kb.found("email") == []
    [record] = s.records("audit.jsonl", "revert")
    assert record["vault"][0]["outcome"] == "undone" and record["notesLeft"] == []
    assert "shared note 'jan-contact' (global, promoted by r1/1): undone: deleted the note" in s.dreams()
    assert [r["op"] for r in s.records("journal.jsonl", "unpromote")] == ["r1/1"]
    # twice: nothing, and the KB is not asked again
    again = s.revert("r1")
    assert (again.reverted, again.already, again.vault) == ([], ["r1/1"], []) and len(s.kb.undos) == 1
    assert revert_text(again) == "nothing to revert in r1: r1/1 already undone\n"


def test_an_edited_note_is_left_and_named_in_the_answer_and_the_audit(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact preference", topic="jan-contact"))
    s.dream("r1")
    edited = s.kb.notes()["jan-contact"].replace("email", "Signal")
    update(SqliteVaultStore(s.kb.dir, s.kb.conn), "jan-contact", edited, confirm=True)
    result = s.revert("r1")
    assert s.memory() == MEMORY and s.kb.notes() == {"jan-contact": edited}  # the local revert stands
    [left] = result.vault
    assert left.outcome == "left" and "edited since the promotion" in left.reason
    assert "PUT /api/v1/agents/alfred/shared/notes/jan-contact" in left.reason
    text = revert_text(result)
    assert "shared note 'jan-contact' (global, promoted by r1/1): LEFT as it is: it was edited since" in text
    assert text.endswith("  left in the shared vault: 'jan-contact'\n")
    [record] = s.records("audit.jsonl", "revert")
    assert record["notesLeft"] == ["jan-contact"] and record["vault"][0]["outcome"] == "left"
    assert "- **Left in the shared vault:** 'jan-contact'" in s.dreams()
    assert s.records("journal.jsonl", "unpromote") == []


def test_a_kb_that_cannot_answer_leaves_the_local_revert_standing_and_the_next_revert_finishes(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact", topic="jan-contact"),
              Proposal(op="add", file="MEMORY.md", content=FERRY, reason="ferry", topic="ferry-times"))
    s.dream("r1")
    s.kb.down = True
    first = s.revert("r1")
    assert s.memory() == MEMORY and sorted(s.kb.notes()) == ["ferry-times", "jan-contact"]
    assert [(u.op_id, u.outcome) for u in first.vault] == [("r1/2", "left"), ("r1/1", "left")]  # newest first
    assert "the KB could not undo it (kb: UNAVAILABLE: connection refused)" in first.vault[0].reason
    assert first.vault[1].reason.startswith("not attempted: the KB was unreachable") and len(s.kb.undos) == 1
    s.kb.down = False
    second = s.revert("r1")
    assert (second.reverted, second.already) == ([], ["r1/2", "r1/1"])
    assert [(u.op_id, u.outcome) for u in second.vault] == [("r1/2", "undone"), ("r1/1", "undone")]
    assert s.kb.notes() == {} and revert_text(second).startswith("nothing more to revert in the files of r1")
    third = s.revert("r1")
    assert third.vault == [] and len(s.kb.undos) == 3


def test_reverting_one_op_undoes_that_ops_promotion_only(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact", topic="jan-contact"),
              Proposal(op="add", file="MEMORY.md", content=FERRY, reason="ferry", topic="ferry-times"))
    s.dream("r1")
    one = s.revert("r1", "2")
    assert one.reverted == ["r1/2"] and [u.note for u in one.vault] == ["ferry-times"]
    assert list(s.kb.notes()) == ["jan-contact"] and JAN in s.memory() and FERRY not in s.memory()
    rest = s.revert("r1")
    assert rest.reverted == ["r1/1"] and [u.note for u in rest.vault] == ["jan-contact"] and s.kb.notes() == {}


def test_a_later_promotion_into_the_same_note_stays(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact", topic="jan-contact"))
    s.dream("r1")
    later = asyncio.run(s.kb.promote("bea", "jan-contact", "contact", "- Jan reads email at 9.", "r9"))  # another agent's night
    assert later.outcome == "updated"
    result = s.revert("r1")
    assert [u.outcome for u in result.vault] == ["undone"]
    assert s.kb.notes() == {"jan-contact": "<!-- promoted: agent bea run r9 -->\n- Jan reads email at 9.\n"}


def test_pending_promotions_are_the_covered_ops_not_undone_newest_first() -> None:
    def promo(op: str) -> dict[str, Any]:
        return {"kind": "promotion", "run": "r1", "op": op, "note": op, "project": "global", "write": "created",
                "offset": 0, "removed": "", "added": "x", "block": "x", "hashBefore": "", "hashAfter": "h"}

    records = [promo("r1/1"), promo("r1/2"), promo("r1/10"), {**promo("r1/3"), "run": "r0"},
               {"kind": "unpromote", "run": "r1", "op": "r1/2"}]
    assert [op for op, _ in vault_undo.pending(records, "r1", ["r1/1", "r1/2", "r1/3", "r1/10"])] == ["r1/10", "r1/1"]
    assert vault_undo.pending(records, "r1", ["r1/3"]) == []


@pytest.mark.parametrize(("outcome", "recorded"), [("undone", True), ("gone", True), ("left", False)])
def test_only_undos_that_happened_are_journaled(outcome: str, recorded: bool) -> None:
    undo = VaultUndo("r1/1", "n", "global", outcome, "why")
    assert bool(vault_undo.done_records("r1", [undo], "2026-12-01T03:00:00Z", "rev")) == recorded


class HeldKb(VaultKb):
    """A VaultKb whose undos wait until ``release`` is set (``entered`` says one is waiting)."""

    def __init__(self, vault_dir: Path) -> None:
        super().__init__(vault_dir)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite | None,
                             request_id: str = "") -> UndoReply:
        self.entered.set()
        await self.release.wait()
        return await super().undo_promotion(agent_id, run_id, op_id, write)


def test_a_revert_whose_caller_goes_away_still_finishes_and_is_audited(tmp_path: Path) -> None:
    s = Setup(tmp_path, Proposal(op="add", file="MEMORY.md", content=JAN, reason="contact", topic="jan-contact"))
    s.dream("r1")
    held = HeldKb(s.kb.dir)
    s.deps = nightly.Deps(index=held, review=s.deps.review, now=lambda: NOW, promoter=held)
    s.dreamer = Dreamer(lambda: s.config, StateStore(tmp_path), s.deps, NoWatcher())

    async def scenario() -> RevertResult:
        caller = asyncio.ensure_future(s.dreamer.revert(s.agent, "r1", None))
        await held.entered.wait()
        caller.cancel()  # the client went away while the KB was asked
        with pytest.raises(asyncio.CancelledError):
            await caller
        held.release.set()
        await asyncio.wait([t for t in asyncio.all_tasks() if t is not asyncio.current_task()])
        return await s.dreamer.revert(s.agent, "r1", None)  # the lock was released: a second revert runs

    again = asyncio.run(scenario())
    assert s.kb.notes() == {} and s.memory() == MEMORY
    [record] = s.records("audit.jsonl", "revert")
    assert record["vault"][0]["outcome"] == "undone"
    assert (again.reverted, again.vault) == ([], [])
