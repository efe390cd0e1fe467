"""The graph as the console draws it (``graph.view``): missing nodes for dangling links, findings
naming their notes, and the bounds saying what they cut."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from services.kb.graph.build import compile_graph
from services.kb.graph.view import view

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def note(notes: Path, name: str, text: str) -> None:
    notes.mkdir(exist_ok=True)
    (notes / f"{name}.md").write_text(text)


def test_nodes_edges_and_findings(tmp_path: Path) -> None:
    note(tmp_path, "a", "---\ntitle: A\nconfidence: 0.2\nupdatedAt: 2026-05-30\nclaims:\n  - id: c1\n    text: the sky is blue\n---\n[[b]] [[ghost]]\n")
    note(tmp_path, "b", "---\nupdatedAt: 2025-01-01\nclaims:\n  - id: c1\n    text: the sky is green\n---\n[[a]]\n")
    note(tmp_path, "stale__c", "retired\n")
    shown = view(compile_graph(tmp_path, NOW))
    assert [(n.name, n.title, n.retired, n.missing) for n in shown.nodes] == [
        ("a", "A", False, False), ("b", "", False, False), ("stale__c", "", True, False), ("ghost", "", False, True)]
    assert shown.edges == [("a", "b"), ("a", "ghost"), ("b", "a")]
    assert [(f.notes, f.text) for f in shown.dangling] == [(("a", "ghost"), "links to [[ghost]], which no note is")]
    assert shown.contradictions[0].notes == ("a", "b")
    assert '"the sky is blue"' in shown.contradictions[0].text and "differs in text" in shown.contradictions[0].text
    assert [f.notes for f in shown.stale] == [("b",)] and "days ago (updatedAt 2025-01-01)" in shown.stale[0].text
    assert [(f.notes, f.text) for f in shown.low_confidence] == [(("a",), "page confidence 0.2")]
    assert shown.cut == () and shown.message == "" and (shown.total_nodes, shown.total_edges) == (4, 3)


def test_the_bounds_cut_nodes_edges_and_lists_and_say_so(tmp_path: Path) -> None:
    for n in range(5):
        note(tmp_path, f"n{n}", f"[[n{(n + 1) % 5}]] [[gone{n}]]\n")
    shown = view(compile_graph(tmp_path, NOW), max_nodes=3, max_findings=2)
    assert [n.name for n in shown.nodes] == ["n0", "n1", "n2"]
    assert shown.edges == [("n0", "n1"), ("n1", "n2")] and shown.total_nodes == 10 and shown.total_edges == 10
    assert len(shown.dangling) == 2
    assert shown.message == "3 of 10 nodes shown (2 of 10 links); 2 of 5 dangling links listed"
