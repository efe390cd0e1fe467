"""One applied splice of a memory file (``Edit``): what the applier and the passes make, the journal
records, the pruned archive keeps and a revert undoes."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

CONTEXT_CHARS = 48  # text kept on each side of a splice, to find it again for a revert


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Edit:
    """One applied splice: enough to journal it, archive what it removed, and undo it.

    ``offset`` is where the splice starts in the text as it was when the op ran;
    ``before`` / ``after`` are up to CONTEXT_CHARS of the text around the
    inserted part once the op was made; ``at_start`` / ``at_end`` say that the
    context reached the start / end of the file (a revert then finds it there).
    ``lines`` are the whole lines of that text the removed part stood in (""
    when nothing was removed): what the pruned archive keeps, so a fact whose
    value a replace changed stays findable in its own words."""

    op_id: str
    file: str
    kind: str  # add | replace | remove | append
    offset: int
    removed: str
    inserted: str
    before: str
    after: str
    hash_before: str
    hash_after: str
    reason: str
    heading_path: tuple[str, ...] = ()
    at_start: bool = False
    at_end: bool = False
    lines: str = ""
