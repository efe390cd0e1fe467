"""A graph build as a client draws it: nodes, edges and the reports as findings, within bounds.

``compile_graph`` gives every edge and finding of a vault; a page that draws the graph and
lists the reports needs them bounded and each finding worded once. ``view`` keeps at most
``MAX_NODES`` nodes (notes first, by name, then the targets of dangling links, which become
``missing`` nodes), the edges between the nodes kept, and at most ``MAX_FINDINGS`` findings
of each report, and says in ``message`` what it cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from services.kb.graph.model import Contradiction, GraphReport, LowConfidence, StalePage

MAX_NODES: Final = 2_000
MAX_FINDINGS: Final = 500
MAX_QUOTE: Final = 120  # characters of a claim's text quoted in a finding


@dataclass(frozen=True)
class ViewNode:
    name: str
    title: str
    retired: bool
    missing: bool


@dataclass(frozen=True)
class Finding:
    notes: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class GraphView:
    nodes: list[ViewNode]
    edges: list[tuple[str, str]]
    contradictions: list[Finding]
    stale: list[Finding]
    dangling: list[Finding]
    low_confidence: list[Finding]
    problems: list[Finding]
    total_nodes: int
    total_edges: int
    cut: tuple[str, ...]  # what was cut, one phrase each

    @property
    def message(self) -> str:
        return "; ".join(self.cut)


def view(report: GraphReport, *, max_nodes: int = MAX_NODES, max_findings: int = MAX_FINDINGS) -> GraphView:
    """``report`` bounded and worded (module docstring)."""
    notes = [ViewNode(n.name, n.title or "", n.retired, False) for n in report.nodes]
    names = {n.name for n in notes}
    missing = sorted({e.target for e in report.dangling} - names)
    every = notes + [ViewNode(name, "", False, True) for name in missing]
    kept = every[:max_nodes]
    kept_names = {n.name for n in kept}
    edges = [(e.source, e.target) for e in report.edges if e.source in kept_names and e.target in kept_names]
    cut: list[str] = []
    if len(every) > len(kept):
        cut.append(f"{len(kept)} of {len(every)} nodes shown ({len(edges)} of {len(report.edges)} links)")

    def bounded(what: str, found: list[Finding]) -> list[Finding]:
        if len(found) > max_findings:
            cut.append(f"{max_findings} of {len(found)} {what} listed")
        return found[:max_findings]

    return GraphView(
        nodes=kept,
        edges=edges,
        contradictions=bounded("contradictions", [_contradiction(c) for c in report.contradictions]),
        stale=bounded("stale notes", [_stale(s) for s in report.stale]),
        dangling=bounded("dangling links", [Finding((e.source, e.target), f"links to [[{e.target}]], which no note is")
                                            for e in report.dangling]),
        low_confidence=bounded("low-confidence findings", [_low(x) for x in report.low_confidence]),
        problems=bounded("problems", [Finding((p.note,), p.message) for p in report.problems]),
        total_nodes=len(every),
        total_edges=len(report.edges),
        cut=tuple(cut),
    )


def _quote(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= MAX_QUOTE else flat[: MAX_QUOTE - 1] + "…"


def _contradiction(c: Contradiction) -> Finding:
    notes = tuple(dict.fromkeys(claim.note for claim in c.claims))
    said = "; ".join(
        f"{claim.note}: " + ", ".join(part for part in (
            f'"{_quote(claim.text)}"' if claim.text is not None else "",
            f"status {_quote(claim.status)}" if claim.status is not None else "") if part)
        for claim in c.claims)
    return Finding(notes, f"claim {c.claim_id} differs in {' and '.join(c.diverges)}: {said}")


def _stale(s: StalePage) -> Finding:
    return Finding((s.note,), f"last updated {s.age_days} days ago ({s.source} {s.updated_at.date().isoformat()})")


def _low(x: LowConfidence) -> Finding:
    if x.claim_id is None:
        return Finding((x.note,), f"page confidence {x.confidence:g}")
    return Finding((x.note,), f'claim {x.claim_id} confidence {x.confidence:g}: "{_quote(x.text)}"')
