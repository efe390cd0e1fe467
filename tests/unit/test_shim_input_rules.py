"""Where input enters the suite: credential headers, names no agent or session can have, and the
shim's rule that input never gets a 500."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
from typing import Any

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

import gateway_http.app as shim_app
from gateway.auth import Authenticator
from gateway.config import ApiKey, build, is_agent_id, schema, validate
from gateway.http_limits import KEY_CHARS, MAX_KEY_CHARS, HttpLimits
from gateway.errors import InvalidArgument, NotFound, PermissionDenied
from gateway.live_config import diff
from gateway_http.credentials import BadCredential, credential_metadata
from gateway_http.descriptors import all_routes
from gateway_http.fields import BadRequest
from gateway_http.transcode import build_request, parse_body
from services.watcher.sessions import SessionRegistry

PROPERTY = settings(max_examples=150, deadline=None, database=None)


# --- credential headers ---------------------------------------------------------------------------


def test_real_keys_pass_as_they_came() -> None:
    generated = "gw_" + secrets.token_urlsafe(32)
    headers = [(b"x-api-key", generated.encode()), (b"authorization", b"Bearer " + b"k" * MAX_KEY_CHARS),
               (b"x-other", b"\xff\t")]
    assert credential_metadata(headers) == (("x-api-key", generated), ("authorization", "Bearer " + "k" * MAX_KEY_CHARS))


@pytest.mark.parametrize("value", [b"admin\tkey", "clé-secrète".encode(), b"key\x00", b"key\x7f", b"\x1bkey",
                                   b"k" * (MAX_KEY_CHARS + 1), b"k" * 65536])
@pytest.mark.parametrize(("header", "name"), [(b"x-api-key", "X-Api-Key"), (b"authorization", "Authorization")])
def test_a_value_no_key_can_have_is_refused_naming_the_header(value: bytes, header: bytes, name: str) -> None:
    sent = b"Bearer " + value if header == b"authorization" else value
    with pytest.raises(BadCredential, match=name) as refused:
        credential_metadata([(header, sent)])
    assert value.decode("latin-1") not in str(refused.value)  # never echoed


def test_the_config_stores_only_keys_the_shim_lets_through() -> None:
    """config_schema.json's ``key`` and the shim's header check are one rule (gateway.config.MAX_KEY_CHARS)."""
    key_schema = schema()["properties"]["gateway"]["properties"]["api"]["properties"]["keys"]["items"]["properties"]["key"]
    assert key_schema["maxLength"] == MAX_KEY_CHARS
    for byte in range(256):
        key = bytes([byte]) * 8
        raw = {"configVersion": "1.0.26", "gateway": {"api": {"keys": [{"key": key.decode("latin-1"), "agents": "*"}]}}}
        try:
            credential_metadata([(b"x-api-key", key)])
            shim_takes = True
        except BadCredential:
            shim_takes = False
        assert (not validate(raw)) == shim_takes, (byte, validate(raw))
    too_long = {"configVersion": "1.0.26", "gateway": {"api": {"keys": [{"key": "k" * (MAX_KEY_CHARS + 1), "agents": "*"}]}}}
    assert validate(too_long) == [f"gateway.api.keys[0].key: the key (not shown) is too long: at most {MAX_KEY_CHARS} characters"]
    bad = {"configVersion": "1.0.26", "gateway": {"api": {"keys": [{"key": "clé-secrète-1", "agents": "*"}]}}}
    assert validate(bad) == [f"gateway.api.keys[0].key: the key (not shown) has a character a key cannot have: a key is {KEY_CHARS}"]


# --- names that cannot be ------------------------------------------------------------------------


def _key(agents: list[str] | None) -> ApiKey:
    return ApiKey(hashlib.sha256(b"k").digest(), None if agents is None else frozenset(agents), True, "k")


@pytest.mark.parametrize("agent_id", ["../x", "a/b", "/etc/passwd", "..", "a\\b", "", "x" * 65, "alfred\n", ".hidden"])
def test_an_id_no_agent_can_have_is_a_bad_name_not_a_missing_agent(agent_id: str) -> None:
    assert not is_agent_id(agent_id)
    everyone = Authenticator([_key(None)], None).identify([("x-api-key", "k")])
    with pytest.raises(InvalidArgument, match="is not an agent id"):
        Authenticator.authorize(everyone, agent_id, agent_exists=False, write=False)
    scoped = Authenticator([_key(["alfred"])], None).identify([("x-api-key", "k")])
    with pytest.raises(PermissionDenied):  # a scoped key still learns nothing about names
        Authenticator.authorize(scoped, agent_id, agent_exists=False, write=False)


def test_a_well_formed_absent_agent_is_still_not_found() -> None:
    everyone = Authenticator([_key(None)], None).identify([("x-api-key", "k")])
    with pytest.raises(NotFound):
        Authenticator.authorize(everyone, "carol", agent_exists=False, write=False)


@pytest.mark.parametrize("session_id", ["..", ".", "../x", "a/b", "a\\b", "/etc/passwd", "a\x00b", "x" * 129])
def test_a_session_id_that_is_not_one_segment_is_refused_everywhere(session_id: str) -> None:
    registry = SessionRegistry(clock=lambda: 0)
    for call in (lambda: registry.register("alfred", session_id, True), lambda: registry.get("alfred", session_id),
                 lambda: registry.end("alfred", session_id)):
        with pytest.raises(InvalidArgument, match="session_id"):
            call()
    assert registry.register("alfred", "5f0c0a1e-uuid:like.id_1", True).session_id == "5f0c0a1e-uuid:like.id_1"


# --- no input reaches a 500 ---------------------------------------------------------------------

BODY_ROUTES = [r for r in all_routes() if r.body]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)


def _field_names(route: Any) -> st.SearchStrategy[str]:
    """A field's name as a client may spell it, or any short text; only the text for a message
    without fields (ListAgents)."""
    names = []
    for field in route.request_class.DESCRIPTOR.fields:
        names += [field.name, field.json_name, field.json_name.upper()]
    return (st.sampled_from(names) if names else st.nothing()) | st.text(max_size=8)


@PROPERTY
@given(st.sampled_from(BODY_ROUTES), st.data())
def test_any_json_body_becomes_a_message_or_bad_request(route: Any, data: st.DataObject) -> None:
    keys = _field_names(route)
    body = data.draw(st.dictionaries(keys, json_values, max_size=4) | json_values)
    raw = json.dumps(body).encode()
    try:
        build_request(route, {f: "alfred" for f in route.path_fields}, parse_body(raw), [])
    except BadRequest as exc:
        str(exc).encode("utf-8")


@PROPERTY
@given(st.sampled_from([r for r in all_routes() if not r.body]), st.data())
def test_any_query_becomes_a_message_or_bad_request(route: Any, data: st.DataObject) -> None:
    names = _field_names(route)
    values = st.text() | st.sampled_from(["NaN", "inf", "-Infinity", "1e999999", "9" * 5000, "99999999999", "-1", "٣"])
    query = data.draw(st.lists(st.tuples(names, values), max_size=4))
    try:
        build_request(route, {f: "alfred" for f in route.path_fields}, None, query)
    except BadRequest as exc:
        str(exc).encode("utf-8")


def _call(app: shim_app.ShimApp, method: str, path: str, body: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers or [(b"x-api-key", b"secret-key-123")]}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_a_bug_is_a_logged_500_with_the_error_body_and_no_input_in_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("the body said SECRET-CONTENT")

    monkeypatch.setattr(shim_app, "build_request", broken)
    app = shim_app.ShimApp({"file_api": "127.0.0.1:1"})
    with structlog.testing.capture_logs() as logs:
        status, body = _call(app, "PUT", "/api/v1/agents/alfred/files/SOUL.md", b'{"content": "SECRET-CONTENT"}')
    assert status == 500
    assert body == {"code": 13, "message": "internal error in the REST shim", "details": [], "error": "internal error in the REST shim"}
    bug = [line for line in logs if line["event"] == "http_bug"]
    assert bug and bug[0]["route"] == "/api/v1/agents/{agent_id}/files/{filename}" and bug[0]["error"] == "RuntimeError"
    assert any("broken" in frame for frame in bug[0]["at"])
    text = json.dumps(logs)
    assert "SECRET-CONTENT" not in text and "secret-key-123" not in text


def test_bad_credentials_are_refused_before_the_body_is_read() -> None:
    app = shim_app.ShimApp({"file_api": "127.0.0.1:1"})
    status, body = _call(app, "PUT", "/api/v1/agents/alfred/files/SOUL.md", b"[" * 5000,
                         [(b"x-api-key", b"k\tk")])
    assert (status, body["code"]) == (401, 16) and "X-Api-Key" in body["message"]


# --- the shim's client limits in config.json ------------------------------------------------------


def _raw(**api: Any) -> dict[str, Any]:
    return {"configVersion": "1.0.26", "gateway": {"api": api}, "agents": [{"id": "alfred"}]}


def test_client_limits_default_validate_and_count_as_a_settings_change(tmp_path: Any) -> None:
    assert build(_raw(), tmp_path).api.limits == HttpLimits(10, 60, 5, 512)
    tuned = build(_raw(headerTimeoutSeconds=1, bodyTimeoutSeconds=2, keepAliveSeconds=3, maxConnections=4), tmp_path)
    assert tuned.api.limits == HttpLimits(1, 2, 3, 4)
    problems = validate(_raw(headerTimeoutSeconds=0, bodyTimeoutSeconds="60", keepAliveSeconds=1.5, maxConnections=-1))
    assert [re.sub(r":.*", "", p) for p in problems] == [
        "gateway.api.bodyTimeoutSeconds", "gateway.api.headerTimeoutSeconds", "gateway.api.keepAliveSeconds",
        "gateway.api.maxConnections"]
    change = diff(build(_raw(), tmp_path), tuned)
    assert change.other and not change.needs_restart  # each new connection reads the limits in force
