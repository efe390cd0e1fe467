"""``configVersion`` migrations (docs/concepts/config.md "config.json").

Each step injects the block its version introduced, with that block's
defaults written out, so an upgraded file shows the new settings. Steps are
idempotent: a block the user already wrote is kept as written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

CURRENT_VERSION = "1.0.26"

Raw = dict[str, Any]


def parse_version(text: str) -> tuple[int, ...]:
    """``"1.0.21"`` → ``(1, 0, 21)``. Raises ValueError on anything else."""
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


def _block(raw: Raw, *path: str) -> Raw:
    node = raw
    for key in path:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    return node


def _inject(raw: Raw, path: tuple[str, ...], defaults: Raw) -> None:
    block = _block(raw, *path)
    for key, value in defaults.items():
        block.setdefault(key, copy.deepcopy(value))


MEMORY_DEFAULTS: Raw = {
    "memoryBudgetChars": 8000,
    "userBudgetChars": 3000,
    "overBudget": "warn",
    "writeRouting": False,
    "episodicArchiveDir": "memory",
}
ARCHIVE_DEFAULTS: Raw = {"enabled": True, "tokenizer": "unicode61", "chunkTokens": 400, "chunkOverlap": 80}
STALENESS_DEFAULTS: Raw = {
    "enabled": True,
    "staleTtlDays": 90,
    "keepImportance": 7,
    "minRetrievalKeep": 1,
    "supersession": True,
    "recordRetrievals": True,
    "maxInvalidationsPerRun": 50,
}

STEPS: list[tuple[str, Callable[[Raw], None]]] = [
    ("1.0.19", lambda raw: _inject(raw, ("gateway", "memory"), MEMORY_DEFAULTS)),
    ("1.0.21", lambda raw: _inject(raw, ("gateway", "knowledge", "archive"), ARCHIVE_DEFAULTS)),
    ("1.0.26", lambda raw: _inject(raw, ("gateway", "dreaming", "staleness"), STALENESS_DEFAULTS)),
]


def migrate(raw: Raw) -> tuple[Raw, list[str]]:
    """Return ``(upgraded copy, versions applied)``. The input is not changed.

    A file without ``configVersion`` is treated as older than every step.
    Raises ValueError for an unparsable version or one newer than this code.
    """
    out = copy.deepcopy(raw)
    version_text = out.get("configVersion", "0.0.0")
    if not isinstance(version_text, str):
        raise ValueError(f"configVersion: must be a string like {CURRENT_VERSION!r}")
    try:
        version = parse_version(version_text)
    except ValueError:
        raise ValueError(f"configVersion: {version_text!r} is not a version like {CURRENT_VERSION!r}") from None
    if version > parse_version(CURRENT_VERSION):
        raise ValueError(
            f"configVersion: {version_text} is newer than this gateway supports ({CURRENT_VERSION})"
        )
    applied = []
    for step_version, step in STEPS:
        if version < parse_version(step_version):
            step(out)
            applied.append(step_version)
    if applied or "configVersion" not in out:
        out["configVersion"] = CURRENT_VERSION
    return out, applied
