"""The frames between the REST shim and its MCP child (docs/operations.md "Memory at rest").

The shim serves MCP from a child process (``gateway_http.mcp_child`` starts it,
``gateway_mcp.child`` is its entry point) over one stream socket. Each frame is length-prefixed:
an 8-byte header (the lengths of its two parts, big-endian), a JSON object (``meta``: the
request's id, its kind, the parts of the ASGI scope or of a response message) and the raw bytes
of a body. Both lengths are bounded by the reader: a frame over its limit is refused as a whole
(``FrameError``) before its parts are read, and the reader then closes the stream. Here because
both sides use it and neither package may import the other.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any, Final

HEADER: Final = struct.Struct(">II")
MAX_META_BYTES: Final = 1024 * 1024  # a request's headers are at most 256 KiB (gateway_http.connections)
BODY_CHUNK_BYTES: Final = 1024 * 1024  # the child sends a response body in pieces of at most this


class FrameError(Exception):
    """A frame over its limit, torn, or whose meta is not a JSON object: the stream is closed."""


def encode(meta: dict[str, Any], body: bytes = b"") -> bytes:
    """One frame: ``meta`` (a JSON object) and ``body``."""
    data = json.dumps(meta, separators=(",", ":")).encode()
    return HEADER.pack(len(data), len(body)) + data + body


async def read(reader: asyncio.StreamReader, max_body_bytes: int) -> tuple[dict[str, Any], bytes] | None:
    """The next frame's meta and body; None at a clean end of the stream (between frames). Raises
    FrameError for a frame over ``MAX_META_BYTES`` or ``max_body_bytes``, or cut short."""
    try:
        head = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("the stream ended inside a frame's header") from None
    meta_size, body_size = HEADER.unpack(head)
    if meta_size > MAX_META_BYTES or body_size > max_body_bytes:
        raise FrameError(f"a frame of {meta_size} + {body_size} bytes is over the limit "
                         f"({MAX_META_BYTES} + {max_body_bytes})")
    try:
        data = await reader.readexactly(meta_size + body_size)
    except asyncio.IncompleteReadError:
        raise FrameError("the stream ended inside a frame") from None
    try:
        meta = json.loads(data[:meta_size])
    except ValueError:
        raise FrameError("a frame's meta is not JSON") from None
    if not isinstance(meta, dict):
        raise FrameError("a frame's meta is not a JSON object")
    return meta, data[meta_size:]


def headers_out(headers: list[tuple[bytes, bytes]]) -> list[list[str]]:
    """ASGI headers as JSON can carry them (latin-1: every byte is one character)."""
    return [[name.decode("latin-1"), value.decode("latin-1")] for name, value in headers]


def headers_in(headers: list[list[str]]) -> list[tuple[bytes, bytes]]:
    """The ASGI headers ``headers_out`` carried."""
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
