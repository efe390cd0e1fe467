"""What each process of the suite may import at start-up (docs/operations.md "Memory at rest").

Each entry point is imported in a fresh interpreter as ``gateway up`` starts it (a service through
``gateway_cli.serve``, after ``gateway.unused_extras.refuse`` for that service; the launcher's
supervising image on its own), and every top-level package then in ``sys.modules`` that is not the
standard library must be in that process's budget. A package outside it fails the test, named: load
it where it is used (at the first MCP request, with the PostgreSQL vault, …), or add it here knowing
what it costs. uvloop is imported when the loop is made (``gateway.event_loop``), so it is in no
budget: the last test runs dreaming's loop and checks it never loads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

OURS = {"gateway", "gateway_cli", "services", "gateway_http"}
# Every gRPC service: gRPC and protobuf, logs. jsonschema is loaded only to check a config.json the
# launcher did not validate (gateway.config.trust); prometheus_client when the metrics are made
# (gateway.metrics: a metrics port, a scrape, an observation the process keeps); PyYAML at the first
# note frontmatter the KB reads (services.kb.index.frontmatter); watchfiles (and anyio with it) only
# where there is no inotify (gateway.watching), and never in the shim, whose uvicorn would import it.
GRPC_STACK = OURS | {
    "grpc", "grpc_health", "grpc_reflection", "grpc_tools", "google",
    "structlog", "typing_extensions", "orjson",
}
BUDGETS = {
    "gateway_cli.launcher": OURS - {"services", "gateway_http"},
    "services.file_api.main": GRPC_STACK,
    "services.watcher.main": GRPC_STACK,
    "services.kb.main": GRPC_STACK | {"apsw"},  # the archives
    "services.dreaming.main": GRPC_STACK,
    "gateway_http.main": GRPC_STACK | {"uvicorn", "httptools"},  # uvicorn without its __init__ (gateway_http): no click
}
SERVICES = {"services.file_api.main": "file_api", "services.watcher.main": "watcher", "services.kb.main": "kb",
            "services.dreaming.main": "dreaming", "gateway_http.main": "http"}
NEVER_AT_START = ("mcp", "pydantic", "psycopg", "psycopg_pool", "starlette", "rich", "greenlet", "yaml", "jsonschema",
                  "prometheus_client", "watchfiles", "anyio", "uvloop")

PROBE = """
import json, sys
if {service!r}:
    from gateway import unused_extras
    unused_extras.refuse({service!r})
    import gateway_cli.serve
import {module}
print(json.dumps(sorted({{name.split(".")[0] for name, mod in sys.modules.items() if mod is not None}})))
"""


def imported_at_start(module: str) -> set[str]:
    """Top-level packages, outside the standard library, in ``sys.modules`` once ``module`` is imported."""
    code = PROBE.format(service=SERVICES.get(module, ""), module=module)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    names = set(json.loads(out.stdout.splitlines()[-1]))
    return {n for n in names if n not in sys.stdlib_module_names and not n.startswith("_") and n != "cython_runtime"}


@pytest.mark.parametrize("module", sorted(BUDGETS))
def test_each_process_imports_only_its_own_stack_at_start(module: str) -> None:
    extra = imported_at_start(module) - BUDGETS[module]
    assert not extra, f"{module} imports {sorted(extra)} at start-up, outside its budget"


def test_the_heavy_packages_stay_out_of_every_budget() -> None:
    for module, budget in BUDGETS.items():
        assert not set(NEVER_AT_START) & budget, module


def test_dreaming_runs_its_loop_without_loading_uvloop() -> None:
    """Dreaming runs on asyncio's own loop (``gateway.event_loop.run(spawns_children=True)``): uvloop,
    made only for the loop of the other processes, never loads in it; the others' loop is uvloop's."""
    code = textwrap.dedent("""
        import sys
        from gateway import event_loop

        async def name():
            return event_loop.running_loop_name()

        print(event_loop.run(name(), spawns_children=True), "uvloop" in sys.modules)
        print(event_loop.run(name()), "uvloop" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["asyncio", "False", "uvloop", "True"]


def test_the_shims_mcp_host_keeps_the_sdk_out_of_the_shim() -> None:
    """What the shim imports at its first MCP request (``gateway_cli.serve.mcp_child``'s loader: the
    host that runs the SDK in a child process, ``gateway_http.mcp_child``) is within the shim's budget:
    the MCP SDK, pydantic and the rest load in the child, never in the shim."""
    code = PROBE.format(service="http", module="gateway_http.main, gateway_http.mcp_child")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    names = set(json.loads(out.stdout.splitlines()[-1]))
    assert "gateway_mcp" not in names
    extra = {n for n in names if n not in sys.stdlib_module_names and not n.startswith("_") and n != "cython_runtime"}
    assert not extra - BUDGETS["gateway_http.main"], sorted(extra - BUDGETS["gateway_http.main"])
