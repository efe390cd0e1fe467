"""A shared tombstone on the wire (``VaultTombstone``; docs/concepts/forget.md "Shared tombstones across
hosts"): dreaming sends the tombstones of a shared forget to the KB, which keeps them in the vault.
``from_proto`` checks every field (INVALID_ARGUMENT naming the first that is wrong), so a malformed record
never reaches the vault every host mirrors."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from gateway.errors import InvalidArgument
from gateway.forgetting import LEAD_HEX, SHARED_SCOPE, Tombstone
from gateway.v1 import kb_pb2

_ID: Final = re.compile(r"F-[0-9a-f]{12}(?:\.[1-9][0-9]{0,5})?")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_LEAD: Final = re.compile(rf"(?:[0-9a-f]{{{LEAD_HEX}}})?")
MAX_TOMBSTONES: Final = 10_000  # one call's; a pattern's distinct matches are far fewer


def to_proto(t: Tombstone) -> kb_pb2.VaultTombstone:
    return kb_pb2.VaultTombstone(tombstone_id=t.id, digest=t.digest, salt=t.salt, lead=t.lead, words=t.words, at=t.at,
                                 by=t.by, places=t.places)


def from_proto(rows: Iterable[kb_pb2.VaultTombstone], field: str = "tombstones") -> list[Tombstone]:
    """The shared tombstones of a request's ``field``; InvalidArgument naming the first malformed one."""
    out = []
    for n, r in enumerate(rows):
        where = f"{field}[{n}]"
        if n >= MAX_TOMBSTONES:
            raise InvalidArgument(f"{field}: more than {MAX_TOMBSTONES} tombstones in one call")
        if not _ID.fullmatch(r.tombstone_id):
            raise InvalidArgument(f"{where}.tombstone_id is not a tombstone id (F- and 12 hex digits, then .N or not)")
        for name, value in (("digest", r.digest), ("salt", r.salt)):
            if not _HEX64.fullmatch(value):
                raise InvalidArgument(f"{where}.{name} must be 64 lower-case hex digits (a shared tombstone's own)")
        if not _LEAD.fullmatch(r.lead):
            raise InvalidArgument(f"{where}.lead must be {LEAD_HEX} lower-case hex digits, or empty")
        if not 0 < r.words <= 100_000:
            raise InvalidArgument(f"{where}.words must be between 1 and 100000")
        if not r.at or len(r.at) > 64 or len(r.by) > 256 or r.places < 0:
            raise InvalidArgument(f"{where}: at (ISO 8601, required), by (at most 256 characters) or places (>= 0) "
                                  "is wrong")
        out.append(Tombstone(r.tombstone_id, r.digest, int(r.words), SHARED_SCOPE, r.at, r.by, int(r.places), r.lead,
                             r.salt))
    return out
