"""The file API's record of the last PUT of each identity file (docs/concepts/lineage.md).

One small JSON file per identity file, ``<home>/agents/<id>/puts/<NAME>.json``
holding ``{"sha256": …, "atMs": …}``: the SHA-256 of the bytes the PUT wrote
and when. The file API writes it (through ``write_atomic``) under the
workspace folder's lock just before the file's own rename, so the watcher,
which composes once it sees that rename, always finds it. The watcher only
reads it: a record names a file's content only while the file's hash is the
record's (a failed write or a later edit on disk leaves a record that
matches nothing and so says nothing).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from gateway.atomic import write_atomic

FOLDER = "puts"
_MAX_RECORD_BYTES = 4096


@dataclass(frozen=True)
class PutRecord:
    sha256: str
    at_ms: int


def puts_dir(agent_dir: Path) -> Path:
    """Where the records of one agent live (``agent_dir`` is ``AgentConfig.agent_dir``)."""
    return agent_dir / FOLDER


def record_put(agent_dir: Path, name: str, data: bytes, at_ms: int) -> None:
    """Record that a PUT is writing ``data`` to identity file ``name`` at ``at_ms``. Raises OSError."""
    folder = puts_dir(agent_dir)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"sha256": hashlib.sha256(data).hexdigest(), "atMs": at_ms}
    write_atomic(folder / f"{name}.json", json.dumps(record).encode("utf-8"), mode=0o600, durable=False)


def last_put(agent_dir: Path, name: str) -> PutRecord | None:
    """The last PUT recorded for ``name``; None when there is none or it cannot be read."""
    try:
        with open(puts_dir(agent_dir) / f"{name}.json", "rb") as handle:
            raw = json.loads(handle.read(_MAX_RECORD_BYTES))
        return PutRecord(str(raw["sha256"]), int(raw["atMs"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
