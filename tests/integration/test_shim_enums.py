"""An unknown session state never becomes IDLE, over REST or gRPC.

A busy session reported as ``"BUSY"`` or ``"busy"`` and read as the enum's
zero value would be taken for idle, and could be restarted mid-task.
The shim refuses any name or number the enum does not have; the watcher
refuses ``SESSION_STATE_UNSPECIFIED`` and any number it does not know,
which is what a raw unknown value on the wire arrives as (proto3 enums are
open). After every refusal the session is still BUSY.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, make_home

from gateway.v1 import watcher_pb2 as pb

pytestmark = pytest.mark.integration

SESSIONS = "/api/v1/agents/alfred/sessions"
# Raw JSON for the state, as a client may send it: names of other spellings, numbers the enum
# lacks, the zero value by name and by number, and values that are no enum at all.
BAD_STATES = ['"BUSY"', '"busy"', '"Busy"', '"IDLE"', '"idle"', '"SESSION_STATE_busy"', "7", "-1", "0", "3",
              '"SESSION_STATE_UNSPECIFIED"', '"2"', '"\\udfff"', "1.5", "2.0", "true", "null", '""', "NaN",
              "1e999999", "-Infinity", "[2]", '{"state": 2}']
KEY = {"X-Api-Key": ADMIN_KEY}


@pytest.fixture(scope="module")
def esuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """The watcher and the shim (the session registry lives in the watcher)."""
    home, ports, http_port = make_home(tmp_path_factory.mktemp("enums"))
    running = Suite(home, http_port, ports)
    try:
        running.start("watcher", "http")
        yield running
    finally:
        running.stop_all()


def states(http: httpx.Client) -> dict[str, str]:
    reply = http.get("/api/v1/agents/alfred/activity", headers=KEY)
    assert reply.status_code == 200, reply.text
    return {s["sessionId"]: s["state"] for s in reply.json().get("sessions", [])}


def post(http: httpx.Client, path: str, raw: str) -> httpx.Response:
    return http.post(path, headers={**KEY, "Content-Type": "application/json"}, content=raw.encode())


@pytest.fixture(scope="module")
def http(esuite: Suite) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=esuite.base_url, timeout=30) as client:
        yield client


def test_no_unknown_state_over_rest_turns_a_busy_session_idle(http: httpx.Client) -> None:
    registered = post(http, SESSIONS, '{"sessionId": "rest-busy", "state": "SESSION_STATE_BUSY"}')
    assert registered.status_code == 200, registered.text
    wrong = []
    for raw in BAD_STATES:
        reply = post(http, f"{SESSIONS}/rest-busy/state", f'{{"state": {raw}}}')
        if reply.status_code != 400 or "state" not in reply.json()["message"].lower():
            wrong.append(f"{raw}: {reply.status_code} {reply.text[:120]}")
    assert not wrong, wrong
    assert states(http)["rest-busy"] == "SESSION_STATE_BUSY"


def test_no_unknown_state_registers_a_session(http: httpx.Client) -> None:
    wrong = []
    for i, raw in enumerate(BAD_STATES):
        reply = post(http, SESSIONS, f'{{"sessionId": "rest-new-{i}", "state": {raw}}}')
        if reply.status_code != 400:
            wrong.append(f"{raw}: {reply.status_code} {reply.text[:120]}")
    assert not wrong, wrong
    assert not [s for s in states(http) if s.startswith("rest-new-")]


def _raw_state(number: int) -> bytes:
    """Field 3 (state) as a varint on the wire, whatever the enum says (negative: 10 bytes)."""
    value, out = number & (2**64 - 1), bytearray([3 << 3])
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_a_raw_unknown_number_over_grpc_is_refused_and_the_session_stays_busy(esuite: Suite, http: httpx.Client) -> None:
    metadata = (("x-api-key", ADMIN_KEY),)
    with grpc.insecure_channel(esuite.address("watcher")) as channel:
        register = channel.unary_unary("/gateway.v1.Sessions/RegisterSession", request_serializer=bytes,
                                       response_deserializer=pb.Session.FromString)
        report = channel.unary_unary("/gateway.v1.Sessions/ReportState", request_serializer=bytes,
                                     response_deserializer=pb.Session.FromString)
        base = pb.RegisterSessionRequest(agent_id="alfred", session_id="grpc-busy").SerializeToString()
        register(base + _raw_state(pb.SESSION_STATE_BUSY), metadata=metadata, timeout=10)
        for number in (7, 3, 0, -1, 2**31 - 1):
            request = pb.ReportStateRequest(agent_id="alfred", session_id="grpc-busy").SerializeToString()
            with pytest.raises(grpc.RpcError) as refused:
                report(request + _raw_state(number), metadata=metadata, timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (number, refused.value.details())
            with pytest.raises(grpc.RpcError) as not_registered:
                register(pb.RegisterSessionRequest(agent_id="alfred", session_id=f"grpc-new-{number}").SerializeToString()
                         + _raw_state(number), metadata=metadata, timeout=10)
            assert not_registered.value.code() == grpc.StatusCode.INVALID_ARGUMENT, number
    now = states(http)
    assert now["grpc-busy"] == "SESSION_STATE_BUSY"
    assert not [s for s in now if s.startswith("grpc-new-")]
