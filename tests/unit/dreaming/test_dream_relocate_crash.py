"""A relocation killed at every step, then what dreaming's next start does: the old state or the new.

The kills are ``dreaming_kills``'s: the steps are every file write (a rename or link into place, a
removal) and every journal append; the kill comes just before a step, just after it, or, for an
append, in its middle (a torn last line).
The start is ``main.settle_workspace`` (what dreaming runs before it serves), or only the
recovery a run begins with. The recovery is then killed at each of its own steps too, and the next
start must still finish it. Then: files someone else changed between the kill and the start, a
source changed just before its write (rolled back at once), and the recall check's put-back of
the source killed at each of its steps.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import agent_with_memory, dream
from dreaming_kills import Crash, Steps, crash_points, injected, killed_twice

from services.dreaming.apply import files
from services.dreaming.apply import intent as relocation_intent
from services.dreaming.apply.restore import Written, put_back
from services.dreaming.main import settle_workspace
from services.dreaming.model.edit import sha256
from services.dreaming.passes.moves import COMPACT, COMPLETED, ROUTE, Move
from services.dreaming.passes.relocate import relocate
from services.dreaming.records import journal

TEXT = "# Memory\n\n## Tasks\n- [x] ship the beta\n- keep the docs fresh\n- [x] rotate the keys\n\n## Log\n- 2026-11-30 met Ada\n"
LOG = "# Log\n- older entry"  # no final newline: the append puts one first
AT = "2026-12-01T03:00:00Z"
FILES = ("MEMORY.md", COMPLETED, "memory/log.md")


def move(kind: str, line: str, target: str, path: tuple[str, ...]) -> Move:
    start = TEXT.index(line)
    end = start + len(line) + 1
    return Move(kind, start, end, TEXT[start:end], target, path, reason=f"{kind} rule")


MOVES = [
    ("run/1", move(COMPACT, "- [x] ship the beta", COMPLETED, ("Memory", "Tasks"))),  # COMPLETED does not exist yet
    ("run/2", move(COMPACT, "- [x] rotate the keys", COMPLETED, ("Memory", "Tasks"))),
    ("run/3", move(ROUTE, "- 2026-11-30 met Ada", "memory/log.md", ("Memory", "Log"))),
]
OPS = [op for op, _ in MOVES]

Snapshot = dict[str, str | None]  # file → its text, None when it does not exist


def fresh(ws: Path) -> Path:
    ws.mkdir()
    (ws / "MEMORY.md").write_text(TEXT)
    (ws / "memory").mkdir()
    (ws / "memory" / "log.md").write_text(LOG)
    return ws


def snapshot(ws: Path) -> Snapshot:
    return {name: (ws / name).read_text() if (ws / name).exists() else None for name in FILES}


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Snapshot, Snapshot]:
    """The files before the relocation and after it (made without a kill)."""
    ws = fresh(tmp_path_factory.mktemp("clean") / "ws")
    pre = snapshot(ws)
    assert relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT).aborted == ""
    return pre, snapshot(ws)


def start(ws: Path, at: str = "2026-12-01T04:00:00Z") -> None:
    """Dreaming's next start (its journal under its run lock)."""
    settle_workspace(ws, at)


def open_edits(ws: Path) -> list[journal.Record]:
    records = journal.read(ws)
    undone = {(r["run"], r["op"]) for r in records if r.get("kind") in ("revert", "restore")}
    return [r for r in records if r.get("kind") == "edit" and (r["run"], r["op"]) not in undone]


def check(ws: Path, pre: Snapshot, post: Snapshot) -> str:
    """The property: the files are exactly the old state or the new, each moved entry stands in
    exactly one place, no intent is open, the journal says what the files hold, and a revert takes
    the new state back to the old. Returns "pre" or "post"."""
    now = snapshot(ws)
    assert now in (pre, post), now
    texts = [text or "" for text in now.values()]
    for _, m in MOVES:
        assert sum(text.count(m.text) for text in texts) == 1, m.text
    assert relocation_intent.open_intents(journal.read(ws)) == []
    edits = open_edits(ws)
    read = lambda rel: (ws / rel).read_text() if (ws / rel).exists() else ""  # noqa: E731 - a reader for plan_revert
    if now == pre:
        assert edits == []  # every op the journal holds is undone
        with pytest.raises(journal.RevertRefused) if not journal.read(ws) else contextlib.nullcontext():
            assert journal.plan_revert(journal.read(ws), "run", None, read).undone == []
        return "pre"
    assert sorted({r["op"] for r in edits}) == OPS
    for name in FILES:
        mine = [r for r in edits if r["file"] == name]
        assert mine and mine[-1]["hashAfter"] == sha256(read(name)), name
    undone = journal.plan_revert(journal.read(ws), "run", None, read)
    assert undone.texts == {name: text or "" for name, text in pre.items()}
    return "post"


STEPS = ["journal edit,intent", f"write {COMPLETED}", "write memory/log.md", "write .dreaming/backups/MEMORY.md.run",
         "write MEMORY.md", "journal intentDone"]


