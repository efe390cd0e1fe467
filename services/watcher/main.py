"""Entry point of the watcher process: the file watch, the recomposer and the Sessions service."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import structlog

from gateway.auth import Authenticator
from gateway.config import AgentConfig, Config, load_config
from gateway.errors import ConfigError
from gateway.grpc_server import serve
from gateway.home import read_internal_token
from gateway.v1 import watcher_pb2, watcher_pb2_grpc
from services.watcher.directive_hub import DirectiveHub
from services.watcher.kb_client import KbRefresher
from services.watcher.recomposer import Recomposer
from services.watcher.servicer import Sessions
from services.watcher.sessions import SessionRegistry
from services.watcher.watch import Roots, WorkspaceWatch

log = structlog.get_logger()


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LiveConfig:
    """The config in force; reloaded when config.json changes (a bad edit keeps the old one)."""

    def __init__(self, config: Config, overrides: Config) -> None:
        self.current = config
        self._overrides = overrides  # deployment overrides (bind/peer hosts) from the entry point
        self.auth = Authenticator(config.api.keys, read_internal_token(config.home))
        self._roots = self._resolve_roots()

    def reload(self) -> set[str]:
        """Re-read config.json; the ids of agents that are new or changed."""
        try:
            fresh = load_config(self.current.home)
        except ConfigError as exc:
            log.error("config_reload_rejected", problems=exc.problems)
            return set()
        from dataclasses import replace

        fresh = replace(fresh, grpc=self._overrides.grpc, api=replace(fresh.api, host=self._overrides.api.host))
        before = {a.id: a for a in self.current.agents}
        changed = {a.id for a in fresh.agents if before.get(a.id) != a}
        self.current = fresh
        self.auth = Authenticator(fresh.api.keys, read_internal_token(fresh.home))
        self._roots = self._resolve_roots()
        log.info("config_reloaded", agents=len(fresh.agents), changed=sorted(changed))
        return changed

    def ensure_workspaces(self, agent_ids: set[str] | None = None) -> None:
        """Create missing workspace folders of configured agents, so they are watched from the
        start (a folder that appears later is only picked up at the next tick)."""
        for agent in self.current.agents:
            if agent_ids is not None and agent.id not in agent_ids:
                continue
            try:
                agent.workspace.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                log.warning("workspace_unavailable", agent=agent.id, error=str(exc))

    def agents(self) -> dict[str, AgentConfig]:
        return {a.id: a for a in self.current.agents}

    def roots(self) -> Roots:
        """Real workspace path → agent id; resolved once per config (the watch asks every tick)."""
        return self._roots

    def _resolve_roots(self) -> Roots:
        return {str(Path(agent.workspace).resolve()): agent.id for agent in self.current.agents}


async def run(config: Config) -> None:
    """Serve gateway.v1.Sessions and keep every agent's CLAUDE.md composed until SIGTERM."""
    live = LiveConfig(config, config)
    registry = SessionRegistry(clock=wall_clock_ms)
    hub = DirectiveHub()
    recomposer = Recomposer(live.agents, registry, hub.publish)
    kb = KbRefresher(config.grpc.address("kb"), read_internal_token(config.home))

    def on_config() -> None:
        changed = live.reload()
        live.ensure_workspaces(changed)
        for agent_id in changed:
            recomposer.mark(agent_id)

    watch = WorkspaceWatch(
        config.home / "config.json",
        live.roots,
        on_files=recomposer.mark,
        on_config=on_config,
        on_root_change=recomposer.mark,
    )

    live.ensure_workspaces()

    async def background(stop: asyncio.Event) -> None:
        for agent_id in live.agents():
            recomposer.mark(agent_id)  # compose everything once at start
        try:
            await asyncio.gather(recomposer.run(stop), watch.run(stop))
        finally:
            await kb.close()

    def register(server: grpc.aio.Server) -> list[str]:
        servicer = Sessions(lambda: live.current, lambda: live.auth, registry, hub, kb.refresh_soon)
        watcher_pb2_grpc.add_SessionsServicer_to_server(servicer, server)
        return [watcher_pb2.DESCRIPTOR.services_by_name["Sessions"].full_name]

    await serve("watcher", config.grpc.bind_address("watcher"), register, background=background)
