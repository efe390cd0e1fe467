"""gateway.logs: the timestamp and the batched write of the suite's JSON lines."""

from __future__ import annotations

import asyncio
import datetime
import re

import pytest
import structlog

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
    seen: list[int] = []

    async def main() -> None:
        logs.later(seen.append, 1)
        assert seen == [1]

    asyncio.run(main())
    logs.later(seen.append, 2)  # and off any event loop
    assert seen == [1, 2]
