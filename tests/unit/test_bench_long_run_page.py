"""The long-run benches' documentation pages (bench/harness/long_run_page.py): bench/soak.py and
bench/capacity.py build their report from figures made up here, through their own functions, and the
page is written from it, as ``--write-docs`` writes it after a run and ``--from-run DIR`` writes it
later from the report a run left. Nothing here starts the suite or sends traffic."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bench_modules import bench


docs_page = bench("harness.page")
long_run_page = bench("harness.long_run_page")
PROCESSES = ("launcher", "file_api", "watcher", "kb", "dreaming", "http")
STARTED = datetime(2026, 12, 6, 8, 39, 41, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n a plot made up for the test"
FROM_RUN_NOTE = "- page written after the run, from its report (`bench/{}.py --from-run DIR`)\n"


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Pages go to a temporary docs/benchmarks; the commit is a fixed one."""
    monkeypatch.setattr(docs_page, "REPO", tmp_path)
    monkeypatch.setattr(docs_page, "DOCS_DIR", tmp_path / "docs" / "benchmarks")
    monkeypatch.setattr(docs_page, "commit", lambda: "abc1234")
    return tmp_path / "docs" / "benchmarks"


def soak_samples(kb_growth_mb: float) -> list[dict[str, object]]:
    """Twenty minutes of samples every 30 s (the first two minutes the warm-up), one at rest, one after the stop."""
    disk = {"used_bytes": 200 * 2**20, "files": 1200, "databases": {"agents/a0000/kb.sqlite": 2**20},
            "wals": {"agents/a0000/kb.sqlite": 2 * 2**20}, "dreaming": {"audit.jsonl": 10_000, "journal.jsonl": 9_000,
                                                                      "DREAMS.md": 4_000}}  # fmt: skip
    out: list[dict[str, object]] = []
    for i in range(41):
        procs = {p: {"rss_mb": 60.0 + (kb_growth_mb * i / 40 if p == "kb" else 0.0), "anon_mb": 30.0, "fds": 30,
                     "threads": 12, "cpu_s": float(i)} for p in PROCESSES}  # fmt: skip
        sample: dict[str, object] = {"t": 30.0 * i, "phase": "warm-up" if i < 4 else "measured", "procs": procs, "disk": disk,
                                     "load": 1.5}  # fmt: skip
        if i:
            sample.update(requests=2250, rate=75.0, p50=4.0, p99=20.0, errors=0, e5xx=0, gen_cpu=12.0)
        out.append(sample)
    out.append({"t": 1265.0, "phase": "rest", "procs": out[-1]["procs"], "disk": disk, "load": 0.4})
    out.append({"t": 1267.0, "phase": "stopped", "procs": {}, "disk": {**disk, "wals": {"agents/a0000/kb.sqlite": 0}}, "load": 0.4})
    return out


def soak_report(out: Path, kb_growth_mb: float) -> tuple[str, list[str]]:
    """bench/soak.py's report of a made-up run, through its own ``build_report``."""
    soak = bench("soak")
    traffic = bench("soak_traffic")
    rec = traffic.Recorder(0.0)
    rec.records = [traffic.Record(float(t), "rest:search", 5.0, 200, True) for t in range(1200)]
    rec.records += [traffic.Record(1250.0, "check:search", 2.0, 200, True)]
    rec.outcomes = Counter({"search with hits": 1200})
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.log").write_text(json.dumps({"service": "kb", "level": "warning", "event": "slow_search", "error": "took 2 s"},
                                             separators=(",", ":")) + "\n")
    argv = ["--agents", "3", "--write-docs"]
    meta = {"commit": "abc1234", "started": STARTED, "took_s": 1342.4, "load_before": "0.50 0.40 0.30",
            "load_after": "1.00 0.80 0.60", "nofile": 1024, "kb_limit": (20000, 20000), "ready_s": 2.1, "composed_s": 2.2}  # fmt: skip
    run = {"rec": rec, "samples": soak_samples(kb_growth_mb), "traffic_s": 1200.0, "gen_cpu": 170.0,
           "suite_cpu": dict.fromkeys(PROCESSES, 10.0), "agreement": (30, 0, []), "directives": 5, "shared_notes": 12, "died": ""}  # fmt: skip
    markdown: str
    verdicts: list[str]
    markdown, verdicts = soak.build_report(soak.parse_args(argv), argv, meta, run, out)
    return markdown, verdicts


