"""Writing config.json: the one path every command that changes it goes through.

config.json can hold plain keys, so it is always written with mode 0600,
whatever mode the file had before. Writes are atomic (temp file, fsync,
rename) and compare-and-swap against the bytes the command read, so an edit
made meanwhile by someone else is never overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.atomic import write_atomic

CONFIG_MODE = 0o600

Raw = dict[str, Any]


def config_bytes(raw: Raw) -> bytes:
    """How config.json is laid out on disk: two-space JSON, key order kept, UTF-8, final newline."""
    return (json.dumps(raw, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_config(path: Path, raw: Raw, *, expected: bytes | None | object = ...) -> None:
    """Replace config.json at ``path`` with ``raw``, mode 0600.

    ``expected``: the bytes the caller read (``None``: the file must not
    exist); when the file holds anything else, WriteConflict is raised and
    nothing is written. Raises OSError on I/O failure (the old file stays).
    """
    write_atomic(path, config_bytes(raw), expected=expected, mode=CONFIG_MODE, keep_mode=False)
