"""Checks shared by the compactor and route-out tests (imported by name: the test dir is on
sys.path): every pass is run twice, and what it moved is accounted for byte for byte."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence

from services.dreaming.apply import sections
from services.dreaming.passes.moves import Move, take

Pass = Callable[[str], list[Move]]
LINE_ENDS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines ends a line


def rebuild(left: str, moves: Sequence[Move]) -> str:
    """The original text put back together from what a pass left and its moves (each at its offset)."""
    out = []
    taken = 0  # chars of ``left`` used so far
    previous = 0  # end of the previous move in the original
    for move in sorted(moves, key=lambda m: m.start):
        gap = move.start - previous
        out.append(left[taken : taken + gap])
        out.append(move.text)
        taken += gap
        previous = move.end
    out.append(left[taken:])
    return "".join(out)


def nonblank_lines(text: str) -> Counter[str]:
    return Counter(line for line in text.splitlines() if line.strip())


def settle(run: Pass, text: str) -> tuple[list[Move], str]:
    """Run ``run`` on ``text``, check its contract, and return its moves and the text they leave:
    the same moves twice (deterministic), spans in file order that match the text and do not
    overlap, every character of the original either left or moved exactly once, the pinned
    sections untouched, and nothing more to move on a second run (idempotent)."""
    moves = run(text)
    assert run(text) == moves
    assert [m.start for m in moves] == sorted(m.start for m in moves)
    for before, after in zip(moves, moves[1:], strict=False):
        assert before.end <= after.start
    for move in moves:
        assert text[move.start : move.end] == move.text and move.text
        assert move.start == 0 or text[move.start - 1] in LINE_ENDS, "a move starts mid-line"
        assert move.end == len(text) or text[move.end - 1] in LINE_ENDS, "a move ends mid-line"
    left = take(text, moves)
    assert rebuild(left, moves) == text
    assert nonblank_lines(left) + sum((nonblank_lines(m.text) for m in moves), Counter()) == nonblank_lines(text)
    assert pinned_texts(left) == pinned_texts(text)
    assert run(left) == []
    return moves, left


def pinned_texts(text: str) -> list[str]:
    return [text[span.start : span.end] for span in sections.pinned_spans(text)]


def big_memory(size: int = 164 * 1024) -> str:
    """A MEMORY.md of at least ``size`` chars that grew for months: a pinned profile, durable
    facts, task lists half done, code, and a daily log under dated headings, in that mix."""
    parts = ["# Memory\n\n## User\n\n- Prefers short answers\n- Lives in Lisbon\n\n"]
    day = 0
    while sum(map(len, parts)) < size:
        month, date = 1 + day // 28 % 12, 1 + day % 28
        iso = f"2025-{month:02d}-{date:02d}"
        parts.append(
            f"## Project {day}\n\n"
            f"- The staging host for project {day} is stage-{day}.internal\n"
            f"- [x] Set up CI for project {day}\n  - with the cache warmed\n"
            f"- [ ] Write the runbook for project {day}\n"
            f"- ✅ Rotated the keys of project {day}\n"
            f"- The DONE column of board {day} means shipped\n\n"
            f"```sh\nmake deploy PROJECT={day}  # [x] DONE\n```\n\n"
            f"### {iso}\n\n- Restarted the broker on stage-{day}\n- Yesterday: paged twice\n\n"
            f"- {iso}: deploy {day} went out at 14:00\n\n"
        )
        day += 1
    return "".join(parts)


_PIECES = (
    "", "", "  ", "# Memory", "## User", "## Tasks", "### Preferences", "## Session log", "## 2026-11-30",
    "### 2026-11-29 evening", "## Feedback", "# Top", "#### 2026-01-01", "- [x] done", "- [ ] open", "- ✅ shipped",
    "- durable fact", "  - nested [x]", "  - [x] nested", "    deeper", "DONE: para", "para line", "Today we did",
    "- 2026-11-28: did", "- Yesterday: x", "```", "  ```", "~~~", "    code", "1. [x] numbered", "- ~~struck~~",
    "lazy line", "- Ship — DONE", "\tindented tab",
)


def random_memory(rng: random.Random) -> str:
    """A small file of random lines drawn from the shapes the passes care about (headings pinned or
    dated, items marked or not, nesting, fences, blank lines), with LF, CRLF or CR line ends."""
    end = rng.choice(["\n", "\r\n", "\r"])
    text = end.join(rng.choice(_PIECES) for _ in range(rng.randint(0, 30)))
    return text + end if text and rng.random() < 0.7 else text
