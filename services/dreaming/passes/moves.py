"""Text a deterministic pass relocates out of MEMORY.md (the compactor, the route-out).

A ``Move`` is a span of whole lines of the source text, taken out of it and
appended, byte for byte, to another workspace file under ``memory/``, where
it stays indexed and searchable. ``take`` applies moves to the source text;
``archive_block`` renders what is appended to the destination: a heading
naming where the entries stood (file, heading path), the date and the run,
then the entries exactly as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COMPACT = "compact"
ROUTE = "route"
COMPLETED = "memory/archive/completed.md"


@dataclass(frozen=True)
class Move:
    """One entry or block moved out of ``source``.

    ``start``/``end``: its span in the text the pass planned from (whole lines,
    the final newline included); ``text`` is exactly that span. ``target`` is
    the workspace-relative destination. ``heading_path`` the headings it stood
    under (outermost first). ``reason`` says which rule matched. ``date`` (ISO
    ``YYYY-MM-DD``) when the entry carries one (the route-out moves the oldest
    first).
    """

    kind: str
    start: int
    end: int
    text: str
    target: str
    heading_path: tuple[str, ...]
    reason: str
    date: str | None = None
    source: str = "MEMORY.md"


def take(text: str, moves: Sequence[Move]) -> str:
    """``text`` without the spans of ``moves`` (which must not overlap). Raises ValueError when a
    move's text is not where it says. One pass over the text (linear in its size)."""
    kept = []
    at = 0
    for move in sorted(moves, key=lambda m: m.start):
        if move.start < at or text[move.start : move.end] != move.text:
            raise ValueError(f"a {move.kind} move does not match the text at {move.start}")
        kept.append(text[at : move.start])
        at = move.end
    kept.append(text[at:])
    return "".join(kept)


def archive_pieces(moves: Sequence[Move], run_id: str, date: str) -> list[tuple[Move, str]]:
    """What is appended to the moves' (common) target, piece by piece, in order: the moves grouped
    by heading path (in order of first appearance), each group under one heading naming where its
    entries stood, then each entry verbatim. Each move's piece is its entry, preceded by the
    group's heading for the first move of a group, so undoing one move takes off exactly its part."""
    groups: dict[tuple[str, ...], list[Move]] = {}
    for move in moves:
        groups.setdefault(move.heading_path, []).append(move)
    out = []
    for path, group in groups.items():
        where = " › ".join((group[0].source, *path))
        verb = "Completed in" if group[0].kind == COMPACT else "Moved from"
        heading = f"\n## {verb} {where} · {date} · run {run_id}\n\n"
        for i, move in enumerate(group):
            body = move.text if move.text.endswith("\n") else move.text + "\n"
            out.append((move, (heading if i == 0 else "") + body))
    return out


def archive_block(moves: Sequence[Move], run_id: str, date: str) -> str:
    """All of ``archive_pieces`` as one text."""
    return "".join(piece for _, piece in archive_pieces(moves, run_id, date))
