"""The CPU half of a refresh: one source's bytes turned into index rows, without SQLite.

``parse_source`` decodes a source (UTF-8 with replacement characters, a BOM
dropped), reads its frontmatter, entries and chunks (of the lines after the
frontmatter only: ``body_chunks``; a NUL in a chunk's text becomes a space, as
SQLite's ``LIKE`` and ``substr`` read a text only up to its first NUL, and FTS5
splits words there anyway), and attributes each chunk its importance (the highest among the entries it touches) and its dominant entry
(the one covering most of its lines, earliest on a tie). ``parse_batches`` does
that for a run of sources, hash guard included, in groups of about a given
number of chunks: the bulk path runs it on a producer thread, or in a worker
process (``indexer_worker``). This module imports nothing heavy (no SQLite, no
config) so that a spawned worker starts in well under a tenth of a second.

A source's entries are stored packed (``schema``: one row per source instead of
one per entry): ``entry_lines``, the flat JSON array of ``start_line, end_line,
importance`` per entry, and ``entry_hashes``, their raw 32-byte digests end to end.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import add, itemgetter
from pathlib import Path
from typing import NamedTuple

from services.kb.index.chunking import Chunk, chunk_lines, split_lines
from services.kb.index.entries import DEFAULT_IMPORTANCE, Entry, Frontmatter, parse_entries, parse_frontmatter
from services.kb.index.query import has_unsegmented

# start, end, text, importance, dominant entry hash, has_cjk, carried (``carry``: the chunk's text is its
# row's text[carried:] with the previous chunk's stored text supplying the first ``carried`` characters)
ChunkRow = tuple[int, int, str, int, str | None, int, int]


class Parsed(NamedTuple):
    """One source turned into rows. ``provenance`` is the frontmatter's raw value (the
    caller's profile classifies it)."""

    provenance: str | None
    entries: list[Entry]
    entry_lines: str
    entry_hashes: bytes
    chunks: list[ChunkRow]


class Unreadable(NamedTuple):
    """``files[position]`` could not be read: its rows stay. ``error`` is the exception's type name."""

    position: int
    error: str


class Unchanged(NamedTuple):
    """``files[position]`` has the stored content hash (the hash guard): only its stat moves."""

    position: int


class Indexed(NamedTuple):
    """``files[position]`` was read and parsed (``digest`` = SHA-256 hex of its bytes)."""

    position: int
    digest: str
    provenance: str | None
    entry_lines: str
    entry_hashes: bytes
    chunks: list[ChunkRow]


Outcome = Unreadable | Unchanged | Indexed


