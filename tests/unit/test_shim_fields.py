"""What the shim refuses in a request: near-miss keys, bodies with no known field, unknown enum values."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.v1 import watcher_pb2
from gateway_http.descriptors import Route, all_routes
from gateway_http.transcode import BadRequest, build_request

pb = watcher_pb2
ACCEPTED = "accepted: SESSION_STATE_IDLE, SESSION_STATE_BUSY"


def route(method: str) -> Route:
    [found] = [r for r in all_routes() if r.method.name == method]
    return found


def register(body: object) -> watcher_pb2.RegisterSessionRequest:
    message = build_request(route("RegisterSession"), {"agent_id": "alfred"}, body, [])
    assert isinstance(message, pb.RegisterSessionRequest)
    return message


@pytest.mark.parametrize("value", ["busy", "BUSY", "SESSION_STATE_BSUY", "session_state_busy", " SESSION_STATE_BUSY", ""])
def test_unknown_enum_names_are_refused_naming_field_and_values(value: str) -> None:
    with pytest.raises(BadRequest) as info:
        register({"state": value})
    assert str(info.value) == f"state: {value!r} is not a valid SessionState; {ACCEPTED}"


def test_enum_numbers_must_be_values_of_the_enum() -> None:
    assert register({"state": 2}).state == pb.SESSION_STATE_BUSY
    for number in (3, -1, 99):
        with pytest.raises(BadRequest, match=f"state: {number} is not a valid SessionState; {ACCEPTED}"):
            register({"state": number})
    for value, kind in ((True, "a boolean"), (1.5, "a number"), (["SESSION_STATE_BUSY"], "an array"), ({}, "an object")):
        with pytest.raises(BadRequest, match=f"state: must be one of SESSION_STATE_IDLE, SESSION_STATE_BUSY, got {kind}"):
            register({"state": value})


def test_exact_enum_names_are_taken() -> None:
    assert register({"state": "SESSION_STATE_BUSY"}).state == pb.SESSION_STATE_BUSY
    assert register({"state": "SESSION_STATE_IDLE", "sessionId": "s1"}).session_id == "s1"
    assert register({"state": None}).state == pb.SESSION_STATE_UNSPECIFIED  # null is the default, as in protojson


@pytest.mark.parametrize(("key", "meant"), [("sessionID", "sessionId"), ("SessionId", "sessionId"), ("session-id", "sessionId"),
                                            ("STATE", "state"), ("agentID", "agentId")])
def test_near_miss_keys_name_the_field_they_probably_meant(key: str, meant: str) -> None:
    with pytest.raises(BadRequest) as info:
        register({key: "x", "state": "SESSION_STATE_BUSY"})
    assert str(info.value) == f"{key}: unknown field; did you mean {meant}?"


def test_the_proto_name_is_a_known_field_not_a_near_miss() -> None:
    assert register({"session_id": "s2", "state": "SESSION_STATE_IDLE"}).session_id == "s2"


def test_a_body_with_no_known_field_is_refused() -> None:
    with pytest.raises(BadRequest) as info:
        register({"mood": "happy", "id": "s3"})
    assert str(info.value) == "request body has no field of RegisterSessionRequest (got: id, mood); accepted: sessionId, state"
    with pytest.raises(BadRequest, match=r"no field of FoldRetrievalsRequest \(got: x\); it takes no field"):
        build_request(route("FoldRetrievals"), {"agent_id": "alfred"}, {"x": 1}, [])
    with pytest.raises(BadRequest, match=r"no field of PutFileRequest \(got: contents\); accepted: content"):
        build_request(route("PutFile"), {"agent_id": "alfred", "filename": "SOUL.md"}, {"contents": "x"}, [])


def test_an_empty_object_and_other_unknown_keys_are_still_fine() -> None:
    assert register({}).state == pb.SESSION_STATE_UNSPECIFIED  # the servicer judges what is required
    assert register({"state": "SESSION_STATE_BUSY", "mood": "happy"}).state == pb.SESSION_STATE_BUSY


def test_enum_query_parameters_follow_the_same_rule() -> None:
    as_query = dataclasses.replace(route("ReportState"), body="")

    def state(value: str) -> int:
        message = build_request(as_query, {"agent_id": "a", "session_id": "s"}, None, [("state", value)])
        assert isinstance(message, pb.ReportStateRequest)
        return message.state

    assert state("SESSION_STATE_BUSY") == state("2") == pb.SESSION_STATE_BUSY
    for bad in ("busy", "BUSY", "session_state_busy", "7"):
        with pytest.raises(BadRequest, match=f"state: .* is not a valid SessionState; {ACCEPTED}"):
            state(bad)
