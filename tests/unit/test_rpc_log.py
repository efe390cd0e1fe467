"""The one log line per RPC (gateway.rpc.unary) names the outcome the caller saw."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
import structlog.testing

from gateway import logs, rpc

REPO = Path(__file__).resolve().parents[2]


class Request:
    agent_id = "alfred"


class Servicer:
    @rpc.unary
    async def Fine(self, request: Request, context: Any) -> str:  # noqa: N802
        return "reply"

    @rpc.unary
    async def Slow(self, request: Request, context: Any) -> str:  # noqa: N802
        await asyncio.sleep(3600)
        return "never"


def logged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The rpc lines as the batch gets them: (method, agent, key, code, ms, moment)."""
    lines: list[tuple[Any, ...]] = []

    def log_lines(batch: list[logs.Line]) -> None:
        for event, fields, at in batch:
            assert event == "rpc"
            lines.append((fields["method"], fields["agent"], fields["key"], fields["code"], fields["ms"], at))

    monkeypatch.setattr(logs, "_log_lines", log_lines)
    monkeypatch.setattr(logs, "_stdout", logs._Stdout(io.BytesIO()))  # as configure() leaves it in a process of the suite
    return lines


def test_a_call_that_returns_is_logged_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = logged(monkeypatch)

    async def main() -> str:
        reply = await Servicer().Fine(Request(), None)
        await asyncio.sleep(2 * logs.FLUSH_AFTER_S)  # the queued line is written by the loop's timer
        return reply

    assert asyncio.run(main()) == "reply"
    assert [line[:4] for line in lines] == [("Fine", "alfred", None, "OK")]


def test_a_cancelled_call_is_logged_cancelled_not_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    # gRPC cancels the handler's task when the caller goes away or its deadline passes.
    lines = logged(monkeypatch)

    async def main() -> None:
        task = asyncio.ensure_future(Servicer().Slow(Request(), None))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(2 * logs.FLUSH_AFTER_S)

    asyncio.run(main())
    assert [line[:4] for line in lines] == [("Slow", "alfred", None, "CANCELLED")]


class Aborted(grpc.aio.AbortError):
    """What ``context.abort`` raises in a real server."""


class Context:
    """The part of a ServicerContext that ``unary`` uses when a handler fails."""

    def __init__(self) -> None:
        self.aborted: list[tuple[grpc.StatusCode, str]] = []

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted.append((code, details))
        raise Aborted()


class Broken:
    @rpc.unary
    async def Crash(self, request: Request, context: Any) -> str:  # noqa: N802
        raise KeyError("secret-detail-in-the-exception")


def test_an_unexpected_exception_is_internal_with_a_generic_message_and_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = logged(monkeypatch)
    context = Context()

    async def main() -> None:
        with pytest.raises(grpc.aio.AbortError):
            await Broken().Crash(Request(), context)
        await asyncio.sleep(2 * logs.FLUSH_AFTER_S)

    with structlog.testing.capture_logs() as events:
        asyncio.run(main())
    # The caller sees only "internal error": the exception's text may quote a key or a body.
    assert context.aborted == [(grpc.StatusCode.INTERNAL, "internal error")]
    [failed] = [e for e in events if e["event"] == "rpc_failed"]
    assert failed["method"] == "Crash" and failed["log_level"] == "error" and failed.get("exc_info") is True
    assert [line[:4] for line in lines] == [("Crash", "alfred", None, "INTERNAL")]


def test_the_lines_of_a_busy_moment_wait_for_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rendered one by one between the calls, the lines would cost a fifth of the file API's throughput:
    # they queue, and leave together on the timer, or on the next turn once the queue is full.
    lines = logged(monkeypatch)

    async def main() -> list[int]:
        seen = []
        for _ in range(logs.MAX_QUEUED - 1):
            await Servicer().Fine(Request(), None)
        await asyncio.sleep(0)
        seen.append(len(lines))  # not yet: the timer has not fired
        await Servicer().Fine(Request(), None)  # the queue is full: written on the next turn
        await asyncio.sleep(0)
        seen.append(len(lines))
        await Servicer().Fine(Request(), None)
        await asyncio.sleep(2 * logs.FLUSH_AFTER_S)
        seen.append(len(lines))
        return seen

    assert asyncio.run(main()) == [0, logs.MAX_QUEUED, logs.MAX_QUEUED + 1]


def test_a_line_keeps_the_moment_its_call_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = logged(monkeypatch)

    async def main() -> tuple[float, float]:
        before = time.time()
        await Servicer().Fine(Request(), None)
        after = time.time()
        await asyncio.sleep(2 * logs.FLUSH_AFTER_S)
        return before, after

    before, after = asyncio.run(main())
    [line] = lines
    assert before <= line[5] <= after


def test_queued_lines_are_written_when_the_process_exits(tmp_path: Path) -> None:
    # A process that stops before the timer fires (SIGTERM ends serve, then the interpreter exits)
    # still writes its lines: the queue is flushed at exit.
    script = tmp_path / "serve_once.py"
    script.write_text(textwrap.dedent("""
        import asyncio
        from gateway import rpc
        from gateway.logs import configure

        class Request:
            agent_id = "alfred"

        class Servicer:
            @rpc.unary
            async def Fine(self, request, context):
                return "reply"

        configure("file_api")
        asyncio.run(Servicer().Fine(Request(), None))  # the loop closes before the timer fires
    """), encoding="utf-8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    [line] = [json.loads(text) for text in out.stdout.splitlines()]
    assert (line["event"], line["method"], line["agent"], line["code"], line["service"]) == ("rpc", "Fine", "alfred", "OK", "file_api")
    assert line["timestamp"].endswith("Z") and "_stamp_at" not in line
