"""A commit cut short by a crash: each file is as before it or as after it, pruned.md agrees, and
the journal still says what the files hold.

The crash is a BaseException, which nothing in the commit catches: what is on disk then is what a
kill -9 at that point leaves. The first tests raise it at a patched step of ``write_atomic`` (the
rename, or the folder's fsync just after it) and call ``journal.settle``; the later ones kill a
commit of MEMORY.md, USER.md and an episodic note at every step (``dreaming_kills``: just before a
file write or journal append, just after it, or in the middle of the append), then what dreaming's
next start (``main.settle_workspace``) or the recovery a run begins with does; then the recovery
killed at each of its own steps, pruned.md or MEMORY.md changed by someone else, and the recall
check's put-back killed at each of its steps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dreaming_helpers import agent_with_memory, dream
from dreaming_kills import Crash, Steps, crash_points, injected, killed_twice

from gateway import atomic
from services.dreaming.apply import intent
from services.dreaming.apply.applier import Plan, plan
from services.dreaming.apply.commit import PRUNED, commit
from services.dreaming.apply.files import BACKUPS, read_text
from services.dreaming.apply.restore import Written, put_back
from services.dreaming.main import settle_workspace
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.edit import sha256
from services.dreaming.model.values import EPISODIC, Proposal
from services.dreaming.records import journal
from services.dreaming.records.journal import SETTLED_BY, plan_revert

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
MEMORY = "# Memory\n\n## Work\n- Project Kestrel ships in March\n- Ticket 41 is closed\n" + "".join(
    f"+ filler line {i:02d}\n" for i in range(40)
)
AT = "2026-12-01T03:00:00Z"


def proposals() -> list[tuple[str, Proposal]]:
    return [
        ("run1/1", Proposal(op="remove", file="MEMORY.md", target="- Ticket 41 is closed", reason="obsolete")),
        ("run1/2", Proposal(op="replace", file="MEMORY.md", target="March", content="April", reason="moved")),
    ]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    return tmp_path


def reader(ws: Path):  # type: ignore[no-untyped-def]
    return lambda rel: read_text(ws, rel)


def crash_commit(ws: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Commit the plan, dying at ``where`` ("rename" of MEMORY.md, or the folder fsync "after" it)."""
    if where == "rename":
        real = os.replace

        def dying_replace(src: object, dst: object) -> None:
            if str(dst).endswith("MEMORY.md"):
                raise Crash
            real(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "replace", dying_replace)
    else:
        real_fsync_dir = atomic._fsync_dir

        def dying_fsync_dir(directory: Path) -> None:
            if directory == ws and (ws / "MEMORY.md").read_text() != MEMORY:  # just after its rename
                raise Crash
            real_fsync_dir(directory)

        monkeypatch.setattr(atomic, "_fsync_dir", dying_fsync_dir)
    with pytest.raises(Crash):
        commit(ws, plan({"MEMORY.md": MEMORY}, proposals(), BUDGETS), "run1", AT)
    monkeypatch.undo()


