"""What one shared promotion wrote to one vault note, as both ends of ``PromoteFact`` keep it.

The KB makes the record when a promotion creates or appends to a note; dreaming keeps it in its
journal, and a revert hands it back (``UndoPromotion``) so the KB can undo exactly that splice.
One definition, and one conversion each way to ``gateway.v1.PromotionWrite``, so the two services
cannot disagree on what a write is.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.v1 import kb_pb2


@dataclass(frozen=True)
class PromotionWrite:
    """``kind``: created or appended; ``offset`` (characters), ``removed`` and ``added``: the splice;
    ``block``: the promoted block; the note's SHA-256 before and after; ``folded_twin``: the text of
    a retired twin folded in ("" when none)."""

    note: str
    project: str
    kind: str
    offset: int
    removed: str
    added: str
    block: str
    hash_before: str
    hash_after: str
    folded_twin: str = ""


def to_proto(w: PromotionWrite) -> kb_pb2.PromotionWrite:
    return kb_pb2.PromotionWrite(note=w.note, project=w.project, kind=w.kind, offset=w.offset, removed=w.removed,
                                 added=w.added, block=w.block, hash_before=w.hash_before, hash_after=w.hash_after,
                                 folded_twin=w.folded_twin)


def from_proto(w: kb_pb2.PromotionWrite) -> PromotionWrite:
    return PromotionWrite(note=w.note, project=w.project, kind=w.kind, offset=w.offset, removed=w.removed, added=w.added,
                          block=w.block, hash_before=w.hash_before, hash_after=w.hash_after, folded_twin=w.folded_twin)
