"""Whether ``flock`` keeps a second process out on the file systems the suite writes to.

Every write of the suite relies on ``flock``: ``write_atomic`` locks the target's folder,
temp files are locked so a sweep can tell a live writer's from a dead one's, and the
home's ``.running/lock`` keeps a restore off a running suite (docs/concepts/writes.md
"Locks that work"). Some file systems (some network and FUSE mounts) accept ``flock``
and let a second process take the same lock, or fail it: there, none of that holds.

So each start probes, once per file system (``st_dev``) among the home, every agent's
workspace and every enabled shared vault: this process takes an exclusive lock on the
folder's own descriptor and on a fresh temp file in it (``.lock-probe.<hex>.gwtmp``,
removed at once); then ONE forked child tries a non-blocking exclusive lock on each of
them and says what happened. Every try must fail with ``EWOULDBLOCK``. The child must
be another process, not another descriptor: on NFS, ``flock`` is emulated with POSIX
locks, which never exclude their own process. A fork, not a new interpreter: the child
runs only ``open``, ``flock`` and ``write``, and a fork costs a third of an interpreter's
start (about 3 ms in a process the size of a service's at start, 10 ms in ``gateway up``'s,
measured on a shared 2-core machine).

A folder not made yet (a new agent's workspace) is probed through its nearest existing
ancestor; where no temp file can be made (a read-only folder), the folder's own lock is
probed alone. ``gateway.files.requireWorkingLocks`` false turns the check off.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gateway.atomic import temp_name

if TYPE_CHECKING:
    from gateway.config import Config

PROBE_NAME: Final = "lock-probe"  # the probe file is temp_name(PROBE_NAME): a temp file any sweep knows
OPT_OUT_KEY: Final = "gateway.files.requireWorkingLocks"
_EXCLUDED: Final = frozenset({errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES})

Lock = Callable[[int], None]


@dataclass(frozen=True)
class LockFault:
    """A file system whose locks do not work: the folder probed, what it holds, what failed."""

    folder: Path
    role: str  # "the home", "the workspace of alice", "the shared vault"
    problem: str

    def line(self) -> str:
        """One line naming the folder, what failed, and the way out."""
        return (f"flock on {self.folder} ({self.role}) {self.problem}: concurrent writes there are not safe; "
                f"use a local file system, or set {OPT_OUT_KEY} to false to start anyway")


Probe = Callable[[Sequence[tuple[str, Path]]], list[LockFault]]


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (what a later mkdir would make it on)."""
    for candidate in (folder, *folder.parents):
        if candidate.is_dir():
            return candidate
    return Path("/")


def folders(config: Config) -> list[tuple[str, Path]]:
    """What to probe for ``config``: (role, folder) for the home, each agent's workspace and each
    enabled shared vault, one per file system, the home first."""
    wanted: list[tuple[str, Path]] = [("the home", config.home)]
    for agent in config.agents:
        wanted.append((f"the workspace of {agent.id}", agent.workspace))
        if agent.knowledge.shared.enabled:
            wanted.append(("the shared vault", agent.knowledge.shared.root))
    if config.knowledge.shared.enabled:
        wanted.append(("the shared vault", config.knowledge.shared.root))
    seen: set[int] = set()
    out = []
    for role, folder in wanted:
        existing = _existing(folder)
        try:
            device = existing.stat().st_dev
        except OSError:
            continue  # gone since: the process that writes there says so itself
        if device not in seen:
            seen.add(device)
            out.append((role, existing))
    return out


def _lock_exclusive(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_EX)


@dataclass(frozen=True)
class _Target:
    role: str
    folder: Path
    path: Path  # the folder itself, or the probe file in it
    flags: int  # how the child opens it: a folder read-only, a file for writing (NFS wants it for LOCK_EX)


