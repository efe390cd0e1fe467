"""A forget of text that a note's own name holds (docs/concepts/vault.md "A name that holds the text").

A note's name is in its file's name (SQLite backend), its rows (PostgreSQL), the rows keyed by it (its
authors, its lifecycle, the retrieval log, the promotion records' ``note`` and their write's ``note``),
the links to it from other notes (``[[name]]``) and the graph reports. The text cannot stay in any of
them, so an apply **renames** the note: each match in its name is replaced by ``name_marker`` (the
marker without its brackets, which a name may not hold: ``forgotten F-…``), so ``Ottoline Brasswick
contacts`` becomes ``forgotten F-0123456789ab contacts``. A name taken already gets `` 2``, `` 3``…;
a name the rules refuse (too long) becomes ``forgotten F-…`` alone. A retired twin (``stale__<name>``)
follows its live name.

- ``plan``: the new live name of every live name (of a live or a retired note) that holds the target.
- ``scrub_links``: a note's ``[[links]]`` whose text holds the target, rewritten as links still:
  the target part to the planned name (a dangling link: the name-safe marker in place of each match),
  a label or section with the name-safe marker. The rest of the note is scrubbed as any text (with
  the marker in brackets), which would break a link's syntax.
- ``renamer``: the planned name of any name (a row's); a name the plan does not know (a note removed
  since, a row left by a forget cut short) with the name-safe marker in place of each match.

The stores move the notes and rewrite the rows (``VaultStore.forget_names``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from gateway.errors import InvalidArgument
from gateway.forgetting import Target
from services.kb.vault.names import is_retired, live_name, retired_name, validate_name

_LINK: Final = re.compile(r"\[\[([^\[\]\n]+)\]\]")  # services/kb/graph/parse.py's link
Rename = Callable[[str], str | None]  # a note name → its new name, or None when it keeps its name


def name_marker(tombstone_id: str) -> str:
    """The marker a note name may hold: ``forgotten F-…`` (no brackets, which break a link)."""
    return f"forgotten {tombstone_id}"


def _new_name(live: str, target: Target, tombstone_id: str) -> str:
    base = target.replace(live, name_marker(tombstone_id)).strip()
    try:
        return validate_name(base)
    except InvalidArgument:  # too long now, or a reserved start: the marker alone
        return name_marker(tombstone_id)


def plan(names: Iterable[str], target: Target, tombstone_id: str) -> dict[str, str]:
    """Live name → its new live name, for every live name among ``names`` (live or retired notes) that
    holds ``target``; each new name free among ``names`` and the other new names (module docstring)."""
    lives = sorted({live_name(n) for n in names})
    taken = set(lives)
    out: dict[str, str] = {}
    for live in lives:
        if not target.finditer(live):
            continue
        new = candidate = _new_name(live, target, tombstone_id)
        n = 2
        while candidate in taken:
            candidate, n = f"{new} {n}", n + 1
        taken.add(candidate)
        out[live] = candidate
    return out


def renamer(planned: Mapping[str, str], target: Target, tombstone_id: str) -> Rename:
    """A name's new name (module docstring): the plan's for its live name, else the name-safe marker in
    place of each match; a retired name stays retired. None for a name that does not hold the target."""
    def rename(name: str) -> str | None:
        live = live_name(name)
        new = planned.get(live)
        if new is None:
            if not target.finditer(live):
                return None
            new = _new_name(live, target, tombstone_id)
        return retired_name(new) if is_retired(name) else new

    return rename


def scrub_links(text: str, target: Target, tombstone_id: str, planned: Mapping[str, str]) -> str:
    """``text`` with each ``[[link]]`` that holds ``target`` rewritten as a link (module docstring)."""
    safe = name_marker(tombstone_id)

    def one(m: re.Match[str]) -> str:
        inner = m.group(1)
        if not target.finditer(inner):
            return m.group(0)
        cut = min([inner.find(c) for c in "|#" if c in inner] or [len(inner)])
        head, rest = inner[:cut], inner[cut:]
        key = head.strip()
        key = key[: -len(".md")] if key.endswith(".md") else key
        new_head = planned.get(key) or target.replace(head, safe)
        return f"[[{new_head}{target.replace(rest, safe)}]]"

    return _LINK.sub(one, text) if "[[" in text else text


def note_scrub(target: Target, tombstone_id: str, planned: Mapping[str, str]) -> Callable[[str], str]:
    """A note's text scrubbed: its links (``scrub_links``), then every match left with the marker."""
    return lambda text: target.scrub(scrub_links(text, target, tombstone_id, planned), tombstone_id)[0]
