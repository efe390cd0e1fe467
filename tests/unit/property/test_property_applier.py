"""Properties of the applier's guards and of the structure they rest on (``services/dreaming``:
``applier.py``, ``sections.py``, ``blocks.py``).

Whatever the files and the proposals (anchors cut anywhere in the text, contents that open
headings or code fences, adds, replaces and removes in any order):

- ``plan`` never raises; every proposal gets one result, in order;
- every applied splice changes only its span: replaying the edits on the original texts, each
  finds exactly what it says it removed at its offset (the anchor, plus the line end of a
  remove of whole lines), its hashes are those of the text before and after, and the replay
  ends on the plan's texts;
- no pinned line (User, Feedback, Preferences, Profile) is removed or leaves its section;
- the bounded loss holds: a run deletes at most 25% of a file as it began (90% when it began
  over its budget), and never empties a file that was not empty;
- over budget nothing grows; under budget nothing is taken over it;
- for the passes that move entries (``blocks``): entries are disjoint whole lines, a tidied set
  of moves keeps every character exactly once, never moves a pinned line, and every entry left
  keeps its first line, its heading path and whether it may move.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.dreaming.apply import sections
from services.dreaming.apply.applier import LOSS_OVER_BUDGET, LOSS_UNDER_BUDGET, plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.edit import Edit
from services.dreaming.model.values import DURABLE, EPISODIC, MEMORY_FILES, OPS, Proposal
from services.dreaming.passes import blocks
from services.dreaming.passes.moves import Move, take

LINES = st.sampled_from([
    "# Memory", "## User", "## Feedback:", "### profile", "## Preferences", "## Notes", "### Sub", "#### Deep",
    "- fact a", "- fact b", "* star item", "1. first", "2) second", "  continued", "  - nested", "\t- tabbed",
    "paragraph text", "more text", "", "", "```", "~~~", "```python", "    code", "---", "text with ## inside",
    "- 2024-05-01 dated entry", "<!-- importance: 9 -->", "é 東京 emoji 🙂",
])


def _numbered(lines: list[str]) -> list[str]:
    """Most entries told apart (an anchor found more than once is never applied), headings kept."""
    return [f"{line} {n}" if line[:1] in "-*12pm" and n % 4 else line for n, line in enumerate(lines)]


# One fact in a file of blank lines: removing it would empty the file.
SPARSE = st.tuples(st.lists(st.sampled_from(["", " " * 12, " " * 30]), max_size=16), st.integers(0, 16)).map(
    lambda t: [*t[0][: t[1]], "- lone fact", *t[0][t[1] :]]
)
# Blocks (a paragraph, a list, a heading) one blank line apart: where removing entries may join two blocks.
BLOCK = st.one_of(
    st.lists(st.sampled_from(["- item", "- item", "  continued", "  - nested"]), min_size=1, max_size=4),
    st.lists(st.sampled_from(["paragraph", "more text"]), min_size=1, max_size=2),
    st.sampled_from([["## Notes"], ["## User"], ["```", "code", "```"]]),
)
BLOCKS = st.lists(BLOCK, max_size=8).map(lambda bs: [line for b in bs for line in [*b, ""]][:-1])
TEXTS = st.tuples(
    st.one_of(st.lists(LINES, max_size=30), SPARSE, BLOCKS).map(_numbered), st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
).map(lambda t: t[1].join(t[0]) + (t[1] if t[2] and t[0] else ""))


@st.composite
def proposals(draw: Any, texts: dict[str, str]) -> list[tuple[str, Proposal]]:
    """Ops whose anchors are mostly found: whole lines of the file, or any slice of it."""
    out = []
    for n in range(draw(st.integers(0, 8))):
        file = draw(st.sampled_from([*MEMORY_FILES, "MEMORY.md", "SOUL.md"]))
        text = texts.get(file, "")
        lines = text.splitlines(keepends=True)
        how = draw(st.sampled_from(["lines", "lines", "slice", "other"]))
        if how == "lines" and lines:
            first = draw(st.integers(0, len(lines) - 1))
            target = "".join(lines[first : draw(st.integers(first + 1, min(len(lines), first + 2)))])
            target = target if draw(st.booleans()) else target.rstrip("\r\n") or target
        elif how == "slice" and text:
            start = draw(st.integers(0, len(text) - 1))
            target = text[start : draw(st.integers(start + 1, min(len(text), start + 80)))]
        else:
            target = draw(st.one_of(LINES, st.text(max_size=10)))
        content = draw(st.lists(LINES, min_size=1, max_size=4).map("\n".join))
        op = draw(st.sampled_from(OPS))
        tier = draw(st.sampled_from([DURABLE] * 5 + [EPISODIC]))
        topic = draw(st.sampled_from(["", "deploys", "Bad Topic"]))
        out.append((f"run/{n + 1}", Proposal(op=op, file=file, target=target, content=content, topic=topic, tier=tier)))
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_edit(edit: Edit, current: str, proposal: Proposal) -> str:
    start, end = edit.offset, edit.offset + len(edit.removed)
    assert current[start:end] == edit.removed, "an edit removed something else than it says"
    assert edit.hash_before == _sha(current)
    new = current[:start] + edit.inserted + current[end:]
    assert edit.hash_after == _sha(new)
    variants = {proposal.target, proposal.target.replace("\r\n", "\n").replace("\n", "\r\n")}
    if edit.kind == "replace":
        assert edit.removed in variants and edit.inserted == proposal.content
    elif edit.kind == "remove":
        assert edit.inserted == ""
        assert any(edit.removed in (v, v + "\n", v + "\r\n") for v in variants)
    else:
        assert edit.kind == "add" and edit.removed == ""
        assert edit.inserted.strip("\n") == proposal.content.strip("\n")
    return new


@settings(max_examples=500)
@given(data=st.data(), memory=TEXTS, user=TEXTS, budget=st.sampled_from([0, 40, 120, 400, 100_000]),
       routing=st.booleans())
def test_plan_keeps_every_guard_whatever_the_proposals(data: Any, memory: str, user: str, budget: int, routing: bool) -> None:
    texts = {"MEMORY.md": memory, "USER.md": user}
    ops = data.draw(proposals(texts))
    budgets = Budgets(memory_chars=budget, user_chars=budget // 2, write_routing=routing)
    result = plan(texts, ops, budgets)
    assert [r.op_id for r in result.results] == [op_id for op_id, _ in ops]
    applied = [r for r in result.results if r.status == "applied"]
    assert len(applied) == len(result.edits) + len(result.appends)
    by_id = dict(ops)
    current = dict(texts)
    removed = dict.fromkeys(MEMORY_FILES, 0)
    for edit in result.edits:
        current[edit.file] = _check_edit(edit, current[edit.file], by_id[edit.op_id])
        removed[edit.file] += len(edit.removed)
    assert current == result.texts
    for _, _, op_result in result.appends:
        assert routing and op_result.proposal.tier == EPISODIC
    for name in MEMORY_FILES:
        before, after, limit = texts[name], result.texts[name], budgets.of(name)
        over = limit > 0 and len(before) > limit
        assert removed[name] <= int(len(before) * (LOSS_OVER_BUDGET if over else LOSS_UNDER_BUDGET)), "bounded loss"
        assert not before.strip() or after.strip(), "a non-empty file was emptied"
        assert not sections.unpins(before, after), "a pinned line was removed or left its section"
        if over:
            assert len(after) <= len(before), "a file over budget grew"
        elif limit > 0:
            assert len(after) <= limit, "a file under budget was taken over it"


@settings(max_examples=400)
@given(data=st.data(), text=TEXTS)
def test_moving_entries_keeps_every_character_and_every_entry_left(data: Any, text: str) -> None:
    lay = blocks.layout(text)
    found = blocks.entries(lay)
    for before, after in zip(found, found[1:]):
        assert before.take_end <= after.start, "entries overlap"
    for entry in found:
        assert entry.start == lay.starts[entry.first] and entry.start <= entry.end <= entry.take_end
        assert not entry.movable or not any(lay.pinned[entry.first : entry.last + 1])
    movable = [e for e in found if e.movable]
    chosen = data.draw(st.lists(st.sampled_from(movable), unique_by=lambda e: e.start) if movable else st.just([]))
    moves = [Move(kind="compact", start=e.start, end=e.take_end, text=text[e.start : e.take_end], target="memory/x.md",
                  heading_path=e.path, reason="test") for e in chosen]
    tidied = blocks.tidy(lay, moves)
    left = take(text, tidied)  # ValueError: overlapping moves, or a move whose text is not where it says
    assert len(left) + sum(len(m.text) for m in tidied) == len(text), "a character was lost or doubled"
    for move in tidied:
        for number in range(lay.line_at(move.start), lay.line_at(max(move.start, move.end - 1)) + 1):
            assert not lay.pinned[number], "a pinned line was moved"
    kept = [(e.head, e.path, e.movable, e.item) for e in found if e not in chosen]
    again = [(e.head, e.path, e.movable, e.item) for e in blocks.entries(blocks.layout(left))]
    assert again == kept, "an entry left behind changed (two blocks were joined)"
    assert _longest_blank_run(left) <= _longest_blank_run(text), "a move left two separations where there was one"


def _longest_blank_run(text: str) -> int:
    longest = run = 0
    for line in text.splitlines():
        run = run + 1 if not line.strip() else 0
        longest = max(longest, run)
    return longest
