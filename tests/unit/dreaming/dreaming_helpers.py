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


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
