"""Which processes hold a home: the lock that keeps ``gateway restore`` off a running suite.

Every process that serves or reads a home as a whole (each ``gateway serve``, the
``gateway up`` launcher, a ``gateway backup``) holds a *shared* ``flock`` on
``<home>/.running/lock`` for as long as it runs (``hold_home``). A restore takes
the same lock *exclusively* (``exclusive_home``), without waiting: while any
holder is alive it cannot, and it refuses, naming them. The kernel drops a
process's locks when it dies (``kill -9`` included), and flock works across
containers that share the home's volume, so the lock says what runs now, never
what ran once: nothing is guessed from ports or pid files.

To name the holders, each one also writes a record, ``<home>/.running/<role>-<pid>-<hex>.json``
(``{"role", "pid", "host", "since"}``), and holds an exclusive ``flock`` on it. The
record is made as a locked temp file (``atomic.open_temp``) renamed into place, so
a record that is visible and unlocked belongs to a process that is gone: it is
ignored, and removed by the next holder. A clean exit removes its own record.

While a restore holds the lock exclusively, a process that starts on that home
refuses to (one line naming the restore), so it never reads a half-restored home.
The folder is transient: backups leave it out, and a restore does not count it
when it checks that a home is empty (docs/architecture.md "Home layout").
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway.atomic import is_temp_name, open_temp
from gateway.errors import CommandError

RUNNING_DIR: Final = ".running"
LOCK_FILE: Final = "lock"
RECORD_SUFFIX: Final = ".json"
_ATTEMPTS: Final = 5  # exclusive attempts when the holders went away between the try and the listing


class HomeBusy(CommandError):
    """The home is held in a way that forbids what was asked; the message names the holders."""


class NoHold(CommandError):
    """The lock folder of the home cannot be made or opened (a read-only home, a wrong owner)."""


@dataclass(frozen=True)
class Holder:
    """One live process holding the home: its role (``kb``, ``gateway up``, ``backup``…), pid and host."""

    role: str
    pid: int
    host: str

    def describe(self, here: str) -> str:
        """``kb (pid 4242)``; the host is named when it is not ``here`` (another container)."""
        where = "" if self.host == here else f" on {self.host}"
        return f"{self.role} (pid {self.pid}{where})"


def _folder(home: Path) -> Path:
    folder = home / RUNNING_DIR
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _open_lock(home: Path) -> int:
    return os.open(_folder(home) / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def _try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _live_record(path: Path) -> Holder | None:
    """The holder a record names while its writer holds it; None for a stale or foreign file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if _try_flock(fd, fcntl.LOCK_SH):
            return None  # nobody holds it: its process is gone
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read())
        return Holder(str(data["role"]), int(data["pid"]), str(data.get("host", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def holders(home: Path) -> list[Holder]:
    """The live holders recorded in ``home``, oldest pid first; empty when none (or no folder)."""
    try:
        names = sorted(os.listdir(home / RUNNING_DIR))
    except OSError:
        return []
    found = [_live_record(home / RUNNING_DIR / n) for n in names if n.endswith(RECORD_SUFFIX)]
    return sorted((h for h in found if h is not None), key=lambda h: (h.host, h.pid))


def _sweep(folder: Path) -> None:
    """Remove the records and record temp files whose writers are gone (unlocked), under their lock."""
    for name in os.listdir(folder):
        if not (name.endswith(RECORD_SUFFIX) or is_temp_name(name)):
            continue
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if _try_flock(fd, fcntl.LOCK_EX) and os.fstat(fd).st_ino == os.lstat(path).st_ino:
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


def _listing(home: Path, holders_now: list[Holder]) -> str:
    here = socket.gethostname()
    if not holders_now:
        return f"a process that left no record holds {home / RUNNING_DIR / LOCK_FILE}"
    return ", ".join(h.describe(here) for h in holders_now)


class Hold:
    """A shared hold on a home and this process's record in it; ``release`` (or exit) ends both."""

    def __init__(self, home: Path, lock_fd: int, record_fd: int, record: Path) -> None:
        self.home, self._lock_fd, self._record_fd, self.record = home, lock_fd, record_fd, record
        self._released = False
        atexit.register(self.release)

    def release(self) -> None:
        """Remove the record and drop both locks; a second call does nothing."""
        if self._released:
            return
        self._released = True
        atexit.unregister(self.release)
        with contextlib.suppress(OSError):
            os.unlink(self.record)
        for fd in (self._record_fd, self._lock_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def hand_over(self) -> tuple[int, int, str]:
        """Keep this hold across an ``exec`` of this process (``gateway up`` does one): both fds
        inheritable, nothing released at this image's exit. The lock fd, the record fd and the
        record's path: what the new image makes its ``Hold`` of."""
        atexit.unregister(self.release)
        self._released = True
        for fd in (self._lock_fd, self._record_fd):
            os.set_inheritable(fd, True)
        return self._lock_fd, self._record_fd, str(self.record)

    def __enter__(self) -> Hold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _write_record(folder: Path, role: str) -> tuple[int, Path]:
    """The record of this process, locked (exclusive) before it is visible; its fd and path."""
    pid = os.getpid()
    name = f"{''.join(c if c.isalnum() or c in '._' else '_' for c in role)}-{pid}-{os.urandom(4).hex()}{RECORD_SUFFIX}"
    fd, tmp = open_temp(folder, name)
    try:
        body = {"role": role, "pid": pid, "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.write(fd, json.dumps(body).encode() + b"\n")
        os.rename(tmp, folder / name)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return fd, folder / name


def hold_home(home: Path, role: str) -> Hold:
    """Take a shared hold on ``home`` for this process (role ``kb``, ``gateway up``, ``gateway backup``…).

    Held until ``release`` or the process ends (an exit handler keeps the hold
    alive, so a caller that holds for its whole life may drop the object).
    Creates ``home`` when missing. Raises HomeBusy, naming the restore, when a
    restore holds the home; NoHold when the lock folder cannot be written.
    """
    try:
        lock_fd = _open_lock(home)
    except OSError as exc:
        raise NoHold(f"cannot open {home / RUNNING_DIR / LOCK_FILE}, the lock of the home ({exc.strerror or exc})") from None
    try:
        if not _try_flock(lock_fd, fcntl.LOCK_SH):
            raise HomeBusy(_restoring(home))
        folder = home / RUNNING_DIR
        _sweep(folder)
        record_fd, record = _write_record(folder, role)
    except OSError as exc:
        os.close(lock_fd)
        raise NoHold(f"cannot write a record in {home / RUNNING_DIR} ({exc.strerror or exc})") from None
    except BaseException:
        os.close(lock_fd)
        raise
    return Hold(home, lock_fd, record_fd, record)


def refuse_while_restoring(home: Path) -> None:
    """Raise HomeBusy when a restore holds ``home`` now; writes nothing (for commands that must
    leave a home as it was, such as ``gateway init`` on a home that is set up)."""
    try:
        fd = os.open(home / RUNNING_DIR / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # no lock file: no process of the suite has held this home
    try:
        if not _try_flock(fd, fcntl.LOCK_SH):
            raise HomeBusy(_restoring(home))
    finally:
        os.close(fd)


def _restoring(home: Path) -> str:
    found = holders(home)
    who = _listing(home, found) if found else "another process (a gateway restore)"
    return f"{who} is writing {home} and holds it exclusively; start again when it has finished"


@contextlib.contextmanager
def exclusive_home(home: Path, role: str = "gateway restore") -> Iterator[None]:
    """Hold ``home`` exclusively for the block, or raise HomeBusy at once naming every holder.

    While the block runs, ``hold_home`` on it refuses. The message is one
    line: ``HOME is in use by gateway up (pid 4230), file_api (pid 4231), …``. Raises NoHold
    when the lock cannot be opened.
    """
    try:
        lock_fd = _open_lock(home)
    except OSError as exc:
        raise NoHold(f"cannot open {home / RUNNING_DIR / LOCK_FILE}, the lock of the home ({exc.strerror or exc})") from None
    try:
        for attempt in range(_ATTEMPTS):
            if _try_flock(lock_fd, fcntl.LOCK_EX):
                break
            found = holders(home)
            if found or attempt == _ATTEMPTS - 1:
                raise HomeBusy(f"{home} is in use by {_listing(home, found)}")
            time.sleep(0.05)  # they let go between the try and the listing: try again
        folder = home / RUNNING_DIR
        _sweep(folder)
        record_fd, record = _write_record(folder, role)
        try:
            yield
        finally:
            os.close(record_fd)
            with contextlib.suppress(OSError):
                os.unlink(record)
    finally:
        os.close(lock_fd)
