"""Properties of the frontmatter parsers under ``services/kb/``.

- ``frontmatter.load_frontmatter`` (the one YAML reader of headers): on any text it returns a
  mapping or raises ``FrontmatterError`` with a line inside the text, never anything else (no
  ``RecursionError``, ``IndexError``…); and what a small YAML emitter writes from a value
  (block mappings and sequences, flow collections, quoted and plain scalars) reads back as
  that value;
- ``graph.parse.parse_note`` never raises, and takes its links from the body only;
- ``entries.parse_frontmatter`` (the indexer's) never raises and ends the frontmatter on its
  closing line, so the body's line numbers, the chunks the indexer makes of the body, and
  ``vault.retirement``'s byte offset (where a retirement marker goes) are right, CRLF included.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from services.kb.graph.parse import extract_links, parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter as indexer_frontmatter
from services.kb.index.frontmatter import FrontmatterError, Value, load_frontmatter
from services.kb.index.indexer_parse import body_chunks
from services.kb.vault.retirement import add_marker, strip_marker

YAMLISH = st.sampled_from(
    ["key", "k2", ": ", ":", "- ", "-", "  ", "    ", "\t", "[", "]", "{", "}", ",", "'", '"', "\\", "\\u00e9", "\\x4",
     "|", ">", "|-", ">+", "#", " #", "&a", "*a", "!tag", "?", "%", "@", "`", "null", "~", "true", "1", "007", "1e3",
     ".inf", "-.nan", "x", "é", "\n", "\n", "\n  ", "\n- ", "\n    - ", "---", "..."]
)
DOCUMENTS = st.one_of(
    st.lists(YAMLISH, max_size=40).map("".join),
    st.text(max_size=80),
    st.integers(1, 80).map(lambda n: "k:\n" + "".join("  " * i + "- \n" for i in range(n))),  # deep nesting
    st.integers(1, 80).map(lambda n: "k: " + "[" * n + "]" * n),
)


@given(text=DOCUMENTS, first=st.integers(1, 5))
def test_any_text_is_a_mapping_or_a_frontmatter_error_on_one_of_its_lines(text: str, first: int) -> None:
    try:
        value = load_frontmatter(text, first_line=first)
    except FrontmatterError as exc:
        assert first <= exc.line < first + len(text.split("\n")), (exc.line, str(exc))
        assert str(exc).startswith(f"line {exc.line}: ")
    else:
        assert isinstance(value, dict)


# --- a small emitter: the value, as YAML the reader reads ------------------------------------

KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64), st.text(max_size=20),
)


def _values(depth: int) -> st.SearchStrategy[Value]:
    if depth == 0:
        return SCALARS
    inner = _values(depth - 1)
    return st.one_of(SCALARS, st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4))


def _scalar(value: Value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # finite: 1.5, 1e+16, -0.0
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)  # a double-quoted YAML scalar: the reader reads \" \\ \n and \u escapes


def _flow(value: Value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return _scalar(value)


def _block(value: Value, indent: int, flow_leaves: bool) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    items = value.items() if isinstance(value, dict) else ((None, v) for v in value)  # type: ignore[union-attr]
    for key, item in items:
        lead = f"{pad}{key}:" if key is not None else f"{pad}-"
        if isinstance(item, (list, dict)) and item and not flow_leaves:
            out.append(lead)
            out.extend(_block(item, indent + 2, flow_leaves))
        else:
            out.append(f"{lead} {_flow(item)}")
    return out


@given(value=st.dictionaries(KEYS, _values(3), max_size=5), flow_leaves=st.booleans())
def test_what_the_emitter_writes_reads_back_as_the_value(value: dict[str, Value], flow_leaves: bool) -> None:
    text = "\n".join(_block(value, 0, flow_leaves))
    assert _same(load_frontmatter(text), value), text


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        return isinstance(got, float) and (got == want or math.isclose(got, want)) and math.copysign(1, got) == math.copysign(1, want)
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return type(got) is type(want) and got == want


# --- where the body starts ------------------------------------------------------------------

FM_LINES = st.lists(st.one_of(st.from_regex(r"[a-z]{1,6}: [a-z0-9 \[\]]{0,10}", fullmatch=True), st.just("")), max_size=8)
BODY = st.lists(st.sampled_from(["# Title", "- item [[alpha]]", "text [[beta|b]] here", "", "---", "```", "[[gamma]]"]),
                max_size=8)


@given(fm=FM_LINES, body=BODY, crlf=st.booleans(), links_in_fm=st.booleans())
def test_the_body_starts_after_the_closing_line(fm: list[str], body: list[str], crlf: bool, links_in_fm: bool) -> None:
    eol = "\r\n" if crlf else "\n"
    front = [*fm, "see: [[not-a-link]]"] if links_in_fm else fm
    text = eol.join(["---", *front, "---", *body]) + (eol if body else "")
    lines = text.replace("\r\n", "\n").split("\n")[:-1] if body else text.replace("\r\n", "\n").split("\n")
    found = indexer_frontmatter(lines)
    assert found.end_line == len(front) + 2  # the closing "---" is that line (1-based)
    assert lines[found.end_line:] == body
    for chunk in body_chunks(lines, found, 8, 2):
        assert chunk.start_line > found.end_line
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    data, marker = text.encode("utf-8"), "<!-- retired: 2026-01-01T00:00:00Z reason: x -->"
    marked = add_marker(data, marker)
    head = eol.join(["---", *front, "---"])
    if body:  # the marker is the line right after the closing one
        assert marked == f"{head}{eol}{marker}{eol}".encode() + data[len(head) + len(eol):]
    else:  # the note is its frontmatter, no final line end
        assert marked == f"{head}{eol}{marker}".encode()
    assert strip_marker(marked) == (data, True)
    assert indexer_frontmatter(split_lines(marked.decode())).end_line == found.end_line  # it still counts
    note = parse_note("n", text)
    assert note.links == extract_links(eol.join(body))
    assert "not-a-link" not in note.links


@given(text=st.one_of(st.text(max_size=120), st.lists(st.one_of(YAMLISH, BODY.map("\n".join)), max_size=20).map("".join)))
def test_parsing_a_note_never_raises(text: str) -> None:
    for candidate in (text, "---\n" + text, "---\n" + text + "\n---\n[[x]]"):
        note = parse_note("n", candidate)
        assert all(isinstance(p, str) for p in note.problems)
        indexer_frontmatter(candidate.split("\n"))
