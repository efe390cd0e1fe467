"""An agent removed from config.json while the watcher runs leaves nothing behind in it.

The real watcher, driven over gRPC with the admin key: bob has a live session and an open
WatchDirectives stream; a live edit removes bob. His stream ends with NOT_FOUND, and when the
operator adds bob again he starts clean: no live session, no last activity (the watcher kept
neither).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import grpc
import pytest
from suite_support import ADMIN_KEY, Suite, make_home, wait_until

from gateway.v1 import watcher_pb2, watcher_pb2_grpc

pytestmark = pytest.mark.integration

AUTH = (("x-api-key", ADMIN_KEY),)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("removed"))
    running = Suite(home, http_port, ports)
    try:
        running.start("watcher")
        yield running
    finally:
        running.stop_all()


def set_agents(suite: Suite, ids: list[str]) -> None:
    path = suite.home / "config.json"
    raw = json.loads(path.read_text())
    raw["agents"] = [{"id": agent_id} for agent_id in ids]
    tmp = suite.home / ".config.json.test-edit"
    tmp.write_text(json.dumps(raw, indent=2))
    os.replace(tmp, path)


def activity(stub: watcher_pb2_grpc.SessionsStub, agent: str) -> watcher_pb2.Activity | grpc.StatusCode:
    try:
        reply: watcher_pb2.Activity = stub.GetActivity(watcher_pb2.GetActivityRequest(agent_id=agent), metadata=AUTH, timeout=5)
    except grpc.RpcError as err:
        return err.code()  # type: ignore[no-any-return]
    return reply


def test_a_removed_agents_sessions_and_streams_go_with_it(suite: Suite) -> None:
    with grpc.insecure_channel(suite.address("watcher")) as channel:
        stub = watcher_pb2_grpc.SessionsStub(channel)
        stub.RegisterSession(watcher_pb2.RegisterSessionRequest(agent_id="bob", session_id="b1",
                                                                state=watcher_pb2.SESSION_STATE_BUSY), metadata=AUTH)
        stream = stub.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id="bob"), metadata=AUTH, timeout=60)
        stream.initial_metadata()  # subscribed
        before = activity(stub, "bob")
        assert isinstance(before, watcher_pb2.Activity) and [s.session_id for s in before.sessions] == ["b1"]

        set_agents(suite, ["alfred"])
        wait_until(lambda: activity(stub, "bob") == grpc.StatusCode.NOT_FOUND, 15, "bob to be removed")
        with pytest.raises(grpc.RpcError) as ended:
            next(iter(stream))
        assert ended.value.code() == grpc.StatusCode.NOT_FOUND
        assert "removed from the config" in (ended.value.details() or "")

        set_agents(suite, ["alfred", "bob"])
        wait_until(lambda: isinstance(activity(stub, "bob"), watcher_pb2.Activity), 15, "bob to be back")
        after = activity(stub, "bob")
        assert isinstance(after, watcher_pb2.Activity)
        assert list(after.sessions) == [] and after.last_activity_ms == 0
