"""The ``gateway`` command (docs/concepts/command-line.md "Command line")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import CommandError
from gateway.home import admin_key_notice, ensure_home, resolve_home
from gateway.suite_lock import hold_home, refuse_while_restoring
from gateway_cli import (
    admin_cli,
    backup_cli,
    config_cli,
    doctor_cli,
    dream_cli,
    forget_cli,
    health_cli,
    init_cli,
    log_options,
    migrate_cli,
    serve,
    stand_in,
    vault_cli,
)
from gateway_cli.command_errors import run_reporting, say_invalid

if TYPE_CHECKING:
    from gateway.config import Config

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description="Durable, safe memory and workspace for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start every service and wait until all are healthy")
    up.add_argument("--home", help="gateway home (default: $GATEWAY_HOME or ~/.claude-gateway)")
    up.add_argument("--http-port", type=int, help="port of the REST shim (default: gateway.api.port)")
    log_options.add_arguments(up)

    init_cli.add_parser(sub)

    serve.add_arguments(sub.add_parser("serve", help="run one service in the foreground"))

    health_cli.add_parser(sub)

    compose = sub.add_parser("compose", help="print what an agent's CLAUDE.md would be now (dry run) and its budget report")
    compose.add_argument("agent", help="agent id")
    compose.add_argument("--home", help="gateway home")

    dream_cli.add_parser(sub)
    forget_cli.add_parser(sub)
    doctor_cli.add_parser(sub)
    migrate_cli.add_parser(sub)

    mcp = sub.add_parser("mcp", help="serve the memory tools (memory_search, memory_get, memory_shared_*) over stdio (MCP) for one agent")
    mcp.add_argument("--agent", required=True, help="agent id the tools act for")
    mcp.add_argument("--home", help="gateway home")

    admin_cli.add_parsers(sub)
    backup_cli.add_parsers(sub)
    vault_cli.add_parser(sub)

    config = sub.add_parser("config", help="read, set, show, check or upgrade config.json")
    config_sub = config.add_subparsers(dest="action", required=True)
    for action, text in (("check", "validate config.json"), ("migrate", "rewrite config.json at the current configVersion, keeping a backup")):
        p = config_sub.add_parser(action, help=text)
        p.add_argument("--home", help="gateway home")
    config_cli.add_actions(config_sub)
    stand_in.add_parser(sub)
    return parser


def _config(home: Path, env: dict[str, str] | None = None) -> Config:
    """The validated config, with deployment overrides from ``env`` applied. Raises ConfigError."""
    from gateway.live_config import loader

    return loader(home, env or {})()


def _compose(home: Path, agent_id: str) -> int:
    """CLAUDE.md on stdout, the budget report on stderr; nothing is written."""
    from services.watcher.compose import compose

    config = _config(home)
    agent = config.agent(agent_id)
    if agent is None:
        known = ", ".join(a.id for a in config.agents) or "none"
        raise CommandError(f"no agent {agent_id!r} in {home / 'config.json'} (agents: {known})")
    result = compose(agent.workspace, agent.memory, agent.knowledge.archive.enabled)
    sys.stdout.write(result.text)
    print(f"--- budget report for {agent_id} (dry run; CLAUDE.md not written) ---", file=sys.stderr)
    print(result.budget_report(), file=sys.stderr)
    return 0


def _config_check(home: Path) -> int:
    """``config check``: one line per error and per warning on stderr; ``ok`` on stdout unless
    there is an error (exit 2). Warnings alone keep exit 0: start-up accepts them."""
    from gateway_cli.config_file import check

    report = check(home)
    if report.errors:
        say_invalid(home, report.errors)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if report.errors:
        return 2
    pending = f" (migrations pending: {', '.join(report.pending)})" if report.pending else ""
    warned = f" ({len(report.warnings)} warning{'s' if len(report.warnings) > 1 else ''})" if report.warnings else ""
    print(f"ok: {report.path}{pending}{warned}")
    return 0


def _run(args: argparse.Namespace, home: Path) -> int:
    if args.command == "up":
        from gateway_cli.launcher import up

        hold = hold_home(home, "gateway up")  # before the first start writes anything (a restore may be writing)
        admin_key = ensure_home(home)
        tightened = serve.tighten_config_mode(home)
        if tightened:
            print(f"gateway: {tightened}", file=sys.stderr, flush=True)
        console = log_options.console_for(args.log_format, args.verbose, sys.stdout, dict(os.environ))
        code = up(home, _config(home), admin_key, args.http_port, console, hold)  # returns only when it cannot start
        notice = admin_key_notice(home)
        if code != 0 and notice:
            # a start that failed (a port taken) may never have printed the key: say where it is
            print(f"gateway: {notice}", file=sys.stderr, flush=True)
        return code
    if args.command == "init":
        refuse_while_restoring(home)
        return init_cli.run(home)
    if args.command == "serve":
        console = log_options.console_for(args.log_format, args.verbose, sys.stdout, dict(os.environ))
        return serve.serve(args.name, home, args.port, args.instance, console, args.ready_fd, args.trusted_config,
                           args.worker)
    if args.command == "health":
        serving, line = health_cli.check(_config(home, dict(os.environ)), args.name)
        print(line, flush=True)
        return 0 if serving else 1
    if args.command == "compose":
        return _compose(home, args.agent)
    if args.command == "mcp":
        from gateway_mcp.server import run as run_mcp

        return run_mcp(_config(home, dict(os.environ)), args.agent, dict(os.environ))
    if args.command in ("keys", "agents"):
        return admin_cli.run(args, home)
    if args.command in ("backup", "restore"):
        return backup_cli.run(args, home)
    if args.command == "vault":
        return vault_cli.run(args, home, dict(os.environ))
    if args.command == "migrate-memory":
        return migrate_cli.run(args, home)
    if args.command == "dream":
        return dream_cli.run(args, home, _config(home, dict(os.environ)))
    if args.command == "forget":
        return forget_cli.run(args, home, _config(home, dict(os.environ)))
    if args.command == "doctor":
        return doctor_cli.run(args, _config(home, dict(os.environ)))
    if args.command == "reviewer":
        return stand_in.run(args.file)
    if args.command == "config":
        if args.action in config_cli.ACTIONS:
            return config_cli.run(args, home)
        if args.action == "check":
            return _config_check(home)
        from gateway_cli.config_file import migrate_file

        print(migrate_file(home))
        return 0
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run one ``gateway`` command; its exit code. Operator errors are one-line messages, exit 2."""
    args = _parser().parse_args(argv)
    home = resolve_home(getattr(args, "home", None), dict(os.environ))
    return run_reporting(home, lambda: _run(args, home))


if __name__ == "__main__":
    sys.exit(main())
