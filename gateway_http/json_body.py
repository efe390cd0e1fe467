"""The one decode step of a REST request body: bytes to a JSON value, or BadRequest.

``json.loads`` alone lets through, or fails with something other than a
clear refusal on, several inputs; this step refuses each with a
message naming it, before the body meets a message:

- **UTF-8 only** (RFC 8259 §8.1, and what grpc-gateway reads). ``json.loads``
  of bytes would guess UTF-16 or UTF-32 from the NUL bytes and accept them;
  here the bytes are decoded as strict UTF-8 (a leading UTF-8 byte order mark
  is tolerated, as the RFC allows), and a body whose first bytes hold a NUL
  (the way the RFC's own detection recognises UTF-16/32) is named as such.
- **Depth.** Arrays and objects nest at most ``MAX_DEPTH`` levels. Our
  request messages are flat (an object of scalars and lists of strings, two
  levels); the bound leaves room for unknown fields a client adds and stays
  far below protobuf's own ``ParseDict`` limit (100). A document deep enough
  to hit the C decoder's recursion guard (about 1,000 levels) is the same
  refusal.
- **Number literals** of at most ``MAX_NUMBER_CHARS`` characters: our numbers
  are int32/int64 (20 characters at most) and a double needs 24, so this never
  refuses a real value, and it keeps Python's 4,300-digit ``int`` limit (a
  ValueError that would be a 500) out of reach.
- **Finite numbers only.** ``NaN``, ``Infinity`` and ``-Infinity`` are not
  JSON (Python accepts them), and a literal such as ``1e999999`` that
  overflows to infinity is refused too.

A refusal inside the document names where it is (``state: NaN is not
JSON…``): the parse hooks return a marker for a refused number, and the walk
of the containers that checks the depth reports its path.
- **No lone surrogates.** A ``\\udfff`` escape without its pair is valid JSON
  syntax but not Unicode: it could not be stored as UTF-8 nor sent in a
  protobuf string, in a key or in a value. A string that is pure ASCII (an
  O(1) flag of Python's strings) cannot hold one; any other is checked by
  encoding it, at C speed.

Cost: the 1 MiB PUT of a file pays one C-speed UTF-8 decode, one C-speed
parse, and a walk of the containers (not of the characters) that encodes
the non-ASCII strings once; ``bench/rest_files.py`` measures that path.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gateway_http.fields import BadRequest

MAX_DEPTH = 32  # levels of arrays and objects, the top-level object included
MAX_NUMBER_CHARS = 100  # characters of one number literal, sign and exponent included
MAX_SHOWN_KEY_CHARS = 40  # a key quoted in a message is cut to this many characters


class _Refused:
    """What the parse hooks return for a number they refuse, so the walk can name where it was
    (the hooks themselves are not told)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what


def _parse_int(text: str) -> int | _Refused:
    if len(text) > MAX_NUMBER_CHARS:
        return _Refused(f"a number literal of {len(text):,} characters; at most {MAX_NUMBER_CHARS}")
    return int(text)


def _parse_float(text: str) -> float | _Refused:
    if len(text) > MAX_NUMBER_CHARS:
        return _Refused(f"a number literal of {len(text):,} characters; at most {MAX_NUMBER_CHARS}")
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"{text} is too large for a double")
    return value


def _parse_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not JSON: numbers must be finite")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _where(path: str) -> str:
    return path if len(path) <= 80 else path[:79] + "…"


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = key if len(key) <= MAX_SHOWN_KEY_CHARS else key[: MAX_SHOWN_KEY_CHARS - 1] + "…"
    return f"{path}.{key}" if path else key


def _check_tree(value: dict[str, Any] | list[Any]) -> None:
    """Refuse nesting deeper than MAX_DEPTH, a refused number and a lone surrogate in a key or a
    string, naming where (``items[2].name``).

    Iterative, so a deep value cannot exhaust the stack here either.
    """
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"request body is nested too deeply at {_where(path)}: at most {MAX_DEPTH} levels "
                             "of arrays and objects")
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(key, str) and _has_surrogate(key):
                raise BadRequest(f"{_where(path) or 'request body'}: a key is not valid Unicode (lone surrogate)")
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, _step(path, key)))
            elif type(item) is _Refused:
                raise BadRequest(f"{_where(_step(path, key))}: {item.what}")
            elif isinstance(item, str) and _has_surrogate(item):
                raise BadRequest(f"{_where(_step(path, key))}: the string is not valid Unicode (lone surrogate)")


def _text(raw: bytes) -> str:
    if b"\x00" in raw[:4]:
        raise BadRequest("request body must be UTF-8 JSON; this looks like UTF-16 or UTF-32")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"request body is not UTF-8 (invalid byte at offset {exc.start})") from None


def decode_json(raw: bytes) -> Any:
    """The JSON value of a request body, under the rules above.

    Raises BadRequest naming what was wrong and, in the body, where; never another exception.
    """
    text = _text(raw)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise BadRequest(f"request body is nested too deeply: at most {MAX_DEPTH} levels of arrays and objects") from None
    if isinstance(value, (dict, list)):
        _check_tree(value)
    elif type(value) is _Refused:
        raise BadRequest(f"request body: {value.what}")
    elif isinstance(value, str) and _has_surrogate(value):
        raise BadRequest("request body: the string is not valid Unicode (lone surrogate)")
    return value
