"""The file API over direct gRPC: auth, validation, health, reflection."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite, workspace
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import files_pb2, files_pb2_grpc

pytestmark = pytest.mark.integration


@pytest.fixture
def stub(suite: Suite) -> Iterator[files_pb2_grpc.WorkspaceFilesStub]:
    with grpc.insecure_channel(suite.address("file_api")) as channel:
        yield files_pb2_grpc.WorkspaceFilesStub(channel)


def code_of(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def test_put_then_get_with_api_key_metadata(stub: files_pb2_grpc.WorkspaceFilesStub) -> None:
    reply = stub.PutFile(
        files_pb2.PutFileRequest(agent_id="alfred", filename="USER.md", content="user"),
        metadata=[("x-api-key", ADMIN_KEY)], timeout=5,
    )
    assert reply.message == "File saved. CLAUDE.md will auto-reload."
    got = stub.GetFile(files_pb2.GetFileRequest(agent_id="alfred", filename="USER.md"), metadata=[("authorization", f"Bearer {READER_KEY}")], timeout=5)
    assert (got.filename, got.content) == ("USER.md", "user")


def test_status_codes(stub: files_pb2_grpc.WorkspaceFilesStub) -> None:
    get = files_pb2.GetFileRequest(agent_id="alfred", filename="SOUL.md")
    assert code_of(lambda: stub.GetFile(get, timeout=5)) == grpc.StatusCode.UNAUTHENTICATED
    put = files_pb2.PutFileRequest(agent_id="alfred", filename="SOUL.md", content="x")
    assert code_of(lambda: stub.PutFile(put, metadata=[("x-api-key", READER_KEY)], timeout=5)) == grpc.StatusCode.PERMISSION_DENIED
    missing = files_pb2.GetFileRequest(agent_id="nobody", filename="SOUL.md")
    assert code_of(lambda: stub.GetFile(missing, metadata=[("x-api-key", ADMIN_KEY)], timeout=5)) == grpc.StatusCode.NOT_FOUND
    no_content = files_pb2.PutFileRequest(agent_id="alfred", filename="SOUL.md")
    assert code_of(lambda: stub.PutFile(no_content, metadata=[("x-api-key", ADMIN_KEY)], timeout=5)) == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["../SOUL.md", "memory/SOUL.md", "SOUL.md\x00", "..\\SOUL.md", "/etc/passwd", "..", "", "CLAUDE.md"])
def test_traversal_and_bad_names_are_invalid_argument(stub: files_pb2_grpc.WorkspaceFilesStub, suite: Suite, name: str) -> None:
    put = files_pb2.PutFileRequest(agent_id="alfred", filename=name, content="pwned")
    assert code_of(lambda: stub.PutFile(put, metadata=[("x-api-key", ADMIN_KEY)], timeout=5)) == grpc.StatusCode.INVALID_ARGUMENT
    assert "pwned" not in "".join(p.read_text(errors="replace") for p in suite.home.rglob("*") if p.is_file() and p.suffix != ".log")


def test_symlink_out_of_the_workspace_is_never_followed(stub: files_pb2_grpc.WorkspaceFilesStub, suite: Suite, tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    ws = workspace(suite, "bob")
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "HEARTBEAT.md").unlink(missing_ok=True)
    (ws / "HEARTBEAT.md").symlink_to(secret)
    get = files_pb2.GetFileRequest(agent_id="bob", filename="HEARTBEAT.md")
    with pytest.raises(grpc.RpcError) as info:
        stub.GetFile(get, metadata=[("x-api-key", ADMIN_KEY)], timeout=5)
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "top secret" not in (info.value.details() or "")
    # a write replaces the link itself; the outside file is untouched
    stub.PutFile(files_pb2.PutFileRequest(agent_id="bob", filename="HEARTBEAT.md", content="beat"), metadata=[("x-api-key", ADMIN_KEY)], timeout=5)
    assert secret.read_text() == "top secret"
    assert not (ws / "HEARTBEAT.md").is_symlink() and (ws / "HEARTBEAT.md").read_text() == "beat"


def test_internal_token_is_accepted_and_a_wrong_one_is_not(stub: files_pb2_grpc.WorkspaceFilesStub, suite: Suite) -> None:
    token = read_internal_token(suite.home)
    get = files_pb2.GetFileRequest(agent_id="bob", filename="SOUL.md")
    stub.GetFile(get, metadata=[(INTERNAL_TOKEN_HEADER, token)], timeout=5)
    assert code_of(lambda: stub.GetFile(get, metadata=[(INTERNAL_TOKEN_HEADER, token + "x")], timeout=5)) == grpc.StatusCode.UNAUTHENTICATED


def test_health_and_reflection(suite: Suite) -> None:
    with grpc.insecure_channel(suite.address("file_api")) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "gateway.v1.WorkspaceFiles"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"gateway.v1.WorkspaceFiles", "grpc.health.v1.Health"} <= names


def test_oversized_message_is_refused_by_the_explicit_limit(stub: files_pb2_grpc.WorkspaceFilesStub) -> None:
    put = files_pb2.PutFileRequest(agent_id="alfred", filename="SOUL.md", content="a" * (9 * 1024 * 1024))
    assert code_of(lambda: stub.PutFile(put, metadata=[("x-api-key", ADMIN_KEY)], timeout=10)) == grpc.StatusCode.RESOURCE_EXHAUSTED
