"""How a bench says what it found: progress lines on stderr, markdown tables, figure rows with their
goal and PASS/FAIL, and the figures' usual units. Nothing here decides a verdict: a bench passes
``ok`` in, this module only writes it down.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.stats import percentile


def say(text: str) -> None:
    """A progress line on stderr (stdout carries the tables)."""
    print(f"bench: {text}", file=sys.stderr, flush=True)


def table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A markdown table. ``align``: one letter per column, ``l`` or ``r`` (left when missing)."""
    rule = ["---:" if align[i:i + 1] == "r" else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def figures_table(rows: Iterable[Sequence[object]]) -> str:
    """The benches' usual table: figure, value, goal, result (PASS, FAIL or empty)."""
    return table(("figure", "value", "goal", "result"), rows)


def figure_verdicts(rows: Iterable[Sequence[str]]) -> list[str]:
    """One PASS/FAIL line per row of a figures table that has a result."""
    return [f"{d}: {a} = {b} (goal {c})" for a, b, c, d in rows if d]


def verdict(ok: bool, text: str) -> str:
    """A goal line: ``PASS text`` or ``FAIL text``."""
    return f"{'PASS' if ok else 'FAIL'} {text}"


@dataclass
class Figures:
    """A figures table being filled: rows of figure, value, goal and verdict, and notes under it."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, figure: str, value: str, goal: str = "", ok: bool | None = None) -> None:
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        self.rows.append((figure, value, goal, verdict))

    def table(self) -> str:
        return figures_table(self.rows)

    def verdicts(self) -> list[str]:
        return figure_verdicts(self.rows)


def fmt_ms(seconds: float) -> str:
    """Seconds as milliseconds with two decimals."""
    return f"{seconds * 1000:.2f} ms"


def latency_cell(values: Sequence[float], empty: str = "n/a") -> str:
    """Seconds as a table cell: ``p50 …, p99 …, max … (n=…)``; ``empty`` when there are none."""
    if not values:
        return empty
    return f"p50 {fmt_ms(percentile(values, 50))}, p99 {fmt_ms(percentile(values, 99))}, max {fmt_ms(max(values))} (n={len(values)})"
