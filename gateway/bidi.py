"""Bidirectional controls: refused wherever a caller's name becomes a file name or is shown as one.

A bidirectional control (Unicode's Bidi_Control property: U+061C, U+200E,
U+200F, U+202A–U+202E, U+2066–U+2069) is invisible and reorders the text
around it, so a name holding one is displayed as something it is not:
``"invoice\\u202edm.exe"`` reads as ``invoiceexe.md`` (the "Trojan Source"
trick, CVE-2021-42574). The name rules already refuse control characters; these
are refused beside them, with a message that names the
character, since the caller cannot see it.

Domain code calls ``refuse_bidi``; it raises the suite's InvalidArgument, so a
caller gets a 400 (gRPC INVALID_ARGUMENT) that says which character and where.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from gateway.errors import InvalidArgument

BIDI_CONTROLS: Final = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_BIDI: Final = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def first_bidi_control(text: str) -> str | None:
    """The first bidirectional control in ``text``, or None when it holds none."""
    found = _BIDI.search(text)
    return found.group() if found is not None else None


def describe(char: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``: a character named so that a reader can see it."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} ({name})" if name else f"U+{ord(char):04X}"


def refuse_bidi(text: str, what: str) -> None:
    """Raise InvalidArgument naming the first bidirectional control in ``text``, if any.

    ``what`` says which value it was, as the caller knows it (``"a shared note
    name"``, ``"path"``): the message reads ``<what> must not contain U+202E
    (RIGHT-TO-LEFT OVERRIDE), a bidirectional control ...``.
    """
    char = first_bidi_control(text)
    if char is not None:
        raise InvalidArgument(
            f"{what} must not contain {describe(char)}, a bidirectional control: "
            "it makes a name display as something it is not"
        )
