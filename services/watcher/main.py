"""Entry point of the watcher process: the file watch, the recomposer and the Sessions service."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import grpc
import structlog

from gateway.config import AgentConfig, Config
from gateway.grpc_server import serve
from gateway.home import read_internal_token
from gateway.live_config import ConfigChange, LiveConfig
from gateway.metrics import REGISTRY, Gauge
from gateway.temp_sweep import Folder, sweep_at_start
from gateway.v1 import watcher_pb2, watcher_pb2_grpc
from services.watcher.directive_hub import DirectiveHub
from services.watcher.dream_client import DreamStatusReader
from services.watcher.kb_client import KbRefresher
from services.watcher.lineage import Lineage
from services.watcher.lineage_store import lineage_dir
from services.watcher.recomposer import Recomposer
from services.watcher.servicer import Sessions
from services.watcher.sessions import SessionRegistry
from services.watcher.watch import Roots, WorkspaceWatch

log = structlog.get_logger()

LIVE_SESSIONS = Gauge("gateway_watcher_live_sessions", "Sessions registered and not ended, every agent.", registry=REGISTRY)
SWEEP_S = 60.0  # how often sessions past their retention are forgotten (services.watcher.sessions)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Workspaces:
    """The agents' workspaces as the watch sees them, kept in step with the live config."""

    def __init__(self, live: LiveConfig) -> None:
        self._live = live
        self._roots = self._resolve(live.current)

    def agents(self) -> dict[str, AgentConfig]:
        return {a.id: a for a in self._live.current.agents}

    def roots(self) -> Roots:
        """Real workspace path → agent id; resolved once per config (the watch asks every tick)."""
        return self._roots

    def ensure(self, agent_ids: set[str] | None = None) -> None:
        """Create missing workspace folders of configured agents, so they are watched from the
        start (a folder that appears later is only picked up at the next tick)."""
        for agent in self._live.current.agents:
            if agent_ids is not None and agent.id not in agent_ids:
                continue
            try:
                agent.workspace.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log.warning("workspace_unavailable", agent=agent.id, error=str(exc))

    def update(self, config: Config) -> None:
        self._roots = self._resolve(config)

    @staticmethod
    def _resolve(config: Config) -> Roots:
        return {str(Path(agent.workspace).resolve()): agent.id for agent in config.agents}


def temp_folders(config: Config) -> list[Folder]:
    """Where the watcher writes (CLAUDE.md in each workspace's top level, each agent's lineage): swept at start."""
    return [
        folder
        for agent in config.agents
        for folder in (Folder(agent.workspace), Folder(lineage_dir(agent.agent_dir), recursive=True))
    ]


async def forget_stale(registry: SessionRegistry, stop: asyncio.Event) -> None:
    """Every ``SWEEP_S`` until ``stop``: forget the sessions past their retention."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SWEEP_S)
        registry.forget_stale()


async def run(live: LiveConfig, instance: str | None = None) -> None:
    """Serve gateway.v1.Sessions and keep every agent's CLAUDE.md composed until SIGTERM."""
    config = live.current
    await asyncio.to_thread(sweep_at_start, temp_folders(config))  # before SERVING: no temp file a crash left
    workspaces = Workspaces(live)
    registry = SessionRegistry(clock=wall_clock_ms)
    LIVE_SESSIONS.set_function(registry.count)
    hub = DirectiveHub()
    lineage = Lineage(clock=wall_clock_ms)
    recomposer = Recomposer(workspaces.agents, registry, hub.publish, lineage.record)
    kb = KbRefresher(config.grpc.address("kb"), read_internal_token(config.home))
    dreams = DreamStatusReader(config.grpc.address("dreaming"), read_internal_token(config.home))

    def on_config(fresh: Config, change: ConfigChange) -> None:
        workspaces.update(fresh)
        changed = {*change.agents_added, *change.agents_changed}
        workspaces.ensure(changed)
        for agent_id in changed:
            recomposer.mark(agent_id)
        # What is kept of a removed agent goes with it; its directive streams end with NOT_FOUND.
        registry.forget_agents(change.agents_removed)
        recomposer.forget(change.agents_removed)
        lineage.forget(change.agents_removed)
        hub.close(change.agents_removed)

    live.subscribe(on_config)
    watch = WorkspaceWatch(workspaces.roots, on_files=recomposer.mark, on_root_change=recomposer.mark)
    workspaces.ensure()

    async def background(stop: asyncio.Event) -> None:
        recomposer.mark_later(workspaces.agents())  # compose everything once at start, behind any change
        try:
            await asyncio.gather(recomposer.run(stop), watch.run(stop), live.follow(stop), forget_stale(registry, stop))
        finally:
            await kb.close()
            await dreams.close()

    def register(server: grpc.aio.Server) -> list[str]:
        servicer = Sessions(live.snapshot, registry, hub, kb.refresh_soon, lineage, dreams.summaries)
        watcher_pb2_grpc.add_SessionsServicer_to_server(servicer, server)
        return [watcher_pb2.DESCRIPTOR.services_by_name["Sessions"].full_name]

    await serve(
        "watcher", config.grpc.bind_address("watcher"), register, background=background, instance=instance,
        metrics=config.metrics.address("watcher"),
    )
