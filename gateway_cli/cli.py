"""The ``gateway`` command (docs/concepts/command-line.md "Command line")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.errors import CommandError, ConfigError, ConfigNotFound, InvalidEdit
from gateway.home import admin_key_notice, ensure_home, not_initialised, resolve_home, tighten_config_mode
from gateway.suite_lock import hold_home, refuse_while_restoring
from gateway_cli import (
    admin_cli,
    backup_cli,
    config_cli,
    dream_cli,
    health_cli,
    init_cli,
    log_options,
    migrate_cli,
    stand_in,
    vault_cli,
)

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.logs import Console
    from gateway_mcp.streamable_http import McpHost

SERVE_NAMES = ("file_api", "watcher", "kb", "dreaming", "http")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description="Durable, safe memory and workspace for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start every service and wait until all are healthy")
    up.add_argument("--home", help="gateway home (default: $GATEWAY_HOME or ~/.claude-gateway)")
    up.add_argument("--http-port", type=int, help="port of the REST shim (default: gateway.api.port)")
    log_options.add_arguments(up)

    init_cli.add_parser(sub)

    serve = sub.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("name", choices=SERVE_NAMES)
    serve.add_argument("--home", help="gateway home")
    serve.add_argument("--port", type=int, help="override the service's port from config.json")
    serve.add_argument("--instance", help=argparse.SUPPRESS)  # the launcher's start nonce (health checks)
    serve.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # http: gateway up's shim worker N (gateway.http_workers)
    log_options.add_arguments(serve)

    health_cli.add_parser(sub)

    compose = sub.add_parser("compose", help="print what an agent's CLAUDE.md would be now (dry run) and its budget report")
    compose.add_argument("agent", help="agent id")
    compose.add_argument("--home", help="gateway home")

    dream_cli.add_parser(sub)
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


def _tighten_config_mode(home: Path) -> str | None:
    """Start-up: make config.json 0600 if group/others can read it; one line saying what happened."""
    path = home / "config.json"
    try:
        old = tighten_config_mode(home)
    except OSError as exc:
        return f"{path} is readable by group or others and its mode cannot be changed ({exc.strerror}); make it 0600"
    if old is None:
        return None
    return f"{path} was mode {old:04o} (readable by group or others, and it can hold keys); it is now 0600"


def _serve(name: str, home: Path, port: int | None, instance: str | None = None, console: Console | None = None,
           worker: int | None = None) -> int:
    """Run process ``name`` until it is stopped; its exit code. ``worker``: the shim is worker N of
    several on one port (``gateway.http_workers``), and names itself so."""
    from gateway import http_workers
    from gateway.event_loop import run as run_loop
    from gateway.live_config import LiveConfig, loader
    from gateway.logs import configure
    from gateway.ports import BindError
    from gateway.resources import raise_open_files_limit
    from gateway.temp_sweep import Folder, sweep_at_start

    missing = not_initialised(home)
    if missing:  # serve never writes a config: one process (init, up) makes the admin key
        raise CommandError(missing)
    if worker is not None and (name != "http" or not 1 <= worker <= http_workers.MAX_WORKERS):
        raise CommandError(f"--worker is for http, from 1 to {http_workers.MAX_WORKERS}")
    process = http_workers.name(worker) if worker is not None else name
    hold_home(home, process)  # for the process's life: gateway restore refuses a home a process holds
    log = configure(process, console=console)
    raise_open_files_limit()  # docs/operations.md "Open files, disk and memory"; the "listening" line says it
    # The home's own files (config.json, admin-key.txt, .internal-token): every serve sweeps them.
    sweep_at_start([Folder(home)])
    notice = admin_key_notice(home)
    # A child of gateway up (it has a start nonce) on a terminal leaves the notice to up's banner,
    # which says it once for the suite; as JSON every process logs it, for whoever reads its log.
    if notice and not (console is not None and instance):
        log.warning("admin_key_unconfirmed", detail=notice)
    tightened = _tighten_config_mode(home)
    if tightened:
        log.warning("config_mode", detail=tightened)
    live = LiveConfig(loader(home, dict(os.environ), service=name, port=port))
    try:
        if name == "http":
            from gateway_http.main import run as run_http

            run_http(live, _mcp_servers, instance, worker)
        elif name == "file_api":
            from services.file_api.main import run as run_file_api

            run_loop(run_file_api(live, instance))
        elif name == "watcher":
            from services.watcher.main import run as run_watcher

            run_loop(run_watcher(live, instance))
        elif name == "kb":
            from services.kb.main import run as run_kb

            run_loop(run_kb(live, instance, os.environ))
        elif name == "dreaming":
            from services.dreaming.main import run as run_dreaming

            run_loop(run_dreaming(live, instance, os.environ), spawns_children=True)
    except BindError as exc:  # one clear line, not a traceback
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    return 0


def _mcp_servers(kb_address: str, max_body_bytes: int) -> McpHost:
    """The shim's MCP host, made in its worker thread: the import loads the MCP SDK (about 0.7 s
    of CPU), which the shim's start does not wait for. The host serves every agent with one
    server, whatever their number. Here because only the entry point may import both
    ``gateway_http`` and ``gateway_mcp``."""
    from gateway_mcp.streamable_http import McpHost

    return McpHost(kb_address, max_body_bytes=max_body_bytes)


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
        _say_invalid(home, report.errors)
    for line in report.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if report.errors:
        return 2
    pending = f" (migrations pending: {', '.join(report.pending)})" if report.pending else ""
    warned = f" ({len(report.warnings)} warning{'s' if len(report.warnings) > 1 else ''})" if report.warnings else ""
    print(f"ok: {report.path}{pending}{warned}")
    return 0


def _say_invalid(home: Path, problems: list[str]) -> None:
    print(f"gateway: config.json in {home} is invalid:", file=sys.stderr)
    for line in problems:
        print(f"  {line}", file=sys.stderr)


def _run(args: argparse.Namespace, home: Path) -> int:
    if args.command == "up":
        from gateway_cli.launcher import up

        hold_home(home, "gateway up")  # before the first start writes anything (a restore may be writing)
        admin_key = ensure_home(home)
        tightened = _tighten_config_mode(home)
        if tightened:
            print(f"gateway: {tightened}", file=sys.stderr, flush=True)
        console = log_options.console_for(args.log_format, args.verbose, sys.stdout, dict(os.environ))
        code = up(home, _config(home), admin_key, args.http_port, console)
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
        return _serve(args.name, home, args.port, args.instance, console, args.worker)
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
    try:
        return _run(args, home)
    except InvalidEdit as exc:
        print(f"gateway: refused: the change would make config.json in {home} invalid; nothing was written:", file=sys.stderr)
        for line in exc.problems:
            print(f"  {line}", file=sys.stderr)
    except ConfigNotFound as exc:
        print(
            f"gateway: no config.json in {exc.path.parent} (not found); "
            "pass --home DIR or set GATEWAY_HOME (make up uses ./var/gateway)",
            file=sys.stderr,
        )
    except ConfigError as exc:
        _say_invalid(home, exc.problems)
    except CommandError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
