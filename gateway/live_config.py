"""The config in force in a running process, following edits of config.json.

Every process that reads config.json (file API, watcher, KB, shim, dreaming)
loads it once in its entry point and then follows the file through this one
mechanism:

- **Follow.** A watch on the home folder (not recursive, so agents' files are
  not watched here; through ``gateway.watching``) wakes on every change there,
  a write of ``config.json`` in place or by rename among them, and at least
  once a minute (where there is no inotify: once a second); each wake-up
  compares the file's identity (inode, size, mtime), so a missed event is
  caught at the next one.
- **Validate, then swap.** The new file is read, migrated and validated with
  the rules start-up uses. A valid one replaces the running config and its
  authenticator in one assignment, so a request sees the old pair or the new
  pair, never a mix. ``config_reloaded`` is logged with what changed: agents
  added, removed or changed, and keys added, removed or changed by *name*
  (never by value or hash).
- **Keep on error.** An invalid edit (bad JSON, a failed check, a file that
  vanished) keeps the running config and logs ``config_reload_rejected`` with
  the problems, once per distinct content.
- **Addresses need a restart.** Where a process listens and how it reaches its
  peers (``gateway.grpc.*``, ``gateway.api.host`` / ``port`` / ``workers``) cannot change
  under a running server; those keep their running values, and the log line
  lists them under ``needs_restart``. The shim's client limits
  (``gateway.api`` timeouts and ``maxConnections``) need none: each new
  connection reads the ones in force.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from gateway.auth import Authenticator
from gateway.config import SOCKETS_DIR, ApiKey, Config, load_config
from gateway.errors import ConfigError
from gateway.home import read_internal_token
from gateway.watching import WatchTiming, batches, wait_or_stop

log = structlog.get_logger()

CONFIG_FILE = "config.json"
GRPC_SERVICES = ("file_api", "watcher", "kb", "dreaming")
# An editor's write-then-rename arrives as one batch (20 ms); a quiet tick each minute compares the
# file's identity, which catches a missed event; without a watch the file is checked each second.
FOLLOW_TIMING = WatchTiming(debounce_ms=20, step_ms=20, tick_ms=60_000)
POLL_S = 1.0

Loader = Callable[[], Config]
Listener = Callable[[Config, "ConfigChange"], None]


@dataclass(frozen=True)
class ConfigChange:
    """What a reload changed. Keys are named by their label (``name``, else ``keys[i]``)."""

    agents_added: tuple[str, ...] = ()
    agents_removed: tuple[str, ...] = ()
    agents_changed: tuple[str, ...] = ()
    keys_added: tuple[str, ...] = ()
    keys_removed: tuple[str, ...] = ()
    keys_changed: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()  # settings that keep their running value until a restart
    other: bool = False  # gateway-wide settings changed (budgets, dreaming, knowledge, the shim's limits)

    @property
    def empty(self) -> bool:
        return self == ConfigChange()

    def log_fields(self) -> dict[str, list[str] | bool]:
        """The non-empty parts, for the ``config_reloaded`` line."""
        out: dict[str, list[str] | bool] = {}
        for name in ("agents_added", "agents_removed", "agents_changed", "keys_added", "keys_removed",
                     "keys_changed", "needs_restart"):
            value = getattr(self, name)
            if value:
                out[name] = list(value)
        if self.other:
            out["settings_changed"] = True
        return out


def _keys_by_label(keys: Iterable[ApiKey]) -> dict[str, ApiKey]:
    return {key.label: key for key in keys}


def _address_fields(old: Config, new: Config) -> list[str]:
    fields = []
    for name, dotted in (("host", "host"), ("file_api", "fileApi"), ("watcher", "watcher"), ("kb", "kb"),
                         ("dreaming", "dreaming")):
        if getattr(old.grpc, name) != getattr(new.grpc, name):
            fields.append(f"gateway.grpc.{dotted}")
    if old.grpc.sockets != new.grpc.sockets:
        fields.append("gateway.grpc.transport")
    for name in ("host", "port", "workers"):
        if getattr(old.api, name) != getattr(new.api, name):
            fields.append(f"gateway.api.{name}")
    if old.metrics != new.metrics:
        fields.append("gateway.metrics")
    return fields


def diff(old: Config, new: Config) -> ConfigChange:
    """What changed from ``old`` to ``new`` (both as loaded, before addresses are pinned)."""
    old_agents = {a.id: a for a in old.agents}
    new_agents = {a.id: a for a in new.agents}
    old_keys, new_keys = _keys_by_label(old.api.keys), _keys_by_label(new.api.keys)
    return ConfigChange(
        agents_added=tuple(sorted(set(new_agents) - set(old_agents))),
        agents_removed=tuple(sorted(set(old_agents) - set(new_agents))),
        agents_changed=tuple(sorted(i for i in set(old_agents) & set(new_agents) if old_agents[i] != new_agents[i])),
        keys_added=tuple(sorted(set(new_keys) - set(old_keys))),
        keys_removed=tuple(sorted(set(old_keys) - set(new_keys))),
        keys_changed=tuple(sorted(n for n in set(old_keys) & set(new_keys) if old_keys[n] != new_keys[n])),
        needs_restart=tuple(_address_fields(old, new)),
        other=(old.memory, old.dreaming, old.knowledge, old.api.limits)
        != (new.memory, new.dreaming, new.knowledge, new.api.limits),
    )


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class LiveConfig:
    """The running config of one process and the authenticator for its keys.

    ``load`` returns the config with the entry point's deployment overrides
    applied (bind and peer hosts, a ``--port``); it raises ConfigError. The
    first load happens here, so a bad config stops start-up with ConfigError.
    """

    def __init__(self, load: Loader) -> None:
        self._load = load
        config = load()
        self._token = read_internal_token(config.home)
        self._state = (config, Authenticator(config.api.keys, self._token))
        self._listeners: list[Listener] = []
        self._file_key = _file_key(self.path)
        self._rejected: tuple[int, int, int] | None = None

    @property
    def current(self) -> Config:
        return self._state[0]

    @property
    def auth(self) -> Authenticator:
        return self._state[1]

    def snapshot(self) -> tuple[Config, Authenticator]:
        """The config and its authenticator, from the same reload."""
        return self._state

    @property
    def path(self) -> Path:
        return self.current.home / CONFIG_FILE

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(new_config, change)`` after every reload that changed something."""
        self._listeners.append(listener)

    def reload(self) -> ConfigChange | None:
        """Read config.json again and swap it in when valid; the change, or None when it was refused."""
        key = _file_key(self.path)
        self._file_key = key
        try:
            fresh = self._load()
        except ConfigError as exc:
            if key != self._rejected:  # once per content, not at every check of a broken file
                self._rejected = key
                log.error("config_reload_rejected", path=str(self.path), problems=exc.problems,
                          kept="the running config")
            return None
        self._rejected = None
        running = self.current
        change = diff(running, fresh)
        # Listen and dial addresses stay as they are until a restart.
        fresh = replace(fresh, grpc=running.grpc, metrics=running.metrics,
                        api=replace(fresh.api, host=running.api.host, port=running.api.port))
        self._state = (fresh, Authenticator(fresh.api.keys, self._token))
        if change.empty:
            return change
        log.info("config_reloaded", **change.log_fields())
        for listener in self._listeners:
            try:
                listener(fresh, change)
            except Exception:  # one listener's bug must not stop the others or the follow loop
                log.exception("config_listener_failed")
        return change

    def _check(self) -> None:
        if _file_key(self.path) != self._file_key:
            self.reload()

    async def follow(self, stop: asyncio.Event) -> None:
        """Reload whenever config.json changes, until ``stop`` is set. Without a watch (the inotify
        limit, say) the file is checked once a second instead."""
        try:
            async with batches([str(self.current.home)], stop, FOLLOW_TIMING, recursive=False) as stream:
                self._check()  # an edit made before the watch was up has no event of its own
                async for _ in stream:
                    self._check()
        except OSError as exc:
            log.warning("config_watch_error", error=str(exc), fallback="polling every second")
            while not stop.is_set():
                self._check()
                await wait_or_stop(stop, POLL_S)


