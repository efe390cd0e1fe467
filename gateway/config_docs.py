"""Markdown reference of every config.json key, generated from config_schema.json.

The table is the body of docs/reference/config.md, which ``python -m gateway_cli.docs_reference``
writes; a test fails when the page and the schema differ. ``python -m gateway.config_docs``
prints the table alone.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.config import schema


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    merged = dict(node)
    while "$ref" in merged:
        target = schema()["$defs"][merged.pop("$ref").rsplit("/", 1)[-1]]
        merged = {**target, **merged}
    return merged


def _type(node: dict[str, Any]) -> str:
    """A key's JSON type in words: ``integer``, ``array of string``, ``"*" or array of string``…"""
    node = _resolve(node)
    if "const" in node:
        return json.dumps(node["const"])
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(_type(choice) for choice in node.get("oneOf", node.get("anyOf", [])))
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(value) for value in node["enum"])
    kind = node.get("type", "")
    if kind == "array" and isinstance(node.get("items"), dict) and "properties" not in node["items"]:
        return f"array of {_type(node['items'])}"
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _rows(node: dict[str, Any], prefix: str, out: list[tuple[str, str, str, str]]) -> None:
    node = _resolve(node)
    for key, prop in node.get("properties", {}).items():
        full = _resolve(prop)
        path = f"{prefix}.{key}" if prefix else key
        default = json.dumps(full["default"]) if "default" in full and full.get("type") != "object" else ""
        if str(prop.get("$ref", "")).endswith("Override"):
            out.append((path, "object", "", prop.get("description", full.get("description", ""))))
        elif full.get("type") == "object" or "properties" in full:
            out.append((path, "object", "", full.get("description", "")))
            _rows(full, path, out)
        elif full.get("type") == "array" and isinstance(full.get("items"), dict) and "properties" in full["items"]:
            out.append((f"{path}[]", "array of object", default, full.get("description", "")))
            _rows(full["items"], f"{path}[]", out)
        else:
            out.append((path, _type(full), default, full.get("description", "")))


def _cell(text: str) -> str:
    """Schema text in a table cell: pipes escaped, ``<`` as an entity (Markdown would read a tag)."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def reference_table() -> str:
    """The markdown table: key path, type, default, meaning."""
    rows: list[tuple[str, str, str, str]] = []
    _rows(schema(), "", rows)
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for path, kind, default, text in rows:
        cells = [f"`{path}`", _cell(kind), f"`{default}`".replace("|", "\\|") if default else "", _cell(text)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_table())