def test_the_steps_are_the_intent_the_destinations_the_backup_the_source_and_the_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path / "ws")
    with injected(monkeypatch, ws, Steps()) as steps:
        relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT)
    assert steps.seen == STEPS


def test_a_kill_at_every_step_leaves_the_old_state_or_the_new_and_the_next_start_finishes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, images: tuple[Snapshot, Snapshot]) -> None:
    pre, post = images
    with injected(monkeypatch, fresh(tmp_path / "count"), Steps()) as counted:
        relocate(tmp_path / "count", "MEMORY.md", TEXT, MOVES, "run", AT)
    outcomes = {}
    for n, point in enumerate(crash_points(len(counted.seen), counted.seen)):
        ws = fresh(tmp_path / f"k{n}")
        with injected(monkeypatch, ws, Steps(point)), pytest.raises(Crash):
            relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT)
        if n % 2:
            start(ws)
        else:  # what the next run (or revert, or migration) does first: no heal, no settle
            relocation_intent.recover(ws, "2026-12-01T04:00:00Z")
        outcomes[(counted.seen[point[0]], point[1])] = check(ws, pre, post)
        start(ws)  # once: a second start changes nothing
        assert check(ws, pre, post) == outcomes[(counted.seen[point[0]], point[1])]
        if outcomes[(counted.seen[point[0]], point[1])] == "pre":  # the next run moves them, once
            assert relocate(ws, "MEMORY.md", TEXT, MOVES, "run2", AT).aborted == ""
            texts = [text or "" for text in snapshot(ws).values()]
            assert all(sum(t.count(m.text) for t in texts) == 1 for _, m in MOVES)
    # the source's compare-and-swap is the commit point: new from just after it, old up to it
    assert outcomes[("write MEMORY.md", "before")] == "pre"
    assert outcomes[("write MEMORY.md", "after")] == "post"
    assert {outcomes[("journal intentDone", how)] for how in ("before", "after", "torn")} == {"post"}
    assert {outcomes[(f"write {COMPLETED}", how)] for how in ("before", "after")} == {"pre"}


def test_a_kill_during_the_recovery_is_finished_by_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, images: tuple[Snapshot, Snapshot]) -> None:
    pre, post = images
    tried = killed_twice(monkeypatch, lambda name: fresh(tmp_path / name), lambda ws: relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT),
                         start, lambda ws: check(ws, pre, post))
    assert tried > 20  # the recoveries that write (a destination back, the close) were each killed


def killed(ws: Path, monkeypatch: pytest.MonkeyPatch, step: str, how: str) -> None:
    with injected(monkeypatch, ws, Steps((STEPS.index(step), how))), pytest.raises(Crash):
        relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT)


def restored(ws: Path) -> list[str]:
    return sorted(r["op"] for r in journal.read(ws) if r.get("kind") == "restore")


def test_a_source_edited_after_the_kill_that_still_holds_the_entries_is_rolled_back_around(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path / "ws")
    killed(ws, monkeypatch, "write MEMORY.md", "before")
    (ws / "MEMORY.md").write_text(TEXT + "- the agent wrote this\n")  # before dreaming started again
    (ws / "memory" / "log.md").write_text((ws / "memory" / "log.md").read_text() + "- and this\n")
    start(ws)
    assert (ws / "MEMORY.md").read_text() == TEXT + "- the agent wrote this\n"
    assert not (ws / COMPLETED).exists()
    assert (ws / "memory" / "log.md").read_text() == LOG + "- and this\n"  # only the relocation's piece came off
    assert restored(ws) == OPS and relocation_intent.open_intents(journal.read(ws)) == []


def test_a_source_edited_after_the_kill_without_the_entries_is_rolled_forward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                images: tuple[Snapshot, Snapshot]) -> None:
    _, post = images
    ws = fresh(tmp_path / "ws")
    killed(ws, monkeypatch, "journal intentDone", "before")
    (ws / "MEMORY.md").write_text(str(post["MEMORY.md"]) + "- the agent wrote this\n")
    start(ws)
    assert snapshot(ws) == {**post, "MEMORY.md": str(post["MEMORY.md"]) + "- the agent wrote this\n"}  # the entries stay moved
    assert restored(ws) == [] and sorted({r["op"] for r in open_edits(ws)}) == OPS


def test_a_destination_whose_pieces_cannot_be_found_keeps_them_with_a_line_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path / "ws")
    killed(ws, monkeypatch, "write MEMORY.md", "before")
    log = ws / "memory" / "log.md"
    log.write_text(log.read_text().replace("# Log", "# Log book"))  # the context before the piece is gone
    found = relocation_intent.recover(ws, AT)
    assert [(r.outcome, r.left) for r in found] == [("back", ["memory/log.md"])]
    assert (ws / "MEMORY.md").read_text() == TEXT and not (ws / COMPLETED).exists()  # never in no place
    assert "- 2026-11-30 met Ada" in log.read_text() and "did not finish, so the entries above are back in MEMORY.md" in log.read_text()
    assert restored(ws) == OPS and relocation_intent.notes(found) == [
        "Relocation run/1 of run run, cut short by a killed process: rolled back (its entries are in their source); "
        "its pieces stay in memory/log.md, which changed since."]


