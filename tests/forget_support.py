"""Helpers of the forget tests, unit and integration (``tests`` is on sys.path): a planted text, and
where any 8-character run of it sits in a file's bytes."""

from __future__ import annotations

from pathlib import Path

from gateway.forgetting import Target

PLANTED = "Zephyrine Quabbleworth keeps her spare key under the blue heron statue, code ZX7QPLMNB4RTYUWE"  # no secret a detector flags: shared notes refuse those
TOMBSTONE = "F-0123456789ab"
RUN = 8


def runs(text: str, size: int = RUN) -> set[bytes]:
    """Every ``size``-character run of ``text``, as UTF-8, as written and lowercased (FTS5 keeps words lowercased)."""
    found = set()
    for start in range(len(text) - size + 1):
        piece = text[start : start + size]
        found |= {piece.encode(), piece.lower().encode()}
    return found


def residue(paths: list[Path], text: str = PLANTED) -> list[str]:
    """``"<file>: <run>"`` for each run of ``text`` found in the bytes of ``paths`` (each must exist) and of
    their -wal and -shm files (where there are)."""
    hits = []
    for path in paths:
        for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            try:
                data = each.read_bytes()
            except FileNotFoundError:
                if each == path:
                    raise
                continue
            lowered = data.lower()
            hits += [f"{each.name}: {run!r}" for run in sorted(runs(text)) if run in data or run in lowered]
    return hits


def scrub_file(path: Path, target: Target, tombstone_id: str = TOMBSTONE) -> int:
    """Rewrite ``path`` with the marker in place of each match (what dreaming does); the matches replaced."""
    new, count = target.scrub(path.read_text(encoding="utf-8"), tombstone_id)
    path.write_text(new, encoding="utf-8")
    return count
