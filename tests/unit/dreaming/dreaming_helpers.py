"""Helpers shared by the dreaming unit tests (imported by name: the test dir is on sys.path):
default settings, transcript records and files, a fixed clock, a run with a scripted reviewer."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gateway.config import AgentConfig, DreamingSettings, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.model.values import MANUAL, Proposal, ReviewerOutcome, ReviewerReply, RunReport

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
REVIEWERS = Path(__file__).resolve().parents[2] / "reviewers"


def settings(**overrides: Any) -> DreamingSettings:
    """The gateway's default dreaming settings (as config.json gives them), with overrides."""
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred"}]}, Path("/nonexistent"))
    return dataclasses.replace(config.agents[0].dreaming, **overrides)


def agent_with_memory(home: Path, memory: str) -> AgentConfig:
    """Agent alfred under ``home`` with ``memory`` as its MEMORY.md and the staleness GC (which asks
    the KB first) off: for runs about the reviewer's ops and the applier."""
    config = build({"configVersion": CURRENT_VERSION, "agents": [{"id": "alfred", "dreaming": {"staleness": {"enabled": False}}}]}, home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True)
    (agent.workspace / "MEMORY.md").write_text(memory)
    return agent


class QuietIndex:
    """A KB that finds nothing: the recall check restores whatever a run removed."""

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        return None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []


def dream(agent: AgentConfig, mode: str, *proposals: Proposal, run_id: str) -> RunReport:
    """One manual run of ``agent`` in ``mode`` whose reviewer proposes ``proposals``."""
    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        return ReviewerOutcome(ReviewerReply("ops", tuple(proposals)), ok=True)

    deps = nightly.Deps(index=QuietIndex(), review=review, now=lambda: NOW)
    return asyncio.run(nightly.run(agent, deps, mode=mode, trigger=MANUAL, run_id=run_id))


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


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
