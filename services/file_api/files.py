"""Reading and writing identity files inside an agent's workspace.

Plain functions over paths: no gRPC here. Writes go through the shared
atomic helper; reads never follow a link out of the workspace.
"""

from __future__ import annotations

import os
import stat
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
    """Content of ``name`` in ``workspace``; ``""`` when it does not exist yet.

    Raises FailedPrecondition when the path is a folder, a link out of the
    workspace, larger than MAX_READ_BYTES, or not valid UTF-8.
    """
    if not workspace.is_dir():
        return ""
    path = _confined(workspace, name)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_READ_BYTES + 1)
    except FileNotFoundError:
        return ""
    except IsADirectoryError:
        raise FailedPrecondition(f"{name} is a folder, not a file") from None
    if len(data) > MAX_READ_BYTES:
        raise FailedPrecondition(f"{name} is larger than {MAX_READ_BYTES} bytes; too large to return")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FailedPrecondition(f"{name} is not valid UTF-8 (byte {exc.start}); fix it on disk") from None


def check_content(content: str) -> bytes:
    """UTF-8 bytes of ``content``. Raises InvalidArgument above 1,048,576 bytes."""
    data = content.encode("utf-8")
    if len(data) > MAX_CONTENT_BYTES:
        raise InvalidArgument(
            f"content is {len(data)} bytes of UTF-8; the limit is {MAX_CONTENT_BYTES} bytes (1 MB)"
        )
    return data


def write_file(workspace: Path, name: str, data: bytes) -> None:
    """Atomically replace ``name`` in ``workspace`` (created if missing) with ``data``.

    Raises FailedPrecondition when the target is a folder; OSError on I/O
    failure, with the previous content intact.
    """
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace / name
    if path.is_dir() and not path.is_symlink():
        raise FailedPrecondition(f"{name} is a folder, not a file; nothing was written")
    # A link is replaced by a regular file (rename does not follow links), so
    # a write can never land outside the workspace.
    write_atomic(path, data)