def test_the_edits_are_journaled_before_the_rename_and_settled_when_it_never_came(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_commit(ws, monkeypatch, "rename")
    assert (ws / "MEMORY.md").read_text() == MEMORY  # the pre-image
    edits = [r for r in journal.read(ws) if r["kind"] == "edit"]
    assert [r["op"] for r in edits] == ["run1/1", "run1/2"]  # journaled before the rename
    assert edits[0]["hashBefore"] == sha256(MEMORY)
    assert journal.settle(ws, reader(ws), AT) == ["run1/1", "run1/2"]
    restores = [r for r in journal.read(ws) if r["kind"] == "restore"]
    assert [(r["op"], r["by"]) for r in restores] == [("run1/1", SETTLED_BY), ("run1/2", SETTLED_BY)]
    planned = plan_revert(journal.read(ws), "run1", None, reader(ws))
    assert (planned.undone, sorted(planned.already)) == ([], ["run1/1", "run1/2"])
    assert journal.settle(ws, reader(ws), AT) == []  # once


def test_a_crash_right_after_the_rename_leaves_edits_a_revert_can_undo(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_commit(ws, monkeypatch, "after")
    post = (ws / "MEMORY.md").read_text()
    assert post != MEMORY and (ws / BACKUPS / "MEMORY.md.run1").read_text() == MEMORY
    edits = [r for r in journal.read(ws) if r["kind"] == "edit"]
    assert edits[-1]["hashAfter"] == sha256(post)  # the journal says what the file holds
    assert journal.settle(ws, reader(ws), AT) == []
    planned = plan_revert(journal.read(ws), "run1", None, reader(ws))
    assert planned.texts == {"MEMORY.md": MEMORY}


def test_a_restore_whose_record_never_came_is_settled(ws: Path) -> None:
    commit(ws, plan({"MEMORY.md": MEMORY}, proposals(), BUDGETS), "run1", AT)
    (ws / "MEMORY.md").write_text(MEMORY)  # the recall check's restore landed; its journal record did not
    assert journal.settle(ws, reader(ws), AT) == ["run1/1", "run1/2"]


def edit(op: str, file: str, before: str, after: str) -> journal.Record:
    return {"kind": "edit", "run": "run2", "op": op, "file": file, "hashBefore": sha256(before), "hashAfter": sha256(after)}


def test_an_op_is_settled_only_when_none_of_its_files_has_it(ws: Path) -> None:
    (ws / "memory").mkdir()
    (ws / "memory" / "a.md").write_text("a before\n")  # op 1's source edit never landed here...
    (ws / "memory" / "b.md").write_text("b after\n")  # ...but its append to b did
    (ws / "memory" / "c.md").write_text("c before\n")  # op 2 touched only c, and never landed
    journal.append(ws, [
        edit("run2/1", "memory/a.md", "a before\n", "a after\n"),
        edit("run2/1", "memory/b.md", "b before\n", "b after\n"),
        edit("run2/2", "memory/c.md", "c before\n", "c after\n"),
    ])
    assert journal.settle(ws, reader(ws), AT) == ["run2/2"]


def test_a_file_that_cannot_be_read_keeps_its_edits(ws: Path) -> None:
    journal.append(ws, [edit("run2/1", "USER.md", "", "new\n")])
    assert journal.settle(ws, lambda rel: None, AT) == []
    assert journal.settle(ws, reader(ws), AT) == ["run2/1"]  # readable: USER.md is missing, as before the edit


# A kill at every step of a commit of MEMORY.md, USER.md and an episodic note (dreaming_kills), then
# what the next start (or the recovery a run begins with) does: each file its old state or its new.

USER = "# People\n\n## Contacts\n- old phone number 555\n" + "".join(f"+ contact line {i:02d}\n" for i in range(20))
PRUNED_BEFORE = "# Pruned\n- an older block"  # no final newline: the commit puts one first
LOG = "memory/log.md"
FILES = ("MEMORY.md", "USER.md", PRUNED, LOG)
REMOVED = {"run/1": ("MEMORY.md", "- Ticket 41 is closed\n"), "run/2": ("MEMORY.md", "- Project Kestrel ships in March\n"),
           "run/4": ("USER.md", "- old phone number 555\n")}
STEPS = [
    "journal archive,edit,intent", f"write {PRUNED}", "write .dreaming/backups/MEMORY.md.run", "write MEMORY.md", "journal intentDone",
    "journal archive,edit,intent", f"write {PRUNED}", "write .dreaming/backups/USER.md.run", "write USER.md", "journal intentDone",
    "journal edit", f"write {LOG}",
]
Snapshot = dict[str, str | None]  # file → its text, None when it does not exist


def the_plan() -> Plan:
    return plan({"MEMORY.md": MEMORY, "USER.md": USER}, [
        ("run/1", Proposal(op="remove", file="MEMORY.md", target="- Ticket 41 is closed", reason="obsolete")),
        ("run/2", Proposal(op="replace", file="MEMORY.md", target="March", content="April", reason="moved")),
        ("run/3", Proposal(op="add", file="MEMORY.md", content="- Kestrel has a new lead", reason="said so")),
        ("run/4", Proposal(op="remove", file="USER.md", target="- old phone number 555", reason="changed")),
        ("run/5", Proposal(op="add", tier=EPISODIC, topic="log", content="- 2026-11-30 beta shipped", reason="log")),
    ], BUDGETS)


def fresh(ws: Path) -> Path:
    (ws / "memory" / "archive").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    (ws / "USER.md").write_text(USER)
    (ws / PRUNED).write_text(PRUNED_BEFORE)
    return ws


def snapshot(ws: Path) -> Snapshot:
    return {name: (ws / name).read_text() if (ws / name).exists() else None for name in FILES}


def killed_at(ws: Path, monkeypatch: pytest.MonkeyPatch, point: tuple[int, str]) -> None:
    with injected(monkeypatch, ws, Steps(point)), pytest.raises(Crash):
        commit(ws, the_plan(), "run", AT)


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> list[Snapshot]:
    """The files before the commit, once MEMORY.md is committed, once USER.md is, and after it all."""
    out = []
    for n, point in enumerate([(0, "before"), (4, "after"), (9, "after")]):
        ws = fresh(tmp_path_factory.mktemp(f"stage{n}"))
        with pytest.MonkeyPatch.context() as monkeypatch:
            killed_at(ws, monkeypatch, point)
        out.append(snapshot(ws))
    ws = fresh(tmp_path_factory.mktemp("post"))
    assert commit(ws, the_plan(), "run", AT).aborted == {}
    return [*out, snapshot(ws)]


def start(ws: Path) -> None:
    """Dreaming's next start (its journal under its run lock)."""
    settle_workspace(ws, "2026-12-01T04:00:00Z")


def check(ws: Path, stages: list[Snapshot]) -> int:
    """The property: the files are as before the commit, or as after it up to a whole file; each
    removed block is in its memory file or in pruned.md, never both, never neither; no intent is
    open; the journal's open edits of a file are exactly its ops when it holds their work and none
    when it does not; and a revert takes every file the commit wrote back. Returns the stage."""
    now = snapshot(ws)
    assert now in stages, now
    pruned = now[PRUNED] or ""
    for op, (name, line) in REMOVED.items():
        archived = f"run run op {op[4:]} (" in pruned
        assert archived != (line in (now[name] or "")), (op, now)
        assert pruned.count(f"run run op {op[4:]} (") <= 1
    records = journal.read(ws)
    assert intent.open_intents(records) == []
    undone = {(r["run"], r["op"]) for r in records if r["kind"] in ("revert", "restore")}
    opened = [r for r in records if r["kind"] == "edit" and (r["run"], r["op"]) not in undone]
    pre, post = stages[0], stages[-1]
    for name in ("MEMORY.md", "USER.md", LOG):
        mine = [r for r in opened if r["file"] == name]
        if now[name] == pre[name]:
            assert mine == [], name
        else:
            assert now[name] == post[name] and mine and mine[-1]["hashAfter"] == sha256(now[name] or ""), name
    if now != pre:
        read = lambda rel: (ws / rel).read_text() if (ws / rel).exists() else ""  # noqa: E731 - a reader for plan_revert
        undo = plan_revert(records, "run", None, read)
        assert {name: text for name, text in undo.texts.items()} == {name: pre[name] or "" for name in undo.texts}
        assert set(undo.texts) == {name for name in ("MEMORY.md", "USER.md", LOG) if now[name] != pre[name]}
    return stages.index(now)


def test_the_steps_are_the_intent_the_archive_the_backup_the_file_and_the_close_per_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path)
    with injected(monkeypatch, ws, Steps()) as steps:
        commit(ws, the_plan(), "run", AT)
    assert steps.seen == STEPS


def test_a_kill_at_every_step_of_a_commit_leaves_each_file_old_or_new_and_pruned_md_agrees(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stages: list[Snapshot]) -> None:
    outcomes = {}
    for n, point in enumerate(crash_points(len(STEPS), STEPS)):
        ws = fresh(tmp_path / f"k{n}")
        killed_at(ws, monkeypatch, point)
        if n % 2 and point[0] < STEPS.index("journal edit"):  # what a run (or revert, or migration) does first
            intent.recover(ws, "2026-12-01T04:00:00Z")
        else:
            start(ws)
        outcomes[(point[0], point[1])] = stage = check(ws, stages)
        start(ws)  # once: a second start changes nothing
        assert check(ws, stages) == stage
    # each memory file's compare-and-swap is its commit point: new from just after it, old up to it
    assert {outcomes[(i, how)] for i in range(3) for how in ("before", "after", "torn") if (i, how) in outcomes} | {
        outcomes[(3, "before")]} == {0}
    assert outcomes[(3, "after")] == outcomes[(4, "torn")] == outcomes[(8, "before")] == 1
    assert outcomes[(8, "after")] == outcomes[(11, "before")] == 2 and outcomes[(11, "after")] == 3


def test_a_kill_during_the_recovery_of_a_commit_is_finished_by_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stages: list[Snapshot]) -> None:
    tried = killed_twice(monkeypatch, lambda name: fresh(tmp_path / name), lambda ws: commit(ws, the_plan(), "run", AT),
                         start, lambda ws: check(ws, stages))
    assert tried > 20  # the recoveries that write (pruned.md back, the restores, the close) were each killed


