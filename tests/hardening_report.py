"""The hardening table that the tests write themselves (``bench/results/hardening.md``).

Each hardening test calls ``record(section, ...)`` with the figures it
measured; every section is kept as one JSON file under
``bench/results/hardening/`` and the Markdown table is rebuilt from all of
them, so a run of one test module updates its own row and keeps the others.
docs/hardening.md "Hardening: what every `make test` proves" says what the
tests prove; the figures stay in this generated file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"
FRAGMENTS = RESULTS / "hardening"
TABLE = RESULTS / "hardening.md"

COLUMNS = (
    ("rounds", "rounds"),
    ("kills_mid_write", "kills mid-write"),
    ("acknowledged", "acknowledged writes"),
    ("lost", "lost"),
    ("torn", "torn"),
    ("inputs", "inputs tried"),
    ("errors_5xx", "5xx"),
    ("longest_ms", "longest response (ms)"),
)
KNOWN = {key for key, _ in COLUMNS} | {"notes"}


def record(section: str, **figures: Any) -> None:
    """Store ``section``'s figures (keys of COLUMNS, plus ``notes``) and rebuild the table."""
    unknown = set(figures) - KNOWN
    if unknown:
        raise ValueError(f"unknown hardening figures: {sorted(unknown)}")
    FRAGMENTS.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in section.lower()).strip("-")
    fragment = FRAGMENTS / f"{slug}.json"
    tmp = fragment.with_suffix(f".{os.getpid()}.part")
    tmp.write_text(json.dumps({"section": section, **figures}, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, fragment)
    _rebuild()


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _rebuild() -> None:
    rows = []
    for path in sorted(FRAGMENTS.glob("*.json")):
        try:
            rows.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    lines = [
        "<!-- written by the hardening tests (tests/hardening_report.py); do not edit by hand -->",
        "",
        "| what | " + " | ".join(title for _, title in COLUMNS) + " | notes |",
        "|---|" + "---|" * (len(COLUMNS) + 1),
    ]
    for row in rows:
        cells = [_cell(row.get(key)) for key, _ in COLUMNS]
        lines.append(f"| {row['section']} | " + " | ".join(cells) + f" | {row.get('notes', '')} |")
    tmp = TABLE.with_suffix(f".{os.getpid()}.part")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, TABLE)
