"""Sessions.WatchDirectives: a bug inside the stream answers INTERNAL and is logged, like every unary RPC."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog.testing

from gateway.auth import Authenticator
from gateway.config import load_config
from gateway.home import ensure_home, read_internal_token
from gateway.v1 import watcher_pb2
from services.watcher.directive_hub import DirectiveHub
from services.watcher.lineage import Lineage
from services.watcher.servicer import Sessions
from services.watcher.sessions import SessionRecord, SessionRegistry


class Aborted(grpc.aio.AbortError):
    """What ``context.abort`` raises in a real server."""


class Context:
    """The part of a ServicerContext that WatchDirectives uses."""

    def __init__(self, key: str) -> None:
        self._metadata = (("x-api-key", key),)
        self.aborted: list[tuple[grpc.StatusCode, str]] = []

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def send_initial_metadata(self, metadata: Any) -> None:
        return None

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted.append((code, details))
        raise Aborted()


class BrokenRegistry(SessionRegistry):
    def live(self, agent_id: str) -> list[SessionRecord]:
        raise KeyError("secret-detail-in-the-exception")


def test_a_bug_in_the_stream_is_internal_with_a_generic_message_and_logged(tmp_path: Path) -> None:
    key = ensure_home(tmp_path)
    assert key is not None
    config = load_config(tmp_path)
    auth = Authenticator(config.api.keys, read_internal_token(tmp_path))
    hub = DirectiveHub()
    servicer = Sessions(lambda: (config, auth), BrokenRegistry(clock=lambda: 0), hub, lambda agent: None, Lineage(clock=lambda: 0))
    context = Context(key)

    sent: list[watcher_pb2.Directive] = []

    async def main() -> None:
        with pytest.raises(Aborted):
            async for directive in servicer.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id="alfred"), context):
                sent.append(directive)

    with structlog.testing.capture_logs() as events:
        asyncio.run(main())
    # The caller sees only "internal error": the exception's text may quote a key or a body.
    assert sent == [] and context.aborted == [(grpc.StatusCode.INTERNAL, "internal error")]
    [failed] = [e for e in events if e["event"] == "rpc_failed"]
    assert failed["method"] == "WatchDirectives" and failed["log_level"] == "error"
    [line] = [e for e in events if e["event"] == "rpc"]
    assert (line["method"], line["agent"], line["code"]) == ("WatchDirectives", "alfred", "INTERNAL")
    assert "secret-detail" not in repr(line)
    assert not hub._subscribers.get("alfred")  # the subscription was dropped with the stream
