"""API-key authentication and per-agent authorization (docs/architecture.md "Auth and the internal token").

A caller presents ``x-api-key: K`` or ``authorization: Bearer K``; internal
callers present the home's internal token under ``x-gateway-internal-token``.
Keys are compared as SHA-256 digests in constant time and never logged.

**Callers seen before.** Each call of a busy client carries the same metadata,
so ``identify`` keeps the metadata of the last ``MEMO_SIZE`` calls it accepted
with the caller they identified, and answers such a call from there (reading
the key, hashing it and comparing it would be a tenth of the file API's own
work per GetFile). Only accepted metadata is kept: a refused one goes the whole
way every time, and a key that is not accepted never gets near the memo. The
lookup hashes the metadata with Python's per-process secret hash, and compares
values only on a full 64-bit hash match, so its time says nothing about the
keys a caller does not already hold. The memo lives as long as its
``Authenticator``, which a reload of config.json replaces: a removed or
changed key is refused from the next call on.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.config import ApiKey, is_agent_id
from gateway.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated

INTERNAL_TOKEN_HEADER = "x-gateway-internal-token"
API_KEY_HEADER = "x-api-key"
MEMO_SIZE = 256  # distinct accepted metadata kept (clients x user agents); the memo starts afresh when full

Metadata = tuple[tuple[str, str | bytes], ...]


@dataclass(frozen=True)
class Caller:
    """Who is calling: a configured key, or an internal service."""

    label: str
    key: ApiKey | None  # None for internal callers

    @property
    def internal(self) -> bool:
        return self.key is None


def key_from_metadata(metadata: Iterable[tuple[str, str | bytes]]) -> tuple[str | None, str | None]:
    """``(api key, internal token)`` found in gRPC metadata, each or both None."""
    api_key = internal = None
    for name, value in metadata:
        if isinstance(value, bytes):
            continue
        name = name.lower()
        if name == API_KEY_HEADER:
            api_key = value
        elif name == "authorization" and api_key is None:
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                api_key = token.strip()
        elif name == INTERNAL_TOKEN_HEADER:
            internal = value
    return api_key, internal


class Authenticator:
    """Decides who a caller is and what it may do."""

    def __init__(self, keys: Iterable[ApiKey], internal_token: str | None) -> None:
        self._keys = tuple(keys)
        self._internal = hashlib.sha256(internal_token.encode()).digest() if internal_token else None
        self._callers = tuple((key.digest, Caller(label=key.label, key=key)) for key in self._keys)  # once per config
        self._internal_caller = Caller(label="internal", key=None)
        self._memo: dict[Metadata, Caller] = {}

    def identify(self, metadata: Iterable[tuple[str, str | bytes]]) -> Caller:
        """The caller behind ``metadata``. Raises Unauthenticated for a missing or unknown key."""
        seen = metadata if type(metadata) is tuple else tuple(metadata)
        try:
            caller = self._memo.get(seen)
        except TypeError:  # pairs that are not tuples (a list of lists): nothing to look up
            return self._identify(seen)
        if caller is None:
            caller = self._identify(seen)  # raises for a refused caller: nothing is kept
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[seen] = caller
        return caller

    def _identify(self, metadata: Metadata) -> Caller:
        api_key, internal = key_from_metadata(metadata)
        if internal is not None and self._internal is not None:
            if hmac.compare_digest(hashlib.sha256(internal.encode()).digest(), self._internal):
                return self._internal_caller
            raise Unauthenticated("invalid internal token")
        if not api_key:
            raise Unauthenticated("missing API key: send X-Api-Key or Authorization: Bearer")
        digest = hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).digest()
        found: Caller | None = None
        for key_digest, caller in self._callers:  # no early exit: the time does not depend on which key matched
            if hmac.compare_digest(digest, key_digest):
                found = caller
        if found is None:
            raise Unauthenticated("unknown API key")
        return found

    @staticmethod
    def visible(caller: Caller, agent_ids: Iterable[str]) -> list[str]:
        """The ids of ``agent_ids`` that ``caller`` may read, in their order: every one for the
        internal token and a ``"*"`` key, those its scope names for a scoped key. A list that
        is not about one agent filters by scope this way instead of refusing (docs/architecture.md
        "Auth and the internal token")."""
        key = caller.key
        return [agent_id for agent_id in agent_ids if key is None or key.covers(agent_id)]

    @staticmethod
    def may_write(caller: Caller, agent_id: str) -> bool:
        """Whether ``caller`` may write to ``agent_id`` (a configured agent)."""
        key = caller.key
        return key is None or (key.write and key.covers(agent_id))

    @staticmethod
    def authorize(caller: Caller, agent_id: str, *, agent_exists: bool, write: bool) -> None:
        """Check ``caller`` may read (or write) ``agent_id``.

        A key whose scope does not name the agent gets PermissionDenied whether
        or not the agent exists, so keys cannot probe for agent names; NotFound
        is only for callers whose scope covers every id (``"*"``, and internal
        callers). A scoped key that names an agent not configured (kept for
        pre-provisioning, or left from a removed agent) gets the same
        PermissionDenied as for any agent it does not cover (docs/architecture.md "Auth and the internal token").
        InvalidArgument is for an id no agent can have (``../x``, ``a/b``: the name
        is bad, not absent), answered to callers whose scope covers every id.
        """
        key = caller.key
        if key is not None and (not key.covers(agent_id) or (not agent_exists and key.agents is not None)):
            raise PermissionDenied(f"this key has no access to agent {agent_id!r}")
        if not agent_exists:
            if not is_agent_id(agent_id):
                raise InvalidArgument(
                    f"{agent_id[:80]!r} is not an agent id: one path segment of letters, digits, '.', '_' or '-' "
                    "(at most 64, starting with a letter or digit)"
                )
            raise NotFound(f"agent {agent_id!r} not found")
        if write and key is not None and not key.write:
            raise PermissionDenied(f"this key has no write access to agent {agent_id!r}")
