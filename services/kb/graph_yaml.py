"""A small, safe parser for the YAML subset that note frontmatter uses.

Supported: block mappings and sequences (a sequence may sit at its key's
indent), ``- key: value`` items, flow collections (``[a, b]``, ``{k: v}``, also
over several lines), single- and double-quoted scalars (YAML 1.2's escapes; a
``\\uD83D\\uDE00`` pair, as JSON writes it, is one character, a lone surrogate
U+FFFD: a title is written as UTF-8), literal and folded block scalars (``|``,
``>``, with ``-``/``+`` chomping), comments, plain
scalars continued on more-indented lines (folded into one string), and plain
scalars resolved as null, booleans (``true``/``false``), integers and floats
(YAML 1.2 core schema). Dates stay strings; so do numbers with a leading zero
(``007`` is an id, not 7). Everything else (anchors, aliases, tags, complex
keys, multi-line quoted scalars, tabs in indentation) raises
FrontmatterError with a line number; nothing is ever executed or constructed.
Nesting is bounded, so a hostile document cannot exhaust the stack.
"""

from __future__ import annotations

import re
from typing import NoReturn

Value = None | bool | int | float | str | list["Value"] | dict[str, "Value"]

MAX_DEPTH = 32
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_NUMBER_START = frozenset("+-.0123456789")
_SPECIAL_FLOATS = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}
# YAML 1.2's escapes in double-quoted scalars (\x, \u and \U are read in _quoted).
_ESCAPES = {
    "n": "\n", "t": "\t", "\t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "/": "/", " ": " ", "e": "\x1b",
    "a": "\x07", "b": "\b", "v": "\x0b", "f": "\x0c", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}
_HIGH, _LOW, _HEX = range(0xD800, 0xDC00), range(0xDC00, 0xE000), re.compile("[0-9a-fA-F]{4}")


class FrontmatterError(ValueError):
    """The frontmatter is not in the supported subset; ``line`` is 1-based in the note."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_frontmatter(text: str, first_line: int = 1) -> dict[str, Value]:
    """Parse ``text`` (the lines between the ``---`` delimiters) into a mapping.

    ``first_line`` is the note's line number of the first line, for messages.
    An empty document is ``{}``. Raises FrontmatterError.
    """
    parser = _Parser(text.split("\n"), first_line)
    return parser.document()


def resolve_plain(text: str) -> Value:
    """Type of a plain (unquoted) scalar under the YAML 1.2 core schema (leading zeros stay text)."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text[0] not in _NUMBER_START:
        return text
    if _INT.fullmatch(text):
        return int(text)
    if text.lower() in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text.lower()]
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


