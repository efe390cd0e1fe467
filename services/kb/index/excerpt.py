"""Get: a bounded, exact excerpt of one memory-scoped file (``memory_get``).

Scope: ``MEMORY.md``, ``USER.md`` and any file under ``memory/``, named by a
workspace-relative POSIX path. Rejected with InvalidArgument: an empty path, NUL
or a backslash, a bidirectional control (``gateway.bidi``: the path is shown to
the agent), an absolute path, any ``.``/``..``/empty component, a path outside
the scope, and a path whose *real* path (symlinks resolved) is outside
the scope of the real workspace (a link out of the workspace, or from
``memory/`` to ``SOUL.md``). A missing file is NotFound; a directory is
InvalidArgument.

Lines are 1-based and split exactly as the indexer splits them, so a search hit's
line range can be fed straight back here. At most ``MAX_LINES`` lines and
``MAX_CHARS`` characters are returned (``truncated`` says the char cap cut it).
Bytes are decoded as UTF-8 with replacement characters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument, NotFound
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_entries
from services.kb.index.sources import CORE_FILES, MEMORY_DIR

DEFAULT_LINES: Final = 200
MAX_LINES: Final = 2000
MAX_CHARS: Final = 100_000


@dataclass(frozen=True)
class EntryRef:
    """An entry the excerpt shows (for the retrieval log)."""

    path: str
    entry_hash: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Excerpt:
    """``text`` holds lines ``from_line``..``to_line`` (``to_line = from_line - 1`` when empty)."""

    path: str
    text: str
    from_line: int
    to_line: int
    total_lines: int
    truncated: bool
    entries: tuple[EntryRef, ...]


def _in_scope(parts: list[str]) -> bool:
    if len(parts) == 1:
        return parts[0] in CORE_FILES
    return parts[0] == MEMORY_DIR


def validate_path(path: str) -> list[str]:
    """The components of a syntactically acceptable memory-scoped path; InvalidArgument otherwise."""
    if not path:
        raise InvalidArgument("path is required")
    if "\x00" in path:
        raise InvalidArgument("path must not contain NUL")
    if "\\" in path:
        raise InvalidArgument("path must use '/' separators")
    refuse_bidi(path, "path")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise InvalidArgument("path must be relative to the workspace")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidArgument("path must not contain '.', '..' or empty components")
    if not _in_scope(parts):
        raise InvalidArgument("path must be MEMORY.md, USER.md or under memory/")
    return parts


def resolve(workspace: Path, path: str) -> Path:
    """The real file behind a memory-scoped ``path``, confined by realpath to the scope."""
    validate_path(path)
    root = os.path.realpath(workspace)
    real = os.path.realpath(os.path.join(root, path))
    rel = os.path.relpath(real, root)
    if rel == os.curdir or rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
        raise InvalidArgument("path resolves outside the workspace")
    if not _in_scope(rel.split(os.sep)):
        raise InvalidArgument("path resolves outside the memory scope")
    if not os.path.lexists(real):
        raise NotFound(f"no such memory file: {path}")
    if not os.path.isfile(real):
        raise InvalidArgument(f"not a file: {path}")
    return Path(real)


def get_excerpt(workspace: Path, path: str, from_line: int = 1, lines: int = DEFAULT_LINES) -> Excerpt:
    """Lines ``from_line``.. of a memory-scoped file, at most ``lines`` of them.

    ``from_line`` < 1 or ``lines`` < 1 is InvalidArgument; ``lines`` above
    MAX_LINES is clamped; a ``from_line`` past the end gives empty text.
    Raises InvalidArgument / NotFound as the module docstring says.
    """
    if from_line < 1:
        raise InvalidArgument("from_line must be 1 or more")
    if lines < 1:
        raise InvalidArgument("lines must be 1 or more")
    real = resolve(workspace, path)
    try:
        data = real.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"no such memory file: {path}") from None
    except OSError:
        raise InvalidArgument(f"cannot read {path}") from None
    all_lines = split_lines(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))
    total = len(all_lines)
    selected = all_lines[from_line - 1 : from_line - 1 + min(lines, MAX_LINES)]
    text = "\n".join(selected)
    truncated = len(text) > MAX_CHARS
    if truncated:
        text = text[:MAX_CHARS]
        selected = text.split("\n")
    to_line = from_line + len(selected) - 1 if selected else from_line - 1
    refs = tuple(
        EntryRef(path, e.entry_hash, e.start_line, e.end_line)
        for e in parse_entries(all_lines)
        if e.start_line <= to_line and e.end_line >= from_line
    )
    return Excerpt(path, text, from_line, to_line, total, truncated, refs)
