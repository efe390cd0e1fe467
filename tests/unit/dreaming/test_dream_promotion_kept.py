"""Promotions kept on the host and retried (vault.kept, promotion.retry_kept): the file survives a kill at any
point, the queue is retried oldest first under the ids first asked, a lost answer is given back by the KB
and lands once, a reverted op's promotion is dropped unsent, and the cap refuses loudly.

The KB is a stand-in running the KB's own vault code (``promotion_record.promote_once``) in this process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from gateway.promotion_write import PromotionWrite
from services.dreaming.model.values import OpResult, Proposal
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.records import journal
from services.dreaming.vault import kept, promotion
from services.dreaming.vault import undo as vault_undo
from services.dreaming.vault.kept import Kept
from services.dreaming.vault.promotion import PromotionReply, UndoReply, promote_applied
from services.kb.vault import promotion_record
from services.kb.vault.note_index import open_vault_index
from services.kb.vault.sqlite_store import SqliteVaultStore

AT = "2026-01-01T03:00:00Z"
DOWN = PeerUnavailable("kb: UNAVAILABLE: the shared vault of project 'global' is unavailable", "UNAVAILABLE")
LATE = PeerUnavailable("kb: DEADLINE_EXCEEDED: Deadline Exceeded", "DEADLINE_EXCEEDED")


class Kb:
    """A ``Promoter`` over a real SQLite vault. ``down``: every call fails as an unavailable vault does;
    ``lose``: the next promotion lands, then its answer is lost (a deadline)."""

    def __init__(self, vault_dir: Path) -> None:
        self.store = SqliteVaultStore(vault_dir, open_vault_index(vault_dir))
        self.down = False
        self.lose = False
        self.asked: list[str] = []

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str) -> PromotionReply:
        self.asked.append(request_id)
        if self.down:
            raise DOWN
        r = promotion_record.promote_once(self.store, request_id=request_id, agent_id=agent_id, topic=topic,
                                          reason=reason, content=content, run_id=run_id, at=1.0e9)
        if self.lose:
            self.lose = False
            raise LATE
        return PromotionReply(r.outcome, r.name, r.reason, r.message, r.name_from, r.passed_over, r.linked, r.folded,
                              r.twin_kept, r.write)

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite | None,
                             request_id: str = "") -> UndoReply:
        self.asked.append(f"undo {request_id}")
        if self.down:
            raise DOWN
        r = promotion_record.undo_once(self.store, write, request_id=request_id, agent_id=agent_id, run_id=run_id,
                                       op_id=op_id, at=2.0e9)
        return UndoReply(r.outcome, r.note, r.reason, r.deleted)

    def text(self, name: str) -> str:
        data = self.store.read(name)
        return "" if data is None else data.decode()


def agent_in(home: Path) -> AgentConfig:
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True, exist_ok=True)
    return agent


def add(run: str, n: int, fact: str, topic: str) -> OpResult:
    return OpResult(f"{run}/{n}", Proposal(op="add", file="MEMORY.md", content=fact, topic=topic), "applied", file="MEMORY.md")


def one(run: str, n: int, topic: str, fact: str = "") -> Kept:
    return Kept(kept.request_id("alfred", f"{run}/{n}"), run, f"{run}/{n}", f"p{n}", topic, "", fact or f"- {topic} fact.",
                AT, "down")


def step(agent: AgentConfig, kb: Kb, run: str, *adds: OpResult) -> promotion.Step:
    return asyncio.run(promote_applied(agent, kb, run, AT, list(adds)))


FERRY = add("r1", 1, "- The ferry leaves pier 4 at 08:15.", "ferry")
KILN = add("r1", 2, "- The kiln fires at 1200 degrees on Fridays.", "kiln")


# --- the file ---------------------------------------------------------------------------------


def test_the_file_round_trips_and_an_id_is_kept_once(tmp_path: Path) -> None:
    assert kept.read(tmp_path) == [] and kept.count(tmp_path) == 0
    assert kept.add(tmp_path, [one("r1", 1, "a"), one("r1", 2, "b")]) == []
    assert kept.add(tmp_path, [one("r1", 2, "b"), one("r2", 1, "c")]) == []
    assert [k.op_id for k in kept.read(tmp_path)] == ["r1/1", "r1/2", "r2/1"] and kept.count(tmp_path) == 3
    assert oct((tmp_path / kept.PENDING).stat().st_mode & 0o777) == "0o600"
    kept.write(tmp_path, [])
    assert not (tmp_path / kept.PENDING).exists()


def test_past_the_cap_the_oldest_stay_and_the_newer_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept, "MAX_KEPT", 2)
    assert kept.add(tmp_path, [one("r1", 1, "a")]) == []
    assert [k.op_id for k in kept.add(tmp_path, [one("r2", 1, "b"), one("r2", 2, "c")])] == ["r2/2"]
    assert [k.op_id for k in kept.read(tmp_path)] == ["r1/1", "r2/1"]


def test_an_unreadable_file_is_copied_aside_before_it_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / kept.PENDING
    path.parent.mkdir()
    path.write_text('{"version": 1, "kept": [{"requestId": ')
    assert kept.count(tmp_path) == 0 and list(path.parent.iterdir()) == [path]  # counting copies nothing
    assert kept.read(tmp_path) == [] and kept.read(tmp_path) == []
    [aside] = path.parent.glob("promotions.pending.json.unreadable-*")  # once, however often it is read
    assert aside.read_text() == '{"version": 1, "kept": [{"requestId": '
    assert kept.add(tmp_path, [one("r1", 1, "a")]) == [] and [k.op_id for k in kept.read(tmp_path)] == ["r1/1"]
    assert aside.exists()


WRITER = """
import sys
from pathlib import Path
from services.dreaming.vault import kept
ws, n = Path(sys.argv[1]), 0
while True:
    n += 1
    kept.write(ws, [kept.Kept(f"a/r/{i}", "r", f"r/{i}", "p", "t", "", "- fact " + "x" * 2000, "at", "e") for i in range(n % 300 + 1)])
    print(n, flush=True)
