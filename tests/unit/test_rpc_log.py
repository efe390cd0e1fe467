"""The one log line per RPC (gateway.rpc.unary) names the outcome the caller saw."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

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
