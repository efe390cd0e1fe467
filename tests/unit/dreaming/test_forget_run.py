"""A whole forget through ``Dreamer.forget`` (``forget.run``) over a workspace real runs wrote, with the
KB's part a fake (the seam): the order of the steps, what the KB is told, the tombstone, the record,
and what a KB that cannot answer leaves."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dreaming_stage import NoWatcher
from forget_stage import BESIDE, FACT, TARGET, Planted, leftovers, plant, snapshot

from gateway.config import build
from gateway.config_migrations import CURRENT_VERSION
from gateway.errors import FailedPrecondition, Unavailable
from gateway.forgetting import SHARED_SCOPE, Target, Tombstone, Tombstones, marker
from services.dreaming import nightly
from services.dreaming.dreamer import Dreamer
from services.dreaming.forget.places import TRANSCRIPTS
from services.dreaming.forget.report import PURGE_ADVICE, forget_text
from services.dreaming.forget.places import Place
from services.dreaming.forget.run import KB_LEFT, Forgotten, KbForget, KbPurge
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.records import audit
from services.dreaming.schedule.state import StateStore


@dataclass
class FakeKb:
    """The KB's ForgetText: records each call and what MEMORY.md held then; answers ``answer`` or raises ``error``."""

    memory: Path
    answer: KbForget = field(default_factory=KbForget)
    error: Exception | None = None
    calls: list[dict[str, object]] = field(default_factory=list)
    held: asyncio.Event | None = None  # set: the call waits for it (``entered`` says it is waiting)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    shares: list[tuple[str, list[Tombstone], str]] = field(default_factory=list)  # ShareTombstones calls
    sent: list[list[Tombstone]] = field(default_factory=list)  # each ForgetText call's tombstones

    async def forget_text(self, agent_id: str, target: Target, *, shared: bool, apply: bool, tombstone_id: str,
                          changed_paths: Sequence[str], tombstones: Sequence[Tombstone] = ()) -> KbForget:
        if self.held is not None:
            self.entered.set()
            await self.held.wait()
        self.calls.append({"agent": agent_id, "shared": shared, "apply": apply, "id": tombstone_id,
                           "changed": list(changed_paths), "memory": self.memory.read_text()})
        self.sent.append(list(tombstones))
        if self.error is not None:
            raise self.error
        return self.answer

    async def share_tombstones(self, agent_id: str, tombstones: Sequence[Tombstone], lift: str = "") -> None:
        self.shares.append((agent_id, list(tombstones), lift))


def forgetting(p: Planted, kb: FakeKb, *, shared: bool = False) -> Dreamer:
    """A Dreamer of the planted home whose KB is ``kb``; ``shared``: the agent's shared KB on (``p.agent`` too)."""
    entry = {"id": "alfred", "knowledge": {"archive": {"enabled": False}, "shared": {"enabled": shared}}}
    config = build({"configVersion": CURRENT_VERSION, "agents": [entry]}, p.agent.home)
    p.agent = config.agents[0]
    deps = nightly.Deps(index=p.stage, review=p.stage.review, now=lambda: p.stage.now, forgetter=kb)
    return Dreamer(lambda: config, StateStore(p.agent.home), deps, NoWatcher())


def run(dreamer: Dreamer, p: Planted, target: Target = TARGET, *, apply: bool = True, shared: bool = False) -> Forgotten:
    return asyncio.run(dreamer.forget(p.agent, target, shared=shared, apply=apply, by="ops-key"))


ARCHIVE = KbForget((Place("archive", "kb_chunks", 2, (), kind="table"),))
ARCHIVE_DONE = KbForget((Place("archive", "kb_chunks", 2, (), changed=True, kind="table"),), (KbPurge("archive", 9000, 4000, 0.1),))


