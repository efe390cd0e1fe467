"""The tombstone checks: text the suite is about to write, checked against the home's tombstones
(docs/concepts/forget.md "Where tombstones are checked").

``find_forgotten(home, text, scope)`` lists the forgets (their ids, ``F-…``) whose text ``text``
brings back, never the text. Dreaming skips an op with one (``skip_reason``: ``forgotten: F-…``),
the KB refuses a shared note or a promoted fact with one (``refuse_forgotten``), the file API
accepts the PUT and warns, and the KB's indexer flags an agent's own write of it.

A forget's **marker** (``[forgotten F-…]``) is checked too, where dreaming adds text: a proposal
written before a forget and scrubbed by it holds the marker where the text was, and accepting it
would write the marker into MEMORY.md (``new_markers``).

The checks read the home's tombstones and the vault's shared ones as this host's KB mirrored them
(``<home>/forget/tombstones.json`` and ``vault-tombstones.json``; docs/concepts/forget.md "Shared
tombstones across hosts"): a ``stat`` of each when no forget applies, and about one hash per distinct
word of the text when one does (``gateway.forgetting``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from gateway.errors import FailedPrecondition
from gateway.forgetting import ID_PREFIX, Tombstone, Tombstones

REASON: Final = "forgotten: "  # the opening of every skip reason here (the dreaming metric's label)
MARKER: Final = re.compile(r"\[forgotten (" + re.escape(ID_PREFIX) + r"[0-9a-f]+)(?:\.\d+)?\]")

Check = Callable[[str], list[str]]  # a text → the ids of the forgets it brings back


def forget_id(tombstone: Tombstone) -> str:
    """The id of the forget that made ``tombstone``: its own, without the ``.N`` of a forget's second
    and later texts (the id its markers carry, and the one ``lift`` takes)."""
    return tombstone.id.split(".", 1)[0]


def find_forgotten(home: Path, text: str, scope: str) -> list[str]:
    """The ids of the forgets of agent ``scope`` (and the shared ones) whose text ``text`` holds, in
    the order found, each once; ``[]`` for none."""
    return list(dict.fromkeys(forget_id(t) for t in Tombstones(home).matches(text, scope)))


def any_forgotten(home: Path, scope: str) -> bool:
    """Whether a forget of agent ``scope`` (or a shared one) left a tombstone: a ``stat`` when unchanged."""
    return Tombstones(home).apply_to(scope)


def checker(home: Path, scope: str) -> Check:
    """``find_forgotten`` bound to one home and agent: what dreaming's pure passes are given."""
    return lambda text: find_forgotten(home, text, scope)


def nothing_forgotten(text: str) -> list[str]:
    """The check of a caller with no home (a test, a plan made without one): nothing is forgotten."""
    return []


def new_markers(text: str, already: str = "") -> list[str]:
    """The ids of the forget markers in ``text`` that ``already`` (the text it replaces) does not hold."""
    kept = set(MARKER.findall(already))
    return [i for i in dict.fromkeys(MARKER.findall(text)) if i not in kept]


def skip_reason(ids: Iterable[str], marker: bool = False) -> str:
    """Why text holding forgotten text is skipped: ``forgotten: F-1, F-2``; with ``marker``, the text
    holds the forgets' markers instead, and the reason says so."""
    said = REASON + ", ".join(ids)
    return said + " (its marker: the text was scrubbed by that forget)" if marker else said


def why_forgotten(text: str, forgotten: Check, already: str = "") -> str:
    """Why ``text``, about to be written in place of ``already``, is skipped: it brings back forgotten
    text (``forgotten``: a ``checker``), or holds a forget's marker ``already`` does not; "" when neither."""
    ids = forgotten(text)
    if ids:
        return skip_reason(ids)
    marked = new_markers(text, already)
    return skip_reason(marked, marker=True) if marked else ""


def refuse_forgotten(home: Path, text: str, field: str, scope: str) -> None:
    """Raise FailedPrecondition naming the forgets when ``text`` (the request's ``field``) brings
    back forgotten text; never the text. FAILED_PRECONDITION, not INVALID_ARGUMENT: the same text is
    accepted once the tombstone is lifted, so it is the home's state that refuses it."""
    ids = find_forgotten(home, text, scope)
    if ids:
        raise FailedPrecondition(
            f"{field} holds text that was forgotten on purpose ({', '.join(ids)}): the suite does not write it "
            "again; take it out and send it again, or lift the tombstone (a key that may forget) if it should "
            "come back"
        )
