"""The one reader of note frontmatter: PyYAML, held to a safe, predictable profile.

Both the graph layer (``graph.parse``) and the indexer (``index.entries``) read a note's
header through ``load_frontmatter``, so one note means the same thing to both.
The profile is the YAML 1.2 core schema on top of PyYAML's safe loader (the C
loader when PyYAML was built with libyaml): ``true``/``false`` are the only
booleans (``yes``, ``off`` stay text), a number with a leading zero stays text
(``007`` is an id, not 7), dates stay strings, mapping keys are their text, and
nothing is ever constructed beyond plain mappings, lists and scalars. Anchors,
aliases and tags, duplicate keys and nesting past MAX_DEPTH are refused with a
FrontmatterError that names the line, so a hostile header can neither expand
nor exhaust the stack. A ``\\uD83D\\uDE00`` pair of escapes, as JSON writes it,
is one character, and a lone surrogate becomes U+FFFD: a title must stay
writable as UTF-8 (libyaml refuses such escapes, so a header holding one is
read by the pure-Python loader).

PyYAML and the profile's loaders are in ``frontmatter_yaml``, imported at the first header read:
a KB whose notes carry no frontmatter never loads them (docs/operations.md "Memory at rest").
"""

from __future__ import annotations

Value = None | bool | int | float | str | list["Value"] | dict[str, "Value"]

MAX_DEPTH = 32


class FrontmatterError(ValueError):
    """The frontmatter cannot be read; ``line`` is 1-based in the note."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def load_frontmatter(text: str, first_line: int = 1) -> dict[str, Value]:
    """``text`` (the lines between the ``---`` delimiters) as a mapping; ``{}`` when empty.

    ``first_line`` is the note's line number of the first line, for messages.
    Raises FrontmatterError (and nothing else) when the text is not a mapping in the profile.
    """
    from services.kb.index.frontmatter_yaml import Refused, parse  # PyYAML: see the module

    try:
        value = parse(text, first_line, MAX_DEPTH)
    except Refused as exc:
        raise FrontmatterError(exc.line, exc.message) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FrontmatterError(first_line, "frontmatter must be a mapping of keys to values")
    return value
