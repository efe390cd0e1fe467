"""Compare-and-swap writes of the file API (docs/concepts/apis.md, "Compare-and-swap writes"), over
REST and gRPC against real processes: the hash GetFile answers, PutFile's expected hash, the 409 /
ABORTED of a stale one, the 400 of a malformed one, who may write, and writers racing on one hash."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite, workspace

from gateway.v1 import files_pb2, files_pb2_grpc

pytestmark = pytest.mark.integration

URL = "/api/v1/agents/alfred/files/{name}"
EMPTY = hashlib.sha256(b"").hexdigest()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def on_disk(suite: Suite, name: str) -> bytes | None:
    path = workspace(suite, "alfred") / name
    return path.read_bytes() if path.exists() else None


def put(http: httpx.Client, name: str, body: dict[str, object], key: str = ADMIN_KEY) -> httpx.Response:
    return http.put(URL.format(name=name), headers={"X-Api-Key": key}, json=body)


@pytest.fixture
def stub(suite: Suite) -> Iterator[files_pb2_grpc.WorkspaceFilesStub]:
    with grpc.insecure_channel(suite.address("file_api")) as channel:
        yield files_pb2_grpc.WorkspaceFilesStub(channel)


# --- REST ---------------------------------------------------------------------------------------


def test_the_hash_read_with_a_file_lets_the_next_write_through(http: httpx.Client, suite: Suite) -> None:
    assert put(http, "USER.md", {"content": "# User\n\n- v1\n"}).status_code == 200
    read = http.get(URL.format(name="USER.md"), headers={"X-Api-Key": READER_KEY}).json()
    assert read["sha256"] == sha("# User\n\n- v1\n")
    saved = put(http, "USER.md", {"content": "# User\n\n- v2\n", "expectedSha256": read["sha256"]})
    assert saved.status_code == 200, saved.text
    assert saved.json()["sha256"] == sha("# User\n\n- v2\n")
    again = put(http, "USER.md", {"content": "# User\n\n- v3\n", "expected_sha256": saved.json()["sha256"]})  # the proto name too
    assert again.status_code == 200, again.text
    assert on_disk(suite, "USER.md") == b"# User\n\n- v3\n"


def test_a_stale_hash_is_409_aborted_and_writes_nothing(http: httpx.Client, suite: Suite) -> None:
    assert put(http, "USER.md", {"content": "what the page read\n"}).status_code == 200
    assert put(http, "USER.md", {"content": "written elsewhere meanwhile\n"}).status_code == 200
    refused = put(http, "USER.md", {"content": "the page's edit\n", "expectedSha256": sha("what the page read\n")})
    assert refused.status_code == 409, refused.text
    body = refused.json()
    assert body["code"] == grpc.StatusCode.ABORTED.value[0]
    assert "USER.md changed since it was read" in body["message"] and "nothing was written" in body["message"]
    assert on_disk(suite, "USER.md") == b"written elsewhere meanwhile\n"


def test_the_hash_of_no_bytes_creates_a_missing_file_once(http: httpx.Client, suite: Suite) -> None:
    assert on_disk(suite, "IDENTITY.md") is None
    assert http.get(URL.format(name="IDENTITY.md"), headers={"X-Api-Key": ADMIN_KEY}).json()["sha256"] == EMPTY
    assert put(http, "IDENTITY.md", {"content": "# Identity\n", "expectedSha256": EMPTY}).status_code == 200
    assert put(http, "IDENTITY.md", {"content": "# Other\n", "expectedSha256": EMPTY}).status_code == 409
    assert on_disk(suite, "IDENTITY.md") == b"# Identity\n"


@pytest.mark.parametrize("bad", ["", "abc", "z" * 64, sha("x") + "0", 7])
def test_a_malformed_hash_is_400_naming_the_field(http: httpx.Client, suite: Suite, bad: object) -> None:
    before = on_disk(suite, "SOUL.md")
    response = put(http, "SOUL.md", {"content": "never written", "expectedSha256": bad})
    assert response.status_code == 400, response.text
    assert "expectedSha256" in response.json()["message"] or "expected_sha256" in response.json()["message"]
    assert on_disk(suite, "SOUL.md") == before


def test_a_hash_gives_no_key_more_than_its_access(http: httpx.Client, suite: Suite) -> None:
    current = http.get(URL.format(name="SOUL.md"), headers={"X-Api-Key": READER_KEY}).json()["sha256"]
    before = on_disk(suite, "SOUL.md")
    body = {"content": "pwned", "expectedSha256": current}
    assert put(http, "SOUL.md", body, key=READER_KEY).status_code == 403  # read-only key
    assert put(http, "SOUL.md", body, key=BOB_WRITER_KEY).status_code == 403  # a writer of another agent
    assert http.put(URL.format(name="SOUL.md"), json=body).status_code == 401
    assert on_disk(suite, "SOUL.md") == before


def test_of_writers_racing_on_one_hash_exactly_one_wins(suite: Suite) -> None:
    with httpx.Client(base_url=suite.base_url, timeout=30) as client:
        assert put(client, "MEMORY.md", {"content": "# Memory\n\n- before the race\n"}).status_code == 200
    expected = sha("# Memory\n\n- before the race\n")
    contents = [f"# Memory\n\n- writer {n}\n" + "x" * 200_000 for n in range(8)]
    statuses: dict[int, int] = {}
    start = threading.Barrier(len(contents))

    def writer(n: int) -> None:
        with httpx.Client(base_url=suite.base_url, timeout=30) as client:
            start.wait()
            statuses[n] = put(client, "MEMORY.md", {"content": contents[n], "expectedSha256": expected}).status_code

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(len(contents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses.values()) == [200] + [409] * (len(contents) - 1)
    [winner] = [n for n, status in statuses.items() if status == 200]
    assert on_disk(suite, "MEMORY.md") == contents[winner].encode()


def test_openapi_shows_the_hash_fields(http: httpx.Client) -> None:
    schemas = http.get("/openapi.json").json()["components"]["schemas"]
    assert "expectedSha256" in schemas["gateway.v1.PutFileRequest.Body"]["properties"]
    assert "sha256" in schemas["gateway.v1.GetFileResponse"]["properties"]
    assert "sha256" in schemas["gateway.v1.PutFileResponse"]["properties"]


# --- gRPC ---------------------------------------------------------------------------------------


def test_grpc_compare_and_swap(stub: files_pb2_grpc.WorkspaceFilesStub, suite: Suite) -> None:
    admin = [("x-api-key", ADMIN_KEY)]
    stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename="AGENTS.md", content="v1"), metadata=admin, timeout=5)
    got = stub.GetFile(files_pb2.GetFileRequest(agent_id="alfred", filename="AGENTS.md"), metadata=[("x-api-key", READER_KEY)], timeout=5)
    assert got.sha256 == sha("v1")
    saved = stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename="AGENTS.md", content="v2", expected_sha256=got.sha256),
                         metadata=admin, timeout=5)
    assert saved.sha256 == sha("v2")
    with pytest.raises(grpc.RpcError) as stale:
        stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename="AGENTS.md", content="v3", expected_sha256=got.sha256),
                     metadata=admin, timeout=5)
    assert stale.value.code() == grpc.StatusCode.ABORTED and "AGENTS.md changed" in (stale.value.details() or "")
    with pytest.raises(grpc.RpcError) as malformed:
        stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename="AGENTS.md", content="v3", expected_sha256=""),
                     metadata=admin, timeout=5)
    assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "expected_sha256" in (malformed.value.details() or "")
    assert on_disk(suite, "AGENTS.md") == b"v2"


@pytest.mark.parametrize(("metadata", "code"), [
    ([("x-api-key", READER_KEY)], grpc.StatusCode.PERMISSION_DENIED),
    ([("x-api-key", BOB_WRITER_KEY)], grpc.StatusCode.PERMISSION_DENIED),
    ([], grpc.StatusCode.UNAUTHENTICATED),
])
def test_grpc_a_hash_gives_no_key_more_than_its_access(stub: files_pb2_grpc.WorkspaceFilesStub, suite: Suite,
                                                       metadata: list[tuple[str, str]], code: grpc.StatusCode) -> None:
    before = on_disk(suite, "HEARTBEAT.md")
    request = files_pb2.PutFileRequest(agent_id="alfred", filename="HEARTBEAT.md", content="pwned",
                                       expected_sha256=hashlib.sha256(before or b"").hexdigest())
    with pytest.raises(grpc.RpcError) as info:
        stub.PutFile(request, metadata=metadata, timeout=5)
    assert info.value.code() == code
    assert on_disk(suite, "HEARTBEAT.md") == before
