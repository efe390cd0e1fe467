"""Properties of the shim's one JSON decode step (gateway_http/json_body.py).

Whatever ``json.dumps`` makes of finite, shallow data decodes to the same
value; a document past any bound, with a non-finite number or a lone
surrogate, or in another encoding, is BadRequest; and no byte string makes
the decoder raise anything else.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_http.fields import BadRequest
from gateway_http.json_body import MAX_DEPTH, MAX_NUMBER_CHARS, decode_json

PROPERTY = settings(max_examples=300, deadline=None, database=None)  # no deadline: the machine is noisy

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
short_ints = st.integers(min_value=-(10 ** (MAX_NUMBER_CHARS - 2)), max_value=10 ** (MAX_NUMBER_CHARS - 1) - 1)
scalars = st.none() | st.booleans() | short_ints | finite_floats | st.text()  # st.text() has no surrogates
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                         max_leaves=30)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def nested(levels: int, kinds: list[bool], leaf: str = "0") -> bytes:
    """``levels`` arrays/objects around ``leaf``; ``kinds[i]`` picks an object at level i."""
    head = "".join('{"k":' if kinds[i % len(kinds)] else "[" for i in range(levels))
    tail = "".join("}" if kinds[i % len(kinds)] else "]" for i in reversed(range(levels)))
    return (head + leaf + tail).encode()


def refused(raw: bytes, fragment: str) -> None:
    with pytest.raises(BadRequest) as caught:
        decode_json(raw)
    assert fragment in str(caught.value)
    str(caught.value).encode("utf-8")  # the message itself is always sendable


@PROPERTY
@given(documents.filter(lambda v: depth(v) <= MAX_DEPTH), st.booleans())
def test_what_json_dumps_writes_decodes_to_the_same_value(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    assert decode_json(raw) == value


@PROPERTY
@given(st.integers(min_value=MAX_DEPTH + 1, max_value=3000), st.lists(st.booleans(), min_size=1, max_size=5))
def test_nesting_past_the_bound_is_refused(levels: int, kinds: list[bool]) -> None:
    refused(nested(levels, kinds), "nested too deeply")


def test_nesting_at_the_bound_is_taken() -> None:
    assert decode_json(nested(MAX_DEPTH, [True])) is not None
    assert depth(decode_json(nested(MAX_DEPTH, [False, True]))) == MAX_DEPTH


@PROPERTY
@given(st.integers(min_value=MAX_NUMBER_CHARS + 1, max_value=6000), st.sampled_from(["{}", "-{}", "{}.5", "1.{}", "1e{}"]),
       st.integers(min_value=0, max_value=3))
def test_an_over_long_number_literal_is_refused(length: int, shape: str, levels: int) -> None:
    literal = shape.format("1" * length)
    refused(nested(levels, [True], literal) if levels else literal.encode(), "number literal")


@PROPERTY
@given(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999999", "-1e400", "1.5E+309"]),
       st.integers(min_value=0, max_value=MAX_DEPTH - 1), st.lists(st.booleans(), min_size=1, max_size=3))
def test_non_finite_numbers_are_refused_wherever_they_are(literal: str, levels: int, kinds: list[bool]) -> None:
    raw = nested(levels, kinds, literal)
    with pytest.raises(BadRequest) as caught:
        decode_json(raw)
    assert "finite" in str(caught.value) or "too large for a double" in str(caught.value)


@PROPERTY
@given(st.integers(min_value=0xD800, max_value=0xDFFF), st.booleans(), st.text(max_size=5), st.integers(min_value=0, max_value=4))
def test_a_lone_surrogate_is_refused_in_a_key_or_a_value(point: int, in_key: bool, around: str, levels: int) -> None:
    escape = json.dumps(around)[1:-1] + f"\\u{point:04x}"
    leaf = f'{{"{escape}": 1}}' if in_key else f'"{escape}"'
    refused(nested(levels, [True, False], leaf), "lone surrogate")


@PROPERTY
@given(st.integers(min_value=0x10000, max_value=0x10FFFF))
def test_a_surrogate_pair_is_one_character(point: int) -> None:
    assert decode_json(json.dumps({"s": chr(point)}).encode()) == {"s": chr(point)}


@PROPERTY
@given(documents.filter(lambda v: depth(v) <= MAX_DEPTH), st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32",
                                                                            "utf-32-be"]))
def test_other_encodings_are_refused(value: Any, encoding: str) -> None:
    raw = json.dumps(value).encode(encoding)
    try:
        decoded = decode_json(raw)
    except BadRequest as exc:
        assert "UTF-8" in str(exc)
    else:  # only a document of one ASCII character in UTF-16-LE without BOM can look like UTF-8
        assert len(json.dumps(value)) == 1 and decoded == value


@settings(max_examples=500, deadline=None, database=None)
@given(st.binary(max_size=200) | documents.map(lambda v: json.dumps(v).encode()).map(lambda b: b[: len(b) // 2]))
def test_no_bytes_raise_anything_but_bad_request(raw: bytes) -> None:
    try:
        decode_json(raw)
    except BadRequest as exc:
        str(exc).encode("utf-8")


def test_a_byte_order_mark_is_tolerated_and_bad_bytes_are_named() -> None:
    assert decode_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    refused(b'{"a": "\xff"}', "not UTF-8")
    refused(b'{"a": "\xed\xbf\xbf"}', "not UTF-8")  # a surrogate encoded as bytes is not UTF-8 either


def test_refusals_name_where_they_are() -> None:
    refused(b'{"state": NaN}', "state: NaN is not JSON")
    refused(b'{"paths": ["a", 1e999]}', "paths[1]: 1e999 is too large")
    refused(b'{"content": "\\udfff"}', "content: the string is not valid Unicode")
    refused(b'{"meta": {"\\ud800x": 1}}', "meta: a key is not valid Unicode")
    assert math.isfinite(decode_json(b"1e308"))
