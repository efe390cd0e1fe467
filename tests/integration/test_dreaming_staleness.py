"""The staleness GC with the real processes (KB + dreaming + the REST shim): the KB's RPCs, a run that
invalidates (a backfilled-old file and a supersession), a revert, a restore after a Search hit that
was recorded and folded, and `gateway dream explain` over the CLI and REST."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from dreaming_support import cli, client, dreaming, read, rest_revert, reviewer, run_ok, search, start_suite, write_reply
from suite_support import Suite, workspace

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

AGENTS = ("ivy", "jon", "kai", "lou")
STALE = "memory/archive/stale.md"
DAY = 86_400
OLD_NOTES = (
    "# Harbour notes\n\n"
    "- #42: the deploy key is in vault A\n"
    "- the ferry to Skerry leaves at nine sharp\n\n"
    "- the lighthouse keeper is called Mara <!-- importance: 8 -->\n"
)
DECISIONS = "# Decisions\n\n- #43: replaces #42 — the deploy key moved to vault B\n"


@pytest.fixture(scope="module")
def ssuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dstale")
    answers = tmp / "answers"
    answers.mkdir()
    agents: list[dict[str, Any]] = [{"id": a, "dreaming": dreaming(reviewer("reply.py", answers / f"{a}.json"))} for a in AGENTS]
    for a in AGENTS:
        write_reply(answers / f"{a}.json", [])

    def old_files(config: dict[str, Any], suite: Suite) -> None:
        """Before any process starts: the notes are a year old on disk, as a backfill finds them."""
        for a in AGENTS:
            folder = suite.home / "agents" / a / "workspace" / "memory"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "notes.md").write_text(OLD_NOTES, encoding="utf-8")
            year_ago = (folder / "notes.md").stat().st_mtime - 365 * DAY
            os.utime(folder / "notes.md", (year_ago, year_ago))
            (folder / "decisions.md").write_text(DECISIONS, encoding="utf-8")

    running = start_suite(tmp, agents, configure=old_files)
    try:
        yield running
    finally:
        running.stop_all()


def kb_stub(suite: Suite) -> tuple[grpc.Channel, kb_pb2_grpc.KnowledgeStub, tuple[tuple[str, str], ...]]:
    channel = grpc.insecure_channel(suite.address("kb"))
    return channel, kb_pb2_grpc.KnowledgeStub(channel), ((INTERNAL_TOKEN_HEADER, read_internal_token(suite.home)),)


def lifecycle(suite: Suite, agent: str, text_fragment: str) -> kb_pb2.ArchiveEntry:
    channel, stub, metadata = kb_stub(suite)
    with channel:
        stub.Refresh(kb_pb2.RefreshRequest(agent_id=agent, wait=True), timeout=60, metadata=metadata)
        page = stub.ListArchiveEntries(kb_pb2.ListArchiveEntriesRequest(agent_id=agent), timeout=30, metadata=metadata)
    ws = workspace(suite, agent)
    for entry in page.entries:
        lines = (ws / entry.path).read_text().split("\n")
        if text_fragment in "\n".join(lines[entry.start_line - 1 : entry.end_line]):
            return entry
    raise AssertionError(f"no entry holds {text_fragment!r}")


def test_the_kb_lists_entries_with_their_lifecycle_and_records_decisions(ssuite: Suite) -> None:
    ferry = lifecycle(ssuite, "ivy", "ferry to Skerry")
    assert ferry.path == "memory/notes.md" and ferry.provenance == "agent" and ferry.importance == 5
    mtime = (workspace(ssuite, "ivy") / "memory/notes.md").stat().st_mtime
    assert abs(ferry.lifecycle.first_seen - mtime) < 1e-3  # first seen at the file's mtime
    assert ferry.lifecycle.retrieval_count == 0 and ferry.lifecycle.invalid_at == 0
    channel, stub, metadata = kb_stub(ssuite)
    with channel:
        reply = stub.UpdateEntryLifecycle(kb_pb2.UpdateEntryLifecycleRequest(agent_id="ivy", updates=[
            kb_pb2.LifecycleUpdate(entry_hash=ferry.lifecycle.entry_hash, supersedes_key="#7"),
            kb_pb2.LifecycleUpdate(entry_hash="0" * 64, invalid_at=5.0)]), timeout=30, metadata=metadata)
        assert (reply.updated, list(reply.missing)) == (1, ["0" * 64])
        one = stub.ListArchiveEntries(kb_pb2.ListArchiveEntriesRequest(agent_id="ivy", entry_hashes=[ferry.lifecycle.entry_hash]),
                                      timeout=30, metadata=metadata)
        assert [e.path for e in one.entries] == ["memory/notes.md"] and one.lifecycle[0].supersedes_key == "#7"
        stub.UpdateEntryLifecycle(kb_pb2.UpdateEntryLifecycleRequest(agent_id="ivy", updates=[
            kb_pb2.LifecycleUpdate(entry_hash=ferry.lifecycle.entry_hash, supersedes_key="")]), timeout=30, metadata=metadata)
        with pytest.raises(grpc.RpcError) as bad:
            stub.ListArchiveEntries(kb_pb2.ListArchiveEntriesRequest(agent_id="ivy", entry_hashes=["nope"]), timeout=30, metadata=metadata)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    with client(ssuite) as http:
        listed = http.get("/api/v1/agents/ivy/memory:entries", params={"pageSize": 1})
        negative = http.get("/api/v1/agents/ivy/memory:entries", params={"pageSize": -1})
    assert negative.status_code == 400 and "page_size" in negative.json()["message"], negative.text
    assert listed.status_code == 200, listed.text
    body = listed.json()  # read-only over REST, one whole source a page
    assert (body["nextPageToken"], [s["path"] for s in body["sources"]]) == ("memory/decisions.md", ["memory/decisions.md"])


def test_a_run_invalidates_with_why_and_a_revert_undoes_it(ssuite: Suite) -> None:
    report = run_ok(ssuite, "jon")
    stale_ops = [o for o in report["ops"] if o["op"] == "stale"]
    assert sorted(o["target"] for o in stale_ops) == ["- #42: the deploy key is in vault A", "- the ferry to Skerry leaves at nine sharp"]
    assert all(o["status"] == "applied" and o["file"] == STALE for o in stale_ops)
    reasons = {o["target"]: o["proposalReason"] for o in stale_ops}
    assert reasons["- #42: the deploy key is in vault A"] == "superseded by memory/decisions.md:3 (#42)"
    assert reasons["- the ferry to Skerry leaves at nine sharp"].startswith("aged out: idle 365 days, retrieved 0 times")
    assert "staleness-gc" in report["steps"] and report["steps"].index("staleness-gc") == 1
    notes = read(ssuite, "jon", "memory/notes.md")
    assert notes == "# Harbour notes\n\n- the lighthouse keeper is called Mara <!-- importance: 8 -->\n"  # importance 8 stays
    stale = read(ssuite, "jon", STALE)
    assert "## Stale · superseded by memory/decisions.md:3 (#42) · from memory/notes.md › Harbour notes" in stale
    assert "<!-- invalid_at: " in stale and '"rule": "aged-out"' in stale
    assert lifecycle(ssuite, "jon", "ferry to Skerry").lifecycle.invalid_at > 0
    assert lifecycle(ssuite, "jon", "#43: replaces").lifecycle.supersedes_key == "#42"
    undone = rest_revert(ssuite, "jon", report["runId"])
    assert undone.status_code == 200, undone.text
    assert sorted(undone.json()["reverted"]) == sorted(o["opId"] for o in stale_ops)  # once each, though a move writes two files
    assert read(ssuite, "jon", "memory/notes.md") == OLD_NOTES and read(ssuite, "jon", STALE) == ""


def test_a_stale_entry_found_by_search_is_restored_on_the_next_run(ssuite: Suite) -> None:
    first = run_ok(ssuite, "kai")
    assert any(o["op"] == "stale" and o["status"] == "applied" for o in first["ops"])
    hits = search(ssuite, "kai", "ferry Skerry nine sharp")  # a real Search hit, recorded by the KB
    assert any(h["path"] == STALE for h in hits)
    second = run_ok(ssuite, "kai")  # folds the log first: the retrieval came after the invalidation
    restores = [o for o in second["ops"] if o["op"] == "restore"]
    assert [(o["status"], o["file"], o["target"]) for o in restores] == [("applied", "memory/notes.md", "- the ferry to Skerry leaves at nine sharp")]
    assert "- the ferry to Skerry leaves at nine sharp\n" in read(ssuite, "kai", "memory/notes.md")
    assert "ferry to Skerry" not in read(ssuite, "kai", STALE) and "#42: the deploy key" in read(ssuite, "kai", STALE)
    life = lifecycle(ssuite, "kai", "ferry to Skerry").lifecycle
    assert life.invalid_at == 0 and life.restored_at > 0 and life.retrieval_count >= 1
    third = run_ok(ssuite, "kai")  # retrieved since: it stays
    assert not [o for o in third["ops"] if o["op"] in ("stale", "restore") and o["status"] == "applied"]


def test_explain_prints_an_entrys_history_over_the_cli_and_rest(ssuite: Suite) -> None:
    report = run_ok(ssuite, "lou")
    done = cli(ssuite, "explain", "lou", "deploy", "key", "vault", "A")
    assert done.returncode == 0, done.stderr
    assert "stands in memory/archive/stale.md" in done.stdout and "(stale)" in done.stdout
    assert "memory/notes.md → memory/archive/stale.md: superseded by memory/decisions.md:3 (#42)" in done.stdout
    assert f"[{report['runId']}/" in done.stdout and "first seen" in done.stdout
    with client(ssuite) as http:
        reply = http.get("/api/v1/agents/lou/dream:explain", params={"query": "ferry Skerry"})
        empty = http.get("/api/v1/agents/lou/dream:explain", params={"query": " "})
        long = http.get("/api/v1/agents/lou/dream:explain", params={"query": "ferry " * 2000})
    assert reply.status_code == 200, reply.text
    assert long.status_code == 200 and len(long.json()["query"]) <= 1000 and len(long.json()["text"]) < 2000  # cut, like Search
    [entry] = [e for e in reply.json()["entries"] if "ferry" in e["text"]]
    assert entry["places"][0]["state"] == "stale" and entry["firstPath"] == "memory/notes.md"
    assert any(e["kind"] == "moved" and e["toFile"] == STALE and "aged out" in e["detail"] for e in entry["events"])
    assert empty.status_code == 400
    unknown = cli(ssuite, "explain", "nobody", "x")
    assert unknown.returncode == 2
