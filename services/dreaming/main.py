"""Entry point of the dreaming process: the nightly scheduler, the vaults' weekly reflection and the Dreaming service."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import grpc
import structlog

from gateway.config import AgentConfig, Config
from gateway.grpc_server import serve
from gateway.home import read_internal_token
from gateway.live_config import LiveConfig
from gateway.temp_sweep import Folder, sweep_at_start
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc
from services.dreaming import nightly
from services.dreaming.apply import intent
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.dreamer import MAX_CONCURRENT_RUNS, Dreamer
from services.dreaming.model.values import ReviewerOutcome, iso
from services.dreaming.peer_client import KbIndex, WatcherActivity
from services.dreaming.records import journal, jsonl
from services.dreaming.review.orphans import kill_orphans, owner_marker
from services.dreaming.reflect.scheduler import WeekState, WeeklyScheduler
from services.dreaming.reflect.vaults import Vault, vaults
from services.dreaming.reflection import Reflections
from services.dreaming.review.reviewer import CommandOutcome, reviewer_environment, run_command, run_reviewer
from services.dreaming.schedule.scheduler import Scheduler, SystemClock
from services.dreaming.schedule.state import Busy, StateStore
from services.dreaming.servicer import Dreaming

log = structlog.get_logger()


def temp_folders(config: Config) -> list[Folder]:
    """Where dreaming writes: each workspace's top level (MEMORY.md, USER.md), memory/** and
    .dreaming/** (never through a link), and the agent's state folder of the home. Swept at start."""
    out = []
    for agent in config.agents:
        out.append(Folder(agent.workspace))
        out.extend(Folder(agent.workspace / sub, recursive=True, follow=False) for sub in ("memory", ".dreaming"))
        out.append(Folder(config.home / "agents" / agent.id))
    return out


def settle_journals(config: Config, store: StateStore) -> None:
    """At start, before SERVING: ``settle_workspace`` for each agent with a journal, under its run
    lock (an agent whose lock another process holds is mid-run there and left alone)."""
    at = iso(datetime.now(UTC))
    for agent in config.agents:
        if not (agent.workspace / journal.JOURNAL).exists():
            continue
        try:
            with store.lock(agent.id):
                torn, recovered, settled = settle_workspace(agent.workspace, at)
        except (Busy, OSError) as exc:
            log.warning("dream_journal_not_settled", agent=agent.id, error=str(exc))
            continue
        if torn:
            log.warning("dream_journal_healed", agent=agent.id, torn_lines=torn,
                        why="a process was killed while it appended to the journal")
        if recovered:
            log.warning("dream_relocation_recovered", agent=agent.id, **intent.summary(recovered),
                        why="a process was killed in the middle of a relocation or of the applier's commit")
        if settled:
            log.warning("dream_journal_settled", agent=agent.id, ops=settled, why=journal.SETTLED_BY)


def settle_workspace(workspace: Path, at: str) -> tuple[int, list[intent.Recovered], list[str]]:
    """What a start does to one workspace's journal, the caller holding the agent's run lock: drop
    the torn lines a killed append left (jsonl.heal), finish the relocations and commits a killed process left
    open (intent.recover), then mark undone the journaled edits a killed process never
    wrote (journal.settle). Returns the lines dropped, the intents finished and the ops settled.
    Raises OSError."""
    torn = jsonl.heal(workspace / journal.JOURNAL)
    recovered = intent.recover(workspace, at)
    settled = journal.settle(workspace, lambda rel: _text_or_none(workspace, rel), at)
    return torn, recovered, settled


def _text_or_none(workspace: Path, rel: str) -> str | None:
    try:
        return read_text(workspace, rel)
    except (Unsafe, OSError):
        return None


async def run(live: LiveConfig, instance: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Serve gateway.v1.Dreaming and run every agent's nightly dream until SIGTERM, following config.json.

    ``environ``: the gateway's environment as the entry point read it; the reviewer command gets
    its allowlisted part (``reviewer.reviewer_environment``; nothing below reads the environment)."""
    config = live.current
    await asyncio.to_thread(sweep_at_start, temp_folders(config))  # before SERVING: no temp file a crash left
    kill_orphans(config.home)  # reviewers a dreaming process of this home left behind when it died
    reviewer_env = {**reviewer_environment(environ or {}), **owner_marker(config.home)}
    token = read_internal_token(config.home)
    index = KbIndex(config.grpc.address("kb"), token)
    activity = WatcherActivity(config.grpc.address("watcher"), token)

    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        # The reviewer works in the agent's own folder of the home (outside its workspace), so
        # a reviewer that looks for project files finds none of the workspace's.
        folder = agent.home / "agents" / agent.id
        folder.mkdir(parents=True, exist_ok=True)
        return await run_reviewer(agent.dreaming.reviewer_command, prompt, agent.dreaming.reviewer_timeout_seconds,
                                  cwd=folder, env=reviewer_env)

    async def ask(vault: Vault, prompt: str) -> CommandOutcome:
        # The vault's reviewer works in its first agent's own folder of the home, as that agent's does.
        folder = config.home / "agents" / vault.first
        folder.mkdir(parents=True, exist_ok=True)
        return await run_command(vault.reviewer_command, prompt, vault.reviewer_timeout_seconds, cwd=folder,
                                 env=reviewer_env)

    reflections = Reflections(index, ask)
    weekly = WeeklyScheduler(lambda: vaults(live.current), reflections.scheduled, WeekState(config.home), SystemClock())
    store = StateStore(config.home)
    await asyncio.to_thread(settle_journals, config, store)
    deps = nightly.Deps(index=index, review=review, now=lambda: datetime.now(UTC), vault=index, promoter=index,
                        forgetter=index)
    dreamer = Dreamer(lambda: live.current, store, deps, activity)
    scheduler = Scheduler(lambda: {a.id: a.dreaming for a in live.current.agents}, dreamer, store, SystemClock(),
                          max_concurrent=MAX_CONCURRENT_RUNS)
    dreamer.scheduler = scheduler
    live.subscribe(lambda _config, _change: scheduler.replan())
    live.subscribe(lambda _config, _change: weekly.replan())

    async def background(stop: asyncio.Event) -> None:
        try:
            await asyncio.gather(scheduler.serve(stop), weekly.serve(stop), live.follow(stop))
        finally:
            await index.close()
            await activity.close()

    def register(server: grpc.aio.Server) -> list[str]:
        dreaming_pb2_grpc.add_DreamingServicer_to_server(Dreaming(dreamer, live.snapshot, reflections), server)
        return [dreaming_pb2.DESCRIPTOR.services_by_name["Dreaming"].full_name]

    await serve(
        "dreaming", config.grpc.bind_address("dreaming"), register, background=background, instance=instance,
        metrics=config.metrics.address("dreaming"), unix=config.grpc.unix_socket("dreaming"),
    )
