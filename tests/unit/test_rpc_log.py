"""The one log line per RPC (gateway.rpc.unary) names the outcome the caller saw."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
import structlog
import structlog.testing

from gateway import rpc


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
    lines: list[tuple[Any, ...]] = []
    monkeypatch.setattr(rpc, "_log_rpc", lambda *args: lines.append(args))
    return lines


def test_a_call_that_returns_is_logged_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = logged(monkeypatch)

    async def main() -> str:
        reply = await Servicer().Fine(Request(), None)
        await asyncio.sleep(0)  # the line is written on the loop's next turn
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
        await asyncio.sleep(0)

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
        await asyncio.sleep(0)

    with structlog.testing.capture_logs() as events:
        asyncio.run(main())
    # The caller sees only "internal error": the exception's text may quote a key or a body.
    assert context.aborted == [(grpc.StatusCode.INTERNAL, "internal error")]
    [failed] = [e for e in events if e["event"] == "rpc_failed"]
    assert failed["method"] == "Crash" and failed["log_level"] == "error" and failed.get("exc_info") is True
    assert [line[:4] for line in lines] == [("Crash", "alfred", None, "INTERNAL")]
