"""Where a bench's figures become text: stdout, ``bench/results/<name>.md`` and, with ``--write-docs``,
the documentation page ``docs/benchmarks/<name>.md``.

A bench builds its tables (markdown) and its PASS/FAIL lines once and hands them to ``Run.finish``;
nothing else formats them again. The page adds what a reader needs to weigh the figures: when the
run was made (UTC), on which commit, with which command, how long it took, and the machine (cores,
load average before and after, Python, platform). ``render`` is a pure function of a ``Page``, so
the same figures always give the same page.

Usage in a bench::

    run = page.Run.begin("kb_live", TITLE, METHOD)   # first thing in main(): load average before
    ...
    run.finish(markdown, verdicts, write_docs=args.write_docs)
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness import BENCH_DIR, REPO

RESULTS_DIR = BENCH_DIR / "results"
DOCS_DIR = REPO / "docs" / "benchmarks"
PYTHON = ".venv/bin/python"
# A page may end with notes written by hand (what the figures mean, what was tried): everything from
# this line on is carried over unchanged when the bench writes the page again.
KEEP = "<!-- Notes below this line are written by hand and kept when the page is written again. -->"


@dataclass(frozen=True)
class Page:
    """Everything a benchmark page shows; ``render`` turns it into markdown."""

    name: str  # the script's name without .py: bench/<name>.py, docs/benchmarks/<name>.md
    title: str
    method: str  # a short paragraph: what is measured, against what
    body: str  # the bench's tables (markdown), as it prints them
    verdicts: list[str]  # the PASS/FAIL lines, as it prints them
    date: str  # "YYYY-MM-DD HH:MM UTC", when the run began
    commit: str
    command: str
    duration_s: float | None  # None: the run did not record how long it took
    cores: int
    load_before: str
    load_after: str
    python: str
    platform: str
    notes: list[str] = field(default_factory=list)  # extra lines for the "This run" list


def machine(extra: str = "") -> str:
    """This machine in a run's notes: cores, platform, Python, then ``extra`` (a library's version)."""
    return f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}{extra}"


def load_average() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def commit() -> str:
    """The short commit of the checkout, with "+ uncommitted changes" when tracked files differ from it
    (the pages themselves excepted: a run of several benches rewrites them one after the other)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/benchmarks"],
                               cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head} + uncommitted changes" if dirty else head


def scrub(text: str) -> str:
    """Machine-specific paths out of ``text``: the checkout becomes relative, a virtual environment
    outside it ``<venv>``, the temp folder ``$TMPDIR`` and the home folder ``~``, so a page does not
    carry one machine's absolute paths."""
    venv = sys.prefix
    if venv not in ("", "/") and not Path(venv).is_relative_to(REPO):
        text = text.replace(venv, "<venv>")
    text = text.replace(str(REPO) + "/", "").replace(str(REPO), ".")
    tmp = tempfile.gettempdir()
    if tmp not in ("", "/"):
        text = text.replace(tmp, "$TMPDIR")
    home = os.path.expanduser("~")
    if home not in ("", "/", "~"):
        text = text.replace(home + "/", "~/")
    return text


