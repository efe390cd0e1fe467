"""A bench's home: a temporary folder removed at the end (unless kept), the children started in it
stopped whatever happens, and the suite's ``config.json`` on free loopback ports.

Metrics are off in every bench home: their default ports may be held by another run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.ports import free_ports
from harness.procs import Children, stop_on_signals
from harness.report import say

KEY = "bench-key-123456"
PORT_NAMES = ("fileApi", "watcher", "kb", "dreaming", "api")


@contextlib.contextmanager
def session(prefix: str, *, keep: bool, logs: str | None = "bench", unbuffered: bool = False) -> Iterator[tuple[Path, Children]]:
    """A temporary home and the ``Children`` of the run, their logs in ``home/<logs>`` (``""``: the
    home itself; None: each child is given its log). On the way out the children are stopped and the
    home removed (``keep``: its path is said instead); Ctrl-C or SIGTERM ends the run with exit code 130."""
    stop_on_signals()
    home = Path(tempfile.mkdtemp(prefix=prefix))
    log_dir = None if logs is None else home / logs
    if log_dir is not None:
        log_dir.mkdir(exist_ok=True)
    children = Children(log_dir, unbuffered=unbuffered)
    try:
        yield home, children
    except KeyboardInterrupt:
        say("interrupted; stopping the children")
        raise SystemExit(130) from None
    finally:
        children.stop_all()
        if keep:
            say(f"home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


def api_key(agents: str | list[str] = "*", *, write: bool, key: str = KEY) -> dict[str, Any]:
    """One entry of ``gateway.api.keys``."""
    return {"name": "bench", "key": key, "agents": agents, "write": write}


def agent_entry(agent_id: str, **settings: Any) -> dict[str, Any]:
    """An agent with its workspace and transcripts at their usual places, and any per-agent
    ``settings`` (``memory=...``, ``dreaming=...``) that are not empty."""
    entry: dict[str, Any] = {"id": agent_id, "workspace": f"agents/{agent_id}/workspace",
                             "transcriptsDir": f"agents/{agent_id}/sessions"}  # fmt: skip
    entry.update({k: v for k, v in settings.items() if v})
    return entry


def write_config(home: Path, agents: list[dict[str, Any]], *, keys: list[dict[str, Any]],
                 gateway: dict[str, Any] | None = None, metrics: bool = True, indent: int = 2) -> dict[str, int]:  # fmt: skip
    """``home/config.json`` for ``agents`` on free loopback ports, with the API ``keys`` and any other
    ``gateway`` blocks; the home made and its internal token written. ``metrics``: write the block
    that turns metrics off (an old tree's code may not know it). The ports by name (``fileApi``,
    ``watcher``, ``kb``, ``dreaming``, ``api``)."""
    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    blocks: dict[str, Any] = {"grpc": {"host": "127.0.0.1", **{k: ports[k] for k in PORT_NAMES[:4]}}}
    if metrics:
        blocks["metrics"] = {"enabled": False}
    blocks["api"] = {"host": "127.0.0.1", "port": ports["api"], "keys": keys}
    config = {"configVersion": CURRENT_VERSION, "gateway": {**blocks, **(gateway or {})}, "agents": agents}
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=indent) + "\n", encoding="utf-8")
    if ensure_home(home) is not None:  # pragma: no cover - config.json was written first
        raise RuntimeError("ensure_home wrote its own config.json")
    return ports


def write_suite_config(home: Path, ids: list[str], key: str, *, write: bool,
                       reviewer: list[str] | None = None) -> dict[str, int]:  # fmt: skip
    """config.json for the whole suite with agents ``ids`` (workspaces and transcripts at their
    default places), one key for every agent and the nightly dream slot 12 hours away (no
    scheduled run during a bench). The ports by service name (``file_api``, ``watcher``, ``kb``,
    ``dreaming``, ``http``)."""
    from datetime import UTC, datetime, timedelta

    slot = datetime.now(UTC) + timedelta(hours=12)
    dreaming: dict[str, Any] = {"dreamHour": slot.hour, "dreamMinute": slot.minute, "staggerWindowMinutes": 0}
    if reviewer is not None:
        dreaming["reviewerCommand"] = reviewer
    ports = write_config(home, [{"id": i} for i in ids], keys=[api_key(write=write, key=key)], gateway={"dreaming": dreaming})
    return {"file_api": ports["fileApi"], "watcher": ports["watcher"], "kb": ports["kb"], "dreaming": ports["dreaming"],
            "http": ports["api"]}  # fmt: skip