"""


def test_a_writer_killed_mid_write_leaves_a_whole_file(tmp_path: Path) -> None:
    for attempt in range(4):
        ws = tmp_path / str(attempt)
        ws.mkdir()
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(ws)], stdout=subprocess.PIPE, text=True,
                                cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
        assert proc.stdout is not None
        for _ in range(20 + 15 * attempt):  # some whole writes, then a kill at whatever point it reached
            proc.stdout.readline()
        time.sleep(0.003 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        found = json.loads((ws / kept.PENDING).read_text())  # whole JSON, never torn
        assert found["version"] == 1 and len(kept.read(ws)) == len(found["kept"]) >= 1


# --- kept, retried, once -------------------------------------------------------------------------


def test_an_outage_keeps_the_promotions_and_the_next_run_lands_each_once(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kb.down = True
    first = step(agent, kb, "r1", FERRY, KILN)
    assert [p.outcome for p in first.promotions] == ["pending", "pending"] and kb.asked == ["alfred/r1/1"]
    assert kb.store.names(include_retired=True) == []
    kb.down = False
    second = step(agent, kb, "r2")  # nothing of its own: the kept ones still go
    assert [(p.op_id, p.outcome, p.retry_of) for p in second.promotions] == [("r1/1", "created", "r1"),
                                                                             ("r1/2", "created", "r1")]
    assert second.steps == ["promotion"] and "kept since run r1, retried" in second.notes[0]
    assert kb.asked[1:] == ["alfred/r1/1", "alfred/r1/2"] and kept.read(agent.workspace) == []
    assert kb.text("ferry").count("pier 4") == 1 and kb.text("kiln").count("1200") == 1
    third = step(agent, kb, "r3")
    assert third == promotion.Step() and len(kb.asked) == 3
    records = journal.read(agent.workspace)
    assert [(r["run"], r["op"], r["note"]) for r in records if r["kind"] == "promotion"] == [
        ("r1", "r1/1", "ferry"), ("r1", "r1/2", "kiln")]  # journaled under the run that kept them


def test_the_kept_go_first_oldest_first_and_an_outage_keeps_the_rest_unasked(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kept.add(agent.workspace, [one("r1", 1, "older"), one("r2", 4, "newer")])
    kb.down = True
    s = step(agent, kb, "r3", add("r3", 1, "- The boiler is serviced in May.", "boiler"))
    assert kb.asked == ["alfred/r1/1"]  # the oldest, then nothing more
    assert [p.outcome for p in s.promotions] == ["pending"]
    assert any("2 kept promotion(s) still wait" in n for n in s.notes)
    assert [k.op_id for k in kept.read(agent.workspace)] == ["r1/1", "r2/4", "r3/1"]
    assert kept.read(agent.workspace)[0].error == str(DOWN)
    kb.down = False
    s = step(agent, kb, "r4", add("r4", 1, "- The gate code changes monthly.", "gate"))
    assert kb.asked[1:] == ["alfred/r1/1", "alfred/r2/4", "alfred/r3/1", "alfred/r4/1"]
    assert [(p.op_id, p.outcome) for p in s.promotions] == [("r1/1", "created"), ("r2/4", "created"),
                                                            ("r3/1", "created"), ("r4/1", "created")]


def test_a_lost_answer_is_retried_and_the_kb_gives_its_first_answer_back(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kb.lose = True
    first = step(agent, kb, "r1", FERRY)
    assert [p.outcome for p in first.promotions] == ["pending"] and "ferry" in kb.store.names(include_retired=False)
    second = step(agent, kb, "r2")
    [p] = second.promotions
    assert (p.outcome, p.note, p.retry_of) == ("created", "ferry", "r1") and p.write is not None
    assert "answered 'created'" in p.reason and kb.text("ferry").count("pier 4") == 1
    # the write the KB gave back is journaled under r1: reverting r1's op takes it out of the vault
    writes = vault_undo.pending(journal.read(agent.workspace), "r1", ["r1/1"])
    assert [op for op, _ in writes] == ["r1/1"]
    [undone] = asyncio.run(vault_undo.undo_all(kb, "alfred", "r1", writes))
    assert undone.outcome == "undone" and kb.store.read("ferry") is None


class Crash(BaseException):
    """The process dies here."""


def test_a_process_killed_after_the_kb_wrote_and_before_the_journal_did_lands_the_promotion_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each promotion is kept before it is asked: a kill between the KB's write and the journal's
    leaves it kept, so the next run gets the KB's answer back and journals it under the first run
    (a revert can take it out of the vault), and the vault holds it once."""
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    real = journal.append

    def dies_at_the_promotion_records(workspace: Path, records: Any, **kwargs: Any) -> None:
        records = list(records)
        if any(r.get("kind") == promotion.PROMOTION for r in records):
            raise Crash
        real(workspace, records, **kwargs)

    monkeypatch.setattr(journal, "append", dies_at_the_promotion_records)
    with pytest.raises(Crash):
        step(agent, kb, "r1", FERRY, KILN)
    monkeypatch.undo()
    assert sorted(kb.store.names(include_retired=False)) == ["ferry", "kiln"]  # the KB wrote both
    assert [(k.op_id, k.error) for k in kept.read(agent.workspace)] == [("r1/1", kept.ASKED), ("r1/2", kept.ASKED)]
    second = step(agent, kb, "r2")
    assert [(p.op_id, p.outcome, p.retry_of) for p in second.promotions] == [("r1/1", "created", "r1"), ("r1/2", "created", "r1")]
    assert kept.read(agent.workspace) == [] and kb.text("ferry").count("pier 4") == 1
    writes = vault_undo.pending(journal.read(agent.workspace), "r1", ["r1/1", "r1/2"])
    assert sorted(op for op, _ in writes) == ["r1/1", "r1/2"]
    assert {u.outcome for u in asyncio.run(vault_undo.undo_all(kb, "alfred", "r1", writes))} == {"undone"}


