"""gRPC status → HTTP, in one place (grpc-gateway v2's table), and the challenge a 401 carries."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

import grpc

from gateway.auth import key_from_metadata

REALM: Final = "claude-gateway"
MAX_DESCRIPTION_CHARS: Final = 300
# RFC 6750 3: error_description may hold only %x20-21 / %x23-5B / %x5D-7E (no '"', no '\\').
_NOT_DESCRIPTION_CHAR = re.compile(r'[^\x20\x21\x23-\x5b\x5d-\x7e]')

HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}


def http_status(code: grpc.StatusCode) -> int:
    """HTTP status for a gRPC code; 500 for anything unmapped."""
    return HTTP_STATUS.get(code, 500)


def error_body(code: grpc.StatusCode, message: str) -> bytes:
    """grpc-gateway's error body plus ``error`` for clients of the documented API.

    A message quoting input is always encodable: a code point UTF-8 cannot
    carry (a lone surrogate) becomes ``?`` rather than failing the answer.
    """
    if not message.isascii():
        message = message.encode("utf-8", "replace").decode("utf-8")
    body = {"code": code.value[0], "message": message, "details": [], "error": message}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def bearer_challenge(problem: str | None) -> list[tuple[bytes, bytes]]:
    """The ``WWW-Authenticate`` header of a 401 (RFC 6750 3).

    The suite takes static keys as bearer tokens (``Authorization: Bearer K``, or
    ``X-Api-Key: K``), so the challenge is ``Bearer``. A request whose key was
    refused gets ``invalid_token`` with ``problem`` (the refusal's text) as the
    description; ``problem`` None means the request presented no key at all, and
    gets the bare challenge, as RFC 6750 3.1 asks (the body still says what is
    missing). It names no ``resource_metadata``: there is no OAuth authorization
    server to point to. A 403 gets no challenge at all: no token flow can widen
    the agents a key covers, and a challenge would start one in OAuth clients.
    """
    value = f'Bearer realm="{REALM}"'
    if problem is not None:
        description = _NOT_DESCRIPTION_CHAR.sub("'", problem)[:MAX_DESCRIPTION_CHARS]
        value += f', error="invalid_token", error_description="{description}"'
    return [(b"www-authenticate", value.encode("ascii"))]


def presented_key(metadata: Iterable[tuple[str, str]]) -> bool:
    """Whether a request's key headers (as gRPC metadata) present an API key (``gateway.auth``'s reading)."""
    api_key, _ = key_from_metadata(metadata)
    return api_key is not None
