"""Markdown renderings of a graph build: the five files under ``<vault>/reports/``.

Deterministic by construction: inputs arrive sorted, nothing reads a clock, and
no "generated at" line is written, so the same notes give the same bytes.
Note names are shown as code spans rather than ``[[links]]``, so the reports
add no edges to the vault's own graph in an editor such as Obsidian.

The Mermaid diagram numbers nodes ``n1``, ``n2``… in name order (missing link
targets included), so no note name ever becomes Mermaid syntax; labels are
quoted, with ``"``, ``#``, ``<``, ``>``, ``&`` and backticks as entity codes.
"""

from __future__ import annotations

from services.kb.graph.model import GraphReport, LowConfidence, StalePage

MAX_TEXT = 300
_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "`": "#96;"}


def render_all(report: GraphReport) -> dict[str, str]:
    """File name → content for every report."""
    return {
        "relationship-graph.md": render_graph(report),
        "backlinks.md": render_backlinks(report),
        "contradictions.md": render_contradictions(report),
        "stale-pages.md": render_stale(report.stale),
        "low-confidence.md": render_low_confidence(report.low_confidence),
    }


def render_graph(report: GraphReport) -> str:
    lines = ["# Relationship graph", "",
             f"{_count(len(report.nodes), 'note')}, {_count(len(report.edges), 'link')} "
             f"({len(report.dangling)} to missing notes), {_count(len(report.problems), 'problem')}.", "",
             "## Notes", ""]
    for node in report.nodes:
        marks = [m for m, on in (("retired", node.retired), ("skipped", node.skipped)) if on]
        title = f" — {_text(node.title)}" if node.title else ""
        lines.append(f"- {_code(node.name)}{title}" + (f" ({', '.join(marks)})" if marks else ""))
    lines += _empty_if(not report.nodes) + ["", "## Links", ""]
    for edge in report.edges:
        lines.append(f"- {_code(edge.source)} → {_code(edge.target)}" + (" (missing note)" if edge.dangling else ""))
    lines += _empty_if(not report.edges) + ["", "## Links to missing notes", ""]
    lines += [f"- {_code(e.source)} → {_code(e.target)}" for e in report.dangling] + _empty_if(not report.dangling)
    lines += ["", "## Diagram", "", *_mermaid(report), "", "## Problems", ""]
    lines += [f"- {_code(p.note)}: {_text(p.message)}" for p in report.problems] + _empty_if(not report.problems)
    return "\n".join(lines) + "\n"


def _mermaid(report: GraphReport) -> list[str]:
    retired = {node.name for node in report.nodes if node.retired}
    names = sorted({node.name for node in report.nodes} | {edge.target for edge in report.dangling})
    ids = {name: f"n{index}" for index, name in enumerate(names, 1)}
    missing = {edge.target for edge in report.dangling}
    lines = ["```mermaid", "graph LR"]
    for name in names:
        style = ":::retired" if name in retired else ":::missing" if name in missing else ""
        lines.append(f'  {ids[name]}["{_mermaid_label(name)}"]{style}')
    for edge in report.edges:
        arrow = "-.->" if edge.dangling else "-->"
        lines.append(f"  {ids[edge.source]} {arrow} {ids[edge.target]}")
    lines += ["  classDef retired fill:#eeeeee,stroke:#999999,color:#666666",
              "  classDef missing fill:#ffffff,stroke:#cc0000,stroke-dasharray:4 4", "```"]
    return lines


def render_backlinks(report: GraphReport) -> str:
    incoming: dict[str, list[str]] = {}
    for edge in report.edges:
        incoming.setdefault(edge.target, []).append(edge.source)
    lines = ["# Backlinks", "", "Each note, with the notes that link to it.", ""]
    for node in report.nodes:
        sources = incoming.get(node.name)
        lines.append(f"- {_code(node.name)} ← " + (", ".join(map(_code, sources)) if sources else "(none)"))
    lines += _empty_if(not report.nodes) + ["", "## Missing notes", "", "Link targets with no note.", ""]
    missing = sorted({edge.target for edge in report.dangling})
    lines += [f"- {_code(name)} ← " + ", ".join(map(_code, incoming[name])) for name in missing]
    lines += _empty_if(not missing)
    return "\n".join(lines) + "\n"


def render_contradictions(report: GraphReport) -> str:
    lines = ["# Contradictions", "",
             "Claims sharing an id whose text (ignoring case and spacing) or status differs.", ""]
    for item in report.contradictions:
        lines += [f"## {_code(item.claim_id)} — {' and '.join(item.diverges)} differ{'s' if len(item.diverges) == 1 else ''}", ""]
        for claim in item.claims:
            facts = [f"status: {_text(claim.status)}" if claim.status is not None else "no status"]
            if claim.confidence is not None:
                facts.append(f"confidence {_number(claim.confidence)}")
            quoted = f'"{_text(claim.text)}"' if claim.text is not None else "(no text)"
            lines.append(f"- {_code(claim.note)}: {quoted} ({', '.join(facts)})")
        lines.append("")
    if not report.contradictions:
        lines += ["_None._", ""]
    return "\n".join(lines[:-1]) + "\n"


def render_stale(stale: list[StalePage]) -> str:
    lines = ["# Stale pages", "",
             "Pages last updated 90 days or more before the build, oldest first "
             "(from `updatedAt`, else the file's modification time).", ""]
    lines += [f"- {_code(page.note)} — updated {page.updated_at.date().isoformat()} ({page.source})"
              for page in stale]
    lines += _empty_if(not stale)
    return "\n".join(lines) + "\n"


def render_low_confidence(low: list[LowConfidence]) -> str:
    pages = [item for item in low if item.claim_id is None]
    claims = [item for item in low if item.claim_id is not None]
    lines = ["# Low confidence", "", "Pages and claims with confidence below 0.5, lowest first.", "", "## Pages", ""]
    lines += [f"- {_code(item.note)} — {_number(item.confidence)}" for item in pages] + _empty_if(not pages)
    lines += ["", "## Claims", ""]
    for item in claims:
        quoted = f': "{_text(item.text)}"' if item.text is not None else ""
        lines.append(f"- {_code(item.note)} claim {_code(item.claim_id or '')} — {_number(item.confidence)}{quoted}")
    lines += _empty_if(not claims)
    return "\n".join(lines) + "\n"


def _empty_if(empty: bool) -> list[str]:
    return ["_None._"] if empty else []


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _number(value: float) -> str:
    return f"{value:g}"


def _text(value: str | None) -> str:
    """One line of free text: whitespace collapsed, bounded."""
    text = " ".join((value or "").split())
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _code(name: str) -> str:
    """A name as a Markdown code span that survives backticks and odd characters in it."""
    if "`" not in name and name.isprintable() and "  " not in name and name.strip() == name and name:
        return f"`{name}`"
    name = " ".join(name.split()) or "?"
    run = longest = 0
    for char in name:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if longest or name.startswith("`") or name.endswith("`") else ""
    return f"{fence}{pad}{name}{pad}{fence}"


def _mermaid_label(name: str) -> str:
    cleaned = "".join(" " if ord(c) < 32 or c == "\x7f" else c for c in name)
    return "".join(_MERMAID_ENTITIES.get(c, c) for c in cleaned)