def section(page: str, heading: str) -> str:
    """The text of one level-2 section of a page."""
    start = page.index(f"\n## {heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start:] if end < 0 else page[start:end]


def test_the_soak_page_has_the_run_its_tables_its_goals_and_its_plot(tmp_path: Path, docs: Path) -> None:
    soak = bench("soak")
    out = tmp_path / "run"
    markdown, verdicts = soak_report(out, kb_growth_mb=20.0)
    (out / "soak.png").write_bytes(PNG)
    path = long_run_page.write("soak", soak.TITLE, soak.METHOD, markdown, out)
    assert path == docs / "soak.md"
    page = path.read_text()
    assert page.startswith(f"# {soak.TITLE}\n")
    run = section(page, "This run")
    assert "- **Date:** 2026-12-06 08:39 UTC\n" in run and "- **Commit:** `abc1234`\n" in run
    assert "- **Command:** `.venv/bin/python bench/soak.py --agents 3 --write-docs`\n" in run
    assert "- **Duration:** 1,342 s\n" in run
    assert "0.50 0.40 0.30 before the run, 1.00 0.80 0.60 after" in run
    assert "- suite: `gateway up` with the soft open-files limit 1024" in run
    figures = section(page, "Figures")
    assert "### Soak: 3 agents, 20 minutes\n" in figures and "#### Per process (after the warm-up)\n" in figures
    assert "| kb | warning | slow_search | 1 | `took 2 s` |" in figures
    assert "![RSS, open files and latency over the run](soak.png)" in figures
    assert "Goals" not in figures and "PASS" not in figures  # the verdicts moved to the page's own section
    goals = section(page, "Goals").strip("\n").splitlines()[2:]
    assert goals[: len(verdicts)] == [f"- {v}" for v in verdicts]
    assert "- FAIL kb RSS growth <= 10 MB over the run: +18.0 MB fitted over 18.0 min (+60 MB/h; first 62.0 -> last 80.0 MB, +18.0)" in goals
    assert "- PASS 0 5xx: 0" in goals
    assert goals[len(verdicts):] and all(line.startswith("- info: ") for line in goals[len(verdicts):])
    assert (docs / "soak.png").read_bytes() == PNG


def test_from_run_writes_the_same_page_from_the_report_a_run_left(tmp_path: Path, docs: Path) -> None:
    soak = bench("soak")
    out = tmp_path / "run"
    markdown, _ = soak_report(out, kb_growth_mb=0.0)
    (out / "soak.png").write_bytes(PNG)
    written = long_run_page.write("soak", soak.TITLE, soak.METHOD, markdown, out).read_text()
    (docs / "soak.png").unlink()
    (out / "soak.md").write_text(markdown + "\n")
    assert soak.main(["--from-run", str(out)]) == 0
    again = (docs / "soak.md").read_text()
    assert FROM_RUN_NOTE.format("soak") in again
    assert again.replace(FROM_RUN_NOTE.format("soak"), "") == written
    assert (docs / "soak.png").read_bytes() == PNG


def test_from_run_without_a_whole_report_writes_nothing(tmp_path: Path, docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    soak = bench("soak")
    assert soak.main(["--from-run", str(tmp_path / "nowhere")]) == 2
    assert "cannot write the page from" in capsys.readouterr().err
    (tmp_path / "soak.md").write_text("## Soak: 3 agents, 1 minutes\n\n- code: abc1234\n")
    assert soak.main(["--from-run", str(tmp_path)]) == 2
    assert "do not say the run's command, code, machine" in capsys.readouterr().err
    markdown, _ = soak_report(tmp_path / "run", kb_growth_mb=0.0)
    (tmp_path / "run" / "soak.md").write_text(markdown)
    assert soak.main(["--from-run", str(tmp_path / "run")]) == 2  # the plot it shows is not in the folder
    assert not docs.exists() or not (docs / "soak.md").exists()


# A report as the long runs wrote it before about_lines: no duration, no architecture, a dirty checkout.
EARLIER = """\
## Capacity: 100, 1,000 agents on one host

- command: `.venv/bin/python bench/capacity.py --out /srv/runs/cap`
- code: 84cfc66 with uncommitted changes; started 2026-12-06 06:45:02 UTC
- machine: 2 cores, Linux 6.18.44, Python 3.11.7; load average 0.06 0.44 0.89 before, 3.75 1.73 1.29 after (other work)
- suite: `gateway up` with the soft open-files limit 1024

| figure | unit | 100 agents | 1,000 agents | per agent 100 -> 1,000 |
|---|---|---:|---:|---:|
| time to ready (`ready` line) | s | 2.11 | 2.99 | +0.978 ms |

- PASS 0 searches not answered at 100 agents (every agent searched): 0
- FAIL 0 searches not answered at 1,000 agents (every agent searched): 3
"""


def test_a_report_written_before_the_run_said_its_duration() -> None:
    report = long_run_page.read(EARLIER)
    assert report.heading == "Capacity: 100, 1,000 agents on one host"
    assert report.notes == ["suite: `gateway up` with the soft open-files limit 1024"]
    assert report.verdicts == [EARLIER.splitlines()[-2][2:], EARLIER.splitlines()[-1][2:]]
    assert report.body.endswith("| time to ready (`ready` line) | s | 2.11 | 2.99 | +0.978 ms |")
    page = long_run_page.report_page("capacity", "Capacity", "Method.", report)
    assert (page.date, page.commit, page.duration_s) == ("2026-12-06 06:45 UTC", "84cfc66 with uncommitted changes", None)
    assert (page.cores, page.platform, page.python) == (2, "Linux 6.18.44", "3.11.7")
    assert (page.load_before, page.load_after) == ("0.06 0.44 0.89", "3.75 1.73 1.29")
    assert "- **Duration:** not recorded\n" in docs_page.render(page)
    with pytest.raises(ValueError, match="title line"):
        long_run_page.read("| a table |\n")


def test_a_section_left_empty_is_dropped() -> None:
    lines = ["## Run", "", "### Goals", "", "### Per process", "", "| a |", "", "### Empty at the end", ""]
    assert long_run_page.drop_empty_sections(lines) == ["## Run", "", "### Per process", "", "| a |", ""]


def test_the_capacity_page_has_the_table_per_size_and_the_verdicts(tmp_path: Path, docs: Path) -> None:
    capacity = bench("capacity")
    small = capacity.SizeFigures(100, started=True, ready_s=1.8, composed_s=1.9, search_status={200: 200}, kb_limit=(20000, 20000),
                                 rest={p: {"rss_mb": 60.0, "anon_mb": 30.0, "fds": 20, "threads": 12} for p in PROCESSES})  # fmt: skip
    large = capacity.SizeFigures(1000, started=True, ready_s=4.8, composed_s=4.9, search_status={200: 1097, 503: 3},
                                 search_examples=["a0420: 503 database is locked"],
                                 rest={p: {"rss_mb": 61.0, "anon_mb": 30.5, "fds": 20, "threads": 12} for p in PROCESSES})  # fmt: skip
    argv = ["--agents", "100,1000", "--write-docs"]
    markdown, verdicts = capacity.report(capacity.parse_args(argv), argv, [small, large], STARTED, 250.0, "0.10 0.20 0.30", "2.00 1.00 0.50")
    out = tmp_path / "run"
    path = long_run_page.write("capacity", capacity.TITLE, capacity.METHOD, markdown, out)
    page = path.read_text()
    assert page.startswith(f"# {capacity.TITLE}\n")
    run = section(page, "This run")
    assert "- **Command:** `.venv/bin/python bench/capacity.py --agents 100,1000 --write-docs`\n" in run
    assert "- **Duration:** 250 s\n" in run and "- **Commit:** `abc1234`\n" in run
    assert "(the KB's limits: soft 20000, hard 20000)" in run
    figures = section(page, "Figures")
    assert "### Capacity: 100, 1,000 agents on one host\n" in figures
    assert "| time to ready (`ready` line) | s | 1.80 | 4.80 | +3.33 ms |" in figures
    assert "| kb | RSS at rest | MB | 60 | 61 | +1.14 KB |" in figures
    assert "Searches not answered at 1,000 agents, first ones:\n\n- `a0420: 503 database is locked`" in figures
    goals = section(page, "Goals")
    assert [line for line in goals.splitlines() if line.startswith("- ")] == [f"- {v}" for v in verdicts]
    assert verdicts[0].startswith("PASS 0 searches not answered at 100 agents")
    assert verdicts[1].startswith("FAIL 0 searches not answered at 1,000 agents (every agent searched): 3")
    assert sorted(p.name for p in docs.iterdir()) == ["capacity.md"]  # no plot: nothing beside the page