def test_blocks_of_a_commit_cut_short_come_off_pruned_md_written_since_and_leave_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path)
    killed_at(ws, monkeypatch, (STEPS.index("write MEMORY.md"), "before"))
    (ws / PRUNED).write_text((ws / PRUNED).read_text() + "- the agent wrote this\n")  # before dreaming started again
    start(ws)
    assert (ws / PRUNED).read_text() == PRUNED_BEFORE + "- the agent wrote this\n"
    assert (ws / "MEMORY.md").read_text() == MEMORY
    assert sorted(r["op"] for r in journal.read(ws) if r["kind"] == "restore") == ["run/1", "run/2", "run/3"]


def test_a_memory_file_changed_just_before_its_write_takes_its_blocks_back_off_pruned_md_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.dreaming.apply import commit as commit_module

    ws = fresh(tmp_path)
    real_backup = commit_module.backup

    def agent_writes_first(workspace: Path, name: str, text: str, run_id: str) -> None:
        if name == "MEMORY.md":  # the agent saves MEMORY.md between the read and the write
            (ws / "MEMORY.md").write_text(MEMORY + "- the agent wrote this\n")
        real_backup(workspace, name, text, run_id)

    monkeypatch.setattr(commit_module, "backup", agent_writes_first)
    done = commit(ws, the_plan(), "run", AT)
    assert done.aborted["MEMORY.md"] == ("MEMORY.md changed on disk just before the write (compare-and-swap); "
                                         "nothing written to MEMORY.md")
    assert [r.status for r in done.results] == ["skipped", "skipped", "skipped", "applied", "applied"]
    memory_blocks = "run run op 1 (" not in (ws / PRUNED).read_text() and "run run op 2 (" not in (ws / PRUNED).read_text()
    assert memory_blocks and "run run op 4 (" in (ws / PRUNED).read_text()  # USER.md's commit went on
    assert "- Ticket 41 is closed" in (ws / "MEMORY.md").read_text()
    assert intent.open_intents(journal.read(ws)) == []
    assert sorted(r["op"] for r in journal.read(ws) if r["kind"] == "restore") == ["run/1", "run/2", "run/3"]


