"""The deterministic passes with the real processes: the nightly order from the audit of one run,
recall of every moved entry by Search, byte-identical archives, revert, and migrate-memory on a
workspace the running KB then searches."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grpc import insecure_channel
from dreaming_support import (
    dreaming,
    journal,
    op_records,
    read,
    rest_revert,
    reviewer,
    run_ok,
    run_record,
    search,
    start_suite,
    write_reply,
    remove,
)
from suite_support import Suite, workspace

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.dreaming.apply.recall import query_for

pytestmark = pytest.mark.integration

AGENTS = ("ada", "ben", "cyd", "eve")
PINNED = "## User\n- [x] likes the window seat (checked, but pinned: it stays)\n\n"
FACTS = "## Facts\n" + "".join(f"- The Osprey relay {i} answers on channel {40 + i}.\n" for i in range(15))
TASKS = "## Tasks\n" + "".join(f"- [x] calibrated gauge {i} on the north pier\n" for i in range(12)) + "- [ ] order spare fuses\n"
LOG = "## Harbour log\n" + "".join(f"- 2026-09-{1 + i % 28:02d} tide table check number {i} with Mara\n" for i in range(60))
MEMORY = "# Memory\n\n" + PINNED + FACTS + "\n" + TASKS + "\n" + LOG
BUDGET = 2500


@pytest.fixture(scope="module")
def psuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dpass")
    answers = tmp / "answers"
    answers.mkdir()
    agents: list[dict[str, Any]] = [
        {"id": a, "memory": {"memoryBudgetChars": BUDGET}, "dreaming": dreaming(reviewer("reply.py", answers / f"{a}.json"))}
        for a in AGENTS
    ]
    files = {a: {"MEMORY.md": MEMORY} for a in AGENTS}
    durable = "## Facts\n" + "".join(f"- The Heron relay {i} answers on channel {100 + i}.\n" for i in range(80))
    files["eve"] = {"MEMORY.md": "# Memory\n\n" + durable}  # durable only: over budget, nothing to route out
    running = start_suite(tmp, agents, files=files)
    for a in AGENTS:
        write_reply(answers / f"{a}.json", [])
    try:
        yield running
    finally:
        running.stop_all()


def answer(suite: Suite, agent: str, proposals: list[dict[str, Any]]) -> None:
    write_reply(suite.home.parent / "answers" / f"{agent}.json", proposals)


def test_one_run_goes_through_the_nightly_order_and_every_moved_entry_is_found(psuite: Suite) -> None:
    answer(psuite, "ada", [remove("- The Osprey relay 3 answers on channel 43.")])
    report = run_ok(psuite, "ada")
    assert report["status"] == "applied", report
    record = run_record(psuite, "ada", report["runId"])
    assert record["steps"] == ["compactor", "staleness-gc", "route-out", "recall-check", "reviewer", "selection", "applier", "recall-check", "audit"]
    ops = op_records(psuite, "ada", report["runId"])
    kinds = [r["proposal"]["op"] for r in sorted(ops, key=lambda r: int(r["op"].rsplit("/", 1)[1]))]
    assert kinds == ["compact"] * 12 + ["route"] * kinds.count("route") + ["remove"] and kinds.count("route") > 0
    after = read(psuite, "ada", "MEMORY.md")
    assert len(after) <= BUDGET and PINNED in after and "order spare fuses" in after
    completed = read(psuite, "ada", "memory/archive/completed.md")
    moved = [r for r in journal(psuite, "ada") if r.get("run") == report["runId"] and r.get("opKind") == "move"]
    for entry in moved:  # byte for byte in its destination, and found by Search
        destination = entry["reason"].rsplit("→ ", 1)[1]
        assert entry["removed"] in read(psuite, "ada", destination)
    assert "- [x] calibrated gauge 4 on the north pier\n" in completed
    hits = search(psuite, "ada", "calibrated gauge north pier")
    assert any(h["path"] == "memory/archive/completed.md" for h in hits)
    routed = [r for r in moved if "memory/harbour-log.md" in r["reason"]]
    assert routed and any(h["path"] == "memory/harbour-log.md" for h in search(psuite, "ada", "tide table check Mara"))
    assert any(n.startswith("Moves recall-checked: all ") for n in record["notes"]), record["notes"]


def test_a_run_of_the_passes_is_reverted_byte_for_byte(psuite: Suite) -> None:
    answer(psuite, "ben", [])
    report = run_ok(psuite, "ben")
    assert read(psuite, "ben", "MEMORY.md") != MEMORY
    undone = rest_revert(psuite, "ben", report["runId"])
    assert undone.status_code == 200, undone.text
    assert read(psuite, "ben", "MEMORY.md") == MEMORY
    assert read(psuite, "ben", "memory/archive/completed.md") == ""
    again = run_ok(psuite, "ben")  # idempotent on the same text: the same moves again
    assert [o["op"] for o in again["ops"]] and all(o["status"] == "applied" for o in again["ops"])


def test_a_second_run_moves_nothing(psuite: Suite) -> None:
    answer(psuite, "cyd", [])
    run_ok(psuite, "cyd")
    text = read(psuite, "cyd", "MEMORY.md")
    second = run_ok(psuite, "cyd")
    assert not [o for o in second["ops"] if o["op"] in ("compact", "route")]
    assert read(psuite, "cyd", "MEMORY.md") == text


def test_migrate_memory_without_a_running_dreaming_service_and_the_kb_finds_the_moves(tmp_path: Path) -> None:
    running = start_suite(tmp_path, [{"id": "dee", "memory": {"memoryBudgetChars": BUDGET}}], services=("kb",),
                          files={"dee": {"MEMORY.md": MEMORY}})
    try:
        ws = workspace(running, "dee")
        gateway = [sys.executable, "-m", "gateway_cli.cli", "migrate-memory", str(ws), "--home", str(running.home)]
        plan = subprocess.run(gateway, capture_output=True, text=True, timeout=60)
        assert plan.returncode == 0, plan.stderr
        assert (ws / "MEMORY.md").read_text() == MEMORY
        applied = subprocess.run([*gateway, "--apply"], capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr
        assert len((ws / "MEMORY.md").read_text()) <= BUDGET
        moved = [r["removed"] for r in map(json.loads, (ws / ".dreaming" / "journal.jsonl").read_text().splitlines())
                 if r.get("opKind") == "move"]
        assert moved
        with insecure_channel(running.address("kb")) as channel:  # only the KB runs: over gRPC
            stub = kb_pb2_grpc.KnowledgeStub(channel)
            metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(running.home)),)
            stub.Refresh(kb_pb2.RefreshRequest(agent_id="dee", wait=True), timeout=60, metadata=metadata)
            for text in moved:
                reply = stub.Search(kb_pb2.SearchRequest(agent_id="dee", query=query_for(text), limit=20), timeout=30, metadata=metadata)
                assert any(text.strip() in (ws / h.path).read_text() for h in reply.hits), text
    finally:
        running.stop_all()


def test_over_budget_a_reviewer_remove_is_archived_in_pruned_md_before_the_cut(psuite: Suite) -> None:
    before = read(psuite, "eve", "MEMORY.md")
    assert len(before) > BUDGET
    block = "".join(f"- The Heron relay {i} answers on channel {100 + i}.\n" for i in (10, 11, 12))
    assert block in before
    answer(psuite, "eve", [remove(block.rstrip("\n"))])
    report = run_ok(psuite, "eve")
    assert [o["op"] for o in report["ops"] if o["status"] == "applied"] == ["remove"], report["ops"]
    assert "route-out" in run_record(psuite, "eve", report["runId"])["steps"]  # it ran and found nothing episodic
    assert block in read(psuite, "eve", "memory/archive/pruned.md")
    assert block not in read(psuite, "eve", "MEMORY.md")
    assert any(h["path"] == "memory/archive/pruned.md" for h in search(psuite, "eve", "Heron relay answers channel 111"))
