"""config.json against its JSON schema: one line per problem, naming the key (``gateway.config.validate``).

jsonschema is imported here only: a process that was handed a config already checked (a child of
``gateway up``, whose launcher checked the very content) never loads it, and loads it when the file
changes (docs/operations.md "Memory at rest").
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema

from gateway import http_workers
from gateway.http_limits import KEY_CHARS

Raw = dict[str, Any]


def _where(error: jsonschema.ValidationError) -> str:
    parts = []
    for part in error.absolute_path:
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(parts).lstrip(".") or "(top level)"


# Fields whose value is (or may be, when pasted in the wrong place) a key: never echoed.
SECRET_FIELDS = ("key", "keySha256", "dsn")

_BOUNDS = {
    "minLength": ("too short", "at least", "character"),
    "maxLength": ("too long", "at most", "character"),
    "minItems": ("too short", "at least", "item"),
    "maxItems": ("too long", "at most", "item"),
}


def _reason(error: jsonschema.ValidationError) -> str:
    secret = bool(error.absolute_path) and error.absolute_path[-1] in SECRET_FIELDS
    is_key = secret and error.absolute_path[-1] == "key"
    shown = f"the {'key' if is_key else 'value'} (not shown)" if secret else repr(error.instance)
    if is_key and error.validator == "pattern":
        return f"{shown} has a character a key cannot have: a key is {KEY_CHARS}"
    if secret and error.validator == "pattern":
        return f"{shown} is not a SHA-256 in hex (64 characters 0-9, a-f)"
    if error.validator == "additionalProperties":
        return f"unknown key ({error.message.split('(')[-1].rstrip(')')})"
    if error.validator == "oneOf" and _where(error).endswith("agents"):
        return 'must be "*" or a list of agent ids'
    if error.validator == "oneOf" and _where(error) == "gateway.api.workers":
        return f'{shown} is not "auto" nor a whole number of processes from 1 to {http_workers.MAX_WORKERS}'
    if error.validator == "not":
        return f"{shown} is not allowed"
    if error.validator in _BOUNDS:
        what, side, unit = _BOUNDS[str(error.validator)]
        bound = error.validator_value
        return f"{shown} is {what}: {side} {bound} {unit}{'' if bound == 1 else 's'}"
    if secret:
        return f"the value (not shown) does not fit the schema ({error.validator} {error.validator_value!r})"
    message: str = error.message
    return message


def _whole_pattern(validator: Any, pattern: str, instance: Any, schema: Raw) -> Any:
    """``pattern`` as JSON Schema means it: ``$`` ends the string. (Python's ``re.search`` also lets
    ``$`` match before a final newline, so ``"alfred\\n"`` would pass as an agent id.)"""
    if not isinstance(instance, str):
        return
    strict = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    if not re.search(strict, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _whole_pattern})


def schema_problems(raw: Raw, schema: Raw) -> list[str]:
    """One line per place where ``raw`` breaks ``schema`` (``key: reason``), sorted; no line shows a secret."""
    return sorted(f"{_where(e)}: {_reason(e)}" for e in _Validator(schema).iter_errors(raw))
