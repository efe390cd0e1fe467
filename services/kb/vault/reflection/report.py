"""The weekly reflection's report for a person: ``reports/reflection.md`` beside the vault's graph reports
(docs/concepts/vault.md "Weekly reflection", The report).

Rewritten whole by the KB after every recorded run and every revert, from the vault's reflection audit:
the newest ``RUNS`` runs, newest first, each with its clusters and what became of them, and each
proposal of a propose-mode run in full (the notes it replaces, the merged note's name, the reviewer's
reason, the merged content, and the two commands that accept or reject it), as the nightly runs'
DREAMS.md shows their proposals. A decision is a run of its own (its reason names the run decided),
so a proposal's fate is the later run's line about its cluster. Note names and contents come from agents:
names are shown as code spans in table cells with their pipes escaped, contents inside a fence longer
than any run of backticks they hold, so nothing in a note can end the block it stands in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from gateway.atomic import write_atomic

FILE: Final = "reflection.md"
RUNS: Final = 20


def _when(at: object) -> str:
    try:
        seconds = float(str(at))
    except ValueError:
        return "?"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC") if seconds > 0 else "?"


def _cell(text: object) -> str:
    """One line for a table cell: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace("|", "\\|")


def _code(text: object) -> str:
    """``text`` as a code span that its own backticks cannot end."""
    value = " ".join(str(text).split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    return f"{ticks} {value} {ticks}"


def _fenced(text: str) -> list[str]:
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return [fence + "markdown", *text.rstrip("\n").split("\n"), fence]


def _names(names: Iterable[object]) -> str:
    return ", ".join(_code(n) for n in names)


def _run(project: str, run: Mapping[str, object]) -> list[str]:
    run_id = str(run.get("run_id", ""))
    clusters: Sequence[Mapping[str, object]] = list(run.get("clusters") or [])  # type: ignore[call-overload]
    proposals: Sequence[Mapping[str, object]] = list(run.get("proposals") or [])  # type: ignore[call-overload]
    lines = [f"## {run_id}: {run.get('status', '')} ({run.get('mode', '')}, {run.get('trigger', '')})", "",
             f"Started {_when(run.get('started_at'))}, finished {_when(run.get('finished_at'))}."]
    if run.get("reason"):
        lines.append(f"Reason: {_cell(run['reason'])}.")
    if float(str(run.get("reverted_at") or 0)) > 0:
        lines.append(f"Reverted {_when(run['reverted_at'])}: its merges were undone.")
    if int(str(run.get("remaining") or 0)):
        lines.append(f"{run['remaining']} clusters wait for the next run.")
    lines.append("")
    if clusters:
        lines += ["| cluster | notes | outcome | why |", "|---|---|---|---|"]
        lines += [f"| {_cell(c.get('cluster_id', ''))} | {_cell(_names(c.get('notes') or []))} "  # type: ignore[arg-type]
                  f"| {_cell(c.get('outcome', ''))} | {_cell(c.get('reason', ''))} |" for c in clusters]
        lines.append("")
    for p in proposals:
        cluster = str(p.get("cluster_id", ""))
        lines += [f"### Proposal {cluster}: merge into {_code(p.get('name', ''))}", "",
                  f"Replaces {_names(p.get('replaces') or [])}. Reason: {_cell(p.get('reason', ''))}.", "",  # type: ignore[arg-type]
                  "Accept or reject it (a decision is a run of its own, listed above this one once made):", "",
                  "```sh",
                  f"gateway vault accept --project {project} {run_id} {cluster}",
                  f"gateway vault reject --project {project} {run_id} {cluster}",
                  "```", "", "The merged note:", "", *_fenced(str(p.get("content", ""))), ""]
    return lines


def render(project: str, runs: Sequence[Mapping[str, object]]) -> str:
    """The report of ``runs`` (newest first, as ``runs.runs`` lists them)."""
    lines = [f"# Weekly reflection of the vault {_code(project)}", "",
             f"The newest {RUNS} runs, newest first (`gateway vault reflections --project {project}` lists them too). "
             "Written by the KB after each run and each revert; edits to this file are overwritten.", ""]
    if not runs:
        lines += ["No run yet.", ""]
    for run in runs[:RUNS]:
        lines += _run(project, run)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(reports_dir: Path, project: str, runs: Sequence[Mapping[str, object]]) -> Path:
    """``reports_dir/reflection.md`` rewritten whole (atomically); its path. OSError when it cannot be."""
    reports_dir.mkdir(parents=True, exist_ok=True)
    path = reports_dir / FILE
    write_atomic(path, render(project, runs).encode("utf-8"))
    return path
