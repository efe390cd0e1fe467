"""The caller's credentials, checked before they become gRPC metadata.

The shim forwards ``X-Api-Key`` and ``Authorization`` as they came
(``gateway.auth`` reads the key from the first, or from ``Bearer K`` in the
second). A value that cannot hold a key is refused here with 401 naming the
header, where it would otherwise fail in gRPC in ways that say nothing about
the key: a TAB or a non-ASCII byte is not allowed in gRPC metadata (an
error that would be a 500), and a 64 KB value passes the channel's metadata
limit (a 429).

What a key can be is ``gateway.http_limits``' rule, which config.json's
plain keys follow too: printable ASCII (space to ``~``), at most
``MAX_KEY_CHARS`` characters. The values are never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gateway.http_limits import MAX_KEY_CHARS

FORWARDED = {b"x-api-key": ("x-api-key", "X-Api-Key"), b"authorization": ("authorization", "Authorization")}
BEARER_PREFIX_CHARS = len("Bearer ")
_NOT_KEY_BYTE = re.compile(rb"[^\x20-\x7e]")


class BadCredential(ValueError):
    """A credential header holds a value no key can have; the text names the header."""


def _check(header: str, value: bytes, limit: int) -> None:
    if len(value) > limit:
        raise BadCredential(f"{header} is {len(value):,} bytes long; an API key is at most {MAX_KEY_CHARS:,} characters")
    if _NOT_KEY_BYTE.search(value):
        raise BadCredential(
            f"{header} holds a control or non-ASCII character; an API key is printable ASCII (space to ~)"
        )


def credential_metadata(headers: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """``X-Api-Key`` and ``Authorization`` of a request as gRPC metadata, in their order.

    Raises BadCredential for a value that cannot hold a key (see the module).
    """
    out = []
    for name, value in headers:
        forwarded = FORWARDED.get(name)
        if forwarded is None:
            continue
        key, header = forwarded
        _check(header, value, MAX_KEY_CHARS + (BEARER_PREFIX_CHARS if key == "authorization" else 0))
        out.append((key, value.decode("ascii")))
    return tuple(out)
