"""Helpers shared by the dreaming tests (imported by name: the test dir is on sys.path)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gateway.config import DreamingSettings, build
from gateway.config_migrations import CURRENT_VERSION


def settings(**overrides: Any) -> DreamingSettings:
    """The gateway's default dreaming settings (as config.json gives them), with overrides."""
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, Path("/nonexistent"))
    return dataclasses.replace(config.agents[0].dreaming, **overrides)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]
