"""Prometheus' naming rules for an exposition, checked in Python (what ``promtool check metrics`` checks).

The rules are those of Prometheus' metric linter (promlint), from its documented checks and the
naming conventions page, written here so the tests need no promtool: every family has help
text; a counter's name ends in ``_total`` and nothing else's does; ``_bucket``, ``_count``,
``_sum`` and the ``le``/``quantile`` labels belong to histograms and summaries; names hold no
metric type, no colon, no camelCase (labels neither), no abbreviated unit (``ms``, ``kb``…) and
no non-base unit (``milliseconds``, ``kilobytes``…); and no family or series appears twice.
``promtool()`` runs the real linter when it is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

ABBREVIATED_UNITS = frozenset(("s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"))
# A non-base unit, and the base unit a name should use instead.
NON_BASE_UNITS = {
    **dict.fromkeys(("milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days", "weeks"), "seconds"),
    **dict.fromkeys(("kilobytes", "megabytes", "gigabytes", "terabytes", "petabytes", "kibibytes", "mebibytes",
                     "gibibytes", "bits"), "bytes"),
    **dict.fromkeys(("percent", "percentage"), "ratio"),
    "fahrenheit": "celsius",
    **dict.fromkeys(("kilometers", "centimeters", "millimeters"), "meters"),
    **dict.fromkeys(("kilograms", "milligrams"), "grams"),
}
TYPES_IN_NAMES = frozenset(("counter", "gauge", "histogram", "summary", "untyped"))
SNAKE_CASE = re.compile(r"[a-z_][a-z0-9_]*")
SAMPLE = re.compile(r"([^\s{]+)(?:\{(.*)\})?\s+\S+")
LABEL_NAME = re.compile(r'([^=,\s]+)="(?:[^"\\]|\\.)*"')
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str | None = None
    series: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)  # (sample name, label names, labels)


def parse(text: str) -> tuple[dict[str, Family], list[str]]:
    """The families of a text exposition, and the problems of its form (duplicates, orphan samples)."""
    families: dict[str, Family] = {}
    problems: list[str] = []
    typed: set[str] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _, kind, name, *rest = line.split(" ", 3)
            family = families.setdefault(name, Family(name))
            if kind == "TYPE":
                if name in typed:
                    problems.append(f"{name} has more than one TYPE line")
                typed.add(name)
                family.type = rest[0] if rest else "untyped"
            else:
                family.help = rest[0] if rest else ""
            continue
        if line.startswith("#"):
            continue
        match = SAMPLE.fullmatch(line.strip())
        if match is None:
            problems.append(f"cannot read the sample line {line!r}")
            continue
        sample, labels = match.group(1), match.group(2) or ""
        owner = _owner(sample, families)
        if owner is None:
            problems.append(f"{sample} has no TYPE line")
            continue
        owner.series.append((sample, tuple(LABEL_NAME.findall(labels)), labels))
    return families, problems


def _owner(sample: str, families: dict[str, Family]) -> Family | None:
    if sample in families:
        return families[sample]
    for suffix in HISTOGRAM_SUFFIXES:
        base = sample.removesuffix(suffix)
        if base != sample and base in families and families[base].type in ("histogram", "summary"):
            return families[base]
    return None


def lint(text: str) -> list[str]:
    """Every problem of ``text`` (a Prometheus text exposition), one line each naming the metric."""
    families, problems = parse(text)
    for family in families.values():
        problems += [f"{family.name} {problem}" for problem in _family_problems(family)]
    return problems


def _family_problems(family: Family) -> list[str]:
    name, kind = family.name, family.type
    out = []
    if not family.help:
        out.append("has no help text")
    if kind == "counter" and not name.endswith("_total"):
        out.append('is a counter: its name should end in "_total"')
    if kind != "counter" and name.endswith("_total"):
        out.append('is not a counter: its name should not end in "_total"')
    if kind != "histogram" and name.endswith("_bucket"):
        out.append('is not a histogram: its name should not end in "_bucket"')
    if kind not in ("histogram", "summary") and name.endswith(("_count", "_sum")):
        out.append('is not a histogram or summary: its name should not end in "_count" or "_sum"')
    if ":" in name:
        out.append("has a colon in its name (colons are for recording rules)")
    if not SNAKE_CASE.fullmatch(name):
        out.append("is not written in snake_case")
    parts = name.split("_")
    out += [f"has the metric type {part!r} in its name" for part in parts if part in TYPES_IN_NAMES]
    out += [f"has the abbreviated unit {part!r} in its name" for part in parts if part in ABBREVIATED_UNITS]
    out += [f"uses the unit {part!r}: use the base unit {NON_BASE_UNITS[part]!r}" for part in parts if part in NON_BASE_UNITS]
    seen: set[tuple[str, str]] = set()
    for sample, labels, raw in family.series:
        if (sample, raw) in seen:
            out.append(f"has the series {sample}{{{raw}}} twice")
        seen.add((sample, raw))
        for label in labels:
            if not SNAKE_CASE.fullmatch(label):
                out.append(f"has the label {label!r}, not written in snake_case")
            if label == "le" and kind != "histogram":
                out.append('is not a histogram: only histograms have the label "le"')
            if label == "quantile" and kind != "summary":
                out.append('is not a summary: only summaries have the label "quantile"')
    return sorted(set(out))


def promtool() -> str | None:
    """The path of Prometheus' ``promtool``, when it is installed (Debian's package ``prometheus`` has it)."""
    return shutil.which("promtool")


def promtool_problems(path: str, text: str) -> tuple[int, str]:
    """``promtool check metrics`` on ``text``: its exit status and everything it printed."""
    done = subprocess.run([path, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()
