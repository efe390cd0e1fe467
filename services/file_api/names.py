"""Which workspace file names the API accepts (docs/concepts/apis.md "REST API", Names)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument

ALLOWED_FILES = ("SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "HEARTBEAT.md", "IDENTITY.md")
_ALLOWED_TEXT = ", ".join(ALLOWED_FILES)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\.md")


def check_filename(name: str) -> str:
    """Return ``name`` when it is one of the six allowed files.

    Raises InvalidArgument when it is not a plain ``NAME.md`` (separators,
    ``..``, NUL, percent-encoded separators, anything else) or is a plain name
    outside the allowed list (CLAUDE.md included). Both messages list the
    allowed names. A bidirectional control gets its own message naming it
    (it is invisible in the name the caller sent; ``gateway.bidi``).
    """
    if name in ALLOWED_FILES:
        return name
    refuse_bidi(name, "a filename")
    if not _PLAIN_NAME.fullmatch(name) or unquote(name) != name:
        raise InvalidArgument(
            f"invalid filename {name[:80]!r}: expected a plain NAME.md, one of: {_ALLOWED_TEXT}"
        )
    raise InvalidArgument(f"filename {name!r} is not allowed; allowed: {_ALLOWED_TEXT}")
