"""The real KB indexes on file events: no refresh call, bursts, links, coalescing.

Nothing here asks for a refresh: each test writes files and waits (bounded) for
Search to find them. The KB's own ``kb_refreshed`` log lines count the refreshes.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hardening_report import record
from suite_support import ADMIN_KEY, Suite, make_home, wait_until, workspace

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)
BURST = 2000


@pytest.fixture(scope="module")
def lsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("kbl"), [{"id": "alfred"}])
    memory = home / "agents" / "alfred" / "workspace" / "memory"
    memory.mkdir(parents=True)
    (home / "shared" / "kb" / "global" / "notes").mkdir(parents=True)  # watched from the start
    for n in range(20):
        (memory / f"old{n:02}.md").write_text(f"# Old {n}\n\n- an old note about orchards, number {n}.\n")
    running = Suite(home, http_port, ports)
    try:
        running.start("kb")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(lsuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(lsuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        stub.Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=60)  # settle
        yield stub


def search(kb: kb_pb2_grpc.KnowledgeStub, query: str, corpus: str = "memory") -> kb_pb2.SearchResponse:
    return kb.Search(pb.SearchRequest(agent_id="alfred", query=query, limit=20, corpus=corpus), metadata=AUTH, timeout=30)


def runs(suite: Suite) -> list[dict[str, object]]:
    return [line for line in suite.log_lines("kb") if line.get("event") == "kb_refreshed"]


def sources(kb: kb_pb2_grpc.KnowledgeStub) -> int:
    return int(kb.GetIndexStatus(pb.GetIndexStatusRequest(agent_id="alfred"), metadata=AUTH, timeout=30).sources)


def test_a_new_note_becomes_searchable_and_fresh_without_a_refresh(lsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(lsuite, "alfred") / "memory"
    for round_ in range(5):
        word = f"loquat{round_}z"
        (memory / f"new{round_}.md").write_text(f"# New\n\n- the {word} tree fruits in May.\n")
        wait_until(lambda w=word: [h.path for h in search(kb, w).hits] == [f"memory/new{round_}.md"], 10,  # type: ignore[misc]
                   f"round {round_}: the note to be found without a refresh")
        assert not search(kb, word).stale


def test_many_writes_coalesce_into_fewer_refreshes(lsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(lsuite, "alfred") / "memory"
    before, start_sources, writes = len(runs(lsuite)), sources(kb), 300
    for n in range(writes):
        (memory / f"many{n:03}.md").write_text(f"- note {n} about the medlar harvest.\n")
    wait_until(lambda: sources(kb) == start_sources + writes and not search(kb, "medlar").stale, 30,
               "every write to be indexed")
    count = len(runs(lsuite)) - before
    record("KB indexes on events: 300 writes", rounds=writes, acknowledged=writes, lost=0,
           notes=f"{count} refreshes for {writes} writes (one running and one queued at most per agent)")
    assert 0 < count < writes


def test_a_symlink_leaving_the_workspace_indexes_nothing(lsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("- the safe combination is durian.\n")
    link = workspace(lsuite, "alfred") / "memory" / "leak.md"
    before = len(runs(lsuite))
    link.symlink_to(outside)
    try:
        wait_until(lambda: len(runs(lsuite)) > before, 10, "the link's event to run a refresh")
        wait_until(lambda: not search(kb, "durian").stale, 10, "the refresh to finish")
        assert search(kb, "durian").hits == []
        assert "walk" in [r["mode"] for r in runs(lsuite)[before:]]  # the walk applies the confinement rules
    finally:
        link.unlink()


def test_a_burst_of_new_notes_keeps_search_answering(lsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    """A ``git checkout`` of BURST notes while another client searches all along: every search
    answers (no error, each within its deadline), and the burst ends indexed and fresh."""
    burst = workspace(lsuite, "alfred") / "memory" / "checkout"
    staging = workspace(lsuite, "alfred") / ".staging"
    staging.mkdir()
    for n in range(BURST):
        (staging / f"c{n:04}.md").write_text(f"# Checkout {n}\n\n- checked-out note {n} about samphire.\n")
    start_sources = sources(kb)
    done = threading.Event()
    answered: list[float] = []
    failures: list[str] = []

    def searcher() -> None:
        with grpc.insecure_channel(lsuite.address("kb")) as channel:
            stub = kb_pb2_grpc.KnowledgeStub(channel)
            while not done.is_set() and len(answered) < 100_000:
                began = time.perf_counter()
                try:
                    search(stub, "orchards")
                except grpc.RpcError as exc:
                    failures.append(str(exc.code()))
                answered.append(time.perf_counter() - began)

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        os.rename(staging, burst)  # one folder event: the walk fallback
        for n in range(0, BURST, 2):  # and edits inside it, as a checkout writes file by file
            (burst / f"c{n:04}.md").write_text(f"# Checkout {n}\n\n- edited note {n} about samphire.\n")
        wait_until(lambda: sources(kb) == start_sources + BURST and not search(kb, "samphire").stale, 60,
                   "the burst to be indexed")
    finally:
        done.set()
        thread.join(60)
    record("KB indexes on events: burst", rounds=len(answered), inputs=BURST, errors_5xx=0, lost=0,
           longest_ms=round(max(answered) * 1000, 1),
           notes=f"{BURST} notes moved in and {BURST // 2} edited while one client searched; every search answered")
    assert failures == [] and len(answered) > 0
    assert [h.path for h in search(kb, "edited note 10 samphire").hits][:1] == ["memory/checkout/c0010.md"]


def test_a_shared_note_dropped_in_by_hand_is_indexed_on_its_event(lsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    notes = lsuite.home / "shared" / "kb" / "global" / "notes"
    search(kb, "anything", "shared")  # the vault's index exists (the first search builds it)
    (notes / "Hand written.md").write_text("# Hand written\n\n- the ferry leaves at nine from pier kumquat.\n")
    wait_until(lambda: [h.path for h in search(kb, "kumquat", "shared").hits] == ["notes/Hand written.md"], 10,
               "the hand-written shared note to be searchable without a refresh")
    assert not search(kb, "kumquat", "shared").stale
    outside = tmp_path / "outside.md"
    outside.write_text("- the vault password is rambutan.\n")
    (notes / "link.md").symlink_to(outside)
    try:
        wait_until(lambda: not search(kb, "rambutan", "shared").stale, 10, "the link's reindex to finish")
        assert search(kb, "rambutan", "shared").hits == []
    finally:
        (notes / "link.md").unlink()
