"""The one write path for workspace files (docs/architecture.md "Who owns which data").

Temp file in the same folder, fsync, then, under the folder's lock, an
optional compare-and-swap against the content the writer read and the atomic
rename; then an fsync of the folder. On any failure the temp file is removed
and the target keeps its previous content.

**Compare-and-swap among the suite's writers.** Every writer in the suite (the
file API, the watcher, the KB's vault, dreaming) goes through ``write_atomic``,
and each call holds an exclusive ``flock`` on the target's folder from the
re-read to the rename. So two of our writers can never interleave between one
writer's check and its rename: of several CAS updates made against the same
expected content, exactly one wins and the others get WriteConflict. An
unconditional write takes the lock too, so it lands either before a CAS
writer's re-read (which then sees it and refuses) or after its rename.
Creating a file that must not exist (``expected=None``) links the temp file
into place with ``os.link``, which fails when the name exists, so of several
creators exactly one wins, even against writers that take no lock.

The lock is on the folder (its directory file descriptor), not on a lock file
beside each target: nothing extra is left in workspaces or vaults, and the
writers of one folder wait for each other only across a re-read and a rename.
The data itself is written and fsynced before the lock is taken.

**Temp files a crash leaves behind.** Every temp file is named
``.<name>.<10 hex>.gwtmp`` (``temp_name``; a dot file, so the watchers and the
indexes skip it) and its writer holds an exclusive ``flock`` on its descriptor
from just after creating it until the rename or the unlink. A writer killed
mid-write leaves the file, but the kernel drops the lock with the process, so
``gateway.temp_sweep`` can tell an abandoned temp file (unlocked) from a live
writer's (locked) and remove only the former, at each process's start. A
sweeper may win the race between a writer's create and its lock: the writer
then sees its file unlinked (``st_nlink == 0``) and makes another, so a live
write never loses its temp file.

**The window that remains.** An agent editing its own files takes no lock. Its
edit is caught by the re-read just before the rename, except when it lands in
the microseconds between that re-read and the rename: then the rename replaces
it. An editor that saves by renaming its own temp file over the target in that
window is replaced the same way. Dreaming narrows this further by keeping a
backup of what it replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from gateway.errors import FailedPrecondition

TEMP_SUFFIX = ".gwtmp"
NAME_MAX_BYTES = 255  # the file-name limit of common file systems (ext4, xfs, btrfs, tmpfs)
_RANDOM_HEX = 10
_TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{10}\.gwtmp", re.DOTALL)  # "." name "." _RANDOM_HEX hex TEMP_SUFFIX
# Earlier versions: mkstemp's ``.<name>.<8 of [a-z0-9_]>.tmp`` and home.py's ``.<name>.<12 hex>.tmp``,
# written without a lock, so only their age can say they are abandoned (gateway.temp_sweep).
_LEGACY_TEMP_NAME = re.compile(r"\..+\.(?:[a-z0-9_]{8}|[0-9a-f]{12})\.tmp", re.DOTALL)
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}  # file systems without hard links
_TEMP_ATTEMPTS = 100


def temp_name(name: str) -> str:
    """A fresh temp file name for target ``name``: ``.<name>.<10 random hex>.gwtmp``.

    At most NAME_MAX_BYTES bytes: the ``<name>`` part is cut short for a target
    whose own name is near the limit (the pattern stays recognisable, and the
    random part keeps it unique).
    """
    budget = NAME_MAX_BYTES - len(f"..{'0' * _RANDOM_HEX}{TEMP_SUFFIX}")
    shown = os.fsdecode(os.fsencode(name)[:budget])
    return f".{shown}.{os.urandom(_RANDOM_HEX // 2).hex()}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of ``write_atomic``'s temp files (the current pattern)."""
    return _TEMP_NAME.fullmatch(name) is not None


def is_legacy_temp_name(name: str) -> bool:
    """Whether ``name`` is a temp file of an earlier version (``.<name>.<random>.tmp``, no lock)."""
    return _LEGACY_TEMP_NAME.fullmatch(name) is not None


