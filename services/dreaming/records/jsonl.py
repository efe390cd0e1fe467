"""JSON-lines files of dreaming (the audit and the journal): append, read back, cap."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gateway.atomic import write_atomic

Record = dict[str, Any]


def append(path: Path, records: Iterable[Record], *, max_bytes: int, keep_bytes: int, durable: bool = True) -> None:
    """Append ``records`` as one write (mode 0600; fsynced when ``durable``); past ``max_bytes``,
    keep only the newest whole lines that fit in ``keep_bytes``.

    A process killed mid-append can leave a torn last line; the next append starts on a line of its
    own, so only the torn line is lost (``read`` skips it), never the record after it."""
    data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records).encode("utf-8")
    if not data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if size > max_bytes:
        trim(path, keep_bytes)


def trim(path: Path, keep_bytes: int) -> None:
    """Keep the newest whole lines of ``path`` that fit in ``keep_bytes`` (atomic rewrite)."""
    data = path.read_bytes()
    if len(data) <= keep_bytes:
        return
    cut = data.find(b"\n", len(data) - keep_bytes)
    write_atomic(path, data[cut + 1 :] if cut >= 0 else b"", mode=0o600)


def heal(path: Path) -> int:
    """Rewrite ``path`` without its broken lines (atomic); how many were dropped (0: untouched).

    A process killed mid-append can leave a torn record: the kernel may end a write to a regular
    file early when the writer is killed. ``read`` skips such a line, but it would stay in the
    file for good; the owner heals the file at start, under the lock its appends take, so no
    append of its own can be under way."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    kept = [line for line in lines if line.strip() and _parses(line)]
    dropped = sum(1 for line in lines if line.strip()) - len(kept)
    if tail.strip():
        if _parses(tail):
            kept.append(tail)  # whole but for its newline
        else:
            dropped += 1
    if len(kept) == len(lines) and not tail:
        return 0
    write_atomic(path, b"".join(line + b"\n" for line in kept), mode=0o600)
    return dropped


def _parses(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def read(path: Path) -> list[Record]:
    """Every record of ``path``, oldest first ([] when missing); broken lines are skipped."""
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return parse(raw)


def parse(raw: str) -> list[Record]:
    """The records of the text of a JSON-lines file, oldest first; broken lines are skipped."""
    out = []
    for line in raw.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out
