"""The documentation pages of the long-run benches (bench/soak.py, bench/capacity.py), made from their reports.

A long run writes its report into its output folder (``soak.md``, ``capacity.md``): a title line,
a list saying what the run was (``about_lines``: command, commit, start, machine, load average,
then the bench's own lines), its tables and its PASS/FAIL lines. The page is made from that text
alone, whether the run has just written it (``--write-docs``) or an earlier run left it in its
folder (``--from-run DIR``): the same report always gives the same page, and a run of twenty
minutes need not be made again to publish it. The page itself is written by bench/harness/page.py,
the one writer of the benches' pages; an image the report shows is copied beside it.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness import page

# The report's first lines, as ``about_lines`` writes them (and as reports written before it said them).
COMMAND = re.compile(r"^command: `(?P<command>.+)`$")
CODE = re.compile(r"^code: (?P<commit>.+?); started (?P<date>\d{4}-\d\d-\d\d \d\d:\d\d)(?::\d\d)? (?P<zone>\S+?)"
                  r"(?:; took (?P<took>\d+) s)?$")  # fmt: skip
MACHINE = re.compile(r"^machine: (?P<cores>\d+) cores, (?P<platform>.+?), Python (?P<python>[^;\s]+); load average "
                     r"(?P<before>[\d. ]+?) before(?: the run)?, (?P<after>[\d. ]+?) after\b")  # fmt: skip
VERDICT = re.compile(r"^- (?:PASS|FAIL|info:) ")
IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<file>[^)]+)\)$")


def about_lines(name: str, argv: list[str], commit: str, started: datetime, took_s: float, load_before: str,
                load_after: str, after: str = "the run") -> list[str]:  # fmt: skip
    """The first lines of a long run's report: what ``read`` takes the page's "This run" from.
    ``started`` is in UTC; ``after`` says when ``load_after`` was read."""
    command = shlex.join([page.PYTHON, f"bench/{name}.py", *argv])
    machine = f"{platform.system()} {platform.release()} ({platform.machine()})"
    return [
        f"- command: `{command}`",
        f"- code: {commit}; started {started:%Y-%m-%d %H:%M:%S} UTC; took {took_s:.0f} s",
        f"- machine: {os.cpu_count() or 0} cores, {machine}, Python {platform.python_version()}; load average "
        f"{load_before} before the run, {load_after} after {after} (other work on the machine skews the figures)",
    ]


@dataclass(frozen=True)
class Report:
    """A long run's report, taken apart: the page is made of these."""

    heading: str  # the title line, without its "## "
    about: dict[str, re.Match[str]]  # command, code, machine
    notes: list[str]  # the other lines of the list under the title
    verdicts: list[str]  # the PASS/FAIL lines (and the soak's "info:" lines beside them)
    body: str  # the rest: the tables, without the verdicts


def read(text: str) -> Report:
    """Take a report apart. Raises ValueError when the text is not a long run's report."""
    lines = text.strip("\n").splitlines()
    if not lines or not lines[0].startswith("## "):
        raise ValueError("a report begins with a '## ' title line")
    about: dict[str, re.Match[str]] = {}
    notes: list[str] = []
    at = 1
    while at < len(lines) and not lines[at].strip():
        at += 1
    while at < len(lines) and lines[at].startswith("- "):  # the list under the title
        line = lines[at][2:]
        at += 1
        for key, pattern in (("command", COMMAND), ("code", CODE), ("machine", MACHINE)):
            match = pattern.match(line)
            if match:
                about[key] = match
                break
        else:
            notes.append(line)
    missing = [key for key in ("command", "code", "machine") if key not in about]
    if missing:
        raise ValueError(f"the report's first lines do not say the run's {', '.join(missing)}")
    rest = lines[at:]
    verdicts = [line[2:] for line in rest if VERDICT.match(line)]
    body = drop_empty_sections([line for line in rest if not VERDICT.match(line)])
    return Report(lines[0][3:].strip(), about, notes, verdicts, "\n".join(body).strip("\n"))


def drop_empty_sections(lines: list[str]) -> list[str]:
    """Without the headings left with nothing under them (the report's "Goals", once its lines moved
    to the page's own Goals section)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            after = [x for x in lines[i + 1:] if x.strip()]
            nxt = after[0] if after else ""
            if not nxt or (nxt.startswith("#") and len(nxt) - len(nxt.lstrip("#")) <= level):
                continue
        out.append(line)
    collapsed: list[str] = []
    for line in out:  # no run of blank lines where a section was dropped
        if line.strip() or (collapsed and collapsed[-1].strip()):
            collapsed.append(line)
    return collapsed


def images(body: str) -> list[str]:
    """The files the report's image lines show, in order."""
    return [m.group("file") for m in (IMAGE.match(line) for line in body.splitlines()) if m]


def image_name(name: str, index: int, source: str) -> str:
    """The name an image gets beside the page: ``soak.png``, then ``soak-2.png``..."""
    return f"{name}{'' if index == 0 else f'-{index + 1}'}{Path(source).suffix}"


def report_page(name: str, title: str, method: str, report: Report, notes: list[str] | None = None) -> page.Page:
    """The page of ``report``: its run's date, commit, command and machine from its first lines."""
    command, code, machine = report.about["command"], report.about["code"], report.about["machine"]
    body = report.body
    for index, source in enumerate(images(body)):
        body = body.replace(f"]({source})", f"]({image_name(name, index, source)})")
    return page.Page(
        name=name, title=title, method=method, body=f"## {report.heading}\n\n{body}", verdicts=list(report.verdicts),
        date=f"{code['date']} {code['zone']}", commit=code["commit"], command=page.scrub(command["command"]),
        duration_s=None if code["took"] is None else float(code["took"]), cores=int(machine["cores"]),
        load_before=machine["before"], load_after=machine["after"], python=machine["python"],
        platform=machine["platform"], notes=[page.scrub(n) for n in [*report.notes, *(notes or [])]],
    )  # fmt: skip


def write(name: str, title: str, method: str, text: str, folder: Path, notes: list[str] | None = None) -> Path:
    """Write ``docs/benchmarks/<name>.md`` from the report ``text``, copying the images it shows from
    ``folder`` beside the page. Raises ValueError for a text that is not a report, OSError for an image
    that is not in ``folder``."""
    report = read(text)
    for index, source in enumerate(images(report.body)):
        page.DOCS_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / source, page.DOCS_DIR / image_name(name, index, source))
    return page.write_page(report_page(name, title, method, report, notes))


def publish(name: str, title: str, method: str, markdown: str, verdicts: list[str], folder: Path, *,
            write_docs: bool) -> None:  # fmt: skip
    """A finished long run: its report ``folder/<name>.md``, its page when ``write_docs``, then its
    PASS/FAIL lines and its tables on stdout."""
    (folder / f"{name}.md").write_text(markdown + "\n", encoding="utf-8")
    if write_docs:
        write(name, title, method, markdown, folder)
    print()
    for line in verdicts:
        print(line)
    print()
    print(markdown)


def from_run(name: str, title: str, method: str, folder: Path) -> int:
    """``--from-run DIR``: the page from the report an earlier run left in ``folder`` (nothing is run).
    Exit code: 0 when written, 2 when the folder holds no report or not a whole one."""
    source = folder / f"{name}.md"
    try:
        text = source.read_text(encoding="utf-8")
        write(name, title, method, text, folder, [f"page written after the run, from its report (`bench/{name}.py --from-run DIR`)"])
    except (OSError, ValueError) as exc:
        print(f"bench/{name}.py: cannot write the page from {source}: {exc}", file=sys.stderr)
        return 2
    return 0