class WriteConflict(FailedPrecondition):
    """The file changed between the writer's read and its rename (CAS failed), or it exists
    where it had to be created."""


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def folder_lock(directory: Path) -> Iterator[None]:
    """Hold the exclusive advisory lock of ``directory`` (flock on its descriptor) for the block.

    Released when the block ends, and by the kernel if the process dies.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    expected: bytes | None | object = ...,
    mode: int = 0o644,
    keep_mode: bool = True,
    durable: bool = True,
    locked: bool = False,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    ``expected``: when given, the write happens only if the file's current
    content equals it (``None`` meaning "the file must not exist"); otherwise
    WriteConflict is raised and nothing changes. The new file keeps the old
    file's permission bits, or gets ``mode`` when it is new; with
    ``keep_mode=False`` it always gets ``mode`` (config.json is 0600 whatever
    it was before).
    ``locked``: the caller already holds ``folder_lock(path.parent)`` (a
    second flock on the folder from the same process would wait for itself).
    ``before_rename``: called under the folder lock once the compare-and-swap
    has passed, just before the rename (dreaming journals a commit's edits
    there, so a crash right after the rename still finds them in its journal).
    The rename may still fail after it (an I/O error; a creator that takes no
    lock), so what it records must be checked against the file later. An
    exception from it aborts the write.
    Raises OSError on I/O failure, with the old content left intact.
    """
    directory = path.parent
    fd, tmp = open_temp(directory, path.name)
    try:  # the temp file's lock (on fd) is held until the rename or the unlink, then closed
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
            try:
                os.fchmod(fd, os.stat(path).st_mode & 0o7777 if keep_mode else mode)
            except FileNotFoundError:
                os.fchmod(fd, mode)
            with contextlib.nullcontext() if locked else folder_lock(directory):
                if expected is None:
                    if os.path.lexists(path):
                        raise WriteConflict(f"{path.name} already exists; nothing was written")
                elif expected is not ... and _read_or_none(path) != expected:
                    raise WriteConflict(f"{path.name} changed on disk since it was read; nothing was written")
                if before_rename is not None:
                    before_rename()
                if expected is None:
                    _create(tmp, path)
                else:
                    os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
    finally:
        os.close(fd)
    if durable:
        _fsync_dir(directory)


def remove_atomic(path: Path, *, expected: bytes, durable: bool = True) -> None:
    """Remove ``path`` if its content is ``expected`` (compare-and-swap under the folder's lock, like
    ``write_atomic``), then sync the folder. Raises WriteConflict when it holds anything else or is
    gone, OSError on I/O failure."""
    with folder_lock(path.parent):
        if _read_or_none(path) != expected:
            raise WriteConflict(f"{path.name} changed on disk since it was read; not removed")
        os.unlink(path)
    if durable:
        _fsync_dir(path.parent)


def open_temp(directory: Path, name: str) -> tuple[int, Path]:
    """Create a new, empty temp file for target ``name`` in ``directory`` (mode 0600) and lock it.

    Returns its descriptor, holding an exclusive ``flock``, and its path; the
    caller keeps the descriptor open until it has renamed or unlinked the file,
    so a sweep (gateway.temp_sweep) never removes it. Never follows a link.
    Raises OSError when the folder refuses the file.
    """
    for _ in range(_TEMP_ATTEMPTS):
        tmp = directory / temp_name(name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink > 0:
                return fd, tmp
        except BaseException:
            discard_temp(fd, tmp)
            raise
        # A sweep took it between our create and our lock (it was unlocked then): make another.
        os.close(fd)
    raise FileExistsError(errno.EEXIST, f"no free temp file name for {name} after {_TEMP_ATTEMPTS} tries", str(directory))


def discard_temp(fd: int, tmp: Path) -> None:
    """Give up a temp file from ``open_temp``: close its descriptor and remove it (gone already is fine)."""
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()


def link_new(tmp: Path, path: Path) -> bool:
    """Put the finished temp file ``tmp`` (from ``open_temp``, its descriptor closed) at ``path``
    unless something is there already (under the folder's lock, as ``write_atomic`` creates a
    file), then sync the folder; whether it was put there. ``tmp`` is gone afterwards either way.
    FileNotFoundError when ``tmp`` itself is gone (a sweep took it once it was unlocked)."""
    try:
        with folder_lock(path.parent):
            _create(tmp, path)
    except WriteConflict:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        return False
    _fsync_dir(path.parent)
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _create(tmp: Path, path: Path) -> None:
    """Put ``tmp`` at ``path`` only if nothing is there (the caller holds the folder lock)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise WriteConflict(f"{path.name} already exists; nothing was written") from None
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        # No hard links here: the folder lock still excludes the suite's own writers.
        if os.path.lexists(path):
            raise WriteConflict(f"{path.name} already exists; nothing was written") from None
        os.replace(tmp, path)
        return
    tmp.unlink()


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
