"""The start-up sweep of the temp files a crash left behind (``gateway/atomic.py``).

A writer killed mid-write leaves its ``.<name>.<random>.gwtmp`` beside the
target for good. Each process, at start and before it reports SERVING, sweeps
the folders it writes to (``sweep_at_start``). A temp file is removed only when
all of these hold:

- its name is ours (``atomic.is_temp_name``) and it is a regular file: a link,
  a folder or a foreign file (``.MEMORY.md.swp``, ``notes.tmp``) is never
  touched;
- it is at least ``AGE_BOUND_S`` old (its mtime). The writer locks its temp
  file microseconds after creating it; the bound keeps a sweep out of that
  window, so a writer seldom has to make a second file. It is not what keeps a
  live writer safe: the lock is;
- a non-blocking exclusive ``flock`` on it succeeds: its writer is gone (the
  kernel drops a dead process's locks, also for containers sharing the volume);
- the file at that name is still the one it locked (the writer did not rename
  it away meanwhile); it is unlinked while the lock is held, so its writer
  cannot be half-way through a rename.

A writer that created its file but had not locked it yet when a sweep removed
it sees ``st_nlink == 0`` once it holds the lock and makes another
(``atomic.open_temp``), so even that race loses nothing.

Young unlocked files found at start are a crash of moments ago: the sweep
waits once, until the youngest reaches the bound (at most ``AGE_BOUND_S`` and a margin),
and looks again, so that when the process reports SERVING no abandoned temp
file of its folders remains. A file whose mtime is in the future (a clock
stepped back) counts as old enough on that second look when nothing about it
changed while the sweep waited.

Temp files of earlier versions (``atomic.is_legacy_temp_name``) were written
without a lock, so only age can say they are abandoned: they go only when older
than ``LEGACY_AGE_BOUND_S`` (an hour).

A sweep never follows a link and never leaves its folder: it works on
directory descriptors (``*at`` calls, ``O_NOFOLLOW``), and a recursive sweep
descends only into real sub-folders, at most ``MAX_DEPTH`` deep. It logs one
``temp_sweep`` event per folder where it found temp files: what it removed
(names and sizes) and what it left, with why.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from gateway.atomic import is_legacy_temp_name, is_temp_name

AGE_BOUND_S = 1.0
LEGACY_AGE_BOUND_S = 3600.0
MAX_DEPTH = 32
WAIT_MARGIN_S = 0.02  # slept beyond the bound, so a file the wait was for is past it on the second look

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_GONE = "gone"  # renamed or removed by someone else meanwhile: nothing to report

log = structlog.get_logger()


@dataclass(frozen=True)
class Folder:
    """A folder a process writes to: ``path`` as configured, alone or with every real
    sub-folder under it (``recursive``). ``follow=False``: skipped when ``path`` itself is a
    link (``memory/`` and ``.dreaming/``, which dreaming never writes through a link)."""

    path: Path
    recursive: bool = False
    follow: bool = True


@dataclass(frozen=True)
class Removed:
    name: str  # relative to the swept folder
    size: int


@dataclass(frozen=True)
class Left:
    name: str
    why: str


@dataclass
class SweepReport:
    """What one folder's sweep removed and left."""

    folder: Path
    removed: list[Removed] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)


@dataclass(frozen=True)
class _Young:
    """A temp file of ours seen unlocked but younger than the bound: looked at again after the wait."""

    folder: Folder
    parts: tuple[str, ...]  # its sub-folder under the folder
    name: str
    identity: tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns
    mtime: float


