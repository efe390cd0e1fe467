"""Committing a plan (pruned archive first, backups, CAS, journal) and reverting it by inverse splice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.dreaming.apply.applier import plan
from services.dreaming.apply.commit import PRUNED, commit
from services.dreaming.apply.files import BACKUPS, BACKUPS_KEPT, Unsafe, confined
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import EPISODIC, Proposal
from services.dreaming.records import journal
from services.dreaming.records.journal import RevertRefused, plan_revert

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
MEMORY = "# Memory\n\n## Work\n- Project Kestrel ships in March\n- Ticket 41 is closed\n- Uses $HOME/bin\n" + "".join(
    f"+ filler line {i:02d}\n" for i in range(40)
)


def ops(*proposals: Proposal) -> list[tuple[str, Proposal]]:
    return [(f"run1/{i + 1}", p) for i, p in enumerate(proposals)]


def remove(target: str) -> Proposal:
    return Proposal(op="remove", file="MEMORY.md", target=target, reason="obsolete")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    return tmp_path


def read(ws: Path, rel: str) -> str:
    return (ws / rel).read_text()


def edits(ws: Path) -> list[journal.Record]:
    """The journal's edit records (not the intents around them, nor the archive's copies)."""
    return [r for r in journal.read(ws) if r["kind"] == "edit"]


def test_commit_archives_first_backs_up_writes_and_journals(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed"), Proposal(op="replace", file="MEMORY.md", target="March", content="April ($1)", reason="moved")), BUDGETS)
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert done.aborted == {}
    new = read(ws, "MEMORY.md")
    assert "Ticket 41" not in new and "ships in April ($1)" in new
    pruned = read(ws, PRUNED)
    assert "## Removed from MEMORY.md › Memory › Work · 2026-12-01 · run run1 op 1 (remove)" in pruned
    assert "- Ticket 41 is closed\n" in pruned and "March" in pruned  # the old side of the replace too
    assert read(ws, f"{BACKUPS}/MEMORY.md.run1") == MEMORY
    records = edits(ws)
    assert [(r["op"], r["opKind"]) for r in records] == [("run1/1", "remove"), ("run1/2", "replace")]
    assert records[0]["removed"] == "- Ticket 41 is closed\n"
    # the write-ahead intent and every record before any file is written, then the close
    assert [r["kind"] for r in journal.read(ws)] == ["intent", "edit", "edit", "archive", "archive", "intentDone"]


def test_a_replace_of_part_of_a_line_archives_the_whole_line_as_it_was(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(Proposal(op="replace", file="MEMORY.md", target="March", content="April", reason="moved"),
                                        remove("- Ticket 41 is closed")), BUDGETS)  # fmt: skip
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    pruned = read(ws, PRUNED)
    assert "run run1 op 1 (replace of part of this text)\n\n- Project Kestrel ships in March\n" in pruned
    assert "run run1 op 2 (remove)\n\n- Ticket 41 is closed\n" in pruned
    # The recall check looks for the same text: the old fact in its own words.
    assert [b.text for b in done.pruned] == ["- Project Kestrel ships in March\n", "- Ticket 41 is closed\n"]
    assert edits(ws)[0]["removed"] == "March"  # the journal keeps the exact splice (reverts need it)


def test_all_blocks_of_a_file_are_archived_in_one_write_in_op_order(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services.dreaming.apply import commit as commit_module

    writes: list[Path] = []
    real = commit_module.write_atomic

    def counting(path: Path, data: bytes, **kwargs: object) -> None:
        writes.append(path)
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(commit_module, "write_atomic", counting)
    p = plan({"MEMORY.md": MEMORY}, ops(*(remove(f"+ filler line {i:02d}") for i in range(5))), BUDGETS)
    commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert [path.relative_to(ws).as_posix() for path in writes] == [PRUNED, "MEMORY.md"]
    pruned = read(ws, PRUNED)
    assert [pruned.index(f"+ filler line {i:02d}") for i in range(5)] == sorted(pruned.index(f"+ filler line {i:02d}") for i in range(5))
    assert pruned.count("## Removed from MEMORY.md") == 5


def test_a_concurrent_edit_aborts_the_file_and_writes_nothing_to_it(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed")), BUDGETS)
    (ws / "MEMORY.md").write_text(MEMORY + "- the agent wrote this meanwhile\n")
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert "changed on disk during the run" in done.aborted["MEMORY.md"]
    assert done.results[0].status == "skipped" and "aborted" in done.results[0].reason
    assert "meanwhile" in read(ws, "MEMORY.md") and "Ticket 41" in read(ws, "MEMORY.md")
    assert not (ws / BACKUPS).exists() and journal.read(ws) == []


def test_a_memory_file_that_does_not_exist_yet_is_created(tmp_path: Path) -> None:
    add = Proposal(op="add", file="USER.md", content="- Name: Ada", reason="said so")
    p = plan({"MEMORY.md": "", "USER.md": ""}, [("run1/1", add)], BUDGETS)
    done = commit(tmp_path, p, "run1", "2026-12-01T03:00:00Z")
    assert done.aborted == {} and done.results[0].status == "applied"
    assert read(tmp_path, "USER.md") == "- Name: Ada\n"
    assert [r["op"] for r in edits(tmp_path)] == ["run1/1"]


def test_a_memory_file_created_by_someone_else_during_the_run_aborts_it(tmp_path: Path) -> None:
    add = Proposal(op="add", file="USER.md", content="- Name: Ada", reason="said so")
    p = plan({"MEMORY.md": "", "USER.md": ""}, [("run1/1", add)], BUDGETS)
    (tmp_path / "USER.md").write_text("- written by the agent\n")
    done = commit(tmp_path, p, "run1", "2026-12-01T03:00:00Z")
    assert "changed on disk" in done.aborted["USER.md"]
    assert read(tmp_path, "USER.md") == "- written by the agent\n"


def test_backups_only_when_something_commits_and_the_newest_20_are_kept(ws: Path) -> None:
    nothing = plan({"MEMORY.md": MEMORY}, ops(remove("- not there")), BUDGETS)
    commit(ws, nothing, "run0", "2026-12-01T03:00:00Z")
    assert not (ws / BACKUPS).exists()
    text = MEMORY
    for i in range(BACKUPS_KEPT + 5):
        line = f"- extra {i:02d}\n"
        text += line
        (ws / "MEMORY.md").write_text(text)
        p = plan({"MEMORY.md": text}, ops(remove(line.rstrip("\n"))), BUDGETS)
        commit(ws, p, f"run{i:02d}", "2026-12-01T03:00:00Z")
        text = read(ws, "MEMORY.md")
    kept = sorted(os.listdir(ws / BACKUPS))
    assert len(kept) == BACKUPS_KEPT and kept[0] == "MEMORY.md.run05" and kept[-1] == "MEMORY.md.run24"


def test_a_memory_file_that_is_a_link_is_never_written(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text(MEMORY)
    (ws / "MEMORY.md").unlink()
    (ws / "MEMORY.md").symlink_to(outside)
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed")), BUDGETS)
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert "outside the workspace" in done.aborted["MEMORY.md"] and outside.read_text() == MEMORY
    (ws / "MEMORY.md").unlink()
    (ws / "inner.md").write_text(MEMORY)
    (ws / "MEMORY.md").symlink_to(ws / "inner.md")  # a link inside the workspace: not written through either
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert "is a link" in done.aborted["MEMORY.md"] and (ws / "inner.md").read_text() == MEMORY


def test_episodic_adds_append_to_confined_topic_notes(ws: Path) -> None:
    note = Proposal(op="add", tier=EPISODIC, topic="kestrel", content="- 2026-11-30 beta shipped", reason="log")
    p = plan({"MEMORY.md": MEMORY}, ops(note, note), BUDGETS)
    commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert read(ws, "memory/kestrel.md") == "- 2026-11-30 beta shipped\n- 2026-11-30 beta shipped\n"
    (ws / "memory").rename(ws / "real-memory")
    (ws / "memory").symlink_to(ws.parent)  # a link out of the workspace
    with pytest.raises(Unsafe):
        confined(ws, "memory/kestrel.md")
    done = commit(ws, plan({"MEMORY.md": MEMORY}, ops(note), BUDGETS), "run2", "2026-12-01T03:00:00Z")
    assert done.results[0].status == "skipped" and "outside the workspace" in done.results[0].reason


def test_revert_of_one_op_and_of_a_whole_run_restore_the_exact_text(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed"), Proposal(op="add", file="MEMORY.md", content="- New: tea at four", reason="x")), BUDGETS)
    commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    (ws / "MEMORY.md").write_text("# An agent's edit at the top\n" + read(ws, "MEMORY.md"))
    one = plan_revert(journal.read(ws), "run1", "run1/1", lambda rel: read(ws, rel))
    assert "- Ticket 41 is closed\n" in one.texts["MEMORY.md"] and "tea at four" in one.texts["MEMORY.md"]
    whole = plan_revert(journal.read(ws), "run1", None, lambda rel: read(ws, rel))
    assert whole.texts["MEMORY.md"] == "# An agent's edit at the top\n" + MEMORY
    assert [r["op"] for r in whole.undone] == ["run1/2", "run1/1"]


def test_revert_refuses_when_the_text_around_the_op_changed(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(Proposal(op="replace", file="MEMORY.md", target="ships in March", content="ships in May", reason="x")), BUDGETS)
    commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    (ws / "MEMORY.md").write_text(read(ws, "MEMORY.md").replace("ships in May", "ships in June"))
    with pytest.raises(RevertRefused, match="changed since"):
        plan_revert(journal.read(ws), "run1", None, lambda rel: read(ws, rel))
    with pytest.raises(RevertRefused, match="no applied op"):
        plan_revert(journal.read(ws), "run9", None, lambda rel: read(ws, rel))


def test_an_op_already_undone_counts_as_done(ws: Path) -> None:
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed")), BUDGETS)
    commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    journal.append(ws, [journal.undo_record("revert", "run1", "run1/1", "2026-12-02T00:00:00Z")])
    again = plan_revert(journal.read(ws), "run1", None, lambda rel: read(ws, rel))
    assert again.undone == [] and again.already == ["run1/1"]


def test_an_episodic_append_can_be_reverted_after_later_appends(ws: Path) -> None:
    first = Proposal(op="add", tier=EPISODIC, topic="log", content="- night one", reason="x")
    second = Proposal(op="add", tier=EPISODIC, topic="log", content="- night two", reason="x")
    commit(ws, plan({"MEMORY.md": MEMORY}, ops(first), BUDGETS), "run1", "2026-12-01T03:00:00Z")
    commit(ws, plan({"MEMORY.md": MEMORY}, ops(second), BUDGETS), "run2", "2026-12-02T03:00:00Z")
    undone = plan_revert(journal.read(ws), "run1", None, lambda rel: read(ws, rel))
    assert undone.texts["memory/log.md"] == "- night two\n"


def test_the_journal_is_capped_keeping_whole_recent_lines(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "MAX_BYTES", 2000)
    monkeypatch.setattr(journal, "KEEP_BYTES", 1000)
    for i in range(50):
        journal.append(ws, [journal.undo_record("revert", f"run{i:02d}", f"run{i:02d}/1", "t")])
    records = journal.read(ws)
    assert (ws / journal.JOURNAL).stat().st_size <= 2000
    assert records[-1]["run"] == "run49" and all(isinstance(r, dict) for r in records)


def test_a_memory_file_that_is_not_utf8_is_left_alone_byte_for_byte(ws: Path) -> None:
    raw = MEMORY.encode() + b"- caf\xe9 in latin-1\n"
    (ws / "MEMORY.md").write_bytes(raw)
    p = plan({"MEMORY.md": MEMORY}, ops(remove("- Ticket 41 is closed")), BUDGETS)
    done = commit(ws, p, "run1", "2026-12-01T03:00:00Z")
    assert "not valid UTF-8" in done.aborted["MEMORY.md"]
    assert (ws / "MEMORY.md").read_bytes() == raw
