"""gRPC status → HTTP, in one place (grpc-gateway v2's table)."""

from __future__ import annotations

import json

import grpc

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
