"""Linux inotify behind a small typed surface: one instance, its watches, and its events as paths.

``gateway.watching`` reads the instance's descriptor from the event loop, so a quiet watch costs
nothing: no thread, no step loop, no wake-up until the kernel has an event (see docs/operations.md,
"At rest"). A recursive watch takes one OS watch per folder and adds the folders created (or moved
in) later as their events arrive; a folder moved away or deleted gives its watches back. Files
written into a new folder before its watch exists are not reported (the callers that care rescan).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from dataclasses import dataclass, field

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000

WATCH_MASK = IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
ADDED = IN_CREATE | IN_MOVED_TO
DELETED = IN_DELETE | IN_MOVED_FROM
MODIFIED = IN_MODIFY | IN_ATTRIB
SELF_GONE = IN_DELETE_SELF | IN_MOVE_SELF

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_READ_BYTES = 64 * 1024


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    return libc if hasattr(libc, "inotify_init1") else None


_LIBC = _libc()


def available() -> bool:
    """Whether this platform has inotify (Linux)."""
    return _LIBC is not None


def _check(result: int, path: str | None = None) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return result


@dataclass(frozen=True)
class Event:
    """One event: what happened (the inotify mask) to ``path``; ``root`` when the path is a watched root itself."""

    mask: int
    path: str
    root: bool = False


@dataclass
class Inotify:
    """One inotify instance (non-blocking, closed on exec). ``add`` folders, then ``read`` when ``fd`` is readable.

    Raises ``OSError`` where the kernel refuses: the instance limit (EMFILE), the watch limit (ENOSPC),
    and from ``read`` after the kernel's event queue overflowed (events were lost).
    """

    recursive: bool = True
    fd: int = field(init=False)
    _paths: dict[int, str] = field(init=False, default_factory=dict)  # watch descriptor → folder
    _roots: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        if _LIBC is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this platform")
        self.fd = _check(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))

    def close(self) -> None:
        os.close(self.fd)

    def add_root(self, path: str) -> None:
        """Watch the folder ``path`` (and, when recursive, every folder under it)."""
        self._roots.add(path)
        self._add_tree(path) if self.recursive else self._add(path)

    def _add(self, path: str) -> bool:
        """One OS watch on ``path``; False when it is gone or not readable (skipped, as a tree walk would)."""
        assert _LIBC is not None
        wd = _LIBC.inotify_add_watch(self.fd, os.fsencode(path), WATCH_MASK)
        if wd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOENT, errno.EACCES, errno.ENOTDIR) and path not in self._roots:
                return False
            raise OSError(code, os.strerror(code), path)
        self._paths[wd] = path
        return True

    def _add_tree(self, top: str) -> None:
        if not self._add(top):
            return
        for folder, names, _ in os.walk(top):
            for name in names:
                self._add(os.path.join(folder, name))

    def _forget_tree(self, top: str) -> None:
        """Drop the watches on ``top`` and under it (it was moved away: its watches would report the new place)."""
        assert _LIBC is not None
        prefix = top + os.sep
        for wd, path in list(self._paths.items()):
            if path == top or path.startswith(prefix):
                _LIBC.inotify_rm_watch(self.fd, wd)
                del self._paths[wd]

    def read(self) -> list[Event]:
        """Every event queued now (none when the queue is empty), in the kernel's order."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, _READ_BYTES)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = _HEADER.unpack_from(data, offset)
                name = data[offset + _HEADER.size : offset + _HEADER.size + size].rstrip(b"\0")
                offset += _HEADER.size + size
                event = self._event(wd, mask, os.fsdecode(name))
                if event is not None:
                    events.append(event)

    def _event(self, wd: int, mask: int, name: str) -> Event | None:
        if mask & IN_Q_OVERFLOW:
            raise OSError(errno.EOVERFLOW, "the inotify event queue overflowed: events were lost")
        if mask & IN_IGNORED:
            self._paths.pop(wd, None)
            return None
        folder = self._paths.get(wd)
        if folder is None:
            return None
        if mask & SELF_GONE:
            self._forget_tree(folder)
            return Event(mask, folder, root=True) if folder in self._roots else None
        path = os.path.join(folder, name)
        if self.recursive and mask & IN_ISDIR:
            if mask & ADDED:
                self._add_tree(path)
            elif mask & DELETED:
                self._forget_tree(path)
        return Event(mask, path)
