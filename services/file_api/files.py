"""Reading and writing identity files inside an agent's workspace.

Plain functions over paths: no gRPC here. Writes go through the shared
atomic helper, as a compare-and-swap when the caller names the content's
sha256 it read; reads never follow a link out of the workspace.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import Aborted, FailedPrecondition, InvalidArgument
from gateway.files_limits import MAX_CONTENT_BYTES

MAX_READ_BYTES = 4 * MAX_CONTENT_BYTES  # files grown on disk by other writers
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()  # a missing file reads as "", so it has this hash
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


class FileChanged(Aborted):
    """A compare-and-swap write found other content than the caller read; nothing was written.

    ABORTED, not FAILED_PRECONDITION: the caller is to read again and retry the whole
    read-modify-write (docs/concepts/apis.md, "Compare-and-swap writes").
    """


def sha256_hex(data: bytes) -> str:
    """Lowercase hex sha256 of ``data``: the hash GetFile answers and PutFile compares."""
    return hashlib.sha256(data).hexdigest()


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
    """
    data = read_bytes(workspace, name)
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FailedPrecondition(f"{name} is not valid UTF-8 (byte {exc.start}); fix it on disk") from None


def read_bytes(workspace: Path, name: str) -> bytes | None:
    """Bytes of ``name`` in ``workspace``; None when it (or the workspace) does not exist.

    Raises FailedPrecondition when the path is a folder, a link out of the
    workspace, or larger than MAX_READ_BYTES.

    Four system calls in the common case (open without following a link, fstat,
    one read sized from the file, close): checks before the open and a read buffer
    sized for the 4 MB limit would be most of a GetFile's own cost.
    """
    path = f"{workspace}/{name}"  # a string (a Path caches its own): no Path built per call
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):  # no workspace, or no such file in it
        return None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        try:  # a link: followed only when it stays in the workspace
            fd = os.open(_confined(workspace, name), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FailedPrecondition(f"{name} is a folder, not a file")
        data = _read_bounded(fd, info.st_size)
    finally:
        os.close(fd)
    if len(data) > MAX_READ_BYTES:
        raise FailedPrecondition(f"{name} is larger than {MAX_READ_BYTES} bytes; too large to return")
    return data


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


def check_expected_sha256(value: str) -> str:
    """``value`` in lowercase when it is 64 hex digits; InvalidArgument naming the field otherwise."""
    if _SHA256_HEX.fullmatch(value) is None:
        raise InvalidArgument(
            f"expected_sha256 (expectedSha256) must be 64 hex digits, the sha256 GetFile answered (got {value[:80]!r});"
            f" a missing or empty file has {EMPTY_SHA256}"
        )
    return value.lower()


def write_file(
    workspace: Path,
    name: str,
    data: bytes,
    *,
    expected_sha256: str | None = None,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Atomically replace ``name`` in ``workspace`` (created if missing) with ``data``.

    ``expected_sha256`` (lowercase hex, from ``check_expected_sha256``): write
    only while the file's content has that hash (EMPTY_SHA256: missing or
    empty), else FileChanged and nothing is written. The hash is checked here,
    then ``write_atomic`` compares the very bytes that had it under the
    folder's lock just before the rename, so no writer of the suite can slip in
    between. ``before_rename`` runs under that lock just before the rename (the
    PUT record, ``gateway.put_record``). Raises FailedPrecondition when the
    target is a folder; OSError on I/O failure, with the previous content intact.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace / name
    if path.is_dir() and not path.is_symlink():
        raise FailedPrecondition(f"{name} is a folder, not a file; nothing was written")
    expected: bytes | None | object = ...
    if expected_sha256 is not None:
        expected = read_bytes(workspace, name)
        if sha256_hex(expected or b"") != expected_sha256:
            raise _changed(name)
    # A link is replaced by a regular file (rename does not follow links), so
    # a write can never land outside the workspace.
    try:
        write_atomic(path, data, expected=expected, before_rename=before_rename)
    except WriteConflict:
        raise _changed(name) from None


def _changed(name: str) -> FileChanged:
    return FileChanged(f"{name} changed since it was read (its sha256 is no longer expected_sha256); nothing was written: read it again and retry")
