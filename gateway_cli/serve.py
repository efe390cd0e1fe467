"""``gateway serve NAME``: one service of the suite in this process, as ``gateway up`` starts each.

``python -m gateway_cli serve NAME --home H …`` is what the launcher runs for each child
(``gateway_cli.__main__`` hands ``serve`` to ``main`` here); ``gateway serve`` (``gateway_cli.cli``)
comes here too. The module imports only the standard library at its
top and each service's own stack once it knows which (docs/operations.md "Memory at rest"): a
child holds its service, not the whole command line's (``gateway_cli.cli`` imports every command).
Before anything imports structlog, the packages it would pick up and the suite never uses are
refused (``gateway.unused_extras``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.lock_probe import Probe
    from gateway.logs import Console
    from gateway.live_config import LiveConfig
    from gateway_http.mcp_mount import LoadHost, McpHost

SERVE_NAMES = ("file_api", "watcher", "kb", "dreaming", "http")
WRITERS = frozenset({"file_api", "watcher", "kb", "dreaming"})  # the shim writes no file: it does not probe the locks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``serve`` (``gateway serve`` and this module's own parser)."""
    from gateway_cli import log_options

    parser.add_argument("name", choices=SERVE_NAMES)
    parser.add_argument("--home", help="gateway home")
    parser.add_argument("--port", type=int, help="override the service's port from config.json")
    parser.add_argument("--instance", help=argparse.SUPPRESS)  # the launcher's start nonce (health checks)
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # the launcher's pipe (gateway.ready_pipe)
    parser.add_argument("--trusted-config", help=argparse.SUPPRESS)  # the digest of the config the launcher validated
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # http: gateway up's shim worker N (gateway.http_workers)
    log_options.add_arguments(parser)


def tighten_config_mode(home: Path) -> str | None:
    """Start-up: make config.json 0600 if group/others can read it; one line saying what happened."""
    from gateway.home import tighten_config_mode

    path = home / "config.json"
    try:
        old = tighten_config_mode(home)
    except OSError as exc:
        return f"{path} is readable by group or others and its mode cannot be changed ({exc.strerror}); make it 0600"
    if old is None:
        return None
    return f"{path} was mode {old:04o} (readable by group or others, and it can hold keys); it is now 0600"


def serve(name: str, home: Path, port: int | None, instance: str | None = None, console: Console | None = None,
          ready_fd: int | None = None, trusted_config: str | None = None, worker: int | None = None,
          probe: Probe | None = None) -> int:
    """Run service ``name`` on ``home`` until SIGTERM/SIGINT; the process exit code. Raises CommandError
    when the home is not initialised or (a service that writes) flock does not keep a second process out
    on a folder it writes to (``gateway.lock_probe``; ``probe``: a test passes its own), HomeBusy while a
    restore holds it. ``trusted_config``: the ``content_digest`` of a config the launcher validated
    (``gateway.config.trust``). ``worker``: the shim is worker N of several on one port
    (``gateway.http_workers``), and names itself so."""
    from gateway import ready_pipe, unused_extras

    unused_extras.refuse(name)
    ready_pipe.expect(ready_fd)

    from gateway import http_workers
    from gateway.errors import CommandError
    from gateway.event_loop import run as run_loop
    from gateway.home import admin_key_notice, not_initialised
    from gateway.live_config import LiveConfig, loader
    from gateway.logs import configure
    from gateway.ports import BindError
    from gateway.resources import raise_open_files_limit
    from gateway.suite_lock import hold_home
    from gateway.temp_sweep import Folder, sweep_at_start

    if trusted_config:
        from gateway.config import trust

        trust(trusted_config)
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
    tightened = tighten_config_mode(home)
    if tightened:
        log.warning("config_mode", detail=tightened)
    live = LiveConfig(loader(home, dict(os.environ), service=name, port=port))
    if name in WRITERS:
        from gateway import lock_probe

        locks = lock_probe.refusal(live.current, probe or lock_probe.probe)
        if locks:
            raise CommandError(locks)
    try:
        if name == "http":
            from gateway_http.main import run as run_http

            run_http(live, mcp_child(live, process, console), instance, worker)
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


def mcp_servers(kb_address: str, max_body_bytes: int) -> McpHost:
    """The MCP host in this process, the one the shim's child runs (``gateway_mcp.child``); the unit
    tests drive the mount with it. The import loads the MCP SDK (about 0.7 s of CPU). The host serves every
    agent with one server, whatever their number. Here because only the entry point may import
    both ``gateway_http`` and ``gateway_mcp``."""
    from gateway_mcp.streamable_http import McpHost as InProcess

    return InProcess(kb_address, max_body_bytes=max_body_bytes)


def mcp_child(live: LiveConfig, service: str, console: Console | None) -> LoadHost:
    """The shim's loader of its MCP host: ``gateway_http.mcp_child.ChildHost``, which serves MCP from a
    child process (``python -m gateway_mcp.child``) and stops it after ``gateway.api.mcpIdleSeconds``
    without a request (read at each idle check: a live edit applies there). The child logs as
    ``service``, in the shim's format (``console``)."""
    log_args = ["--service", service, "--log-format", "json" if console is None else "console"]
    if console is not None:
        log_args += [*(["--verbose"] if console.verbose else []), *(["--colors"] if console.colors else [])]

    def load(kb_address: str, max_body_bytes: int) -> McpHost:
        from gateway_http.mcp_child import ChildHost

        return ChildHost(kb_address, max_body_bytes=max_body_bytes, child_args=log_args,
                         idle_seconds=lambda: live.current.api.mcp_idle_seconds)

    return load


def main(argv: list[str] | None = None) -> int:
    """``python -m gateway_cli serve ARGS``: the arguments of ``gateway serve``; errors said as ``gateway`` says them."""
    from gateway import unused_extras

    unused_extras.refuse()
    from gateway.home import resolve_home
    from gateway_cli import log_options
    from gateway_cli.command_errors import run_reporting

    parser = argparse.ArgumentParser(prog="gateway serve", description="run one service in the foreground")
    add_arguments(parser)
    args = parser.parse_args(argv)
    home = resolve_home(args.home, dict(os.environ))
    console = log_options.console_for(args.log_format, args.verbose, sys.stdout, dict(os.environ))
    return run_reporting(home, lambda: serve(args.name, home, args.port, args.instance, console, args.ready_fd, args.trusted_config,
                                                args.worker))