def test_a_source_changed_just_before_its_write_rolls_the_destinations_back_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path / "ws")
    real_backup = files.backup

    def agent_writes_first(*args: Any) -> None:  # the agent saves MEMORY.md between the read and the write
        (ws / "MEMORY.md").write_text(TEXT + "- the agent wrote this\n")
        real_backup(*args)

    monkeypatch.setattr("services.dreaming.passes.relocate.backup", agent_writes_first)
    done = relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT)
    assert done.aborted == "MEMORY.md changed on disk just before the write (compare-and-swap); nothing was moved"
    assert snapshot(ws) == {"MEMORY.md": TEXT + "- the agent wrote this\n", COMPLETED: None, "memory/log.md": LOG}
    assert restored(ws) == OPS and relocation_intent.open_intents(journal.read(ws)) == []


def test_an_entry_whose_relocation_was_rolled_back_says_why_in_its_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.dreaming.history.explain import _journal_events

    ws = fresh(tmp_path / "ws")
    killed(ws, monkeypatch, "write MEMORY.md", "before")
    start(ws)
    events = _journal_events(journal.read(ws), "- [x] ship the beta")
    assert [e.kind for e in events] == ["moved", "undone"]
    assert events[1].detail == f"run/1 undone ({relocation_intent.RECOVERED_BY})"


def test_a_destination_never_written_but_edited_since_is_left_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path / "ws")
    killed(ws, monkeypatch, "write memory/log.md", "before")  # completed.md has its pieces, log.md not yet
    (ws / "memory" / "log.md").write_text("# Log\n- rewritten by the agent\n")
    assert [(r.outcome, r.left) for r in relocation_intent.recover(ws, AT)] == [("back", [])]
    assert snapshot(ws) == {"MEMORY.md": TEXT, COMPLETED: None, "memory/log.md": "# Log\n- rewritten by the agent\n"}


def test_a_kill_while_the_recall_check_puts_the_source_back_leaves_a_journal_that_matches(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, images: tuple[Snapshot, Snapshot]) -> None:
    """The recall check of a pass that could not find a moved entry puts MEMORY.md back (its
    destinations keep their copies, with a line saying so): killed at each step of that, the next
    start (or the recovery a run begins with) leaves MEMORY.md as the pass left it with its moves
    open and no line, or put back with them undone and the line in each destination."""
    _, post = images
    after = str(post["MEMORY.md"])
    written = [Written("MEMORY.md", TEXT, after, tuple(OPS), (COMPLETED, "memory/log.md"))]
    count = fresh(tmp_path / "count")
    relocate(count, "MEMORY.md", TEXT, MOVES, "run", AT)
    with injected(monkeypatch, count, Steps()) as counted:
        put_back(count, "run", AT, written, {"MEMORY.md": "an entry was not found"})
    assert counted.seen == ["journal archive,intent", f"write {COMPLETED}", "write memory/log.md", "write MEMORY.md",
                            "journal intentDone,restore"]
    for n, point in enumerate(crash_points(len(counted.seen), counted.seen)):
        ws = fresh(tmp_path / f"k{n}")
        relocate(ws, "MEMORY.md", TEXT, MOVES, "run", AT)
        with injected(monkeypatch, ws, Steps(point)), pytest.raises(Crash):
            put_back(ws, "run", AT, written, {"MEMORY.md": "an entry was not found"})
        if n % 2:
            relocation_intent.recover(ws, "2026-12-01T04:00:00Z")
        else:
            start(ws)
        memory = (ws / "MEMORY.md").read_text()
        assert memory in (TEXT, after)
        opened = sorted({r["op"] for r in open_edits(ws)})
        assert opened == ([] if memory == TEXT else OPS), (point, opened)
        assert relocation_intent.open_intents(journal.read(ws)) == []
        for name in (COMPLETED, "memory/log.md"):  # the line saying the entries are back: there exactly when they are
            assert (ws / name).read_text().count("was restored after the recall check") == (memory == TEXT), (point, name)
        read = lambda rel: (ws / rel).read_text()  # noqa: E731 - a reader for plan_revert
        if memory == after:
            assert journal.plan_revert(journal.read(ws), "run", None, read).texts["MEMORY.md"] == TEXT
        else:
            assert journal.plan_revert(journal.read(ws), "run", None, read).undone == []


def test_a_run_finishes_a_relocation_left_open_before_it_reads_memory_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = agent_with_memory(tmp_path / "home", TEXT)
    ws = agent.workspace
    (ws / "memory").mkdir()
    (ws / "memory" / "log.md").write_text(LOG)
    killed(ws, monkeypatch, "write MEMORY.md", "before")
    report = dream(agent, "propose", run_id="run2")
    assert report.notes[0] == "Relocation run/1 of run run, cut short by a killed process: rolled back (its entries are in their source)."
    assert snapshot(ws) == {"MEMORY.md": TEXT, COMPLETED: None, "memory/log.md": LOG}
