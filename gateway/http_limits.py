"""What the REST shim holds its clients to: what a key can be, and how long and how many it waits for.

Typed from ``gateway.api`` in config.json by ``gateway.config`` (the schema
documents each key); the shim's header check (``gateway_http.credentials``)
and its connections (``gateway_http.connections``) read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What a key can be (config_schema.json's ``key`` says the same; a test holds them together): it
# travels in an HTTP header and in gRPC metadata, which carry printable ASCII only, and two of
# them must fit gRPC's 8 KiB of metadata. The REST shim refuses any other X-Api-Key with 401.
MAX_KEY_CHARS = 1024
KEY_CHARS = "printable ASCII (space to ~)"


@dataclass(frozen=True)
class HttpLimits:
    """How long the REST shim waits for a client, and how many it holds (``gateway.api``).

    A connection must send its request line and headers within
    ``header_timeout_seconds`` of opening (or of its first byte after a
    keep-alive wait), and the body within ``body_timeout_seconds`` of the
    headers; an idle keep-alive connection is closed after
    ``keep_alive_seconds``; a connection beyond ``max_connections`` closes
    the one that has waited longest for a whole request, or is answered 503
    and closed at once when every connection has a request in progress
    (``gateway_http.connections``).
    """

    header_timeout_seconds: int = 10
    body_timeout_seconds: int = 60
    keep_alive_seconds: int = 5
    max_connections: int = 512

    @classmethod
    def from_api(cls, api: dict[str, Any]) -> HttpLimits:
        """The limits of a ``gateway.api`` block with its defaults filled in."""
        return cls(
            header_timeout_seconds=api["headerTimeoutSeconds"],
            body_timeout_seconds=api["bodyTimeoutSeconds"],
            keep_alive_seconds=api["keepAliveSeconds"],
            max_connections=api["maxConnections"],
        )