class _Parser:
    def __init__(self, lines: list[str], first_line: int) -> None:
        self.lines = lines
        self.pos = 0
        self.first = first_line
        # Per line, computed once: indent (spaces), the text after it, and whether
        # the line is blank or a comment (the parser looks at most lines several times).
        self.indents: list[int] = []
        self.contents: list[str] = []
        self.skippable: list[bool] = []
        for line in lines:
            content = line.lstrip(" ")
            self.indents.append(len(line) - len(content))
            self.contents.append(content)
            bare = content.lstrip()
            self.skippable.append(not bare or bare[0] == "#")

    def rewrite(self, pos: int, column: int, content: str) -> None:
        """Re-read line ``pos`` as ``content`` at ``column`` (the item of ``- key: value``)."""
        self.lines[pos] = " " * column + content
        self.indents[pos] = column
        self.contents[pos] = content

    def fail(self, message: str, pos: int | None = None) -> NoReturn:
        raise FrontmatterError(self.first + (self.pos if pos is None else pos), message)

    def document(self) -> dict[str, Value]:
        if not self.skip_blank():
            return {}
        value = self.block(self.indent(), 0)
        if self.skip_blank():
            self.fail("unexpected content after the document")
        if not isinstance(value, dict):
            self.fail("frontmatter must be a mapping of keys to values", 0)
        return value

    # -- lines ---------------------------------------------------------------

    def skip_blank(self) -> bool:
        """Move past blank and comment lines; False at the end of the document."""
        skippable = self.skippable
        end = len(skippable)
        while self.pos < end:
            if not skippable[self.pos]:
                return True
            self.pos += 1
        return False

    def indent(self) -> int:
        if self.contents[self.pos][:1] == "\t":
            self.fail("tab in indentation")
        return self.indents[self.pos]

    # -- blocks --------------------------------------------------------------

    def block(self, indent: int, depth: int) -> Value:
        if depth > MAX_DEPTH:
            self.fail(f"nesting deeper than {MAX_DEPTH} levels")
        if _is_item(self.contents[self.pos]):
            return self.sequence(indent, depth)
        return self.mapping(indent, depth)

    def sequence(self, indent: int, depth: int) -> list[Value]:
        items: list[Value] = []
        while self.skip_blank():
            here = self.indent()
            content = self.contents[self.pos]
            if here < indent or (here == indent and not _is_item(content)):
                break
            if here > indent:
                self.fail("unexpected indentation")
            rest = content[1:].lstrip(" ")
            column = here + len(content) - len(rest)
            if rest and not rest.startswith("#") and (_is_item(rest) or self.split_key(rest) is not None):
                # "- key: value" opens a mapping whose keys sit at the column of "key".
                self.rewrite(self.pos, column, rest)
                items.append(self.block(column, depth + 1))
            else:
                self.pos += 1
                items.append(self.value(rest, indent, depth + 1, in_mapping=False))
        return items

    def mapping(self, indent: int, depth: int) -> dict[str, Value]:
        result: dict[str, Value] = {}
        while self.skip_blank():
            here = self.indent()
            if here < indent:
                break
            if here > indent:
                self.fail("unexpected indentation")
            content = self.contents[self.pos]
            if _is_item(content):
                self.fail("a list item where a 'key: value' line was expected")
            split = self.split_key(content)
            if split is None:
                self.fail("expected a 'key: value' line")
            key, rest = split
            if key in result:
                self.fail(f"duplicate key {key!r}")
            self.pos += 1
            result[key] = self.value(rest, indent, depth + 1, in_mapping=True)
        return result

    def value(self, rest: str, parent: int, depth: int, *, in_mapping: bool) -> Value:
        """The value after ``key:`` or ``-``; ``self.pos`` is already past its line."""
        if depth > MAX_DEPTH:
            self.fail(f"nesting deeper than {MAX_DEPTH} levels", self.pos - 1)
        if not rest or rest.startswith("#"):
            if not self.skip_blank():
                return None
            here = self.indent()
            content = self.contents[self.pos]
            if here > parent and not _is_item(content) and self.split_key(content) is None:
                self.pos += 1  # the value on the next line: "key:\n  value"
                return self.value(content, parent, depth, in_mapping=False)
            nested = here > parent or (in_mapping and here == parent and _is_item(content))
            return self.block(here, depth) if nested else None
        head = rest[0]
        if head in "|>":
            return self.block_scalar(rest, parent)
        if head in "[{":
            return self.flow(rest)
        if head in "&*!":
            self.fail("anchors, aliases and tags are not supported", self.pos - 1)
        if head in "?%@`":
            self.fail(f"a value may not start with {head!r}", self.pos - 1)
        if head in "'\"":
            try:
                scalar, end = _quoted(rest, 0)
            except ValueError as exc:
                self.fail(str(exc), self.pos - 1)
            if scalar is None:
                self.fail("unterminated quoted string (multi-line quotes are not supported)", self.pos - 1)
            tail = rest[end:].strip()
            if tail and not tail.startswith("#"):
                self.fail("unexpected text after a quoted string", self.pos - 1)
            return scalar
        text = _strip_comment(rest)
        if len(text) == len(rest.rstrip()):  # a comment ends a plain scalar; otherwise it may go on
            more = self.continuation(parent)
            if more:
                return text + more
        return resolve_plain(text)

    def continuation(self, parent: int) -> str:
        """Folded continuation lines of a plain scalar (indented past ``parent``), or ""."""
        if self.pos < len(self.lines) and self.contents[self.pos] and self.indents[self.pos] <= parent:
            return ""  # the common case: the next line is a sibling or a parent's
        out = ""
        while True:
            ahead = self.pos
            while ahead < len(self.lines) and not self.lines[ahead].strip():
                ahead += 1
            if ahead == len(self.lines):
                return out
            line = self.lines[ahead]
            stripped = line.strip()
            here = len(line) - len(line.lstrip(" "))
            if here <= parent or line[here:here + 1] == "\t" or stripped.startswith("#"):
                return out
            try:
                if _split_key(stripped) is not None:
                    return out  # "key: value" deeper in: the mapping reports the bad indentation
            except ValueError:
                return out
            blanks = ahead - self.pos
            self.pos = ahead + 1
            text = _strip_comment(stripped)
            out += ("\n" * blanks if blanks else " ") + text
            if len(text) != len(stripped):
                return out

    def split_key(self, content: str) -> tuple[str, str] | None:
        try:
            return _split_key(content)
        except ValueError as exc:
            self.fail(str(exc))

    def block_scalar(self, header: str, parent: int) -> str:
        header_line = self.pos - 1
        spec = _strip_comment(header)
        if spec not in ("|", "|-", "|+", ">", ">-", ">+"):
            self.fail(f"unsupported block scalar header {spec!r}", header_line)
        body: list[str] = []
        content_indent: int | None = None
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if not line.strip():
                body.append("")
                self.pos += 1
                continue
            here = len(line) - len(line.lstrip(" "))
            if content_indent is None:
                if here <= parent:
                    break
                content_indent = here
            if here < content_indent:
                break
            body.append(line[content_indent:])
            self.pos += 1
        trailing = len(body) - len(_rstrip_blank(body))
        lines = _rstrip_blank(body)
        if self.pos < len(self.lines):
            self.pos -= trailing  # blank lines after the scalar belong to the document
        if spec[0] == "|":
            text = "\n".join(lines)
        else:
            text = _fold(lines)
        if spec.endswith("-") or not text:
            return text
        return text + ("\n" * (trailing + 1) if spec.endswith("+") else "\n")

    def flow(self, rest: str) -> Value:
        start = self.pos - 1
        text, depth = _flow_line(rest)
        while depth > 0:
            if self.pos >= len(self.lines):
                self.fail("unterminated flow collection", start)
            more, delta = _flow_line(self.lines[self.pos].strip())
            self.pos += 1
            text += " " + more
            depth += delta
        try:
            value, end = _Flow(text).parse()
        except ValueError as exc:
            self.fail(str(exc), start)
        if text[end:].strip():
            self.fail("unexpected text after a flow collection", start)
        return value


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _split_key(content: str) -> tuple[str, str] | None:
    """``key: rest`` → (key, rest stripped of leading spaces); None when not a mapping entry."""
    if content[0] in "'\"":
        key, end = _quoted(content, 0)
        if key is None or content[end:end + 1] != ":":
            return None
        after = content[end + 1:]
        if after and after[0] != " ":
            return None
        return key, after.lstrip(" ")
    if content[0] in "[{&*!?|>%@`#":
        return None
    at = content.find(":")
    while at != -1:
        if at + 1 == len(content) or content[at + 1] == " ":
            key = content[:at].rstrip()
            return (key, content[at + 1:].lstrip(" ")) if key else None
        at = content.find(":", at + 1)
    return None


