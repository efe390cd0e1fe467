"""``gateway migrate-memory WORKSPACE [--apply]`` (the rules are in services/dreaming/migration.py).

Exit codes: 0 done or nothing to do, 1 refused (MEMORY.md changed since the
plan, a dreaming run of the agent in progress, a move that could not be
written), 2 bad usage. Progress goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.config import Config, load_config
from gateway.errors import CommandError, ConfigError

if TYPE_CHECKING:
    from services.dreaming.migration import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    migrate = sub.add_parser("migrate-memory", help="drain an over-budget MEMORY.md once: plan, or --apply",
                             description="Compact terminal entries and route episodic ones out of MEMORY.md.")
    migrate.add_argument("workspace", help="the agent's workspace folder (holds MEMORY.md)")
    migrate.add_argument("--apply", action="store_true", help="make the moves (else only write .dreaming/migration-plan.md)")
    migrate.add_argument("--home", help="gateway home, to use the agent's budget and settings when the workspace is one")


def _agent_of(config: Config | None, workspace: Path):  # type: ignore[no-untyped-def]
    if config is None:
        return None
    for agent in config.agents:
        if os.path.realpath(agent.workspace) == os.path.realpath(workspace):
            return agent
    return None


def run(args: argparse.Namespace, home: Path) -> int:
    from gateway.forget_guard import checker
    from services.dreaming import migration

    workspace = Path(args.workspace).expanduser().resolve()
    if not workspace.is_dir():
        raise CommandError(f"no workspace folder at {workspace}")
    try:
        config: Config | None = load_config(home)
    except ConfigError:
        config = None  # no (valid) home: the defaults, as for any workspace
    agent = _agent_of(config, workspace)
    settings = migration.Settings()
    if agent is not None:
        settings = migration.Settings(agent.memory.memory_budget_chars, agent.memory.episodic_archive_dir,
                                      agent.dreaming.auto_route_out, checker(agent.home, agent.id))
    who = f"agent {agent.id}" if agent is not None else "no configured agent (default settings)"
    try:
        with migration.agent_lock(home, agent.id if agent is not None else None):
            return _migrate(args, workspace, settings, who)
    except migration.Refused as exc:
        print(f"gateway: migrate-memory refused: {exc}", file=sys.stderr)
        return 1


def _migrate(args: argparse.Namespace, workspace: Path, settings: Settings, who: str) -> int:
    """Plan, or make the moves, under the agent's run lock. Raises migration.Refused."""
    from services.dreaming import migration

    plan = migration.make_plan(migration.read_memory(workspace), settings)
    now = datetime.now(UTC)
    summary = (f"{len(plan.compacted):,} terminal entries to compact, {len(plan.routed):,} episodic entries to route out; "
               f"MEMORY.md {len(plan.before):,} -> {len(plan.after):,} chars (budget {plan.budget:,}; {who})")
    if not args.apply:
        migration.write_plan(workspace, migration.render(plan, workspace, now.isoformat(timespec="seconds")))
        print(f"plan: {summary}; written to {workspace / migration.PLAN_FILE}")
        return 0
    waiting = migration.waiting_plan(workspace)
    if waiting is not None and waiting[2] == "planned" and waiting[0] != plan.source_sha:
        raise migration.Refused(f"MEMORY.md changed since {workspace / migration.PLAN_FILE} was made; "
                                f"run `gateway migrate-memory {workspace}` to plan again")
    if not plan.moves:
        print(f"nothing to do: {summary}")
        return 0
    report = migration.apply(workspace, plan, now, lambda line: print(f"gateway: {line}", file=sys.stderr, flush=True))
    print(f"applied (run {report.run_id}): {summary}")
    return 0
