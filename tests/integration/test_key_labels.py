"""Writes are traceable to a key: each rpc log line names the caller's key (never the key itself)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, make_home, wait_until

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import files_pb2, files_pb2_grpc, watcher_pb2, watcher_pb2_grpc

pytestmark = pytest.mark.integration

UNNAMED_KEY = "unnamed-key-0001"


@pytest.fixture(scope="module")
def lsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Suite, str]]:
    """file API + watcher on a home with one key made by ``gateway keys add`` and one key without a name."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("labels"))
    raw = json.loads((home / "config.json").read_text())
    raw["gateway"]["api"]["keys"].append({"key": UNNAMED_KEY, "agents": "*"})  # keys[4]
    (home / "config.json").write_text(json.dumps(raw))
    added = subprocess.run(
        [sys.executable, "-m", "gateway_cli.cli", "keys", "add", "ci-bot", "--agents", "alfred", "--write", "--home", str(home)],
        capture_output=True, text=True, timeout=60, check=True,
    )
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "watcher")
        yield running, added.stdout.strip()
    finally:
        running.stop_all()


def rpc_lines(suite: Suite, service: str, method: str) -> list[dict[str, Any]]:
    return [l for l in suite.log_lines(service) if l.get("event") == "rpc" and l.get("method") == method]


def get_file(suite: Suite, metadata: list[tuple[str, str]], agent: str = "alfred") -> grpc.StatusCode:
    with grpc.insecure_channel(suite.address("file_api")) as channel:
        stub = files_pb2_grpc.WorkspaceFilesStub(channel)
        try:
            stub.GetFile(files_pb2.GetFileRequest(agent_id=agent, filename="SOUL.md"), metadata=metadata, timeout=10)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_each_call_logs_the_label_of_its_key(lsuite: tuple[Suite, str]) -> None:
    suite, ci_key = lsuite
    calls = [
        ([("x-api-key", ci_key)], "alfred", "ci-bot", grpc.StatusCode.OK),
        ([("authorization", f"Bearer {ADMIN_KEY}")], "alfred", "admin", grpc.StatusCode.OK),
        ([("x-api-key", UNNAMED_KEY)], "alfred", "keys[4]", grpc.StatusCode.OK),
        ([(INTERNAL_TOKEN_HEADER, read_internal_token(suite.home))], "alfred", "internal", grpc.StatusCode.OK),
        ([("x-api-key", READER_KEY)], "bob", "reader", grpc.StatusCode.PERMISSION_DENIED),  # identified, then denied
        ([("x-api-key", "not-a-key-at-all")], "alfred", None, grpc.StatusCode.UNAUTHENTICATED),
    ]
    before = len(rpc_lines(suite, "file_api", "GetFile"))
    for metadata, agent, _, code in calls:
        assert get_file(suite, metadata, agent) == code
    wait_until(lambda: len(rpc_lines(suite, "file_api", "GetFile")) >= before + len(calls), 15, "the rpc log lines")
    lines = rpc_lines(suite, "file_api", "GetFile")[before:]
    assert [(l["key"], l["agent"], l["code"]) for l in lines] == [(label, agent, code.name) for _, agent, label, code in calls]
    text = suite.log_path("file_api").read_text()
    for secret in (ci_key, ADMIN_KEY, UNNAMED_KEY, READER_KEY, read_internal_token(suite.home)):
        assert secret not in text


def test_a_write_with_a_cli_made_key_is_traceable_to_it(lsuite: tuple[Suite, str]) -> None:
    suite, ci_key = lsuite
    with grpc.insecure_channel(suite.address("file_api")) as channel:
        stub = files_pb2_grpc.WorkspaceFilesStub(channel)
        stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename="MEMORY.md", content="- from CI"),
                     metadata=[("x-api-key", ci_key)], timeout=10)
    wait_until(lambda: any(l["key"] == "ci-bot" for l in rpc_lines(suite, "file_api", "PutFile")), 15, "the PutFile rpc line")
    assert (suite.home / "agents" / "alfred" / "workspace" / "MEMORY.md").read_text() == "- from CI"


def test_watch_directives_logs_its_key_too(lsuite: tuple[Suite, str]) -> None:
    suite, ci_key = lsuite
    with grpc.insecure_channel(suite.address("watcher")) as channel:
        stub = watcher_pb2_grpc.SessionsStub(channel)
        denied = stub.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id="bob"), metadata=[("x-api-key", ci_key)], timeout=10)
        with pytest.raises(grpc.RpcError) as info:
            next(denied)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # a stream the server serves until the deadline ends it (no directive is due for alfred)
        stream = stub.WatchDirectives(watcher_pb2.WatchDirectivesRequest(agent_id="alfred"), metadata=[("x-api-key", ci_key)], timeout=1)
        with pytest.raises(grpc.RpcError) as info:
            next(stream)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_until(lambda: [l["code"] for l in rpc_lines(suite, "watcher", "WatchDirectives")] == ["PERMISSION_DENIED", "CANCELLED"], 15,
               "both WatchDirectives rpc lines")
    assert [l["key"] for l in rpc_lines(suite, "watcher", "WatchDirectives")] == ["ci-bot", "ci-bot"]
