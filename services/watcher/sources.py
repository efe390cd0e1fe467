"""Safe reading of the identity files CLAUDE.md is composed from.

The composer must never raise for a bad file and never read outside the
workspace. ``read_source`` therefore:

- confines by real path: the file's real location must be inside the
  workspace's real location (a link to ``notes/SOUL.md`` in the workspace is
  fine, a link to ``/etc/passwd`` is reported and never opened);
- opens without following a final link and without blocking (a FIFO does not
  hang the watcher), then checks with ``fstat`` that it holds a regular file;
- reads at most ``max_bytes`` (a 50 MB MEMORY.md costs one bounded read; its
  size is taken from ``fstat``);
- decodes UTF-8 with U+FFFD for bad bytes, so the agent still sees the text,
  and reports where the first bad byte is.

Every problem comes back as one line in ``Source.problem``.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_READ_BYTES = 4 * 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Source:
    """What could be read of one workspace file.

    ``text`` is None when the file is missing or its content could not be
    used at all (``problem`` then says why, except for a plain missing file).
    ``chars`` counts the code points of ``text``; ``size_bytes`` is the size
    on disk; ``too_large`` means only the first ``max_bytes`` were read.
    ``bad_utf8_at`` is the offset of the first invalid UTF-8 byte (those
    bytes became U+FFFD). ``sha256`` is the hex SHA-256 of the bytes read
    (of the first ``max_bytes`` for a file too large; None when none were). ``unusable`` means the content was left out entirely (folder, link out of
    the workspace, unreadable); ``problem`` may also be set for a usable file
    (bad UTF-8 replaced, too large).
    """

    name: str
    text: str | None
    size_bytes: int | None = None
    too_large: bool = False
    bad_utf8_at: int | None = None
    problem: str | None = None
    unusable: bool = False
    sha256: str | None = None

    @property
    def chars(self) -> int | None:
        return None if self.text is None else len(self.text)

    @property
    def missing(self) -> bool:
        return self.text is None and self.problem is None


def _open_readonly(path: str) -> int:
    """Open ``path`` for reading; the seam tests replace to simulate EACCES."""
    return os.open(path, _OPEN_FLAGS)


def _inside(real: str, real_root: str) -> bool:
    try:
        return os.path.commonpath([real, real_root]) == real_root
    except ValueError:  # different drives
        return False


def _unusable(name: str, reason: str) -> Source:
    return Source(name=name, text=None, problem=f"{name} {reason}", unusable=True)


def _read_fd(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _decode(data: bytes, *, complete: bool) -> tuple[str, int | None]:
    """``data`` as text and the offset of the first invalid byte (None when valid).

    When ``complete`` is False the data is a prefix of the file: a multi-byte
    character cut at its end is dropped rather than reported as invalid.
    """
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=complete), None
    except UnicodeDecodeError as exc:
        bad = exc.start
    return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=complete), bad


def read_source(workspace: Path, name: str, *, max_bytes: int = MAX_READ_BYTES) -> Source:
    """Read ``workspace/name`` safely; never raises for a bad file.

    Returns a Source whose ``text`` is None when the file is missing (no
    problem) or unusable (problem set: a folder, not a regular file, a link
    whose real path leaves the workspace, or an OS error such as permission
    denied). Bad UTF-8 and files over ``max_bytes`` are used with a problem.
    """
    real_root = os.path.realpath(workspace)
    real = os.path.realpath(workspace / name)
    if not _inside(real, real_root):
        return _unusable(name, "is a link whose real path leaves the workspace; not followed")
    try:
        fd = _open_readonly(real)
    except FileNotFoundError:
        return Source(name=name, text=None)
    except PermissionError:
        return _unusable(name, "cannot be read: permission denied")
    except OSError as exc:
        return _unusable(name, f"cannot be read: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            return _unusable(name, "is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            return _unusable(name, "is not a regular file")
        data = _read_fd(fd, max_bytes + 1)
    except OSError as exc:
        return _unusable(name, f"cannot be read: {exc.strerror or exc}")
    finally:
        os.close(fd)
    too_large = len(data) > max_bytes
    size = max(info.st_size, len(data))
    text, bad = _decode(data[:max_bytes], complete=not too_large)
    problems = []
    if bad is not None:
        problems.append(f"is not valid UTF-8 (first bad byte at offset {bad})")
    if too_large:
        problems.append(f"is {size:,} bytes; only the first {max_bytes:,} bytes were read")
    return Source(
        name=name,
        text=text,
        size_bytes=size,
        too_large=too_large,
        bad_utf8_at=bad,
        problem=f"{name} " + " and ".join(problems) if problems else None,
        sha256=hashlib.sha256(data[:max_bytes]).hexdigest(),
    )