def _second_process(targets: Sequence[_Target]) -> list[str]:
    """What ONE forked child finds, for each target: ``x`` (the lock was refused: it works),
    ``g`` (granted: it does not), ``o<errno>`` (could not open) or ``f<errno>`` (flock failed);
    ``n<errno>`` for every target when no child could be made."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        return [f"n{exc.errno}"] * len(targets)
    if pid == 0:  # the child: system calls only, then _exit (no cleanup of the parent's state)
        code = 1
        try:
            os.close(read_end)
            answers = []
            for target in targets:
                try:
                    fd = os.open(target.path, target.flags | os.O_CLOEXEC | os.O_NOFOLLOW)
                except OSError as exc:
                    answers.append(f"o{exc.errno}")
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    answers.append("g")
                except OSError as exc:
                    answers.append("x" if exc.errno in _EXCLUDED else f"f{exc.errno}")
                finally:
                    os.close(fd)
            os.write(write_end, "\n".join(answers).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    try:
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode().split("\n") if chunks else []


def _fault(target: _Target, answer: str | None) -> LockFault | None:
    what = "the folder" if target.path == target.folder else "a file in it"
    if answer == "x" or (answer or "").startswith("o"):
        return None  # refused as it must be; or not opened (removed meanwhile): nothing said about locks
    if answer == "g":
        return LockFault(target.folder, target.role, f"does not keep a second process out (one took the lock this one held on {what})")
    if answer and answer[0] in "fn":
        why = os.strerror(int(answer[1:]))
        problem = f"fails in a second process ({why})" if answer[0] == "f" else f"could not be checked: no second process ({why})"
        return LockFault(target.folder, target.role, problem)
    return LockFault(target.folder, target.role, "could not be checked: the second process did not answer")


def probe(checked: Sequence[tuple[str, Path]], lock: Lock = _lock_exclusive) -> list[LockFault]:
    """The faults of the folders ``checked`` (role, folder), each on a file system of its own; empty
    when a second process is kept out of every lock this one holds.

    ``lock``: how this process takes its exclusive lock on a descriptor (a test passes one that
    does nothing, as some network file systems do). Raises nothing for a folder it cannot open
    or write in (the process that writes there reports that itself).
    """
    faults: list[LockFault] = []
    targets: list[_Target] = []
    with contextlib.ExitStack() as held:
        for role, folder in checked:
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            held.callback(os.close, fd)
            try:
                lock(fd)
            except OSError as exc:
                faults.append(LockFault(folder, role, f"fails ({exc.strerror or exc})"))
                continue
            targets.append(_Target(role, folder, folder, os.O_RDONLY | os.O_DIRECTORY))
            file = _probe_file(folder, lock, held)
            if file is not None:
                targets.append(_Target(role, folder, file, os.O_WRONLY))
        answers = _second_process(targets) if targets else []
    reported: set[Path] = {fault.folder for fault in faults}
    for index, target in enumerate(targets):
        fault = _fault(target, answers[index] if index < len(answers) else None)
        if fault is not None and fault.folder not in reported:
            reported.add(fault.folder)
            faults.append(fault)
    return faults


def _probe_file(folder: Path, lock: Lock, held: contextlib.ExitStack) -> Path | None:
    """A new temp file in ``folder``, locked by ``lock`` and removed when ``held`` closes; None when
    the folder takes no new file (read-only, not ours) or the lock fails (the folder's own lock,
    taken the same way, already said whether locks work there)."""
    path = folder / temp_name(PROBE_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    held.callback(os.close, fd)
    held.callback(_unlink, path)  # runs before the close: the file is never there unlocked
    try:
        lock(fd)
    except OSError:
        return None
    return path


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def refusal(config: Config, run: Probe = probe) -> str | None:
    """None when every file system ``config`` writes to keeps a second process out of its locks
    (or ``gateway.files.requireWorkingLocks`` is false); else one line naming each folder where it
    does not and what failed. ``run``: the probe (a test passes one that reports a fault)."""
    if not config.files.require_working_locks:
        return None
    faults = run(folders(config))
    return "; ".join(fault.line() for fault in faults) or None