def test_a_dry_run_changes_nothing_and_reports_every_store_without_the_text(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md", answer=ARCHIVE)
    before = snapshot(tmp_path)
    report = run(forgetting(p, kb), p, apply=False)
    assert snapshot(tmp_path) == before
    assert kb.calls == [{"agent": "alfred", "shared": False, "apply": False, "id": "", "changed": [],
                         "memory": kb.calls[0]["memory"]}]
    assert report.tombstone_id == "" and not report.applied and report.changed == 0
    assert {"MEMORY.md", "kb_chunks", "s1.jsonl"} <= {pl.path for pl in report.places}
    assert not Tombstones(tmp_path).all()
    assert FACT[:8] not in forget_text(report)


def test_an_apply_scrubs_the_files_before_the_kb_then_tombstones_and_records_it(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md", answer=ARCHIVE_DONE)
    report = run(forgetting(p, kb), p)
    [call] = kb.calls
    assert call["apply"] is True and call["id"] == report.tombstone_id
    assert FACT not in str(call["memory"]) and marker(report.tombstone_id) in str(call["memory"])  # files first
    assert "MEMORY.md" in call["changed"] and "dreaming.json" not in call["changed"]  # the workspace's paths only
    assert leftovers(tmp_path) == ["agents/alfred/sessions/s1.jsonl"]  # the runtime's transcript: listed, kept
    [transcript] = [pl for pl in report.places if pl.store == TRANSCRIPTS]
    assert transcript.left and not transcript.changed
    [tomb] = Tombstones(tmp_path).all()
    assert (tomb.id, tomb.scope, tomb.by, tomb.places) == (report.tombstone_id, "alfred", "ops-key", report.changed)
    assert Tombstones(tmp_path).matches(f"again: {FACT.upper()}", "alfred") == [tomb]
    last = audit.read_records(p.workspace)[-1]
    assert (last["kind"], last["id"], last["by"], last["places"]) == ("forget", report.tombstone_id, "ops-key", report.changed)
    assert last["stores"]["archive"] == 1 and last["stores"]["workspace"] >= 5 and last["shared"] is False
    text = forget_text(report)
    assert PURGE_ADVICE in text and "9000 -> 4000" in text and FACT[:8] not in text
    assert BESIDE in (p.transcripts / "s1.jsonl").read_text()


def test_the_same_forget_again_finds_nothing_more_to_do(tmp_path: Path) -> None:
    p = plant(tmp_path)
    dreamer = forgetting(p, FakeKb(p.workspace / "MEMORY.md"))
    run(dreamer, p)
    again = run(dreamer, p)
    assert again.changed == 0 and {pl.store for pl in again.places} == {TRANSCRIPTS}
    assert again.tombstones == 0 and len(Tombstones(tmp_path).all()) == 1  # the same words are tombstoned once


def test_a_pattern_tombstones_each_distinct_string_it_matched(tmp_path: Path) -> None:
    p = plant(tmp_path)
    (p.workspace / "memory" / "codes.md").write_text("- door code 1234-Q\n- gate code 8812-Z\n- door code 1234-Q\n")
    report = run(forgetting(p, FakeKb(p.workspace / "MEMORY.md")), p, Target.parse(None, r"code [0-9]{4}-[A-Z]"))
    assert report.tombstones == 2
    store = Tombstones(tmp_path)
    assert {t.id for t in store.all()} == {report.tombstone_id, report.tombstone_id + ".2"}
    assert store.matches("the gate code 8812-z again", "alfred") and not store.matches("code 9999-Z", "alfred")


def test_a_shared_pattern_tombstones_what_it_matched_in_the_vault_too(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md", answer=KbForget(matched=("code 5050-V",)))  # only in a vault note
    report = run(forgetting(p, kb, shared=True), p, Target.parse(None, r"code [0-9]{4}-[A-Z]"), shared=True)
    assert report.tombstones == 1 and Tombstones(tmp_path).matches("the code 5050-V", "bob")
    assert "5050" not in forget_text(report)
    [(_, shared, lift)] = kb.shares  # the vault gets the one matched only there, after the KB's answer
    assert shared == Tombstones(tmp_path).all() and lift == "" and kb.sent[-1] == []


def test_a_shared_forget_sends_its_tombstones_to_the_vault_before_and_after_the_kb_part(tmp_path: Path) -> None:
    """ForgetText carries the tombstones (kept in the vault before any note is scrubbed), then ShareTombstones
    sends them again with their places (docs/concepts/forget.md "Shared tombstones across hosts")."""
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md")
    report = run(forgetting(p, kb, shared=True), p, shared=True)
    [tomb] = Tombstones(tmp_path).all()
    assert tomb.scope == SHARED_SCOPE and len(tomb.salt) == 64
    assert [(t.id, t.digest, t.salt, t.places) for t in kb.sent[-1]] == [(tomb.id, tomb.digest, tomb.salt, 0)]
    assert kb.shares == [("alfred", [tomb], "")] and tomb.places == report.changed > 0


def test_an_agents_own_forget_sends_nothing_to_the_vault(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md")
    run(forgetting(p, kb, shared=True), p)
    assert kb.sent[-1] == [] and kb.shares == [] and Tombstones(tmp_path).all()[0].salt == ""


def test_a_kb_that_cannot_answer_leaves_the_files_scrubbed_the_tombstone_and_the_record(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md", error=PeerUnavailable("kb: UNAVAILABLE: down", "UNAVAILABLE"))
    with pytest.raises(Unavailable, match="run the same forget again") as caught:
        run(forgetting(p, kb), p)
    [tomb] = Tombstones(tmp_path).all()
    assert tomb.id in caught.value.message and FACT[:8] not in caught.value.message
    last = audit.read_records(p.workspace)[-1]
    assert last["id"] == tomb.id and str(last["kb"]).startswith("not done: kb: UNAVAILABLE")
    assert leftovers(tmp_path) == ["agents/alfred/sessions/s1.jsonl"]
    kb.error = None
    assert run(forgetting(p, kb), p).changed == 0  # run again: the KB's part now; the files hold nothing more


def test_a_shared_forget_of_an_agent_without_a_vault_is_refused_before_any_file(tmp_path: Path) -> None:
    p = plant(tmp_path)  # its shared KB is off
    kb = FakeKb(p.workspace / "MEMORY.md")
    before = snapshot(tmp_path)
    with pytest.raises(FailedPrecondition, match="shared KB disabled"):
        run(forgetting(p, kb), p, shared=True)
    assert snapshot(tmp_path) == before and kb.calls == []


def test_kb_places_left_after_an_apply_say_so_and_a_shared_tombstone_is_scoped_star(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kb = FakeKb(p.workspace / "MEMORY.md", answer=KbForget((Place("vault:global", "notes/x.md", 1, (3,), left=KB_LEFT, kind="note"),)))
    report = run(forgetting(p, kb, shared=True), p, shared=True)  # the fake KB stands for the vault
    assert [pl.left for pl in report.places if pl.store == "vault:global"] == [KB_LEFT]
    assert [t.scope for t in Tombstones(tmp_path).all()] == [SHARED_SCOPE]
    assert json.dumps(audit.read_records(p.workspace)[-1]).count("notes/x.md") == 1
    assert re.search(r"notes/x\.md \[note\]: 1 \(line 3\)", forget_text(report))


def test_a_forget_whose_caller_goes_away_runs_to_its_end(tmp_path: Path) -> None:
    p = plant(tmp_path)

    async def scenario() -> None:
        kb = FakeKb(p.workspace / "MEMORY.md", held=asyncio.Event())
        dreamer = forgetting(p, kb)
        caller = asyncio.ensure_future(dreamer.forget(p.agent, TARGET, shared=False, apply=True, by="ops-key"))
        await kb.entered.wait()  # the files are scrubbed; the KB's part is under way
        caller.cancel()
        assert kb.held is not None
        kb.held.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        [shielded] = dreamer._forgets  # the forget itself goes on: the tombstone, the record, the lock released
        await shielded
        assert kb.calls and not dreamer._forgets

    asyncio.run(scenario())
    [tomb] = Tombstones(tmp_path).all()
    assert audit.read_records(p.workspace)[-1]["id"] == tomb.id
    again = asyncio.run(forgetting(p, FakeKb(p.workspace / "MEMORY.md")).forget(p.agent, TARGET, shared=False, apply=True,
                                                                               by="ops-key"))
    assert again.changed == 0  # the lock was released, and nothing was left to do


class Killed(BaseException):
    """The process dies here: no ``except Exception`` of the forget catches it, so nothing after it runs."""


def test_a_pattern_forget_killed_after_the_files_keeps_its_tombstone_and_the_next_run_finishes(tmp_path: Path) -> None:
    """The strings a pattern matched are tombstoned before any file is scrubbed: once the files are
    scrubbed, the same forget again cannot find them to tombstone them."""
    p = plant(tmp_path)
    (p.workspace / "memory" / "codes.md").write_text("- door code 1234-Q\n- gate code 8812-Z\n")
    pattern = Target.parse(None, r"code [0-9]{4}-[A-Z]")
    kb = FakeKb(p.workspace / "MEMORY.md", error=Killed())
    with pytest.raises(Killed):
        run(forgetting(p, kb), p, pattern)
    assert "1234" not in (p.workspace / "memory" / "codes.md").read_text()  # the files were done
    store = Tombstones(tmp_path)
    first = store.all()
    assert len(first) == 2 and {t.places for t in first} == {0}  # written first; the count was never known
    assert not [r for r in audit.read_records(p.workspace) if r.get("kind") == "forget"]  # no record: it died
    kb.error = None
    again = run(forgetting(p, kb), p, pattern)
    assert again.changed == 0 and again.tombstones == 0 and store.all() == first
    assert store.matches("the door code 1234-q again", "alfred") and store.matches("gate code 8812-Z", "alfred")
    assert audit.read_records(p.workspace)[-1]["id"] == again.tombstone_id  # the run that finished it records it


def test_a_forget_sets_the_places_it_changed_on_every_tombstone_it_wrote(tmp_path: Path) -> None:
    p = plant(tmp_path)
    (p.workspace / "memory" / "codes.md").write_text("- door code 1234-Q\n- gate code 8812-Z\n")
    kb = FakeKb(p.workspace / "MEMORY.md", answer=KbForget(matched=("code 5050-V",)))
    report = run(forgetting(p, kb, shared=True), p, Target.parse(None, r"code [0-9]{4}-[A-Z]"), shared=True)
    rows = Tombstones(tmp_path).all()
    assert [t.id for t in rows] == [report.tombstone_id, f"{report.tombstone_id}.2", f"{report.tombstone_id}.3"]
    assert {t.places for t in rows} == {report.changed} and report.changed >= 1 and report.tombstones == 3


def test_a_name_left_in_the_archive_is_the_agents_to_rename_one_left_in_the_vault_is_to_run_again() -> None:
    from services.dreaming.forget.run import left_of
    from services.dreaming.forget.workspace import NAME_HOLDS_IT

    assert left_of("name", "archive") == NAME_HOLDS_IT
    assert left_of("name", "vault:global") == KB_LEFT and left_of("note", "vault:global") == KB_LEFT
