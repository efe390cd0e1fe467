"""gateway.logs: the timestamp and the batched write of the suite's JSON lines."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import pytest
import structlog
import structlog.testing

from gateway import logs

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def parse(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_the_timestamp_reads_as_structlogs_iso_utc_stamp() -> None:
    ours = logs._Timestamp()(None, "info", {})["timestamp"]
    theirs = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "info", {})["timestamp"]
    assert ISO_UTC.match(ours) and ISO_UTC.match(theirs)
    assert abs((parse(ours) - parse(theirs)).total_seconds()) < 1


def test_a_line_logged_late_is_stamped_with_the_moment_it_describes() -> None:
    stamp = logs._Timestamp()
    event = stamp(None, "info", {logs.STAMP_AT: 1_796_170_000.25, "event": "rpc"})
    assert event == {"event": "rpc", "timestamp": "2026-12-02T00:06:40.250000Z"}


def test_each_second_is_formatted_afresh() -> None:
    stamp = logs._Timestamp()
    first = stamp(None, "info", {logs.STAMP_AT: 59.75})["timestamp"]
    second = stamp(None, "info", {logs.STAMP_AT: 60.25})["timestamp"]
    assert (first, second) == ("1970-01-01T00:00:59.750000Z", "1970-01-01T00:01:00.250000Z")


class Buffer:
    def __init__(self) -> None:
        self.data = b""
        self.flushes = 0

    def write(self, data: bytes) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        self.flushes += 1


def test_lines_inside_one_write_are_flushed_once_at_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = Buffer()
    stdout = logs._Stdout(buffer)  # type: ignore[arg-type]
    monkeypatch.setattr(logs, "_stdout", stdout)
    logger = structlog.BytesLogger(stdout)  # type: ignore[arg-type]
    logger.msg(b"alone")
    assert buffer.flushes == 1
    with logs.one_write():
        logger.msg(b"one")
        with logs.one_write():
            logger.msg(b"two")
        logger.msg(b"three")
        assert buffer.flushes == 1
    assert buffer.flushes == 2
    assert buffer.data == b"alone\none\ntwo\nthree\n"


def test_off_the_suites_logging_a_later_line_is_logged_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # In a test or a library user, nothing set up the batch's writer: the line is not held back.
    monkeypatch.setattr(logs, "_stdout", None)

    async def main() -> list[MutableMapping[str, Any]]:
        with structlog.testing.capture_logs() as seen:
            logs.later("first", n=1)
            return list(seen)

    [first] = asyncio.run(main())
    assert (first["event"], first["n"], first["log_level"]) == ("first", 1, "info")
    with structlog.testing.capture_logs() as seen:
        logs.later("second", n=2)  # and off any event loop
    assert [e["event"] for e in seen] == ["second"]


class Stdout(io.BytesIO):
    """stdout's bytes, counting its flushes."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1

    @property
    def data(self) -> bytes:
        return self.getvalue()

    def clear(self) -> None:
        self.seek(0)
        self.truncate()
        self.flushes = 0


Configure = Callable[..., Stdout]


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Configure]:
    """``configure(service, level)`` as a process of the suite runs it, writing to a buffer; undone afterwards.

    Called in the test itself: pytest puts its own capture back on ``sys.stdout`` between a fixture and its test.
    """
    saved = structlog.get_config()
    processors = list(saved["processors"])
    for name in ("_stdout", "_chain", "_level"):
        monkeypatch.setattr(logs, name, getattr(logs, name))

    def configure(service: str, level: int = logging.INFO) -> Stdout:
        buffer = Stdout()
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(buffer))
        logs.configure(service, level)
        return buffer

    yield configure
    structlog.configure(**{**saved, "processors": processors})


def lines_of(buffer: Stdout) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.data.splitlines()]


def test_a_batch_renders_each_line_as_structlog_would_in_one_write(configured: Configure) -> None:
    out = configured("file_api")
    log = structlog.get_logger()
    at = 1_796_170_000.25
    log.info("rpc", method="GetFile", agent="alfred", key="ops", code="OK", ms=0.02, **{logs.STAMP_AT: at})
    direct = out.data
    out.clear()
    logs._log_lines([("rpc", {"method": "GetFile", "agent": "alfred", "key": "ops", "code": "OK", "ms": 0.02}, at)] * 3)
    assert out.data == direct * 3  # the same bytes, key order included
    assert out.flushes == 1


def test_a_batch_keeps_to_the_configured_level(configured: Configure) -> None:
    out = configured("file_api", logging.WARNING)
    logs._log_lines([("rpc", {"method": "GetFile"}, 1.0)])
    assert out.data == b""


def test_lines_queued_on_a_loop_are_written_together_by_its_timer(configured: Configure) -> None:
    out = configured("http")

    async def main() -> tuple[int, int]:
        before = out.flushes
        for n in range(3):
            logs.later("http", n=n)
        queued = len(out.data)
        await asyncio.sleep(3 * logs.FLUSH_AFTER_S)
        return queued, out.flushes - before

    assert asyncio.run(main()) == (0, 1)
    assert [(e["event"], e["n"], e["service"]) for e in lines_of(out)] == [("http", 0, "http"), ("http", 1, "http"), ("http", 2, "http")]


def test_a_line_queued_on_a_loop_in_another_thread_is_written_by_that_loops_timer(configured: Configure) -> None:
    # The queue's timer belongs to one loop at a time; a line from another loop arms that loop's timer.
    out = configured("kb")

    async def queue_one(n: int) -> None:
        logs.later("rpc", n=n)
        await asyncio.sleep(3 * logs.FLUSH_AFTER_S)

    async def main() -> None:
        logs.later("rpc", n=0)
        await asyncio.to_thread(asyncio.run, queue_one(1))
        await asyncio.sleep(3 * logs.FLUSH_AFTER_S)

    asyncio.run(main())
    assert sorted(e["n"] for e in lines_of(out)) == [0, 1]


def test_a_line_queued_by_a_loop_that_closed_is_written_by_the_next_one(configured: Configure) -> None:
    out = configured("kb")

    async def queue_one(n: int, wait: float) -> None:
        logs.later("rpc", n=n)
        await asyncio.sleep(wait)

    asyncio.run(queue_one(0, 0))  # closes before its timer fires
    asyncio.run(queue_one(1, 3 * logs.FLUSH_AFTER_S))  # same thread, a new loop: its own timer
    assert sorted(e["n"] for e in lines_of(out)) == [0, 1]


def test_capturing_logs_sees_the_batched_lines(configured: Configure) -> None:
    out = configured("file_api")

    async def main() -> None:
        logs.later("rpc", method="GetFile")
        await asyncio.sleep(3 * logs.FLUSH_AFTER_S)

    with structlog.testing.capture_logs() as seen:
        asyncio.run(main())
    assert [(e["event"], e["method"]) for e in seen] == [("rpc", "GetFile")]
    assert out.data == b""