def test_a_run_that_is_not_killed_leaves_nothing_kept_ahead(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    first = step(agent, kb, "r1", FERRY, KILN)
    assert [p.outcome for p in first.promotions] == ["created", "created"] and kept.read(agent.workspace) == []
    assert sorted(op for op, _ in vault_undo.pending(journal.read(agent.workspace), "r1", ["r1/1", "r1/2"])) == ["r1/1", "r1/2"]


def test_a_kept_promotion_whose_op_was_reverted_is_dropped_unsent(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kept.add(agent.workspace, [one("r1", 1, "reverted"), one("r1", 2, "restored"), one("r1", 3, "kept")])
    journal.append(agent.workspace, [journal.undo_record("revert", "r1", "r1/1", AT, by="rv1"),
                                     journal.undo_record("restore", "r1", "r1/2", AT)])
    s = step(agent, kb, "r2")
    assert kb.asked == ["undo alfred/r1/1", "undo alfred/r1/2", "alfred/r1/3"]  # asked whether they landed, not sent
    assert [(p.op_id, p.outcome) for p in s.promotions] == [("r1/1", "dropped"), ("r1/2", "dropped"), ("r1/3", "created")]
    assert s.promotions[0].reason == "kept since run r1, whose op was reverted since: not sent"
    assert kept.read(agent.workspace) == []


def test_a_lost_answer_whose_op_was_reverted_is_taken_out_of_the_vault(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kb.lose = True
    assert [p.outcome for p in step(agent, kb, "r1", FERRY).promotions] == ["pending"]
    assert "ferry" in kb.store.names(include_retired=False)  # it landed; dreaming never heard
    journal.append(agent.workspace, [journal.undo_record("revert", "r1", "r1/1", AT, by="rv1")])
    kb.down = True
    waiting = step(agent, kb, "r2")
    assert waiting.promotions == [] and [k.op_id for k in kept.read(agent.workspace)] == ["r1/1"]
    kb.down = False
    [p] = step(agent, kb, "r3").promotions
    assert (p.outcome, p.note) == ("dropped", "ferry") and "was taken out again" in p.reason
    assert kb.store.read("ferry") is None and kept.read(agent.workspace) == []
    assert kb.asked == ["alfred/r1/1", "undo alfred/r1/1", "undo alfred/r1/1"]


def test_a_refusal_on_retry_declines_and_leaves_the_queue(tmp_path: Path) -> None:
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kept.add(agent.workspace, [one("r1", 1, "bad")])

    async def refuse(*args: Any) -> PromotionReply:
        raise PeerUnavailable("kb: FAILED_PRECONDITION: shared promotion is off", "FAILED_PRECONDITION")

    kb.promote = refuse  # type: ignore[method-assign]
    [p] = step(agent, kb, "r2").promotions
    assert p.outcome == "declined" and "no longer kept" in p.reason and kept.read(agent.workspace) == []


def test_past_the_cap_a_promotion_is_declined_logged_and_noted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept, "MAX_KEPT", 1)
    agent, kb = agent_in(tmp_path / "home"), Kb(tmp_path / "vault")
    kb.down = True
    s = step(agent, kb, "r1", FERRY, KILN)
    assert [p.outcome for p in s.promotions] == ["pending", "declined"]
    assert "the host already keeps 1 promotions" in s.promotions[1].reason
    assert any("1 promotion(s) of this run were dropped" in n for n in s.notes)
    assert [k.op_id for k in kept.read(agent.workspace)] == ["r1/1"]


def test_propose_mode_or_a_shared_kb_off_leaves_the_kept_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred", "knowledge": {"shared": {"mode": "propose"}}}]}, home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    kb = Kb(tmp_path / "vault")
    kept.add(agent.workspace, [one("r1", 1, "waits")])
    assert step(agent, kb, "r2") == promotion.Step() and kb.asked == [] and kept.count(agent.workspace) == 1
