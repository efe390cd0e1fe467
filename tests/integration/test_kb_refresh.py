"""Targeted refreshes in the real KB process: events name the changed sources, a barrier keeps read-your-writes.

Each test writes files and calls Refresh (or Search with refresh) *at once*, with
no sleep in between: the barrier must make every write before the call count.
The KB's own log says whether a refresh was targeted or walked the tree. As
the KB indexes on file events by itself, the work of one write may be
done by the refresh the event queued or by the one the test asked for: the tests
add up every refresh logged since the write (each logs before it answers).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from suite_support import ADMIN_KEY, Suite, make_home, workspace

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)


@pytest.fixture(scope="module")
def rsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("kbr"), [{"id": "alfred"}])
    memory = home / "agents" / "alfred" / "workspace" / "memory"
    memory.mkdir(parents=True)
    for n in range(30):
        (memory / f"note{n:02}.md").write_text(f"# Note {n}\n\n- filler entry number {n} about gardening.\n")
    running = Suite(home, http_port, ports)
    try:
        running.start("kb")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def kb(rsuite: Suite) -> Iterator[kb_pb2_grpc.KnowledgeStub]:
    with grpc.insecure_channel(rsuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        refresh(stub)  # settle: the first refresh after start walks the tree
        yield stub


def refresh(kb: kb_pb2_grpc.KnowledgeStub) -> kb_pb2.RefreshReport:
    return kb.Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=60).report


def paths(kb: kb_pb2_grpc.KnowledgeStub, query: str, **kw: object) -> list[str]:
    reply = kb.Search(pb.SearchRequest(agent_id="alfred", query=query, limit=20, **kw), metadata=AUTH, timeout=30)
    return sorted(hit.path for hit in reply.hits)


def modes(suite: Suite) -> list[str]:
    return [line["mode"] for line in suite.log_lines("kb") if line.get("event") == "kb_refreshed"]


def runs_since(suite: Suite, before: int) -> list[dict[str, object]]:
    """The kb_refreshed lines after the first ``before`` ones."""
    return [line for line in suite.log_lines("kb") if line.get("event") == "kb_refreshed"][before:]


def indexed_since(suite: Suite, before: int) -> tuple[int, int, set[str]]:
    """(sources indexed, pruned, modes of the runs that changed something) since ``before``."""
    runs = runs_since(suite, before)
    busy = {str(r["mode"]) for r in runs if r["indexed"] or r["pruned"]}
    return sum(int(str(r["indexed"])) for r in runs), sum(int(str(r["pruned"])) for r in runs), busy


def test_an_edit_is_reindexed_alone_and_read_back_at_once(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    for round_ in range(15):  # a write immediately followed by its refresh, many times: no race
        word = f"zucchini{round_}x"
        before = len(modes(rsuite))
        (memory / "note03.md").write_text(f"# Note 3\n\n- the {word} bed needs water.\n")
        report = refresh(kb)
        assert report.errors == [], round_
        assert indexed_since(rsuite, before) == (1, 0, {"targeted"}), round_
        # reported as a walk would: the untouched sources
        assert [r["skipped"] for r in runs_since(rsuite, before) if r["indexed"]] == [29]
        assert paths(kb, word) == ["memory/note03.md"]


def test_search_with_refresh_sees_a_write_made_just_before(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    for round_ in range(10):
        word = f"parsnip{round_}y"
        (memory / f"fresh{round_}.md").write_text(f"- harvest the {word} in spring.\n")
        assert paths(kb, word, refresh=True) == [f"memory/fresh{round_}.md"], round_
    before = len(modes(rsuite))
    for round_ in range(10):
        os.unlink(memory / f"fresh{round_}.md")
    refresh(kb)
    assert indexed_since(rsuite, before)[1] == 10
    assert paths(kb, "parsnip0y") == []


def test_an_atomic_rename_write_is_seen(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    tmp = memory / ".note05.md.tmp"
    before = len(modes(rsuite))
    tmp.write_text("- renamed into place: kohlrabi.\n")
    os.replace(tmp, memory / "note05.md")
    refresh(kb)
    assert indexed_since(rsuite, before)[0] == 1
    assert paths(kb, "kohlrabi") == ["memory/note05.md"]


def test_a_new_folder_with_files_forces_a_walk(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    deep = memory / "projects" / "garden" / "2026"
    before = len(modes(rsuite))
    deep.mkdir(parents=True)  # files written before inotify watches the new folders are never reported
    (deep / "plan.md").write_text("- rotate the rutabaga beds.\n")
    (memory / "projects" / "top.md").write_text("- order rutabaga seed.\n")
    refresh(kb)
    assert indexed_since(rsuite, before)[0] == 2
    assert "walk" in modes(rsuite)[before:]
    assert paths(kb, "rutabaga") == ["memory/projects/garden/2026/plan.md", "memory/projects/top.md"]
    # The new folders are watched now: the next edit is targeted again.
    before = len(modes(rsuite))
    (deep / "plan.md").write_text("- rotate the rutabaga and turnip beds.\n")
    refresh(kb)
    assert indexed_since(rsuite, before) == (1, 0, {"targeted"})
    assert paths(kb, "turnip") == ["memory/projects/garden/2026/plan.md"]


def test_moving_a_folder_away_prunes_its_sources(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    before = len(modes(rsuite))
    (memory / "old").mkdir()
    (memory / "old" / "a.md").write_text("- the quince tree.\n")
    (memory / "old" / "b.md").write_text("- the quince jam.\n")
    refresh(kb)
    assert indexed_since(rsuite, before)[0] == 2
    before = len(modes(rsuite))
    shutil.move(str(memory / "old"), str(tmp_path / "old"))  # one event for the folder, none for its files
    refresh(kb)
    assert indexed_since(rsuite, before)[1] == 2
    assert paths(kb, "quince") == []


def test_a_symlink_out_of_the_workspace_is_not_indexed(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("- the vault code is mangosteen.\n")
    link = workspace(rsuite, "alfred") / "memory" / "link.md"
    before = len(modes(rsuite))
    link.symlink_to(outside)
    try:
        refresh(kb)
        assert indexed_since(rsuite, before)[0] == 0
        assert "walk" in modes(rsuite)[before:]  # the walk applies the confinement rules
        assert paths(kb, "mangosteen") == []
    finally:
        link.unlink()
    refresh(kb)


def test_a_restart_walks_the_tree_and_catches_changes_made_while_down(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    rsuite.stop("kb")  # ``kb`` settled the index first: what follows is only what changed while down
    (memory / "offline.md").write_text("- written while the KB was down: tamarillo.\n")
    os.unlink(memory / "note07.md")
    rsuite.start("kb")
    with grpc.insecure_channel(rsuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        report = refresh(stub)
        assert (report.indexed, report.pruned) == (1, 1)
        assert paths(stub, "tamarillo") == ["memory/offline.md"]
        before = len(modes(rsuite))
        (memory / "offline.md").write_text("- written after the restart: feijoa.\n")
        refresh(stub)
        assert indexed_since(rsuite, before)[0] == 1
        assert paths(stub, "feijoa") == ["memory/offline.md"]