def with_deployment(config: Config, env: dict[str, str]) -> Config:
    """``config`` with the deployment overrides read from ``env`` by an entry point:
    ``GATEWAY_BIND_HOST`` (the address every process binds, its metrics port too), ``GATEWAY_<SERVICE>_HOST``
    (how a peer is reached, e.g. by its compose service name) and ``GATEWAY_TRANSPORT`` (``unix`` or ``tcp``:
    ``gateway.grpc.transport``). Raises ConfigError for another transport."""
    peers = tuple(
        (name, env[f"GATEWAY_{name.upper()}_HOST"]) for name in GRPC_SERVICES if env.get(f"GATEWAY_{name.upper()}_HOST")
    )
    bind = env.get("GATEWAY_BIND_HOST") or None
    api = replace(config.api, host=bind) if bind else config.api
    metrics = replace(config.metrics, host=bind) if bind else config.metrics
    grpc = replace(config.grpc, bind_host=bind, peer_hosts=peers)
    transport = env.get("GATEWAY_TRANSPORT") or None
    if transport not in (None, "unix", "tcp"):
        raise ConfigError([f"GATEWAY_TRANSPORT: {transport!r} is not unix or tcp"])
    if transport is not None:
        grpc = replace(grpc, sockets=config.home / SOCKETS_DIR if transport == "unix" else None)
    return replace(config, api=api, metrics=metrics, grpc=grpc)


def loader(home: Path, env: dict[str, str], *, service: str | None = None, port: int | None = None) -> Loader:
    """The ``load`` of a LiveConfig for an entry point: config.json of ``home`` with the
    deployment overrides of ``env`` and, when given, ``service`` listening on ``port``."""

    def load() -> Config:
        config = with_deployment(load_config(home), env)
        if service is not None and port is not None:
            if service == "http":
                config = replace(config, api=replace(config.api, port=port))
            else:
                overrides: dict[str, Any] = {service: port}
                config = replace(config, grpc=replace(config.grpc, **overrides))
        return config

    return load
