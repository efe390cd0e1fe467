"""Targeted refreshes in the real KB process: events name the changed sources, a barrier keeps read-your-writes.

Each test writes files and calls Refresh (or Search with refresh) *at once*, with
no sleep in between: the barrier must make every write before the call count.
The KB's own log says whether a refresh was targeted or walked the tree.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from suite_support import ADMIN_KEY, Suite, make_home, wait_until, workspace

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


def last_mode_after(suite: Suite, before: int) -> str:
    wait_until(lambda: len(modes(suite)) > before, 10, "a kb_refreshed log line")
    return modes(suite)[-1]


def test_an_edit_is_reindexed_alone_and_read_back_at_once(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    for round_ in range(15):  # a write immediately followed by its refresh, many times: no race
        word = f"zucchini{round_}x"
        (memory / "note03.md").write_text(f"# Note 3\n\n- the {word} bed needs water.\n")
        before = len(modes(rsuite))
        report = refresh(kb)
        assert (report.indexed, report.pruned, report.errors) == (1, 0, []), round_
        assert report.skipped == 29  # reported as a walk would: the untouched sources
        assert last_mode_after(rsuite, before) == "targeted"
        assert paths(kb, word) == ["memory/note03.md"]


def test_search_with_refresh_sees_a_write_made_just_before(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    for round_ in range(10):
        word = f"parsnip{round_}y"
        (memory / f"fresh{round_}.md").write_text(f"- harvest the {word} in spring.\n")
        assert paths(kb, word, refresh=True) == [f"memory/fresh{round_}.md"], round_
    for round_ in range(10):
        os.unlink(memory / f"fresh{round_}.md")
    report = refresh(kb)
    assert report.pruned == 10
    assert paths(kb, "parsnip0y") == []


def test_an_atomic_rename_write_is_seen(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    tmp = memory / ".note05.md.tmp"
    tmp.write_text("- renamed into place: kohlrabi.\n")
    os.replace(tmp, memory / "note05.md")
    assert refresh(kb).indexed == 1
    assert paths(kb, "kohlrabi") == ["memory/note05.md"]


def test_a_new_folder_with_files_forces_a_walk(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    deep = memory / "projects" / "garden" / "2026"
    deep.mkdir(parents=True)  # files written before inotify watches the new folders are never reported
    (deep / "plan.md").write_text("- rotate the rutabaga beds.\n")
    (memory / "projects" / "top.md").write_text("- order rutabaga seed.\n")
    before = len(modes(rsuite))
    report = refresh(kb)
    assert report.indexed == 2
    assert last_mode_after(rsuite, before) == "walk"
    assert paths(kb, "rutabaga") == ["memory/projects/garden/2026/plan.md", "memory/projects/top.md"]
    # The new folders are watched now: the next edit is targeted again.
    (deep / "plan.md").write_text("- rotate the rutabaga and turnip beds.\n")
    before = len(modes(rsuite))
    assert refresh(kb).indexed == 1
    assert last_mode_after(rsuite, before) == "targeted"
    assert paths(kb, "turnip") == ["memory/projects/garden/2026/plan.md"]


def test_moving_a_folder_away_prunes_its_sources(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    (memory / "old").mkdir()
    (memory / "old" / "a.md").write_text("- the quince tree.\n")
    (memory / "old" / "b.md").write_text("- the quince jam.\n")
    assert refresh(kb).indexed == 2
    shutil.move(str(memory / "old"), str(tmp_path / "old"))  # one event for the folder, none for its files
    report = refresh(kb)
    assert report.pruned == 2
    assert paths(kb, "quince") == []


def test_a_symlink_out_of_the_workspace_is_not_indexed(rsuite: Suite, kb: kb_pb2_grpc.KnowledgeStub, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("- the vault code is mangosteen.\n")
    link = workspace(rsuite, "alfred") / "memory" / "link.md"
    link.symlink_to(outside)
    try:
        before = len(modes(rsuite))
        assert refresh(kb).indexed == 0
        assert last_mode_after(rsuite, before) == "walk"  # the walk applies the confinement rules
        assert paths(kb, "mangosteen") == []
    finally:
        link.unlink()
    refresh(kb)


def test_a_restart_walks_the_tree_and_catches_changes_made_while_down(rsuite: Suite) -> None:
    memory = workspace(rsuite, "alfred") / "memory"
    rsuite.stop("kb")
    (memory / "offline.md").write_text("- written while the KB was down: tamarillo.\n")
    os.unlink(memory / "note07.md")
    rsuite.start("kb")
    with grpc.insecure_channel(rsuite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        report = refresh(stub)
        assert (report.indexed, report.pruned) == (1, 1)
        assert paths(stub, "tamarillo") == ["memory/offline.md"]
        (memory / "offline.md").write_text("- written after the restart: feijoa.\n")
        assert refresh(stub).indexed == 1
        assert paths(stub, "feijoa") == ["memory/offline.md"]
