"""Running out of a resource is UNAVAILABLE naming it, never INTERNAL, and degrades health for a while (gateway.resources)."""

from __future__ import annotations

import asyncio
import errno
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import apsw
import grpc
import pytest

from gateway import resources, rpc
from gateway.grpc_server import resources_status
from gateway.resources import BUSY_METADATA, DISK_SPACE, MEMORY, OPEN_FILES, SHORTAGE_METADATA, Shortages, shortage

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("exc", "what"),
    [
        (OSError(errno.EMFILE, "Too many open files"), OPEN_FILES),
        (OSError(errno.ENFILE, "Too many open files in system"), resources.FILE_TABLE),
        (OSError(errno.ENOSPC, "No space left on device"), DISK_SPACE),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), DISK_SPACE),
        (apsw.FullError("database or disk is full"), DISK_SPACE),
        (MemoryError(), MEMORY),
        (ValueError("a bug"), None),
        (OSError(errno.EACCES, "Permission denied"), None),
        (apsw.SQLError("no such table: kb_meta"), None),
    ],
)
def test_what_ran_out(exc: BaseException, what: str | None) -> None:
    assert shortage(exc) == what


def test_a_shortage_behind_another_error_is_found() -> None:
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as inner:
            raise RuntimeError("could not refresh") from inner
    except RuntimeError as outer:
        assert shortage(outer) == OPEN_FILES


def test_sqlite_cannot_open_counts_as_open_files_only_at_the_limit(tmp_path: Path) -> None:
    """SQLite says only "unable to open database file": at the limit that is the limit."""
    script = textwrap.dedent(
        f"""
        import contextlib, os, resource, apsw
        from gateway.resources import shortage
        try:
            apsw.Connection({str(tmp_path / "missing" / "x.sqlite")!r}, flags=apsw.SQLITE_OPEN_READWRITE)
        except apsw.CantOpenError as exc:
            print("elsewhere", shortage(exc))
        used = len(os.listdir("/proc/self/fd"))
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 4, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        held = []
        with contextlib.suppress(OSError):  # open until the limit refuses one
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        try:
            apsw.Connection({str(tmp_path / "x.sqlite")!r})
            print("opened")
        except apsw.Error as exc:
            print("at the limit", shortage(exc))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["elsewhere None", f"at the limit {OPEN_FILES}"], out.stderr


def test_degraded_from_a_shortage_until_a_success_after_the_hold() -> None:
    now = [100.0]
    s = Shortages(clock=lambda: now[0], hold_s=15.0)
    assert s.degraded() == []
    s.ran_out(OPEN_FILES)
    now[0] += 1
    s.succeeded()
    assert s.degraded() == [OPEN_FILES]  # within the hold, whatever succeeds
    now[0] += 20
    assert s.degraded() == []  # past the hold, with a success since
    s.ran_out(DISK_SPACE)
    now[0] += 20
    assert s.degraded() == [DISK_SPACE]  # past the hold, but nothing succeeded since
    s.succeeded()
    assert s.degraded() == []


def test_health_answers_for_the_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpc_health.v1 import health_pb2

    s = Shortages()
    monkeypatch.setattr(resources, "SHORTAGES", s)
    monkeypatch.setattr(sys.modules["gateway.grpc_server"], "SHORTAGES", s)
    assert resources_status("gateway.resources") == health_pb2.HealthCheckResponse.SERVING
    s.ran_out(OPEN_FILES)
    assert resources_status("gateway.resources") == health_pb2.HealthCheckResponse.NOT_SERVING
    assert resources_status("gateway.resources/open-files") == health_pb2.HealthCheckResponse.NOT_SERVING
    assert resources_status("gateway.resources/disk-space") == health_pb2.HealthCheckResponse.SERVING
    assert resources_status("gateway.v1.Knowledge") is None


class Aborted(Exception):
    """What the fake gRPC context's abort raises, as grpc.aio's does."""


class Context:
    """What ``unary`` uses of a grpc.aio.ServicerContext."""

    def __init__(self) -> None:
        self.trailing: tuple[tuple[str, str], ...] = ()
        self.status: tuple[grpc.StatusCode, str] | None = None

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = metadata

    async def abort(self, code: grpc.StatusCode, message: str) -> None:
        self.status = (code, message)
        raise Aborted

    def code(self) -> grpc.StatusCode | None:
        return self.status[0] if self.status else None


class Request:
    agent_id = "alfred"


class Servicer:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    @rpc.unary
    async def Search(self, request: Request, context: Any) -> str:  # noqa: N802
        raise self.exc


async def call(exc: BaseException) -> Context:
    """What a handler that raises ``exc`` answers, through ``rpc.unary``."""
    context = Context()
    with pytest.raises(Aborted):
        await Servicer(exc).Search(Request(), context)
    return context


def test_a_call_that_ran_out_of_files_is_unavailable_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Shortages()
    monkeypatch.setattr(rpc, "SHORTAGES", s)
    told: list[str] = []
    s.listeners.append(told.append)
    s.process = "the kb process"

    short = asyncio.run(call(OSError(errno.EMFILE, "Too many open files")))
    assert short.status is not None and short.status[0] == grpc.StatusCode.UNAVAILABLE
    assert short.status[1].startswith("the kb process ran out of open files")
    assert short.trailing == ((SHORTAGE_METADATA, "open-files"),)
    assert s.degraded() == [OPEN_FILES] and told == [OPEN_FILES]
    bug = asyncio.run(call(ValueError("a bug")))
    assert bug.status == (grpc.StatusCode.INTERNAL, "internal error") and bug.trailing == ()


def test_a_database_locked_past_its_timeout_is_unavailable_saying_so_and_not_degraded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer holding a lock too long is not a bug in the request: 503 with a message that
    says what happened (the shim keeps it, by the metadata), and nothing ran out."""
    s = Shortages()
    monkeypatch.setattr(rpc, "SHORTAGES", s)
    s.process = "the kb process"

    try:
        raise RuntimeError("reindex failed") from apsw.BusyError("database is locked")
    except RuntimeError as wrapped:
        behind = wrapped
    for exc in (apsw.BusyError("database is locked"), behind):
        locked = asyncio.run(call(exc))
        assert locked.status == (grpc.StatusCode.UNAVAILABLE, resources.BUSY_MESSAGE.format(process="the kb process"))
        assert "locked by another writer" in locked.status[1]
        assert locked.trailing == ((BUSY_METADATA, "1"),)
    assert s.degraded() == []
    assert not resources.busy(apsw.SQLError("no such table: kb_meta")) and not resources.busy(ValueError())


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    script = textwrap.dedent(
        """
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        from gateway.resources import raise_open_files_limit
        before, now, top = raise_open_files_limit()
        print(before, now == top, resource.getrlimit(resource.RLIMIT_NOFILE)[0] == resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        """
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["256", "True", "True"], out.stderr