def _strip_comment(text: str) -> str:
    at = text.find(" #")
    return (text[:at] if at != -1 else text).strip()


def _quoted(text: str, start: int) -> tuple[str | None, int]:
    """Parse a quoted scalar at ``start``; (value, index after it) or (None, _) when unterminated."""
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        char = text[i]
        if quote == "'":
            if char == "'":
                if text[i + 1:i + 2] == "'":
                    out.append("'")
                    i += 2
                    continue
                return "".join(out), i + 1
        elif char == '"':
            return "".join(out), i + 1
        elif char == "\\":
            code = text[i + 1:i + 2]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                i += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(code)
            digits = text[i + 2:i + 2 + width] if width else ""
            if not width or len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"bad escape \\{code} in a quoted string")
            point = int(digits, 16)
            i += 2 + len(digits)
            if point in _HIGH and text[i:i + 2] == "\\u" and _HEX.fullmatch(low := text[i + 2:i + 6]) and int(low, 16) in _LOW:
                point = 0x10000 + ((point - 0xD800) << 10) + (int(low, 16) - 0xDC00)  # a UTF-16 pair, as JSON writes it
                i += 6
            # A lone surrogate (or a point past Unicode) cannot be stored or written as UTF-8.
            out.append("\ufffd" if point > 0x10FFFF or point in _HIGH or point in _LOW else chr(point))
            continue
        out.append(char)
        i += 1
    return None, i


