"""The weekly reflection's report for a person (``reflection.report``): every run's clusters and proposals,
and nothing a note holds can end the table cell or the fence it stands in."""

from __future__ import annotations

from pathlib import Path

from services.kb.vault.reflection import report

RUN = {
    "run_id": "R-20261206T040000Z-1a2b3c", "mode": "propose", "trigger": "schedule", "status": "ok", "reason": "",
    "started_at": 1_796_000_000.0, "finished_at": 1_796_000_060.0, "remaining": 2, "reverted_at": 0.0,
    "clusters": [
        {"cluster_id": "C-0123456789ab", "notes": ["kiln | log", "kiln `x`"], "outcome": "proposed", "reason": "one\ntopic"},
        {"cluster_id": "C-ba9876543210", "notes": ["a", "b"], "outcome": "unreviewed", "reason": "the reviewer failed: timed out"},
    ],
    "proposals": [{"cluster_id": "C-0123456789ab", "name": "kiln", "replaces": ["kiln | log", "kiln `x`"],
                   "reason": "same kiln", "content": "# Kiln\n\n````\nnot the end\n````\n- fires at cone 10\n",
                   "state": "pending"}],
}


def test_a_run_shows_its_clusters_its_proposals_and_the_commands_to_decide() -> None:
    text = report.render("team", [RUN])
    assert "## R-20261206T040000Z-1a2b3c: ok (propose, schedule)" in text and "2 clusters wait for the next run." in text
    assert "| C-ba9876543210 | ` a `, ` b ` | unreviewed | the reviewer failed: timed out |" in text
    assert "gateway vault accept --project team R-20261206T040000Z-1a2b3c C-0123456789ab" in text
    assert "gateway vault reject --project team R-20261206T040000Z-1a2b3c C-0123456789ab" in text


def test_a_note_cannot_end_its_cell_or_its_fence() -> None:
    text = report.render("team", [RUN])
    row = next(line for line in text.splitlines() if line.startswith("| C-0123456789ab"))
    assert row.count(" | ") == 3 and "kiln \\| log" in row  # the name's pipe escaped: still four cells
    assert "`` kiln `x` ``" in text  # a code span longer than the name's own backticks
    lines = text.splitlines()
    start = lines.index("`````markdown")  # five: longer than the content's four
    assert lines[start + 1 :].index("`````") > lines[start + 1 :].index("not the end")


def test_the_report_is_written_whole_with_no_run_yet_said_so(tmp_path: Path) -> None:
    path = report.write(tmp_path / "reports", "team", [])
    assert path.name == "reflection.md" and "No run yet." in path.read_text()
    report.write(tmp_path / "reports", "team", [RUN] * 30)
    assert path.read_text().count("## R-") == report.RUNS
