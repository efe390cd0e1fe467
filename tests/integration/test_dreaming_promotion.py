"""Shared promotion through real processes (KB, dreaming, REST shim) with scripted reviewers:
two agents promoting one recurring fact on the same night end as one note; propose mode and
pointer-only adds promote nothing; a KB that is down never fails the dream (the promotion is kept).

Each agent has a shared project of its own, except ada and bea, who share ``night``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from dreaming_support import add, audit, dreaming, read, replies, restart, reviewer, run_ok, start_suite, write_reply
from suite_support import ADMIN_KEY, READER_KEY, Suite

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

ADA_FACT = "- The harbour office opens at 07:00 and closes at 16:00 on weekdays."
BEA_FACT = "- On weekdays the harbour office opens at 07:00; it closes at 16:00."
SATURDAY = "- The harbour office also opens on Saturdays from 08:00 to 12:00."
POINTERS = "- see memory/projects.md\n- [[projects]]\n- Details: memory/harbour.md"


def shared(project: str, **more: Any) -> dict[str, Any]:
    return {"knowledge": {"shared": {"project": project, **more}}}


@pytest.fixture(scope="module")
def psuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("promotion")
    folder = tmp / "home" / "replies"  # replies() of the home start_suite makes
    hold = folder / "hold"

    def held(agent: str, signal: str, wait: str) -> list[str]:
        return reviewer("hold.py", "--signal", hold / signal, "--wait", hold / wait, folder / f"{agent}.json")

    agents = [
        {"id": "ada", "dreaming": dreaming(held("ada", "ada-in", "bea-in")), **shared("night")},
        {"id": "bea", "dreaming": dreaming(held("bea", "bea-in", "ada-in")), **shared("night")},
        {"id": "alfred", "dreaming": dreaming(reviewer("reply.py", folder / "alfred.json")), **shared("quiet", mode="propose")},
        {"id": "dana", "dreaming": dreaming(reviewer("reply.py", folder / "dana.json")), **shared("pointers")},
        {"id": "eve", "dreaming": dreaming(reviewer("reply.py", folder / "eve.json")), **shared("down")},
    ]
    files = {a["id"]: {"MEMORY.md": "# Memory\n\n- The office plants need water on Mondays.\n"} for a in agents}
    running = start_suite(tmp, agents, services=("kb", "dreaming", "http"), files=files)
    replies(running.home)
    hold.mkdir(parents=True, exist_ok=True)
    try:
        yield running
    finally:
        running.stop_all()


def vault_notes(suite: Suite, project: str) -> dict[str, str]:
    folder = suite.home / "shared" / "kb" / project / "notes"
    return {p.name.removesuffix(".md"): p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}


def promotions(suite: Suite, agent: str, run_id: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, agent) if r.get("kind") == "promotion" and r.get("run") == run_id]


def reply_for(suite: Suite, agent: str, *proposals: dict[str, Any]) -> None:
    write_reply(replies(suite.home) / f"{agent}.json", proposals)


def test_two_agents_promoting_one_recurring_fact_on_the_same_night_end_as_one_note(psuite: Suite) -> None:
    reply_for(psuite, "ada", add(ADA_FACT, reason="harbour office hours", topic="harbour-office-hours"))
    reply_for(psuite, "bea", add(BEA_FACT, reason="insert after the Harbour section"))
    reports: dict[str, dict[str, Any]] = {}

    def dream(agent: str) -> None:
        reports[agent] = run_ok(psuite, agent)

    threads = [threading.Thread(target=dream, args=(agent,)) for agent in ("ada", "bea")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(reports) == {"ada", "bea"}  # both reviewers met (hold.py): the runs overlapped
    for agent, fact in (("ada", ADA_FACT), ("bea", BEA_FACT)):
        assert reports[agent]["status"] == "applied" and fact in read(psuite, agent, "MEMORY.md")
        assert "promotion" in reports[agent]["steps"]
    notes = vault_notes(psuite, "night")
    assert len(notes) == 1, notes
    [(name, text)] = notes.items()
    assert ADA_FACT in text and BEA_FACT in text
    records = {agent: promotions(psuite, agent, reports[agent]["runId"]) for agent in ("ada", "bea")}
    assert sorted(r[0]["outcome"] for r in records.values()) == ["created", "merged"]
    assert {r[0]["note"] for r in records.values()} == {name}
    assert records["bea"][0]["passedOver"] == "insert after the Harbour section"  # an editing instruction names nothing
    note_lines = [n for n in reports["ada"]["notes"] if n.startswith("Shared promotion of ")]
    assert len(note_lines) == 1 and repr(name) in note_lines[0]

    # Another night, the same fact recurs for ada, reworded, under its topic: it lands in that note too
    # (bea's rendezvous file is there now, so ada's reviewer answers at once).
    reply_for(psuite, "ada", add(SATURDAY, reason="harbour office hours", topic="harbour-office-hours"))
    later = run_ok(psuite, "ada")
    [record] = promotions(psuite, "ada", later["runId"])
    assert record["outcome"] in ("updated", "merged") and record["note"] == name
    assert list(vault_notes(psuite, "night")) == [name] and SATURDAY in vault_notes(psuite, "night")[name]


def test_propose_mode_promotes_nothing_and_the_kb_refuses_it_too(psuite: Suite) -> None:
    reply_for(psuite, "alfred", add("- The lighthouse lamp is serviced every March.", topic="lighthouse-lamp"))
    report = run_ok(psuite, "alfred")
    assert report["status"] == "applied" and "promotion" not in report["steps"]
    assert any("Shared promotion is off (knowledge.shared.mode is 'propose')" in n for n in report["notes"])
    assert vault_notes(psuite, "quiet") == {} and promotions(psuite, "alfred", report["runId"]) == []
    with grpc.insecure_channel(psuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        request = kb_pb2.PromoteFactRequest(agent_id="alfred", content="- a fact", topic="t")
        for key, code in ((ADMIN_KEY, grpc.StatusCode.FAILED_PRECONDITION), (READER_KEY, grpc.StatusCode.PERMISSION_DENIED)):
            with pytest.raises(grpc.RpcError) as info:
                stub.PromoteFact(request, metadata=(("x-api-key", key),), timeout=10)
            assert info.value.code() == code, info.value.details()


def test_a_pointer_only_add_is_written_locally_and_never_promoted(psuite: Suite) -> None:
    reply_for(psuite, "dana", add(POINTERS, reason="index"), add("- The ferry leaves pier 4 at 08:15.", reason="ferry times"))
    report = run_ok(psuite, "dana")
    assert report["status"] == "applied" and POINTERS in read(psuite, "dana", "MEMORY.md")
    records = promotions(psuite, "dana", report["runId"])
    assert [(r["outcome"], r["note"]) for r in records] == [("skipped", ""), ("created", "ferry-times")]
    assert "index pointers" in records[0]["reason"]
    assert list(vault_notes(psuite, "pointers")) == ["ferry-times"]


def test_a_kb_that_is_down_never_fails_the_dream(psuite: Suite) -> None:
    reply_for(psuite, "eve", add("- The bakery delivers bread at 06:30.", reason="bakery"))
    psuite.stop("kb")
    try:
        report = run_ok(psuite, "eve")
    finally:
        restart(psuite, "kb")
    assert report["status"] == "applied" and "- The bakery delivers bread at 06:30." in read(psuite, "eve", "MEMORY.md")
    [record] = promotions(psuite, "eve", report["runId"])
    assert record["outcome"] == "pending" and "the KB could not promote it (kb: UNAVAILABLE" in record["reason"]
    assert any(n.startswith("Shared promotion of ") and "kept on this host" in n for n in report["notes"])
    assert vault_notes(psuite, "down") == {}
