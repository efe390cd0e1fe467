"""How the JSON of a request meets its message's fields: lookup, near-miss keys, enum values.

grpc-gateway v2 (protojson with ``DiscardUnknown``) ignores unknown body
fields but refuses enum names it does not know. The shim does the same, and
refuses two kinds of body that would otherwise be silently read as empty:

- a key that is not a field but is spelt like one (the same letters once
  lower-cased and stripped of ``_`` and ``-``: ``sessionID``, ``SessionId``) is
  a typo, answered with the field it probably meant;
- a non-empty object none of whose keys is a field of the message.

An empty object is fine (the servicer judges what is required). Enum values
are the exact value name or, like protojson, the value's number; any other
name (``busy``, ``BUSY``, a misspelling) or a number the enum does not have is
refused, naming the field and the values it accepts (``*_UNSPECIFIED`` is
never listed: no RPC takes it as a real value).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from google.protobuf import descriptor

FD = descriptor.FieldDescriptor

MAX_SHOWN_CHARS = 40  # a refused value is quoted up to this many characters


class BadRequest(ValueError):
    """The request cannot be turned into the RPC's message; the text says why."""


@cache
def _fields(message: descriptor.Descriptor) -> dict[str, descriptor.FieldDescriptor]:
    """A message's fields by JSON name and by proto name (protojson accepts both)."""
    out: dict[str, descriptor.FieldDescriptor] = {}
    for field in message.fields:
        out[field.name] = field
        out[field.json_name] = field
    return out


def field_for(message: descriptor.Descriptor, key: str) -> descriptor.FieldDescriptor | None:
    """The field a JSON key (JSON name or proto name) names, or None."""
    return _fields(message).get(key)


def _folded(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


@cache
def _folded_fields(message: descriptor.Descriptor) -> dict[str, descriptor.FieldDescriptor]:
    return {_folded(field.name): field for field in message.fields}


def near_miss(message: descriptor.Descriptor, key: str) -> descriptor.FieldDescriptor | None:
    """The field an unknown ``key`` is probably a typo of (same letters, other case or separators)."""
    return _folded_fields(message).get(_folded(key))


def json_kind(value: Any) -> str:
    """``value``'s JSON type in words, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def accepted_values(enum: descriptor.EnumDescriptor) -> list[str]:
    """The names a caller may send: every value but the zero ``*_UNSPECIFIED``."""
    return [v.name for v in enum.values if not (v.number == 0 and v.name.endswith("_UNSPECIFIED"))]


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return repr(text[:MAX_SHOWN_CHARS])


def enum_number(field: descriptor.FieldDescriptor, value: Any, where: str, *, digits: bool = False) -> int:
    """The number of enum ``value``: its exact value name, or an integer the enum has.

    ``digits`` also takes a string of decimal digits (query parameters are
    always strings). Raises BadRequest naming ``where`` and the accepted names.
    """
    enum = field.enum_type
    accepted = ", ".join(accepted_values(enum))
    if isinstance(value, str):
        # Enum names are ASCII identifiers; anything else (a lone surrogate above all, which
        # upb's lookup cannot even encode) is no name of the enum.
        by_name = enum.values_by_name.get(value) if value.isascii() else None
        if by_name is not None:
            return int(by_name.number)
        if digits and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise BadRequest(f"{where}: {_shown(value)} is not a valid {enum.name}; accepted: {accepted}")
    if isinstance(value, int) and not isinstance(value, bool):
        if value in enum.values_by_number:
            return value
        raise BadRequest(f"{where}: {value} is not a valid {enum.name}; accepted: {accepted}")
    raise BadRequest(f"{where}: must be one of {accepted}, got {json_kind(value)}")


def _recurse(field: descriptor.FieldDescriptor) -> bool:
    """Whether a message field's JSON is checked key by key (not a map, not a well-known type)."""
    message = field.message_type
    return message is not None and not message.GetOptions().map_entry and not message.full_name.startswith("google.protobuf.")


def check_object(message: descriptor.Descriptor, body: dict[str, Any], prefix: str = "") -> None:
    """Refuse near-miss keys and bad enum values in ``body`` and its nested messages.

    Unknown keys that are no near miss are left alone (they are ignored).
    """
    for key, value in body.items():
        where = prefix + key
        field = field_for(message, key)
        if field is None:
            meant = near_miss(message, key)
            if meant is not None:
                raise BadRequest(f"{where}: unknown field; did you mean {prefix}{meant.json_name}?")
            continue
        if value is None:
            continue
        items: Iterable[Any] = value if field.is_repeated and isinstance(value, list) else (value,)
        if field.type == FD.TYPE_ENUM:
            for item in items:
                enum_number(field, item, where)
        elif field.type == FD.TYPE_MESSAGE and _recurse(field):
            for item in items:
                if isinstance(item, dict):
                    check_object(field.message_type, item, where + ".")


def check_known_keys(message: descriptor.Descriptor, body: dict[str, Any], path_fields: tuple[str, ...]) -> None:
    """Refuse a non-empty body none of whose keys is a field of ``message``.

    The message names the keys received and the fields the body may carry
    (``path_fields`` come from the URL and are not listed).
    """
    if not body or any(field_for(message, key) is not None for key in body):
        return
    got = ", ".join(sorted(key[:MAX_SHOWN_CHARS] for key in body))
    fields = [f.json_name for f in message.fields if f.name not in path_fields]
    accepts = f"accepted: {', '.join(fields)}" if fields else "it takes no field: send {} or no body"
    raise BadRequest(f"request body has no field of {message.name} (got: {got}); {accepts}")
