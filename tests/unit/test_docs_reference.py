"""docs/reference/ is what the code renders now, and says what the code says.

Each page is regenerated in memory and compared with the committed file, as the OpenAPI
document is checked against the routes; a stale page fails with the command that rewrites it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gateway_cli.docs_reference import cli_page, grpc_page, mcp_page, metrics_page
from gateway_cli.docs_reference.__main__ import main
from gateway_cli.docs_reference.access import READ, WRITE, AccessUnknown, method_access, rpc_access
from gateway_cli.docs_reference.markdown import prose
from gateway_cli.docs_reference.pages import PAGES, REFERENCE_DIR
from gateway_http.descriptors import all_routes
from gateway_http.openapi import openapi_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return {name: render() for name, render in PAGES.items()}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_committed_page_is_what_the_code_renders(name: str, rendered: dict[str, str]) -> None:
    path = REFERENCE_DIR / name
    assert path.is_file(), f"docs/reference/{name} is missing: run `python -m gateway_cli.docs_reference`"
    assert path.read_text(encoding="utf-8") == rendered[name], (
        f"docs/reference/{name} is stale: run `python -m gateway_cli.docs_reference` and commit the page"
    )


def test_pages_hold_nothing_of_this_machine(rendered: dict[str, str]) -> None:
    """No absolute path, date or local port: the pages must render the same on every machine."""
    for name, text in rendered.items():
        assert str(ROOT) not in text and str(Path.home()) not in text, name
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), name
        assert text == PAGES[name](), f"{name} renders differently twice"


def test_the_rest_page_has_every_route_with_its_access(rendered: dict[str, str]) -> None:
    text = rendered["rest.md"]
    routes = all_routes()
    assert len(re.findall(r"^### ", text, re.M)) == len(routes)
    for route in routes:
        assert f"`{route.http_method} {openapi_path(route)}`" in text
    assert "| [`PUT /api/v1/agents/{agentId}/files/{filename}`](#workspacefiles-putfile) |" in text
    put = text.split("{ #workspacefiles-putfile }", 1)[1].split("\n### ", 1)[0]
    assert "with write access" in put and "| `content` | `string` | yes |" in put


def test_access_is_what_the_servicers_check() -> None:
    by_name = {r.method.name: r.method for r in all_routes()}
    assert rpc_access(by_name["GetFile"]) == READ and rpc_access(by_name["PutFile"]) == WRITE
    assert rpc_access(by_name["Refresh"]) == READ  # a POST that needs only read access
    assert rpc_access(by_name["CreateSharedNote"]) == WRITE and rpc_access(by_name["Search"]) == READ
    for service in grpc_page.services():
        for method in service.methods:  # every RPC, internal ones too: none is left unknown
            assert rpc_access(method) in (READ, WRITE)


class _Servicer:
    """A servicer as the access reader sees one: methods and the access check they call."""

    def _check(self, context: object, agent_id: str, *, write: bool = False) -> None: ...

    def _log(self, text: str) -> None: ...

    async def Reads(self, request: Any, context: object) -> None:  # noqa: N802
        self._log("first")  # a helper without write is no access check
        self._check(context, request.agent_id)

    async def Writes(self, request: Any, context: object) -> None:  # noqa: N802
        self._check(context, request.agent_id, write=True)

    async def Decides(self, request: Any, context: object) -> None:  # noqa: N802
        self._check(context, request.agent_id, write=request.flag)

    async def Unchecked(self, request: Any, context: object) -> None:  # noqa: N802
        self._log("no check")


def test_access_is_read_from_the_check_and_never_guessed() -> None:
    assert method_access(_Servicer, "Reads") == READ  # write left out: the helper's default
    assert method_access(_Servicer, "Writes") == WRITE
    for name in ("Decides", "Unchecked"):
        with pytest.raises(AccessUnknown):
            method_access(_Servicer, name)


def test_the_grpc_page_has_every_rpc_message_and_enum(rendered: dict[str, str]) -> None:
    text = rendered["grpc.md"]
    for service in grpc_page.services():
        for method in service.methods:
            assert f"{{ #{grpc_page.rpc_anchor(method)} }}" in text
    for message in grpc_page.messages():
        assert f"{{ #{grpc_page.message_anchor(message.full_name)} }}" in text
    for enum in grpc_page.enums():
        assert f"{{ #{grpc_page.enum_anchor(enum.full_name)} }}" in text
    assert "stream [`Directive`](#message-directive)" in text  # WatchDirectives streams


def test_the_mcp_page_lists_the_servers_own_tools(rendered: dict[str, str]) -> None:
    tools = {tool.name: tool for tool in mcp_page.tools()}
    assert set(tools) == {"memory_search", "memory_get", "memory_shared_create", "memory_shared_get",
                          "memory_shared_update", "memory_shared_delete"}
    text = rendered["mcp.md"]
    for name in tools:
        assert f"## `{name}` {{ #{name.replace('_', '-')} }}" in text
    assert "| `limit` | `integer` (≥ 1) |   | `6` |" in text
    delete = text.split("{ #memory-shared-delete }", 1)[1].split("\n## ", 1)[0]
    assert "- **Access**: **write**" in delete and "- **Hints**: destructive, idempotent" in delete


def test_the_cli_page_has_every_command(rendered: dict[str, str]) -> None:
    text = rendered["cli.md"]
    commands = cli_page.commands()
    assert {"gateway up", "gateway serve", "gateway config check", "gateway mcp"} <= set(commands)
    for command in commands:
        assert f"`{command}` {{ #{command.replace(' ', '-')}" in text, command
    assert "`--instance`" not in text  # hidden from --help, hidden here


def test_the_metrics_page_has_every_metric_a_process_exposes(rendered: dict[str, str]) -> None:
    import gateway_http.http_metrics  # noqa: F401
    import services.dreaming.records.metrics
    import services.kb.metrics
    import services.watcher.main  # noqa: F401
    from gateway.metrics import exposition

    documented = {m.name: m for m in metrics_page.metrics()}
    scraped = set(re.findall(r"^# TYPE (\S+) (\S+)$", exposition()[0].decode(), re.M))
    for name, kind in scraped:
        shown = name + "_total" if kind == "counter" and not name.endswith("_total") else name
        assert shown in documented and documented[shown].type == kind, name
    size = documented["gateway_knowledge_index_bytes"]  # registered only when the KB starts
    assert size.labels == ("agent",) and size.process == "kb"
    assert documented["gateway_http_requests_total"].labels == ("route", "method", "status")
    assert "| [`gateway_rpc_duration_seconds`](#gateway-rpc-duration-seconds) | histogram |" in rendered["metrics.md"]


def test_every_module_that_declares_a_metric_is_read() -> None:
    declares = re.compile(r"registry=REGISTRY|REGISTRY\.register\(|MetricFamily\(")
    found = set()
    for top in ("gateway", "gateway_http", "gateway_mcp", "gateway_cli", "services"):
        for path in (ROOT / top).rglob("*.py"):
            if declares.search(path.read_text(encoding="utf-8")) and "docs_reference" not in path.parts:
                found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert found == set(metrics_page.METRIC_MODULES), "add the module to metrics_page.METRIC_MODULES"


def test_prose_shows_text_as_written() -> None:
    assert prose("stale__<name> in memory/** {agentId}") == r"stale\_\_&lt;name&gt; in memory/\*\* \{agentId\}"
    assert prose("run `a|b_c` now\n and  then") == r"run `a\|b_c` now and then"


def test_check_names_stale_pages_and_writing_fixes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cli.md").write_text("old\n", encoding="utf-8")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "stale: " + tmp_path.name + "/cli.md (run python -m gateway_cli.docs_reference)" in err
    assert err.count("stale: ") == len(PAGES)
    assert main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PAGES)
    assert main(["--check", "--out", str(tmp_path)]) == 0
