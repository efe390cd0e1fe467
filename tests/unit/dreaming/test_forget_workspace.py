"""A forget over a workspace real dreaming runs wrote (forget_stage): what the scan reports, and an
apply that leaves no 8-character run of the fact anywhere but the runtime's transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dreaming_stage import Stage, dream, dreamer_on
from forget_stage import BESIDE, FACT, FACT_LINE, MEMORY, TARGET, Planted, leftovers, plant, snapshot

from gateway.atomic import WriteConflict, write_atomic
from gateway.config import build
from gateway.config_migrations import CURRENT_VERSION
from gateway.forgetting import Target, marker
from services.dreaming.forget import WorkspaceReport, apply, apply_agent, scan, scan_agent
from services.dreaming.forget.places import IN_FLIGHT, RUNTIME_FILE, STATE, TRANSCRIPTS, WORKSPACE
from services.dreaming.forget.workspace import KEPT_CHANGING
from services.dreaming.model.values import Proposal
from services.dreaming.records import audit
from services.dreaming.vault import kept
from services.dreaming.vault.kept import Kept

AT = "2026-12-07T02:00:00Z"
ID = "F-0123456789ab"


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return plant(tmp_path_factory.mktemp("home"))


def scanned(p: Planted, target: Target = TARGET) -> WorkspaceReport:
    return scan(p.workspace, target, state_dir=p.state_dir, transcripts_dir=p.transcripts)


def applied(p: Planted, target: Target = TARGET, **kw: object) -> WorkspaceReport:
    return apply(p.workspace, target, ID, by="ops-key", at=AT, state_dir=p.state_dir, transcripts_dir=p.transcripts, **kw)  # type: ignore[arg-type]


def lines_with(path: Path, text: str) -> list[int]:
    raw = path.read_text()
    return [n for n, line in enumerate(raw.splitlines(), 1) if text in line or json.dumps(text)[1:-1] in line]


def test_the_scan_finds_every_place_dreaming_keeps_the_fact_and_changes_nothing(planted: Planted) -> None:
    home = planted.workspace.parents[2]
    before = snapshot(home)
    report = scanned(planted)
    assert snapshot(home) == before
    where = {(p.store, p.path) for p in report.places}
    assert where == {
        (WORKSPACE, "MEMORY.md"), (WORKSPACE, "memory/people.md"), (WORKSPACE, "memory/archive/pruned.md"),
        (WORKSPACE, ".dreaming/DREAMS.md"), (WORKSPACE, ".dreaming/audit.jsonl"), (WORKSPACE, ".dreaming/journal.jsonl"),
        *((WORKSPACE, f".dreaming/backups/MEMORY.md.{run}") for run in planted.runs),
        (STATE, "dreaming.json"), (TRANSCRIPTS, "s1.jsonl"),
    }
    by_path = {p.path: p for p in report.places}
    for rel in ("MEMORY.md", "memory/people.md", "memory/archive/pruned.md", ".dreaming/audit.jsonl"):
        assert list(by_path[rel].lines) == lines_with(planted.workspace / rel, FACT), rel
    # The journal's first edit holds only the fact's tail, in the 48-character context of the next line's edit.
    journal = by_path[".dreaming/journal.jsonl"]
    lines = (planted.workspace / ".dreaming/journal.jsonl").read_text().splitlines()
    first = next(n for n, line in enumerate(lines, 1) if '"kind":"edit"' in line)
    assert first in journal.lines and first not in lines_with(planted.workspace / ".dreaming/journal.jsonl", FACT)
    # DREAMS.md shortens the long line mid-fact ("…"): the cut start is a place too.
    dreams = planted.workspace / ".dreaming/DREAMS.md"
    cut = next(n for n, line in enumerate(dreams.read_text().splitlines(), 1) if "its lobby, until: Dana" in line)
    assert cut in by_path[".dreaming/DREAMS.md"].lines and FACT not in dreams.read_text().splitlines()[cut - 1]
    assert by_path["s1.jsonl"].left == RUNTIME_FILE and not by_path["MEMORY.md"].left
    assert all(not p.changed for p in report.places)
    assert FACT not in repr(report) and "Whitlock" not in repr(report)


def test_apply_scrubs_every_place_but_the_transcript_and_keeps_the_rest(tmp_path: Path) -> None:
    p = plant(tmp_path)
    home = tmp_path
    found = scanned(p)
    before = snapshot(home)
    report = applied(p)
    assert report.matches == found.matches
    assert [(x.store, x.path) for x in report.left] == [(TRANSCRIPTS, "s1.jsonl")]
    assert report.changed == len(found.places) - 1
    assert leftovers(home) == ["agents/alfred/sessions/s1.jsonl"]
    after = snapshot(home)
    assert after["agents/alfred/sessions/s1.jsonl"] == before["agents/alfred/sessions/s1.jsonl"]
    memory = (p.workspace / "MEMORY.md").read_text()
    assert f"- {BESIDE}\n" in memory and marker(ID) in memory
    # JSON lines that held nothing are byte for byte what they were; the rest still parse.
    for rel in (".dreaming/journal.jsonl", ".dreaming/audit.jsonl"):
        old = before[f"agents/alfred/workspace/{rel}"].decode().splitlines()
        new = after[f"agents/alfred/workspace/{rel}"].decode().splitlines()
        assert len(new) == len(old) + (rel == audit.AUDIT), rel
        for was, now in zip(old, new, strict=False):
            if not any(word in was for word in ("Dana", "Whitlock", "locker", "7741")):
                assert now == was, rel
            assert isinstance(json.loads(now), dict), rel
    assert [x.path for x in scan_agent(p.agent, TARGET).places] == ["s1.jsonl"]


def test_the_forget_is_audited_by_key_name_and_counts_never_the_text(tmp_path: Path) -> None:
    p = plant(tmp_path)
    report = applied(p)
    last = audit.read_records(p.workspace)[-1]
    assert last == {"kind": "forget", "id": ID, "by": "ops-key", "at": AT, "places": report.changed, "matches": report.matches,
                    "left": [{"store": TRANSCRIPTS, "path": "s1.jsonl", "count": 1, "why": RUNTIME_FILE}]}
    assert "Whitlock" not in (p.workspace / audit.AUDIT).read_text()


def test_running_the_same_forget_again_changes_nothing_more(tmp_path: Path) -> None:
    p = plant(tmp_path)
    applied(p)
    first = snapshot(tmp_path)
    again = applied(p)
    assert again.changed == 0 and [x.path for x in again.places] == ["s1.jsonl"]
    second = snapshot(tmp_path)
    audit_rel = f"agents/alfred/workspace/{audit.AUDIT}"
    assert {k: v for k, v in second.items() if k != audit_rel} == {k: v for k, v in first.items() if k != audit_rel}
    assert second[audit_rel].startswith(first[audit_rel])  # only its own audit line was added


def test_a_pattern_forgets_each_of_its_matches_and_nothing_else(tmp_path: Path) -> None:
    p = plant(tmp_path)
    report = applied(p, Target.parse(None, r"locker code is \d{4}"))
    assert report.changed and "locker code is 7741" not in "".join(
        d.decode(errors="replace") for r, d in snapshot(tmp_path).items() if "sessions" not in r)
    assert "Dana Whitlock's [forgotten" in (p.workspace / "memory/people.md").read_text()


def test_a_file_changed_under_the_forget_is_read_again_never_clobbered(tmp_path: Path) -> None:
    p = plant(tmp_path)
    memory = p.workspace / "MEMORY.md"
    calls: list[Path] = []

    def agent_edits_first(path: Path, data: bytes, *, expected: bytes) -> None:
        calls.append(path)
        if path == memory and calls.count(memory) == 1:  # the agent appends a line between our read and our write
            memory.write_text(memory.read_text() + "- Written by the agent meanwhile.\n")
        write_atomic(path, data, expected=expected)

    applied(p, write=agent_edits_first)
    assert calls.count(memory) == 2
    text = memory.read_text()
    assert text.endswith("- Written by the agent meanwhile.\n") and "Whitlock" not in text


def test_a_file_that_keeps_changing_is_left_and_reported(tmp_path: Path) -> None:
    p = plant(tmp_path)
    memory = p.workspace / "MEMORY.md"

    def always_conflicts(path: Path, data: bytes, *, expected: bytes) -> None:
        if path == memory:
            raise WriteConflict("MEMORY.md changed on disk since it was read; nothing was written")
        write_atomic(path, data, expected=expected)

    report = applied(p, write=always_conflicts)
    left = {x.path: x.left for x in report.left}
    assert left["MEMORY.md"] == KEPT_CHANGING and "Whitlock" in memory.read_text()
    assert [x.path for x in applied(p).left] == ["s1.jsonl"]  # the next run finishes it


def test_links_are_not_followed_and_writes_in_flight_are_only_reported(tmp_path: Path) -> None:
    p = plant(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text(f"- {FACT}\n")
    (p.workspace / "memory" / "linked.md").symlink_to(outside)
    temp = p.workspace / "memory" / ".people.md.0123456789.gwtmp"
    temp.write_text(f"{FACT}\n")
    report = applied(p)
    assert outside.read_text() == f"- {FACT}\n" and "memory/linked.md" not in {x.path for x in report.places}
    assert {x.path: x.left for x in report.left}["memory/.people.md.0123456789.gwtmp"] == IN_FLIGHT
    assert temp.read_text() == f"{FACT}\n"


def test_a_file_name_that_holds_the_text_is_not_repeated_in_the_report(tmp_path: Path) -> None:
    p = plant(tmp_path)
    named = p.workspace / "memory" / "notes about Whitlock.md"
    named.write_text("- Whitlock called.\n")
    report = apply(p.workspace, Target.parse("Whitlock", None), ID, by="k", at=AT)
    shown = [x for x in report.places if x.path.startswith("memory/notes about")]
    assert [(x.path, x.changed, x.left) for x in shown] == [
        ("memory/notes about […].md", True, "its name holds the text: rename it by hand")]
    assert "Whitlock" not in json.dumps(audit.read_records(p.workspace)[-1])


def test_kept_promotions_a_damaged_state_copy_and_an_episodic_folder_elsewhere_are_covered(tmp_path: Path) -> None:
    p = plant(tmp_path)
    kept.write(p.workspace, [Kept("alfred/r1/3", "r1", "r1/3", "p-1", "people", "episode", f"- {FACT}", AT, "unavailable")])
    torn = '{"format": 1, "lastRun": {"reason": ' + json.dumps(FACT) + ', "sta'  # escaped, as dreaming.json is
    (p.state_dir / "dreaming.json.corrupt-1").write_text(torn)
    notes = p.workspace / "journal" / "daily" / "2026-12-01.md"
    notes.parent.mkdir(parents=True)
    notes.write_text(f"- {FACT}\n")
    report = apply(p.workspace, TARGET, ID, by="k", at=AT, episodic_dir="journal/daily", state_dir=p.state_dir)
    assert {(x.store, x.path) for x in report.places} >= {
        (WORKSPACE, kept.PENDING), (STATE, "dreaming.json.corrupt-1"), (WORKSPACE, "journal/daily/2026-12-01.md")}
    assert [k.fact for k in kept.read(p.workspace)] == [f"- {marker(ID)}"]
    assert leftovers(tmp_path) == ["agents/alfred/sessions/s1.jsonl"]


def test_a_recall_check_that_put_the_fact_back_leaves_nothing_of_it_in_its_notes(tmp_path: Path) -> None:
    entry = {"id": "alfred", "dreaming": {"staleness": {"enabled": False}}, "knowledge": {"shared": {"enabled": False}}}
    config = build({"configVersion": CURRENT_VERSION, "agents": [entry]}, tmp_path)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text(MEMORY)
    stage = Stage()  # its Search finds nothing: the removal is put back, and the run's notes say which entry
    dream(dreamer_on(config, tmp_path, stage), agent, stage, Proposal(op="remove", file="MEMORY.md", target=FACT_LINE, reason="stale"))
    assert "could not find a removed entry" in (agent.workspace / audit.AUDIT).read_text()
    apply_agent(agent, TARGET, ID, by="k", at=AT)
    assert leftovers(tmp_path) == []
