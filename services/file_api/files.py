"""Reading and writing identity files inside an agent's workspace.

Plain functions over paths: no gRPC here. Writes go through the shared
atomic helper; reads never follow a link out of the workspace.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from gateway.atomic import write_atomic
from gateway.errors import FailedPrecondition, InvalidArgument
from gateway.files_limits import MAX_CONTENT_BYTES

MAX_READ_BYTES = 4 * MAX_CONTENT_BYTES  # files grown on disk by other writers


def _confined(workspace: Path, name: str) -> Path:
    """``workspace/name``, refusing a path whose real location leaves the workspace.

    The common case (a regular file, no link) costs one lstat; only a link
    pays for resolving real paths.
    """
    path = workspace / name
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return path
    except FileNotFoundError:
        return path
    real_ws = os.path.realpath(workspace)
    real = os.path.realpath(path)
    if os.path.dirname(real) != real_ws:
        raise FailedPrecondition(f"{name} is a link that leaves the workspace; refusing to follow it")
    return path


def read_file(workspace: Path, name: str) -> str:
    """Content of ``name`` in ``workspace``; ``""`` when it (or the workspace) does not exist yet.

    Raises FailedPrecondition when the path is a folder, a link out of the
    workspace, larger than MAX_READ_BYTES, or not valid UTF-8.

    Four system calls in the common case (open without following a link, fstat,
    one read sized from the file, close): checks before the open and a read buffer
    sized for the 4 MB limit would be most of a GetFile's own cost.
    """
    path = f"{workspace}/{name}"  # a string (a Path caches its own): no Path built per call
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # no workspace, or no such file in it
        return ""
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        try:  # a link: followed only when it stays in the workspace
            fd = os.open(_confined(workspace, name), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return ""
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FailedPrecondition(f"{name} is a folder, not a file")
        data = _read_bounded(fd, info.st_size)
    finally:
        os.close(fd)
    if len(data) > MAX_READ_BYTES:
        raise FailedPrecondition(f"{name} is larger than {MAX_READ_BYTES} bytes; too large to return")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FailedPrecondition(f"{name} is not valid UTF-8 (byte {exc.start}); fix it on disk") from None


def _read_bounded(fd: int, size: int) -> bytes:
    """At most MAX_READ_BYTES + 1 bytes of ``fd`` (one past the limit: the caller says "too large").

    The first read asks for the size ``fstat`` gave plus one byte, never the limit: a read
    allocates what it asks for. A file that grows meanwhile is read on, to the same bound.
    """
    data = os.read(fd, min(size, MAX_READ_BYTES) + 1)
    while len(data) > size and len(data) <= MAX_READ_BYTES:
        more = os.read(fd, MAX_READ_BYTES + 1 - len(data))
        if not more:
            break
        data += more
    return data


def check_content(content: str) -> bytes:
    """UTF-8 bytes of ``content``. Raises InvalidArgument above 1,048,576 bytes."""
    data = content.encode("utf-8")
    if len(data) > MAX_CONTENT_BYTES:
        raise InvalidArgument(
            f"content is {len(data)} bytes of UTF-8; the limit is {MAX_CONTENT_BYTES} bytes (1 MB)"
        )
    return data


def write_file(workspace: Path, name: str, data: bytes, *, before_rename: Callable[[], None] | None = None) -> None:
    """Atomically replace ``name`` in ``workspace`` (created if missing) with ``data``.

    ``before_rename`` runs under the folder's lock just before the rename (the
    PUT record, ``gateway.put_record``). Raises FailedPrecondition when the
    target is a folder; OSError on I/O failure, with the previous content intact.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace / name
    if path.is_dir() and not path.is_symlink():
        raise FailedPrecondition(f"{name} is a folder, not a file; nothing was written")
    # A link is replaced by a regular file (rename does not follow links), so
    # a write can never land outside the workspace.
    write_atomic(path, data, before_rename=before_rename)