def sweep_at_start(
    folders: Iterable[Folder],
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[SweepReport]:
    """Sweep ``folders`` (missing ones are skipped), waiting once for young abandoned files.

    ``clock`` is the wall clock that file mtimes are compared with; ``sleep``
    the wait (both injected by tests). Returns one report per folder that held
    temp files of ours or of earlier versions, each also logged. Never raises
    for a folder that cannot be read: that folder is skipped and logged.
    """
    reports: dict[Folder, SweepReport] = {}
    young: list[_Young] = []
    for folder in dict.fromkeys(folders):
        report = SweepReport(folder.path)
        reports[folder] = report
        try:
            young.extend(_sweep_folder(folder, report, clock))
        except OSError as exc:
            log.warning("temp_sweep_failed", folder=str(folder.path), error=str(exc))
    if young:
        now = clock()
        sleep(min(AGE_BOUND_S, max(AGE_BOUND_S - max(now - y.mtime, 0.0) for y in young)) + WAIT_MARGIN_S)
        for y in young:
            with contextlib.suppress(OSError):
                _second_look(y, reports[y.folder], clock)
    found = [r for r in reports.values() if r.removed or r.left]
    for report in found:
        log.info(
            "temp_sweep",
            folder=str(report.folder),
            removed=[{"name": r.name, "bytes": r.size} for r in report.removed],
            left=[{"name": item.name, "why": item.why} for item in report.left],
        )
    return found


def _sweep_folder(folder: Folder, report: SweepReport, clock: Callable[[], float]) -> list[_Young]:
    young: list[_Young] = []
    for dfd, parts in _walk(folder):
        for name, seen in _candidates(dfd):
            rel = "/".join((*parts, name))
            if is_legacy_temp_name(name):
                if clock() - seen.st_mtime < LEGACY_AGE_BOUND_S:
                    report.left.append(Left(rel, f"an earlier version's temp file, younger than {LEGACY_AGE_BOUND_S:.0f} s"))
                    continue
            elif clock() - seen.st_mtime < AGE_BOUND_S:
                if _locked(dfd, name, seen):
                    report.left.append(Left(rel, "locked: a live writer's"))
                else:
                    young.append(_Young(folder, parts, name, _identity(seen), seen.st_mtime))
                continue
            _record(report, rel, _remove_if_unlocked(dfd, name, seen))
    return young


def _second_look(y: _Young, report: SweepReport, clock: Callable[[], float]) -> None:
    rel = "/".join((*y.parts, y.name))
    with _open_under(y.folder, y.parts) as dfd:
        try:
            seen = os.stat(y.name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        age = clock() - seen.st_mtime
        unchanged = _identity(seen) == y.identity
        if age >= AGE_BOUND_S or (age < 0 and unchanged):
            _record(report, rel, _remove_if_unlocked(dfd, y.name, seen))
        else:
            report.left.append(Left(rel, f"changed while the sweep waited, younger than {AGE_BOUND_S:g} s"))


def _record(report: SweepReport, rel: str, outcome: int | str) -> None:
    if isinstance(outcome, int):
        report.removed.append(Removed(rel, outcome))
    elif outcome != _GONE:
        report.left.append(Left(rel, outcome))


def _remove_if_unlocked(dfd: int, name: str, seen: os.stat_result) -> int | str:
    """Unlink ``name`` (in folder ``dfd``) if it is still the file ``seen`` and no one holds its
    lock; its size when removed, else why not (or _GONE)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return _GONE
    except OSError as exc:
        return f"cannot be opened: {exc.strerror}"
    try:
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode) or (held.st_dev, held.st_ino) != (seen.st_dev, seen.st_ino):
            return _GONE
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "locked: a live writer's"
        try:
            now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return _GONE
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            return _GONE  # renamed away, and something else took the name
        os.unlink(name, dir_fd=dfd)
        return held.st_size
    finally:
        os.close(fd)  # drops our lock; a writer that was waiting for it finds its file unlinked


def _locked(dfd: int, name: str, seen: os.stat_result) -> bool:
    """Whether someone holds the lock of ``name`` (which must still be the file ``seen``)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return False
    try:
        held = os.fstat(fd)
        if (held.st_dev, held.st_ino) != (seen.st_dev, seen.st_ino):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)


def _candidates(dfd: int) -> list[tuple[str, os.stat_result]]:
    """The regular files of folder ``dfd`` named like a temp file of ours or of an earlier version."""
    out = []
    with os.scandir(dfd) as listing:
        for entry in listing:
            if not (is_temp_name(entry.name) or is_legacy_temp_name(entry.name)):
                continue
            try:
                seen = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(seen.st_mode):
                out.append((entry.name, seen))
    return out


def _walk(folder: Folder) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Descriptors of ``folder`` and (when recursive) of each real sub-folder, depth first, with
    its parts; each is closed once the caller is done with it and its sub-folders. A missing
    folder yields nothing."""
    try:
        root = os.open(folder.path, _root_flags(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP and not folder.follow:
            return  # a link where the folder should be: not ours to sweep
        raise
    yield from _descend(root, (), folder.recursive)


def _descend(dfd: int, parts: tuple[str, ...], recursive: bool) -> Iterator[tuple[int, tuple[str, ...]]]:
    try:
        yield dfd, parts
        if not recursive or len(parts) >= MAX_DEPTH:
            return
        with os.scandir(dfd) as listing:
            names = [e.name for e in listing if e.is_dir(follow_symlinks=False)]
        for name in names:
            try:
                inner = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dfd)
            except OSError:
                continue  # gone, or a link swapped in meanwhile (O_NOFOLLOW refuses it)
            yield from _descend(inner, (*parts, name), recursive)
    finally:
        os.close(dfd)


def _root_flags(folder: Folder) -> int:
    return _DIR_FLAGS if folder.follow else _DIR_FLAGS | os.O_NOFOLLOW


@contextlib.contextmanager
def _open_under(folder: Folder, parts: tuple[str, ...]) -> Iterator[int]:
    """The descriptor of ``folder``'s ``parts…``, each part opened without following a link."""
    dfd = os.open(folder.path, _root_flags(folder))
    try:
        for part in parts:
            inner = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dfd)
            os.close(dfd)
            dfd = inner
        yield dfd
    finally:
        os.close(dfd)


def _identity(seen: os.stat_result) -> tuple[int, int, int, int]:
    return seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns
