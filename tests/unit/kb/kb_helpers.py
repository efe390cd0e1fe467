"""Helpers shared by the knowledge-archive tests (imported by name: the test dir is on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.config import ArchiveSettings

OLD = 1_600_000_000  # 2020-09-13: far outside the racy-clean window


def settings(tokenizer: str = "unicode61", chunk_tokens: int = 400, chunk_overlap: int = 80) -> ArchiveSettings:
    return ArchiveSettings(enabled=True, tokenizer=tokenizer, chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap)


def write(workspace: Path, rel: str, text: str, mtime: float | None = OLD) -> Path:
    """Write a workspace file; an old mtime by default so the stat guard trusts it."""
    path = workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path
