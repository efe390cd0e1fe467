"""gateway migrate-memory through the CLI: plan, apply exactly the plan, refuse a changed file,
apply twice, exit codes, pinned sections, and the journal that undoes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway_cli.cli import main
from services.dreaming.migration import PLAN_FILE, Settings, make_plan, waiting_plan
from services.dreaming.records import journal

PINNED = "## User\n- [x] prefers tea (a checked box in a pinned section stays)\n- 2026-01-02 started at the lighthouse\n\n"
DURABLE = "## Facts\n" + "".join(f"- The Kestrel service {i} listens on port {4000 + i}.\n" for i in range(20))
TASKS = "## Tasks\n" + "".join(f"- [x] shipped build {i} of the beta\n" for i in range(40)) + "- [ ] write the launch notes\n"
LOG = "## Log\n" + "".join(f"- 2026-10-{1 + i % 28:02d} met the harbour team about berth {i}\n" for i in range(300))
MEMORY = "# Memory\n\n" + PINNED + DURABLE + "\n" + TASKS + "\n" + LOG


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(MEMORY)
    return folder


def cli(*args: str, home: Path) -> int:
    return main(["migrate-memory", *args, "--home", str(home)])


def test_plan_writes_only_the_plan_then_apply_moves_exactly_it(ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "no-home"
    assert cli(str(ws), home=home) == 0
    assert (ws / "MEMORY.md").read_text() == MEMORY
    assert sorted(p.name for p in ws.rglob("*") if p.is_file()) == ["MEMORY.md", "migration-plan.md"]
    plan_text = (ws / PLAN_FILE).read_text()
    header = waiting_plan(ws)
    assert header is not None and header[2] == "planned"
    plan = make_plan(MEMORY, Settings())
    assert header[1] == len(plan.moves) and len(plan.compacted) == 40 and plan.routed
    assert "shipped build 7 of the beta" in plan_text
    assert all(" ".join(m.text.split()) in plan_text for m in plan.routed)  # entry by entry
    capsys.readouterr()
    assert cli(str(ws), "--apply", home=home) == 0
    out, err = capsys.readouterr()
    assert out.startswith("applied (run ") and "moving" in err  # progress on stderr
    after = (ws / "MEMORY.md").read_text()
    assert after == plan.after and len(after) <= 8000
    moved = [r["removed"] for r in journal.read(ws) if r.get("opKind") == "move"]
    assert sorted(moved) == sorted(m.text for m in plan.moves)  # exactly the plan's entries
    for move in plan.moves:  # byte for byte in their destinations
        assert move.text in (ws / move.target).read_text()
    assert PINNED in after  # pinned sections never move
    assert waiting_plan(ws) is not None and waiting_plan(ws)[2] == "applied"  # type: ignore[index]


def test_apply_twice_changes_nothing_the_second_time(ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "no-home"
    assert cli(str(ws), "--apply", home=home) == 0
    once = {p: p.read_bytes() for p in ws.rglob("*.md") if ".dreaming" not in p.parts}
    capsys.readouterr()
    assert cli(str(ws), "--apply", home=home) == 0
    assert capsys.readouterr().out.startswith("nothing to do")
    assert {p: p.read_bytes() for p in ws.rglob("*.md") if ".dreaming" not in p.parts} == once


def test_a_change_between_plan_and_apply_is_refused_and_nothing_moves(ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "no-home"
    assert cli(str(ws), home=home) == 0
    edited = MEMORY + "- [x] a line the agent added after the plan\n"
    (ws / "MEMORY.md").write_text(edited)
    capsys.readouterr()
    assert cli(str(ws), "--apply", home=home) == 1
    assert "changed since" in capsys.readouterr().err
    assert (ws / "MEMORY.md").read_text() == edited and not (ws / "memory").exists()
    assert cli(str(ws), home=home) == 0 and cli(str(ws), "--apply", home=home) == 0  # plan again, then it applies


def test_bad_usage_is_exit_2(tmp_path: Path) -> None:
    assert cli(str(tmp_path / "nowhere"), home=tmp_path) == 2


def test_the_migration_is_a_run_the_journal_can_revert_byte_for_byte(ws: Path, tmp_path: Path) -> None:
    assert cli(str(ws), "--apply", home=tmp_path / "no-home") == 0
    [run] = [r for r in map(json.loads, (ws / ".dreaming" / "audit.jsonl").read_text().splitlines()) if r["kind"] == "run"]
    assert run["trigger"] == "migrate" and run["steps"][:2] == ["compactor", "route-out"]
    undone = journal.plan_revert(journal.read(ws), run["run"], None, lambda rel: (ws / rel).read_text() if (ws / rel).exists() else "")
    assert undone.texts["MEMORY.md"] == MEMORY


def test_an_agents_workspace_uses_the_agents_budget(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({
        "configVersion": "1.0.26", "gateway": {"memory": {"memoryBudgetChars": 100000}}, "agents": [{"id": "alfred"}],
    }))
    (home / ".internal-token").write_text("t")
    ws = home / "agents" / "alfred" / "workspace"
    ws.mkdir(parents=True)
    (ws / "MEMORY.md").write_text(MEMORY)
    assert cli(str(ws), "--apply", home=home) == 0
    after = (ws / "MEMORY.md").read_text()
    assert "shipped build 3 of the beta" not in after  # compacted
    assert "berth 12" in after  # under a 100,000-char budget nothing is routed out


def test_a_memory_md_that_is_not_utf8_is_never_rewritten(ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = MEMORY.encode() + b"- a line with a broken byte \xff here\n"
    (ws / "MEMORY.md").write_bytes(raw)
    assert cli(str(ws), "--apply", home=tmp_path / "no-home") == 1
    assert "not valid UTF-8" in capsys.readouterr().err
    assert (ws / "MEMORY.md").read_bytes() == raw