def test_a_run_finishes_a_commit_left_open_before_it_reads_memory_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = agent_with_memory(tmp_path / "home", MEMORY)
    ws = agent.workspace
    (ws / "USER.md").write_text(USER)
    (ws / "memory" / "archive").mkdir(parents=True)
    (ws / PRUNED).write_text(PRUNED_BEFORE)
    killed_at(ws, monkeypatch, (STEPS.index("journal intentDone"), "before"))
    report = dream(agent, "propose", run_id="run2")
    assert report.notes[0] == ("The commit of MEMORY.md by run run (ops from run/1), cut short by a killed process: rolled "
                               "forward (its changes stand in MEMORY.md; the blocks it removed are in pruned.md).")
    assert intent.open_intents(journal.read(ws)) == []


def test_a_kill_while_the_recall_check_puts_memory_back_leaves_pruned_md_saying_exactly_what_is_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stages: list[Snapshot]) -> None:
    """The recall check of the commit could not find a removed entry: MEMORY.md and USER.md get
    their pre-images back, and pruned.md keeps the blocks with a line saying they are back. Killed
    at each step of that, the next start (or the recovery a run begins with) leaves each file as the
    commit wrote it (its ops open, no line) or put back (its ops undone, the line in pruned.md)."""
    pre, post = stages[0], stages[-1]
    written = [Written(name, str(pre[name]), str(post[name]), ops, (PRUNED,))
               for name, ops in (("MEMORY.md", ("run/1", "run/2", "run/3")), ("USER.md", ("run/4",)))]
    why = {"MEMORY.md": "an entry was not found", "USER.md": "an entry was not found"}
    count = fresh(tmp_path / "count")
    commit(count, the_plan(), "run", AT)
    with injected(monkeypatch, count, Steps()) as counted:
        put_back(count, "run", AT, written, why)
    assert counted.seen == [step for name in ("MEMORY.md", "USER.md") for step in (
        "journal archive,intent", f"write {PRUNED}", f"write {name}", "journal intentDone,restore")]
    for n, point in enumerate(crash_points(len(counted.seen), counted.seen)):
        ws = fresh(tmp_path / f"k{n}")
        commit(ws, the_plan(), "run", AT)
        with injected(monkeypatch, ws, Steps(point)), pytest.raises(Crash):
            put_back(ws, "run", AT, written, why)
        if n % 2:
            intent.recover(ws, "2026-12-01T04:00:00Z")
        else:
            start(ws)
        records = journal.read(ws)
        assert intent.open_intents(records) == []
        undone = {r["op"] for r in records if r["kind"] == "restore"}
        pruned = (ws / PRUNED).read_text()
        for w in written:
            back = (ws / w.file).read_text() == w.before
            assert back or (ws / w.file).read_text() == w.after, (point, w.file)
            assert set(w.ops) <= undone if back else not set(w.ops) & undone, (point, w.file)
            assert pruned.count(f"{w.file} was restored after the recall check") == back, (point, w.file)
        assert all(f"run run op {op[4:]} (" in pruned for op in REMOVED)  # the blocks stay archived either way


def test_an_episodic_append_whose_rename_fails_after_its_record_is_marked_undone_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = fresh(tmp_path)
    (ws / LOG).write_text("# Log\n")
    real = os.replace

    def failing(src: object, dst: object) -> None:
        if str(dst).endswith(LOG):
            raise OSError(28, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", failing)
    done = commit(ws, the_plan(), "run", AT)
    monkeypatch.undo()
    assert [(r.op_id, r.status) for r in done.results][-1] == ("run/5", "skipped") and (ws / LOG).read_text() == "# Log\n"
    mine = [r for r in journal.read(ws) if r.get("op") == "run/5"]
    assert [(r["kind"], r.get("by", "")) for r in mine] == [("edit", ""), ("restore", "the write failed ([Errno 28] No space left on device)")]
    assert journal.settle(ws, reader(ws), AT) == []  # nothing left for the next start
