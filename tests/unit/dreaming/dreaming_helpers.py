"""Builders shared by the dreaming unit tests: transcript records and files, a fixed clock."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
REVIEWERS = Path(__file__).resolve().parents[2] / "reviewers"


def iso(when: datetime) -> str:
    """Claude Code's timestamp form: milliseconds and a Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def record(kind: str, content: object, *, at: datetime | None = None, **extra: object) -> dict[str, object]:
    """A transcript record of type ``kind`` (user, assistant, ...) whose message content is ``content``."""
    out: dict[str, object] = {"type": kind, "message": {"role": kind, "content": content}, **extra}
    if at is not None:
        out["timestamp"] = iso(at)
    return out


def write_session(
    folder: Path, name: str, lines: list[object], *, age: timedelta = timedelta(hours=1)
) -> Path:
    """Write ``lines`` (records as JSON, or raw bytes/str as they are) to ``folder/name``, mtime ``NOW - age``."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for line in lines:
            if isinstance(line, bytes):
                handle.write(line + b"\n")
            elif isinstance(line, str):
                handle.write(line.encode("utf-8") + b"\n")
            else:
                handle.write(json.dumps(line).encode("utf-8") + b"\n")
    set_age(path, age)
    return path


def set_age(path: Path, age: timedelta) -> None:
    stamp = (NOW - age).timestamp()
    os.utime(path, (stamp, stamp), follow_symlinks=False)
