"""API-key identification and the per-agent access rules (docs/architecture.md "Auth and the internal token")."""

from __future__ import annotations

import hashlib
import hmac

import pytest

import gateway.auth
from gateway.auth import INTERNAL_TOKEN_HEADER, Authenticator, key_from_metadata
from gateway.config import ApiKey
from gateway.errors import NotFound, PermissionDenied, Unauthenticated


def key(secret: str, agents: list[str] | None, write: bool = False) -> ApiKey:
    return ApiKey(hashlib.sha256(secret.encode()).digest(), None if agents is None else frozenset(agents), write, secret[:3])


AUTH = Authenticator(
    [key("reader-key", ["alfred"]), key("admin-key", None, write=True), key("bob-key", ["bob"], True), key("carol-key", ["carol"], True)],
    "internal-tok",
)


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ([("x-api-key", "k")], ("k", None)),
        ([("authorization", "Bearer k")], ("k", None)),
        ([("authorization", "bearer   k ")], ("k", None)),
        ([("authorization", "Basic k")], (None, None)),
        ([("authorization", "Bearer ")], (None, None)),
        ([("x-api-key", "a"), ("authorization", "Bearer b")], ("a", None)),
        ([(INTERNAL_TOKEN_HEADER, "t")], (None, "t")),
        ([("x-api-key-bin", b"k")], (None, None)),
    ],
)
def test_key_from_metadata(metadata: list, expected: tuple) -> None:  # type: ignore[type-arg]
    assert key_from_metadata(metadata) == expected


def test_identify() -> None:
    assert AUTH.identify([("x-api-key", "reader-key")]).label == "rea"
    assert AUTH.identify([(INTERNAL_TOKEN_HEADER, "internal-tok")]).internal
    for metadata in ([], [("x-api-key", "")], [("x-api-key", "nope")], [(INTERNAL_TOKEN_HEADER, "wrong")]):
        with pytest.raises(Unauthenticated):
            AUTH.identify(metadata)


def test_missing_key_message_says_how_to_send_one() -> None:
    with pytest.raises(Unauthenticated, match="X-Api-Key or Authorization: Bearer"):
        AUTH.identify([])


def test_internal_token_is_refused_when_the_home_has_none() -> None:
    auth = Authenticator([], None)
    with pytest.raises(Unauthenticated):
        auth.identify([(INTERNAL_TOKEN_HEADER, "")])


@pytest.mark.parametrize(
    ("secret", "agent", "exists", "write", "error"),
    [
        ("reader-key", "alfred", True, False, None),
        ("reader-key", "alfred", True, True, PermissionDenied),  # no write access
        ("reader-key", "bob", True, False, PermissionDenied),  # not in scope
        ("reader-key", "zed", False, False, PermissionDenied),  # not in scope: no probing
        ("admin-key", "zed", False, False, NotFound),  # scope covers it: 404
        ("carol-key", "carol", False, False, PermissionDenied),  # named but not configured: 403, as for any agent
        ("carol-key", "carol", False, True, PermissionDenied),
        ("carol-key", "carol", True, True, None),  # once carol is configured, the key works
        ("admin-key", "bob", True, True, None),
        ("bob-key", "bob", True, True, None),
        ("bob-key", "alfred", True, False, PermissionDenied),
    ],
)
def test_authorize(secret: str, agent: str, exists: bool, write: bool, error: type[Exception] | None) -> None:
    caller = AUTH.identify([("x-api-key", secret)])
    if error is None:
        AUTH.authorize(caller, agent, agent_exists=exists, write=write)
    else:
        with pytest.raises(error):
            AUTH.authorize(caller, agent, agent_exists=exists, write=write)


def test_internal_caller_may_read_and_write_any_existing_agent() -> None:
    caller = AUTH.identify([(INTERNAL_TOKEN_HEADER, "internal-tok")])
    AUTH.authorize(caller, "anyone", agent_exists=True, write=True)
    with pytest.raises(NotFound):
        AUTH.authorize(caller, "ghost", agent_exists=False, write=False)


def test_a_caller_seen_before_is_identified_from_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same metadata again skips the hash and the comparisons, and gets the same caller.
    auth = Authenticator(AUTH._keys, "internal-tok")
    metadata = (("x-api-key", "reader-key"), ("user-agent", "grpc-python"))
    first = auth.identify(metadata)
    compared: list[bytes] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append(a)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    assert auth.identify(metadata) is first
    assert compared == []  # from the memo
    # Pairs that cannot be looked up (lists) go the whole way.
    assert auth.identify([list(pair) for pair in metadata]).label == "rea"  # type: ignore[misc]
    assert len(compared) == len(auth._keys)


def test_a_refused_caller_is_never_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = Authenticator(AUTH._keys, "internal-tok")
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            auth.identify((("x-api-key", "nope"),))
    assert auth._memo == {}
    # A key the memo has seen stops working with the config that removed it: a reload builds a new Authenticator.
    auth.identify((("x-api-key", "reader-key"),))
    without_reader = Authenticator([k for k in AUTH._keys if k.label != "rea"], "internal-tok")
    with pytest.raises(Unauthenticated):
        without_reader.identify((("x-api-key", "reader-key"),))


def test_the_memo_is_bounded() -> None:
    auth = Authenticator(AUTH._keys, "internal-tok")
    for n in range(gateway.auth.MEMO_SIZE * 3):
        auth.identify((("x-api-key", "reader-key"), ("user-agent", f"client {n}")))
        assert len(auth._memo) <= gateway.auth.MEMO_SIZE


def test_visible_filters_a_list_by_the_key_scope() -> None:
    ids = ["alfred", "bob", "carol", "dave"]
    reader = AUTH.identify([("x-api-key", "reader-key")])
    assert AUTH.visible(reader, ids) == ["alfred"]
    assert AUTH.visible(AUTH.identify([("x-api-key", "admin-key")]), ids) == ids
    assert AUTH.visible(AUTH.identify([(INTERNAL_TOKEN_HEADER, "internal-tok")]), ids) == ids
    assert AUTH.visible(AUTH.identify([("x-api-key", "bob-key")]), reversed(ids)) == ["bob"]


def test_may_write_needs_a_write_key_that_covers_the_agent() -> None:
    reader, bob = (AUTH.identify([("x-api-key", k)]) for k in ("reader-key", "bob-key"))
    assert not AUTH.may_write(reader, "alfred")
    assert AUTH.may_write(bob, "bob") and not AUTH.may_write(bob, "alfred")
    assert AUTH.may_write(AUTH.identify([(INTERNAL_TOKEN_HEADER, "internal-tok")]), "anyone")