def read_source(path: Path | str) -> bytes:
    """The bytes of one source (plain os calls: a third of the cost of ``Path.read_bytes``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts = []
        while data := os.read(fd, _READ_BYTES):
            parts.append(data)
    finally:
        os.close(fd)
    return parts[0] if len(parts) == 1 else b"".join(parts)


_READ_BYTES = 1 << 20


def body_chunks(lines: list[str], frontmatter: Frontmatter, chunk_tokens: int, chunk_overlap: int) -> list[Chunk]:
    """The chunks of a source split into ``lines``: its lines after the frontmatter, numbered as in the file.

    The frontmatter is metadata, read for importance and provenance only: kept
    out of the index, it never matches a query nor shows in a snippet.
    """
    if not frontmatter.end_line:
        return chunk_lines(lines, chunk_tokens, chunk_overlap)
    return chunk_lines(lines[frontmatter.end_line :], chunk_tokens, chunk_overlap, frontmatter.end_line + 1)


def parse_source(data: bytes, chunk_tokens: int, chunk_overlap: int) -> Parsed:
    """Decode, split and parse one source (rules in the module docstring)."""
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    lines = split_lines(text)
    frontmatter = parse_frontmatter(lines)
    entries = parse_entries(lines, frontmatter)
    chunks = body_chunks(lines, frontmatter, chunk_tokens, chunk_overlap)
    if "\x00" in text:  # rare: only a chunk's text changes (entries and their hashes are the file's)
        chunks = [Chunk(start, end, chunk.replace("\x00", " ")) for start, end, chunk in chunks]
    default = frontmatter.importance if frontmatter.importance is not None else DEFAULT_IMPORTANCE
    # One check for the whole file: most files hold no CJK/Thai, so their chunks need none.
    cjk = not text.isascii() and has_unsegmented(text)
    rows = [
        (start, end, chunk, importance, dominant, int(cjk and has_unsegmented(chunk)), carried)
        for (start, end, chunk), (importance, dominant), carried in zip(
            chunks, attribute(chunks, entries, default), carry(chunks)
        )
    ]
    lines_json, hashes = pack_entries(entries)
    return Parsed(frontmatter.provenance, entries, lines_json, hashes, rows)


def carry(chunks: list[Chunk]) -> list[int]:
    """Per chunk, how many of its first characters the stored text of the chunk before it supplies (0: none).

    A chunk that starts with lines of the previous one (``chunking``'s overlap) has
    those lines, up to the newline after them, as its first characters; they are
    the previous chunk's last characters. They are carried only when that
    chunk's *stored* text (its text after its own carried part) ends with them,
    so that a reader never needs more than one chunk back (``schema``'s
    ``kb_chunks`` view); otherwise (a short chunk after a long overlap) the chunk
    stores its whole text.
    """
    out = [0] * len(chunks)
    for n in range(1, len(chunks)):
        before, (start, _, text) = chunks[n - 1], chunks[n]
        lines = before[1] - start + 1
        if lines <= 0:
            continue
        at = -1
        for _ in range(lines):
            at = text.find("\n", at + 1)
            if at < 0:
                break
        stored = len(before[2]) - out[n - 1]
        if at > 0 and at <= stored and before[2].endswith(text[:at]):
            out[n] = at
    return out


def pack_entries(entries: list[Entry]) -> tuple[str, bytes]:
    """``entries`` as stored (module docstring): the JSON array of ``start_line, end_line,
    importance`` per entry (an f-string per entry is faster than the C JSON encoder here)
    and the digests as raw bytes, end to end."""
    lines = "[" + ",".join([f"{e[0]},{e[1]},{e[4]}" for e in entries]) + "]"
    return lines, bytes.fromhex("".join([e[3] for e in entries]))


def attribute(chunks: list[Chunk], entries: list[Entry], default: int) -> list[tuple[int, str | None]]:
    """Per chunk: the highest importance among the entries it touches (so an important
    entry is never diluted by its neighbours) and the hash of the entry covering most
    of its lines (earliest on a tie)."""
    result: list[tuple[int, str | None]] = []
    count = len(entries)
    first = 0
    for chunk_start, chunk_end, _ in chunks:
        while first < count and entries[first][1] < chunk_start:
            first += 1
        importance = -1
        dominant: str | None = None
        best = 0
        index = first
        while index < count:
            entry_start, entry_end, _, digest, entry_importance = entries[index]
            if entry_start > chunk_end:
                break
            overlap = (entry_end if entry_end < chunk_end else chunk_end) - (
                entry_start if entry_start > chunk_start else chunk_start
            ) + 1
            if overlap > best:
                best, dominant = overlap, digest
            if entry_importance > importance:
                importance = entry_importance
            index += 1
        result.append((importance if importance >= 0 else default, dominant))
    return result


SourceFile = tuple[str, str | None, int]  # root-relative path, stored content hash or None, mtime_ns
LifecycleRow = tuple[str, str]  # entry_hash, the JSON array [entry_hash, path, mtime_ns]


# json.dumps(value, ensure_ascii=False) for a str, without building an encoder per call.
_json_string = json.JSONEncoder(ensure_ascii=False).encode


def parse_batches(
    root: Path,
    files: list[SourceFile],
    chunk_tokens: int,
    chunk_overlap: int,
    batch_chunks: int,
    read: Callable[[Path], bytes] | None = None,
    lifecycle: list[LifecycleRow] | None = None,
) -> Iterator[list[Outcome]]:
    """Read (with ``read``, or ``read_source``), hash and parse ``files`` in order, yielding
    the outcomes in lists of about ``batch_chunks`` chunks (the last one possibly empty).
    A read error (OSError) is an outcome; anything else raises. With ``lifecycle``, a row
    for every entry of every indexed file is appended to it, in file order."""
    batch: list[Outcome] = []
    size = 0
    top = os.fspath(root)
    for index, (rel, stored_hash, mtime_ns) in enumerate(files):
        try:
            data = read(root / rel) if read is not None else read_source(os.path.join(top, rel))
        except OSError as exc:
            batch.append(Unreadable(index, type(exc).__name__))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest == stored_hash:
            batch.append(Unchanged(index))
            continue
        parsed = parse_source(data, chunk_tokens, chunk_overlap)
        batch.append(Indexed(index, digest, parsed.provenance, parsed.entry_lines, parsed.entry_hashes, parsed.chunks))
        if lifecycle is not None:
            # Each row is '["<hash>",<path>,<mtime_ns>]': the two concatenations run in C.
            hashes = list(map(itemgetter(3), parsed.entries))
            tail = f'",{_json_string(rel)},{mtime_ns}]'
            lifecycle.extend(zip(hashes, map(add, map(add, repeat('["'), hashes), repeat(tail))))
        size += len(parsed.chunks)
        if size >= batch_chunks:
            yield batch
            batch, size = [], 0
    yield batch


def lifecycle_json(rows: list[LifecycleRow]) -> str:
    """``rows`` as one JSON array, in the order collected (path order). ``indexer_bulk``
    sorts them by hash and then path as it inserts them, so the first path in sorted order
    wins an entry held twice; sorting here as well cost each worker half a second per
    190,000 rows, on the critical path of a full index."""
    return "[" + ",".join([row for _, row in rows]) + "]"
