"""The one write path for workspace files (DESIGN.md "Processes").

Temp file in the same folder, fsync, optional compare-and-swap against the
content the writer read, atomic rename, fsync of the folder. On any failure
the temp file is removed and the target keeps its previous content.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from gateway.errors import FailedPrecondition

TEMP_SUFFIX = ".tmp"


def temp_prefix(name: str) -> str:
    """Prefix of the temp files written next to ``name``; watchers ignore dot files."""
    return f".{name}."


class WriteConflict(FailedPrecondition):
    """The file changed between the writer's read and its rename (CAS failed)."""


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def write_atomic(
    path: Path,
    data: bytes,
    *,
    expected: bytes | None | object = ...,
    mode: int = 0o644,
    keep_mode: bool = True,
    durable: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``expected``: when given, the write happens only if the file's current
    content equals it (``None`` meaning "the file must not exist"); otherwise
    WriteConflict is raised and nothing changes. The new file keeps the old
    file's permission bits, or gets ``mode`` when it is new; with
    ``keep_mode=False`` it always gets ``mode`` (config.json is 0600 whatever
    it was before).
    Raises OSError on I/O failure, with the old content left intact.
    """
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=temp_prefix(path.name), suffix=TEMP_SUFFIX)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777 if keep_mode else mode)
        except FileNotFoundError:
            os.chmod(tmp, mode)
        if expected is not ...:
            if _read_or_none(path) != expected:
                raise WriteConflict(f"{path.name} changed on disk since it was read; nothing was written")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some file systems refuse a directory fsync
            os.fsync(fd)
    finally:
        os.close(fd)