def _flow_line(line: str) -> tuple[str, int]:
    """The line without its trailing comment, and its bracket depth change (quotes skipped)."""
    depth = 0
    i = 0
    quote = ""
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "#" and (i == 0 or line[i - 1] == " "):
            return line[:i].rstrip(), depth
        i += 1
    return line, depth


def _rstrip_blank(lines: list[str]) -> list[str]:
    end = len(lines)
    while end and not lines[end - 1]:
        end -= 1
    return lines[:end]


def _fold(lines: list[str]) -> str:
    out = ""
    for index, line in enumerate(lines):
        if index == 0:
            out = line
        elif not line:
            out += "\n"
        elif out.endswith("\n") or line.startswith(" ") or lines[index - 1].startswith(" "):
            out += ("" if out.endswith("\n") else "\n") + line
        else:
            out += " " + line
    return out


class _Flow:
    """Recursive descent over one flow collection, bounded by MAX_DEPTH."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def parse(self) -> tuple[Value, int]:
        value = self.node(0)
        return value, self.i

    def ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1

    def peek(self) -> str:
        return self.text[self.i:self.i + 1]

    def node(self, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
        self.ws()
        char = self.peek()
        if char == "[":
            return self.collection("]", depth)
        if char == "{":
            return self.collection("}", depth)
        if char in ("'", '"'):
            value, end = _quoted(self.text, self.i)
            if value is None:
                raise ValueError("unterminated quoted string")
            self.i = end
            return value
        if char and char in "&*!":
            raise ValueError("anchors, aliases and tags are not supported")
        return resolve_plain(self.plain())

    def plain(self) -> str:
        start = self.i
        while self.i < len(self.text):
            char = self.text[self.i]
            if char in ",[]{}" or (char == ":" and self.text[self.i + 1:self.i + 2] in (" ", ",", "}", "]", "")):
                break
            self.i += 1
        return self.text[start:self.i].strip()

    def collection(self, close: str, depth: int) -> Value:
        self.i += 1
        items: list[Value] = []
        pairs: dict[str, Value] = {}
        while True:
            self.ws()
            if self.peek() == close:
                self.i += 1
                return pairs if close == "}" else items
            if not self.peek():
                raise ValueError("unterminated flow collection")
            if close == "]":
                items.append(self.node(depth + 1))
            else:
                key = self.node(depth + 1)
                if isinstance(key, (list, dict)):
                    raise ValueError("a flow mapping key must be a scalar")
                name = "" if key is None else str(key).lower() if isinstance(key, bool) else str(key)
                self.ws()
                value: Value = None
                if self.peek() == ":":
                    self.i += 1
                    value = self.node(depth + 1)
                if name in pairs:
                    raise ValueError(f"duplicate key {name!r}")
                pairs[name] = value
            self.ws()
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != close:
                raise ValueError(f"expected ',' or {close!r} in a flow collection")
