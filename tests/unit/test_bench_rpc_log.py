"""The benches' handler times from a service's rpc log lines (bench/harness/procs.py ``rpc_seconds``),
read from a log written by the suite's own logging (gateway/logs.py): its rpc lines leave in
batches after the calls, so the lines of the calls a bench has made are not all in the log yet."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from bench_modules import bench

from gateway import logs

procs = bench("harness.procs")

WARMUP = 20
MEASURED = 30


class ServiceLog:
    """A log file and the stream a child process has as its stdout on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stdout = io.TextIOWrapper(open(path, "wb"))  # noqa: SIM115 - closed by the fixture

    def configure(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``configure`` as the KB runs it under a bench, its stdout the log file (``Children.start``).
        Called in the test itself: pytest puts its own capture back on ``sys.stdout`` between a fixture and its test."""
        monkeypatch.setattr(sys, "stdout", self.stdout)
        logs.configure("kb")


@pytest.fixture
def service_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServiceLog]:
    """A service's log; the test's logging restored afterwards."""
    saved = structlog.get_config()
    processors = list(saved["processors"])
    for name in ("_stdout", "_chain", "_level"):
        monkeypatch.setattr(logs, name, getattr(logs, name))
    log = ServiceLog(tmp_path / "kb.log")
    yield log
    structlog.configure(**{**saved, "processors": processors})
    log.stdout.close()


def call_ended(method: str, ms: float) -> None:
    """What ``gateway.rpc.unary`` does as a call ends: its line is queued, not written."""
    logs.later("rpc", method=method, agent="bench", key="internal", code="OK", ms=ms)


def test_the_measured_calls_are_told_from_a_warm_up_whose_lines_are_written_after_it(
    service_log: ServiceLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kb_shared's missing "Search handler time" rows: the bench marked the log's length when its
    # warm-up had returned, but the warm-up's lines were still queued in the service; written after
    # the mark, they counted as measured calls, and the count no longer matched the calls made.
    service_log.configure(monkeypatch)

    async def service_and_bench() -> tuple[int, list[float]]:
        for n in range(WARMUP):
            call_ended("Search", float(n))
        mark = service_log.path.read_bytes().count(b"\n")  # the warm-up has returned: what a mark would count now
        for n in range(MEASURED):
            call_ended("Search", 1000.0 + n)
            call_ended("Get", 5.0)  # another method between them
        # The bench reads in its own thread while the service's loop goes on writing its batches.
        return mark, await asyncio.to_thread(procs.rpc_seconds, service_log.path, "Search", WARMUP, MEASURED)

    mark, seconds = asyncio.run(service_and_bench())
    assert mark == 0  # none of the warm-up's lines was in the log yet
    assert len(procs._rpc_lines(service_log.path, "Search")[mark:]) == WARMUP + MEASURED  # what the mark took in
    assert seconds == [(1000.0 + n) / 1000 for n in range(MEASURED)]


def test_lines_that_never_come_fail_the_read_naming_them(service_log: ServiceLog, monkeypatch: pytest.MonkeyPatch) -> None:
    service_log.configure(monkeypatch)

    async def service() -> None:
        for n in range(3):
            call_ended("Search", float(n))
        logs.flush_later()  # what the service's timer does

    asyncio.run(service())
    assert procs.rpc_seconds(service_log.path, "Search", 1, 2, timeout=0) == [0.001, 0.002]
    with pytest.raises(RuntimeError, match=r"3 rpc lines of Search after 0 s, expected 1 \+ 3"):
        procs.rpc_seconds(service_log.path, "Search", 1, 3, timeout=0)
