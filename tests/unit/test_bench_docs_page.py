"""bench/harness/page.py: the one writer of the benches' results and documentation pages. The same
figures always give the same page; machine paths stay out of it; hand-written notes at the end of
a page survive the next run."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from bench_modules import bench


docs_page = bench("harness.page")
report = bench("harness.report")


def page(**changes: object) -> object:
    fields: dict[str, object] = {
        "name": "kb_live",
        "title": "KB live indexing",
        "method": "A note is written and searched for.\n",
        "body": "## KB live (1,000 files)\n\n"
        + report.figures_table([("Write -> searchable, p50", "12.12 ms", "<= 100 ms", "PASS"), ("Archive", "1,000 files", "", "")]),
        "verdicts": ["PASS: Write -> searchable, p50 = 12.12 ms (goal <= 100 ms)"],
        "date": "2026-12-06 09:00 UTC",
        "commit": "abc1234",
        "command": ".venv/bin/python bench/kb_live.py --write-docs",
        "duration_s": 15.4,
        "cores": 2,
        "load_before": "0.40 0.50 0.60",
        "load_after": "1.10 0.70 0.60",
        "python": "3.12.3",
        "platform": "Linux 6.1 (x86_64)",
    }
    fields.update(changes)
    return docs_page.Page(**fields)


EXPECTED = """\
# KB live indexing

<!-- Written by bench/kb_live.py --write-docs: the next run rewrites this page, all but the hand-written notes at its end (if any). -->

A note is written and searched for.

## This run

- **Date:** 2026-12-06 09:00 UTC
- **Commit:** `abc1234`
- **Command:** `.venv/bin/python bench/kb_live.py --write-docs`
- **Duration:** 15 s
- **Machine:** 2 cores, Linux 6.1 (x86_64), Python 3.12.3
- **Load average** (1, 5, 15 min): 0.40 0.50 0.60 before the run, 1.10 0.70 0.60 after

Figures depend on the machine and on what else runs on it: compare runs made under a similar load.

## Figures

### KB live (1,000 files)

| figure | value | goal | result |
|---|---|---|---|
| Write -> searchable, p50 | 12.12 ms | <= 100 ms | PASS |
| Archive | 1,000 files |  |  |

## Goals

- PASS: Write -> searchable, p50 = 12.12 ms (goal <= 100 ms)
"""


def test_render_is_deterministic_from_fixed_figures() -> None:
    assert docs_page.render(page()) == EXPECTED
    assert docs_page.render(page()) == docs_page.render(page())


def test_a_bench_without_goals_says_so() -> None:
    text = docs_page.render(page(verdicts=[]))
    assert text.endswith("## Goals\n\nNo goal is checked by this bench: its figures are information.\n")


def test_tables_and_verdicts() -> None:
    assert report.table(("a", "b"), [(1, "x")], "rl") == "| a | b |\n|---:|---|\n| 1 | x |"
    rows = [("Search p99", "27 ms", "<= 50 ms", "PASS"), ("Corpus", "10 files", "", ""), ("Size", "3x", "<= 2.5x", "FAIL")]
    assert report.figure_verdicts(rows) == ["PASS: Search p99 = 27 ms (goal <= 50 ms)", "FAIL: Size = 3x (goal <= 2.5x)"]
    assert report.verdict(True, "x") == "PASS x" and report.verdict(False, "y") == "FAIL y"
    assert docs_page.results_text("| t |", ["PASS x"]) == "| t |\n\nGoals:\n\n- PASS x\n"
    assert docs_page.results_text("| t |\n", []) == "| t |\n"


def test_machine_paths_stay_out_of_the_page() -> None:
    tmp = tempfile.gettempdir()
    body = f"- corpus: cached in {tmp}/kb-bench-corpus\n- code: {docs_page.REPO}/services/kb"
    text = docs_page.render(page(body=body, verdicts=[f"PASS kept {docs_page.REPO}"]))
    assert tmp + "/" not in text and str(docs_page.REPO) not in text
    assert "cached in $TMPDIR/kb-bench-corpus" in text and "- code: services/kb" in text and "PASS kept ." in text


def test_a_virtual_environment_outside_the_checkout_is_named_not_spelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docs_page.sys, "prefix", "/srv/envs/gateway")
    assert docs_page.scrub("/srv/envs/gateway/lib/python3.11/site-packages/anyio/x.py:3") == "<venv>/lib/python3.11/site-packages/anyio/x.py:3"
    monkeypatch.setattr(docs_page.sys, "prefix", str(docs_page.REPO / ".venv"))
    assert docs_page.scrub(f"{docs_page.REPO}/.venv/lib/y.py") == ".venv/lib/y.py"


def test_headings_move_down_a_level_outside_code() -> None:
    assert docs_page.demote("## a\ntext\n```\n# not a heading\n```\n### b") == "### a\ntext\n```\n# not a heading\n```\n#### b"


def test_hand_written_notes_survive_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docs_page, "DOCS_DIR", tmp_path / "docs")
    monkeypatch.setattr(docs_page, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(docs_page, "REPO", tmp_path)
    run = docs_page.Run.begin("demo", "Demo", "Method.", ["--quick"])
    assert run.command() == ".venv/bin/python bench/demo.py --quick"
    path = run.finish("| a |\n|---|\n| 1 |", ["PASS one"], write_docs=True, echo=False)
    assert path == tmp_path / "docs" / "demo.md"
    first = path.read_text()
    assert first.startswith("# Demo\n") and "- PASS one\n" in first
    assert (tmp_path / "results" / "demo.md").read_text() == "| a |\n|---|\n| 1 |\n\nGoals:\n\n- PASS one\n"
    notes = f"{docs_page.KEEP}\n\n## Notes\n\nWhy the goal is not met.\n"
    path.write_text(first + "\n" + notes)
    run.finish("| a |\n|---|\n| 2 |", ["FAIL two"], write_docs=True, echo=False)
    second = path.read_text()
    assert "| 2 |" in second and "| 1 |" not in second and "- FAIL two\n" in second
    assert second.endswith("\n" + notes)
    assert second.count(docs_page.KEEP) == 1
    assert run.finish("x", [], write_docs=False, echo=False) is None
