"""A commit cut short by a crash: the journal still says what the file holds.

The crash is a BaseException raised by a patched step of ``write_atomic`` (the rename, or
the folder's fsync just after it), which nothing in the commit catches: what is on disk then
is what a kill -9 at that point leaves. ``journal.settle`` is what dreaming's next start runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway import atomic
from services.dreaming.apply.applier import plan
from services.dreaming.apply.commit import commit
from services.dreaming.apply.files import BACKUPS, read_text
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.edit import sha256
from services.dreaming.model.values import Proposal
from services.dreaming.records import journal
from services.dreaming.records.journal import SETTLED_BY, plan_revert

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
MEMORY = "# Memory\n\n## Work\n- Project Kestrel ships in March\n- Ticket 41 is closed\n" + "".join(
    f"+ filler line {i:02d}\n" for i in range(40)
)
AT = "2026-12-01T03:00:00Z"


class Crash(BaseException):
    """The process dies here."""


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
