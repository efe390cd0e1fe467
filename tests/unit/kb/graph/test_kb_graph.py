"""Graph layer: edges, backlinks, contradictions, stale and low-confidence pages, problems, determinism."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.kb.graph.build import MAX_NOTE_BYTES, build_reports, compile_graph, compile_notes
from services.kb.graph.model import Edge, GraphReport

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
REPORTS = ["relationship-graph.md", "backlinks.md", "contradictions.md", "stale-pages.md", "low-confidence.md"]


def _iso(days_ago: int) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat()


def _note(notes: Path, name: str, text: str) -> None:
    (notes / f"{name}.md").write_text(text, encoding="utf-8")


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    notes = tmp_path / "vault" / "notes"
    notes.mkdir(parents=True)
    _note(notes, "alpha", f"""---
title: Alpha page
confidence: 0.49
updatedAt: {_iso(90)}
claims:
  - id: sky
    text: The sky is blue
    status: supported
  - id: water
    text: Water is wet
    status: supported
    confidence: 0.5
  - id: grass
    text: Grass is green
    status: supported
---
# Alpha

Links: [[beta]], [[gamma|the gamma page]], [[delta#Some section]], [[missing-note]].
Again [[beta]] (one edge), an example `[[not-a-link]]`, and ![[diagram.png]].

```
[[fenced-example]]
```
""")
    _note(notes, "beta", f"""---
title: "Beta page"
confidence: 0.5
updatedAt: {_iso(89)}
claims:
  - {{id: grass, text: "  grass IS   green ", status: Supported}}
  - id: water
    text: water is wet
    status: disputed
    confidence: 0.49
---
Back to [[alpha]].
""")
    _note(notes, "gamma", """---
title: Gamma
updatedAt: 2025-05-01
claims:
- id: sky
  text: The sky is green
  status: supported
---
See [[alpha#^block]] and [[retired]].
""")
    _note(notes, "delta", "No frontmatter, no links.\n")
    _note(notes, "stale__retired", "---\ntitle: Retired page\nconfidence: 0.1\nupdatedAt: 2000-01-01\n---\n[[alpha]]\n")
    _note(notes, "broken", "---\ntitle: [unclosed\nconfidence: 0.1\n---\nStill links to [[alpha]].\n")
    _note(notes, "badtypes", "---\ntitle: Bad types\nconfidence: high\nclaims: not a list\nupdatedAt: yesterday\n---\n")
    _note(notes, "unterminated", "---\ntitle: Never closed\n[[beta]]\n")
    return notes


def _mtime_days_ago(days: int) -> Callable[[Path], float]:
    def mtime(path: Path) -> float:
        return (NOW - timedelta(days=days)).timestamp()
    return mtime


def _build(notes: Path, mtime_days: int = 1) -> GraphReport:
    return build_reports(notes, notes.parent / "reports", NOW, mtime=_mtime_days_ago(mtime_days))


def _read(notes: Path, name: str) -> str:
    return (notes.parent / "reports" / name).read_text(encoding="utf-8")


def test_edges_resolve_label_section_and_retired_forms(notes: Path) -> None:
    report = _build(notes)
    assert report.edges == [
        Edge("alpha", "beta", False),
        Edge("alpha", "delta", False),
        Edge("alpha", "gamma", False),
        Edge("alpha", "missing-note", True),
        Edge("beta", "alpha", False),
        Edge("broken", "alpha", False),
        Edge("gamma", "alpha", False),
        Edge("gamma", "stale__retired", False),  # [[retired]] reaches its retired twin
        Edge("stale__retired", "alpha", False),
        Edge("unterminated", "beta", False),
    ]
    assert report.dangling == [Edge("alpha", "missing-note", True)]
    nodes = {node.name: node for node in report.nodes}
    assert sorted(nodes) == ["alpha", "badtypes", "beta", "broken", "delta", "gamma", "stale__retired", "unterminated"]
    assert nodes["stale__retired"].retired and not nodes["alpha"].retired
    assert nodes["alpha"].title == "Alpha page" and nodes["delta"].title is None


def test_relationship_graph_lists_every_edge_and_marks_dangling(notes: Path) -> None:
    report = _build(notes)
    text = _read(notes, "relationship-graph.md")
    links = text.split("## Links\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert links == [f"- `{e.source}` → `{e.target}`" + (" (missing note)" if e.dangling else "") for e in report.edges]
    assert "- `alpha` — Alpha page\n" in text
    assert "- `stale__retired` — Retired page (retired)\n" in text
    assert "## Links to missing notes\n\n- `alpha` → `missing-note`\n" in text


def test_mermaid_block_has_every_edge(notes: Path) -> None:
    report = _build(notes)
    text = _read(notes, "relationship-graph.md")
    block = re.search(r"```mermaid\ngraph LR\n(.*?)\n```", text, re.S)
    assert block is not None
    ids = dict(re.findall(r'^  (n\d+)\["([^"]*)"\]', block.group(1), re.M))
    by_label = {label: node_id for node_id, label in ids.items()}
    assert set(by_label) == {n.name for n in report.nodes} | {"missing-note"}
    arrows = set(re.findall(r"^  (n\d+) (-->|-\.->) (n\d+)$", block.group(1), re.M))
    expected = {(by_label[e.source], "-.->" if e.dangling else "-->", by_label[e.target]) for e in report.edges}
    assert arrows == expected
    assert f'  {by_label["missing-note"]}["missing-note"]:::missing' in block.group(1)


def test_mermaid_labels_are_escaped(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    _note(notes, 'odd "name" #1 <b>', "[[plain]]\n")
    _note(notes, "plain", "")
    build_reports(notes, tmp_path / "reports", NOW)
    text = (tmp_path / "reports" / "relationship-graph.md").read_text()
    assert 'n1["odd #quot;name#quot; #35;1 #lt;b#gt;"]' in text
    assert "  n1 --> n2\n" in text


def test_backlinks(notes: Path) -> None:
    _build(notes)
    text = _read(notes, "backlinks.md")
    assert "- `alpha` ← `beta`, `broken`, `gamma`, `stale__retired`\n" in text
    assert "- `beta` ← `alpha`, `unterminated`\n" in text
    assert "- `delta` ← `alpha`\n" in text
    assert "- `badtypes` ← (none)\n" in text
    assert "## Missing notes\n\nLink targets with no note.\n\n- `missing-note` ← `alpha`\n" in text


def test_contradictions_text_and_status_but_not_whitespace_or_case(notes: Path) -> None:
    report = _build(notes)
    found = {c.claim_id: c for c in report.contradictions}
    assert sorted(found) == ["sky", "water"]  # "grass" differs only in spacing and case
    assert found["sky"].diverges == ("text",)
    assert [(c.note, c.text) for c in found["sky"].claims] == [("alpha", "The sky is blue"), ("gamma", "The sky is green")]
    assert found["water"].diverges == ("status",)
    text = _read(notes, "contradictions.md")
    assert "## `sky` — text differs\n\n- `alpha`: \"The sky is blue\" (status: supported)\n" in text
    assert "- `gamma`: \"The sky is green\" (status: supported)\n" in text
    assert "## `water` — status differs\n" in text
    assert "- `beta`: \"water is wet\" (status: disputed, confidence 0.49)\n" in text
    assert "grass" not in text


def test_contradiction_within_one_note(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    _note(notes, "solo", "---\nclaims:\n  - {id: x, text: one}\n  - {id: x, text: two}\n---\n")
    report = build_reports(notes, tmp_path / "reports", NOW)
    assert [(c.claim_id, c.diverges, len(c.claims)) for c in report.contradictions] == [("x", ("text",), 2)]


def test_stale_boundary_is_90_days(notes: Path) -> None:
    report = _build(notes, mtime_days=1)
    assert [(s.note, s.source, s.age_days) for s in report.stale] == [("alpha", "updatedAt", 90)]
    text = _read(notes, "stale-pages.md")
    assert "- `alpha` — updated 2025-03-03 (updatedAt)\n" in text
    assert "`beta`" not in text and "stale__retired" not in text  # 89 days; retired notes are out of service


def test_stale_falls_back_to_mtime(notes: Path) -> None:
    report = _build(notes, mtime_days=120)
    stale = {s.note: s.source for s in report.stale}
    # no (valid) updatedAt: the injected mtime decides
    assert stale == {"alpha": "updatedAt", "badtypes": "file mtime", "broken": "file mtime",
                     "delta": "file mtime", "unterminated": "file mtime"}


def test_low_confidence_boundary_is_half(notes: Path) -> None:
    report = _build(notes)
    assert [(x.note, x.claim_id, x.confidence) for x in report.low_confidence] == [
        ("alpha", None, 0.49), ("beta", "water", 0.49)]
    text = _read(notes, "low-confidence.md")
    assert "## Pages\n\n- `alpha` — 0.49\n\n## Claims\n\n- `beta` claim `water` — 0.49: \"water is wet\"\n" in text


def test_malformed_frontmatter_is_reported_not_raised(notes: Path) -> None:
    report = _build(notes)
    problems = {(p.note, p.message) for p in report.problems}
    assert ("broken", "frontmatter: line 3: while parsing a flow sequence, did not find expected ',' or ']' (frontmatter ignored)") in problems
    assert ("unterminated", "frontmatter: no closing '---' line (frontmatter ignored)") in problems
    bad = sorted(message for note, message in problems if note == "badtypes")
    assert bad == [
        "claims: expected a list, got text (ignored)",
        "confidence: expected a number from 0 to 1, got text (ignored)",
        "updatedAt: expected an ISO date or datetime, got 'yesterday' (ignored)",
    ]
    assert "- `broken`: frontmatter: line 3: while parsing a flow sequence, did not find expected ',' or ']' (frontmatter ignored)\n" in _read(
        notes, "relationship-graph.md")
    assert not any(x.note == "broken" for x in report.low_confidence)  # its frontmatter was ignored


def test_oversized_note_is_skipped_and_reported(notes: Path) -> None:
    _note(notes, "huge", "[[alpha]] [[nowhere]]\n" + "x" * MAX_NOTE_BYTES)
    _note(notes, "limit", "[[alpha]]\n" + "x" * (MAX_NOTE_BYTES - len("[[alpha]]\n")))
    assert (notes / "limit.md").stat().st_size == MAX_NOTE_BYTES
    _note(notes, "links-to-huge", "[[huge]]\n")
    report = _build(notes)
    assert ("huge", "larger than 512 KB (skipped)") in {(p.note, p.message) for p in report.problems}
    assert not any(e.source == "huge" for e in report.edges)
    assert Edge("limit", "alpha", False) in report.edges
    assert Edge("links-to-huge", "huge", False) in report.edges  # a skipped note still exists
    assert "- `huge` (skipped)\n" in _read(notes, "relationship-graph.md")


def test_oversized_frontmatter_is_ignored(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    _note(notes, "big", "---\ntitle: Big\nfiller: " + "y" * (64 * 1024) + "\n---\n[[other]]\n")
    report = build_reports(notes, tmp_path / "reports", NOW)
    assert [(p.note, p.message) for p in report.problems] == [("big", "frontmatter: larger than 64 KB (ignored)")]
    assert report.nodes[0].title is None
    assert report.edges == [Edge("big", "other", True)]  # the body still counts


def test_second_run_is_byte_identical_and_writes_nothing(notes: Path) -> None:
    first = _build(notes)
    assert first.written == REPORTS
    reports = notes.parent / "reports"
    before = {name: ((reports / name).read_bytes(), (reports / name).stat().st_mtime_ns) for name in REPORTS}
    for name in REPORTS:
        os.utime(reports / name, ns=(1, 1))  # a rewrite would move the mtime off this marker
    second = _build(notes)
    assert second.written == []
    for name in REPORTS:
        assert (reports / name).read_bytes() == before[name][0]
        assert (reports / name).stat().st_mtime_ns == 1
    _note(notes, "delta", "Now links to [[gamma]].\n")
    third = _build(notes)
    assert third.written == ["relationship-graph.md", "backlinks.md"]


def test_same_notes_same_bytes_in_another_folder(notes: Path, tmp_path: Path) -> None:
    _build(notes)
    copy = tmp_path / "copy" / "notes"
    copy.mkdir(parents=True)
    for path in sorted(notes.iterdir(), reverse=True):  # a different creation order
        (copy / path.name).write_bytes(path.read_bytes())
    _build(copy)
    for name in REPORTS:
        assert (copy.parent / "reports" / name).read_bytes() == (notes.parent / "reports" / name).read_bytes()


def test_not_notes_are_ignored(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    _note(notes, "real", "[[secret]]\n")
    (notes / ".hidden.md").write_text("[[real]]\n")
    (notes / "readme.txt").write_text("[[real]]\n")
    (tmp_path / "secret-outside.md").write_text("[[real]]\n")
    os.symlink(tmp_path / "secret-outside.md", notes / "secret.md")
    report = build_reports(notes, tmp_path / "reports", NOW)
    assert [n.name for n in report.nodes] == ["real"]
    assert report.edges == [Edge("real", "secret", True)]
    assert [(p.note, p.message) for p in report.problems] == [("secret", "symbolic link (not followed; not a note)")]


def test_empty_or_missing_vault(tmp_path: Path) -> None:
    report = build_reports(tmp_path / "nothing", tmp_path / "reports", NOW)
    assert report.nodes == [] and report.written == REPORTS
    assert "0 notes, 0 links (0 to missing notes), 0 problems." in (tmp_path / "reports" / "relationship-graph.md").read_text()


def test_reports_never_go_into_the_notes_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must not be the notes folder"):
        build_reports(tmp_path, tmp_path, NOW)
    assert list(tmp_path.iterdir()) == []


def test_invalid_utf8_is_reported(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bytes.md").write_bytes(b"---\ntitle: ok\n---\n\xff [[x]]\n")
    report = build_reports(notes, tmp_path / "reports", NOW)
    assert report.problems[0].message == "not valid UTF-8 (undecodable bytes replaced)"
    assert report.edges == [Edge("bytes", "x", True)]


def test_notes_given_as_bytes_compile_as_their_files_do(notes: Path) -> None:
    """``compile_notes`` (a vault kept in a database) gives the graph ``compile_graph`` gives the same notes
    as files, the last change standing for the mtime."""
    changed = (NOW - timedelta(days=100)).timestamp()
    files = compile_graph(notes, NOW, mtime=lambda _: changed)
    given = [(p.stem, p.read_bytes(), changed) for p in sorted(notes.glob("*.md"))]
    rows = compile_notes(given, NOW)
    assert (rows.nodes, rows.edges, rows.dangling, rows.contradictions, rows.low_confidence) == (
        files.nodes, files.edges, files.dangling, files.contradictions, files.low_confidence)
    assert [(s.note, s.updated_at) for s in rows.stale] == [(s.note, s.updated_at) for s in files.stale]
    assert {s.source for s in rows.stale} <= {"updatedAt", "last change"} and rows.stale
