"""The shared vault's own GC through the real KB process: CollectVault once per vault per day for two
agents of one vault, retrievals recorded by Search and GetSharedNote (and not when the caller opts
out), a retired note restored once it was retrieved again, and the refusals.

The KB runs on the real clock, so note ages are file mtimes set by the test (staleDays is 1), and
"the next day" is the day claim in the vault's kb_meta set back by the test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import grpc
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, make_home

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)
NO_RECORD = (*AUTH, ("x-gateway-record-retrievals", "0"))
THREE_DAYS_AGO = time.time() - 3 * 86_400


@pytest.fixture(scope="module")
def gsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [{"id": "alfred"}, {"id": "bob"}, {"id": "hermit", "knowledge": {"shared": {"enabled": False}}}]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("vaultgc"), agents,
                                       knowledge={"shared": {"gc": {"staleDays": 1}}})
    running = Suite(home, http_port, ports)
    try:
        running.start("kb")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(gsuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(gsuite.address("kb")) as channel:
        yield kb_pb2_grpc.KnowledgeStub(channel)


def notes(suite: Suite) -> Path:
    return suite.home / "shared" / "kb" / "global" / "notes"


def old_note(kb: kb_pb2_grpc.KnowledgeStub, suite: Suite, name: str, words: str) -> None:
    """A note created through the KB, then aged by hand: last written three days ago."""
    made = kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name=name, confirm=True,
                                                          content=f"# {name}\n\nThe {words} checklist.\n"),
                               metadata=AUTH, timeout=30)
    assert made.created and not made.linked  # no note links another (a link would match its name)
    os.utime(notes(suite) / f"{name}.md", (THREE_DAYS_AGO, THREE_DAYS_AGO))


def search(kb: kb_pb2_grpc.KnowledgeStub, query: str, corpus: str = "shared", metadata: tuple[tuple[str, str], ...] = AUTH) -> list[str]:
    reply = kb.Search(pb.SearchRequest(agent_id="bob", query=query, corpus=corpus, limit=3), metadata=metadata, timeout=30)
    return [h.path for h in reply.hits]


def collect(kb: kb_pb2_grpc.KnowledgeStub, agent: str) -> kb_pb2.CollectVaultResponse:
    reply: kb_pb2.CollectVaultResponse = kb.CollectVault(pb.CollectVaultRequest(agent_id=agent), metadata=AUTH, timeout=60)
    return reply


def next_day(suite: Suite) -> None:
    """As if the day had turned: the vault's day claim set back (the KB keeps running)."""
    conn = apsw.Connection(os.fspath(suite.home / "shared" / "kb" / "global" / "kb.sqlite"))
    try:
        conn.setbusytimeout(10_000)
        conn.execute("UPDATE kb_meta SET value = '2000-01-01' WHERE key = 'vault_gc_day'")
    finally:
        conn.close()


def test_the_vault_gc_runs_once_a_day_for_two_agents_and_restores_what_was_retrieved_again(
    gsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub
) -> None:
    old_note(kb, gsuite, "kiln", "kiln thermocouple")
    old_note(kb, gsuite, "sluice", "sluice gatekeeper")
    old_note(kb, gsuite, "quarry", "quarry winch")
    old_note(kb, gsuite, "ferry", "ferry timetable")
    assert search(kb, "kiln thermocouple")[0] == "notes/kiln.md"  # retrieved: not idle any more
    assert search(kb, "ferry timetable", metadata=NO_RECORD)[0] == "notes/ferry.md"  # opted out: not counted

    first = collect(kb, "alfred")
    assert first.outcome == pb.VAULT_GC_OUTCOME_RAN and first.ran_for == "alfred" and first.project == "global"
    assert sorted(first.retired) == ["ferry", "quarry", "sluice"] and first.folded >= 1
    assert first.stale_days == 1 and first.max_retirements_per_run == 50
    assert "Shared vault GC ('global'): retired 3 note(s) idle over 1 days" in first.message
    second = collect(kb, "bob")
    assert second.outcome == pb.VAULT_GC_OUTCOME_ALREADY_RAN and second.ran_for == "alfred" and second.day == first.day
    assert "already ran today" in second.message and "nothing was done" in second.message
    assert sorted(p.name for p in notes(gsuite).glob("*.md")) == [
        "kiln.md", "stale__ferry.md", "stale__quarry.md", "stale__sluice.md"]

    # Retired notes stay searchable; a Search hit and a GetSharedNote of the retired name are retrievals.
    assert search(kb, "sluice gatekeeper", corpus="all")[0] == "notes/stale__sluice.md"
    got = kb.GetSharedNote(pb.GetSharedNoteRequest(agent_id="bob", name="stale__quarry"), metadata=AUTH, timeout=10)
    assert got.retired and "quarry winch" in got.content
    assert collect(kb, "bob").outcome == pb.VAULT_GC_OUTCOME_ALREADY_RAN  # still the same day: nothing comes back yet
    next_day(gsuite)
    third = collect(kb, "bob")
    assert third.outcome == pb.VAULT_GC_OUTCOME_RAN and third.ran_for == "bob"
    assert sorted(third.restored) == ["quarry", "sluice"] and list(third.retired) == []
    assert (notes(gsuite) / "sluice.md").read_text() == "# sluice\n\nThe sluice gatekeeper checklist.\n"
    assert search(kb, "sluice gatekeeper")[0] == "notes/sluice.md"
    assert sorted(p.name for p in notes(gsuite).glob("*.md")) == ["kiln.md", "quarry.md", "sluice.md", "stale__ferry.md"]


def test_collect_vault_needs_write_access_and_the_shared_kb(gsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    with pytest.raises(grpc.RpcError) as denied:
        kb.CollectVault(pb.CollectVaultRequest(agent_id="alfred"), metadata=(("x-api-key", READER_KEY),), timeout=10)
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as off:
        collect(kb, "hermit")
    assert off.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "shared KB disabled" in (off.value.details() or "")
