"""Shared-vault note names and the name → file mapping (docs/concepts/vault.md "Shared vault").

A note's identity is a freeform name the caller picks. A name is accepted when,
after trimming surrounding whitespace and Unicode NFC normalisation, it:

- is not empty, and is at most ``MAX_NAME_CHARS`` (120) characters (code points)
  and ``MAX_NAME_BYTES`` (200) bytes of UTF-8 — the byte bound keeps
  ``stale__<name>.md`` and ``write_atomic``'s temp name under the 255-byte
  file-name limit of common file systems;
- holds no ``/`` or ``\\`` (no separators, so no traversal), no NUL, no control
  character (Unicode Cc: U+0000–U+001F, U+007F–U+009F) and no line/paragraph
  separator (U+2028, U+2029), and no bidirectional control (U+061C, U+200E,
  U+200F, U+202A–U+202E, U+2066–U+2069: they make a name display as another;
  ``gateway.bidi``);
- holds none of ``[ ] | # ^``: they would break a ``[[wikilink]]`` to the note
  (Obsidian reads ``#`` as a heading anchor, ``^`` as a block reference, ``|``
  as an alias);
- does not start with ``.`` (so never ``.`` or ``..`` and never a hidden file).

Everything else is allowed: spaces, punctuation, any script. The name maps to
the file ``notes/<name>.md`` — the name itself plus ``.md``; the rules above
already make it one safe path segment, so no encoding is needed and the mapping
is trivially reversible (``name_from_path``). Names are case-sensitive:
``Deploy`` and ``deploy`` are two notes on a case-sensitive file system (Linux);
on a case-insensitive one (macOS default) they are the same file, and create
then reports the collision.

A retired note is ``stale__<name>`` (``notes/stale__<name>.md``). The
``stale__`` prefix (exact, case-sensitive) is reserved: ``validate_name``
refuses it unless the caller passes ``allow_retired=True`` (reads and deletes).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from gateway.bidi import refuse_bidi
from gateway.errors import InvalidArgument

MAX_NAME_CHARS: Final = 120
MAX_NAME_BYTES: Final = 200
RETIRED_PREFIX: Final = "stale__"
RESERVED_PREFIX: Final = "pruned__"
PRUNED_ARCHIVE: Final = "pruned__archive"
PRUNED_UNTRUSTED: Final = "pruned__untrusted"  # the archive of lines from untrusted notes (provenance: untrusted)
NOTES_DIR: Final = "notes"
NOTE_SUFFIX: Final = ".md"

_FORBIDDEN: Final = re.compile(r"[/\\\x00-\x1f\x7f-\x9f\u2028\u2029\[\]|#^]")


def validate_name(raw: str, *, allow_retired: bool = False) -> str:
    """The canonical form of ``raw`` (trimmed, NFC) when it is a valid note name.

    Raises InvalidArgument naming the broken rule (rules in the module docstring).
    ``allow_retired`` lets a ``stale__`` name through (for get and delete).
    """
    name = unicodedata.normalize("NFC", raw.strip())
    if not name:
        raise InvalidArgument("a shared note name must not be empty")
    if len(name) > MAX_NAME_CHARS or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidArgument(
            f"a shared note name is at most {MAX_NAME_CHARS} characters and {MAX_NAME_BYTES} bytes of UTF-8"
        )
    bad = _FORBIDDEN.search(name)
    if bad is not None:
        shown = bad.group() if bad.group().isprintable() else f"U+{ord(bad.group()):04X}"
        raise InvalidArgument(
            f"a shared note name must not contain {shown!r} (no / \\ [ ] | # ^ or control characters)"
        )
    refuse_bidi(name, "a shared note name")
    if name.startswith("."):
        raise InvalidArgument("a shared note name must not start with '.'")
    if name.startswith(RETIRED_PREFIX) and not allow_retired:
        raise InvalidArgument(f"names starting with {RETIRED_PREFIX!r} are reserved for retired notes")
    if name.startswith(RESERVED_PREFIX) and not allow_retired:
        raise InvalidArgument(f"names starting with {RESERVED_PREFIX!r} are reserved for the vault's pruned archive")
    return name


def is_reserved(name: str) -> bool:
    """Whether ``name`` is the vault's own (the pruned archive, retired or not): never a note to list,
    cluster, merge or retire."""
    return live_name(name).startswith(RESERVED_PREFIX)


def is_retired(name: str) -> bool:
    """Whether ``name`` is a retired note's name (``stale__<name>``)."""
    return name.startswith(RETIRED_PREFIX)


def retired_name(name: str) -> str:
    """The retired twin's name of live note ``name``."""
    return RETIRED_PREFIX + name


def live_name(name: str) -> str:
    """The live name of a retired ``stale__<name>`` (``name`` itself when not retired)."""
    return name[len(RETIRED_PREFIX):] if is_retired(name) else name


def note_path(name: str) -> str:
    """The vault-relative POSIX path of a (validated) name: ``notes/<name>.md``."""
    return f"{NOTES_DIR}/{name}{NOTE_SUFFIX}"


def name_from_path(rel_path: str) -> str | None:
    """The note name a vault-relative path holds (``notes/<name>.md``), or None for any other path."""
    prefix = NOTES_DIR + "/"
    if not rel_path.startswith(prefix) or not rel_path.endswith(NOTE_SUFFIX):
        return None
    name = rel_path[len(prefix) : -len(NOTE_SUFFIX)]
    if not name or "/" in name:
        return None
    return name