def demote(markdown: str) -> str:
    """Every heading one level down (``## x`` -> ``### x``): the page's own sections are level 2."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        out.append("#" + line if not fenced and line.startswith("#") else line)
    return "\n".join(out)


def goals_list(verdicts: list[str]) -> list[str]:
    return [f"- {v}" for v in verdicts] if verdicts else ["No goal is checked by this bench: its figures are information."]


def results_text(body: str, verdicts: list[str]) -> str:
    """``bench/results/<name>.md``: the tables, then the goals."""
    text = body.rstrip("\n") + "\n"
    if verdicts:
        text += "\nGoals:\n\n" + "\n".join(goals_list(verdicts)) + "\n"
    return text


def kept_notes(old_page: str) -> str:
    """The hand-written tail of an existing page: from the ``KEEP`` line to the end ("" when none)."""
    at = old_page.find("\n" + KEEP)
    return old_page[at + 1:] if at >= 0 else ""


def render(page: Page, kept: str = "") -> str:
    """The page's markdown, then ``kept`` (the hand-written notes of the previous page, from the
    ``KEEP`` line on); the same arguments always give the same text."""
    lines = [
        f"# {page.title}",
        "",
        f"<!-- Written by bench/{page.name}.py --write-docs: the next run rewrites this page, all but the hand-written "
        "notes at its end (if any). -->",
        "",
        page.method.strip(),
        "",
        "## This run",
        "",
        f"- **Date:** {page.date}",
        f"- **Commit:** `{page.commit}`",
        f"- **Command:** `{page.command}`",
        f"- **Duration:** {'not recorded' if page.duration_s is None else f'{page.duration_s:,.0f} s'}",
        f"- **Machine:** {page.cores} cores, {page.platform}, Python {page.python}",
        f"- **Load average** (1, 5, 15 min): {page.load_before} before the run, {page.load_after} after",
        *[f"- {note}" for note in page.notes],
        "",
        "Figures depend on the machine and on what else runs on it: compare runs made under a similar load.",
        "",
        "## Figures",
        "",
        scrub(demote(page.body.strip("\n"))),
        "",
        "## Goals",
        "",
        *[scrub(line) for line in goals_list(page.verdicts)],
        "",
    ]
    text = "\n".join(lines)
    return text + "\n" + kept.rstrip("\n") + "\n" if kept else text


def parser(doc: str | None, *, quick: str = "", keep_home: str = "") -> argparse.ArgumentParser:
    """A bench's command line: described by the first paragraph of ``doc``, with ``--write-docs`` and,
    when their help is given, ``--quick`` and ``--keep-home``."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    if quick:
        p.add_argument("--quick", action="store_true", help=quick)
    if keep_home:
        p.add_argument("--keep-home", action="store_true", help=keep_home)
    add_flag(p)
    return p


def add_flag(parser: argparse.ArgumentParser) -> None:
    """The ``--write-docs`` option every bench entry script takes."""
    parser.add_argument("--write-docs", action="store_true",
                        help="also write this run's page, docs/benchmarks/<name>.md (date, commit, machine, tables, goals)")  # fmt: skip


@dataclass
class Run:
    """One run of a bench, from ``begin`` (load average, clock, command line) to ``finish``."""

    name: str
    title: str
    method: str
    started: datetime
    started_mono: float
    load_before: str
    argv: list[str]

    @classmethod
    def begin(cls, name: str, title: str, method: str, argv: list[str] | None = None) -> Run:
        return cls(name, title, method, datetime.now(UTC), time.monotonic(), load_average(),
                   list(sys.argv[1:] if argv is None else argv))  # fmt: skip

    def command(self) -> str:
        return shlex.join([PYTHON, f"bench/{self.name}.py", *self.argv])

    def page(self, body: str, verdicts: list[str], notes: list[str] | None = None) -> Page:
        return Page(
            name=self.name, title=self.title, method=self.method, body=body, verdicts=list(verdicts),
            date=f"{self.started:%Y-%m-%d %H:%M} UTC", commit=commit(), command=scrub(self.command()),
            duration_s=time.monotonic() - self.started_mono, cores=os.cpu_count() or 0,
            load_before=self.load_before, load_after=load_average(), python=platform.python_version(),
            platform=f"{platform.system()} {platform.release()} ({platform.machine()})", notes=list(notes or []),
        )  # fmt: skip

    def finish(self, body: str, verdicts: list[str], *, write_docs: bool, notes: list[str] | None = None,
               echo: bool = True) -> Path | None:  # fmt: skip
        """Print the PASS/FAIL lines and the tables, write ``bench/results/<name>.md`` and, when
        ``write_docs``, the page. Returns the page's path (None when not written)."""
        if echo:
            print()
            for line in verdicts:
                print(line)
            print()
            print(body.rstrip("\n"))
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        results = RESULTS_DIR / f"{self.name}.md"
        results.write_text(results_text(body, verdicts), encoding="utf-8")
        print(f"bench: markdown written to {results.relative_to(REPO)}", file=sys.stderr, flush=True)
        if not write_docs:
            return None
        return write_page(self.page(body, verdicts, notes))


def write_page(page: Page) -> Path:
    """Write ``docs/benchmarks/<name>.md`` from ``page``, keeping the hand-written notes at the end of
    the page it replaces. Returns the page's path."""
    DOCS_DIR.mkdir(parents=True, exist_ok=True)
    path = DOCS_DIR / f"{page.name}.md"
    kept = kept_notes(path.read_text(encoding="utf-8")) if path.exists() else ""
    path.write_text(render(page, kept), encoding="utf-8")
    print(f"bench: page written to {path.relative_to(REPO)}", file=sys.stderr, flush=True)
    return path
