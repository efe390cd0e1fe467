"""Identity files answered from memory while they are unchanged on disk.

A GetFile of an unchanged file costs one ``lstat`` here instead of the open,
fstat, read, close and UTF-8 decode of ``files.read_file`` (the read is about
a fifth of the file API's own cost per call).

**When an entry is used.** An entry is the text of one path together with what
``lstat`` said of it when it was read: device, inode, size, mtime and ctime in
nanoseconds. It answers only while ``lstat`` still says exactly that. Agents
and editors write the identity files directly, so the cache cannot rely on
hearing of writes: a rename puts a new inode at the path, and a write in place
changes the ctime (which no program can set back).

**The settle rule.** A file system stamps times at its own granularity (a
clock tick of a few milliseconds, a second or two on some), so a second write
of the same size within the tick of a read could leave every field equal. An
entry is therefore kept only for a file whose ctime was already ``SETTLE_NS``
old when it was read: any later write stamps a later time. (Git's index treats
a file stamped as recently as the index itself the same way, as "racily clean".)
A file written moments ago is read from disk until it has settled.

**What always goes to disk.** A path that is not a regular file (a link, a
folder, nothing), one ``lstat`` cannot see, and a file over ``MAX_ENTRY_BYTES``
go through ``files.read_file`` every time, with its refusals. Entries are
bounded to ``max_bytes`` in all (``gateway.files.readCacheMiB``, 32 MiB by default); the oldest
goes first.

**What an entry holds.** Not the text itself but what the caller builds from
it, once per read from disk (``build(name, text)``): the file API keeps the
finished ``GetFileResponse``, so a repeat read builds no message and copies no
text.

Left alone: a writer that changes a file through a shared memory map may not
update its times until the kernel writes the pages back; nothing in the suite
or in an agent's usual tools writes identity files that way.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from gateway.files_limits import MAX_CONTENT_BYTES
from services.file_api.files import read_file

SETTLE_NS = 3_000_000_000  # beyond the coarsest timestamp granularity in common use (2 s)
MAX_ENTRY_BYTES = MAX_CONTENT_BYTES
MIB = 1024 * 1024
MAX_CACHED_BYTES = 32 * MIB  # gateway.files.readCacheMiB's default

Stamp = tuple[int, int, int, int, int]
T = TypeVar("T")


class ReadCache(Generic[T]):
    """``read(workspace, name)``: ``build(name, text)`` of what ``files.read_file`` answers, from memory while the file is unchanged."""

    def __init__(
        self, build: Callable[[str, str], T], *, clock: Callable[[], int] = time.time_ns, max_bytes: int = MAX_CACHED_BYTES
    ) -> None:
        self._build = build
        self._clock = clock
        self._max_bytes = max_bytes
        self._entries: dict[str, tuple[Stamp, T, int]] = {}  # path -> (stamp, built value, size); oldest first
        self._bytes = 0

    def read(self, workspace: Path, name: str) -> T:
        path = f"{workspace}/{name}"
        try:
            info = os.lstat(path)
        except OSError:  # absent, or not ours to see: read_file answers "" or raises as it always has
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            return self._build(name, read_file(workspace, name))
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        entry = self._entries.get(path)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        value = self._build(name, read_file(workspace, name))
        if entry is not None:
            self._drop(path)
        if info.st_size <= MAX_ENTRY_BYTES and self._clock() - info.st_ctime_ns >= SETTLE_NS:
            self._keep(path, stamp, value, info.st_size)
        return value

    def _keep(self, path: str, stamp: Stamp, value: T, size: int) -> None:
        self._entries[path] = (stamp, value, size)
        self._bytes += size
        while self._bytes > self._max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, path: str) -> None:
        _, _, size = self._entries.pop(path)
        self._bytes -= size

    def __len__(self) -> int:
        return len(self._entries)
