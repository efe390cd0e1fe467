"""The shim's fast protojson render of flat replies is byte for byte protojson's own."""

from __future__ import annotations

import json

from google.protobuf import descriptor, json_format
from google.protobuf.message import Message
from hypothesis import given
from hypothesis import strategies as st

from gateway.v1.files_pb2 import GetFileResponse
from gateway_http.descriptors import all_routes
from gateway_http.transcode import flat_plan, render

FD = descriptor.FieldDescriptor
FLAT = sorted(
    {r.response_class for r in all_routes() if flat_plan(r.response_class.DESCRIPTOR) is not None}, key=lambda c: c.__name__
)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def protojson(message: Message) -> bytes:
    data = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def value_of(field: descriptor.FieldDescriptor) -> st.SearchStrategy[object]:
    if field.is_repeated:  # only strings: flat_plan
        return st.lists(TEXT, max_size=3)
    if field.cpp_type == FD.CPPTYPE_STRING:
        return st.one_of(st.just(""), TEXT)
    if field.cpp_type == FD.CPPTYPE_BOOL:
        return st.booleans()
    if field.cpp_type == FD.CPPTYPE_INT32:
        return st.one_of(st.just(0), st.integers(-(2**31), 2**31 - 1))
    return st.one_of(st.just(0), st.integers(0, 2**32 - 1))


@st.composite
def flat_messages(draw: st.DrawFn) -> Message:
    cls = draw(st.sampled_from(FLAT))
    message = cls()
    for field in cls.DESCRIPTOR.fields:
        if not draw(st.booleans()):  # left unset half the time: a field with presence is then absent
            continue
        if field.is_repeated:
            getattr(message, field.name).extend(draw(value_of(field)))
        else:
            setattr(message, field.name, draw(value_of(field)))
    return message


def test_the_file_api_replies_take_the_fast_path() -> None:
    names = {c.__name__ for c in FLAT}
    assert {"GetFileResponse", "PutFileResponse"} <= names


@given(flat_messages())
def test_flat_replies_render_as_protojson_does(message: Message) -> None:
    assert render(message) == protojson(message)


def test_every_character_is_escaped_as_json_escapes_it() -> None:
    # The fast path encodes with orjson: the same bytes as json.dumps(ensure_ascii=False) for any text
    # a protobuf string can hold (controls, quotes, backslashes, U+2028, astral planes...).
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for start in range(0, len(chars), 4096):
        text = "".join(chars[start:start + 4096])
        message = GetFileResponse(filename=text, content=text)
        assert render(message) == protojson(message)
