"""The MCP server's place in the architecture (docs/architecture.md "Processes" and "Where each rule is enforced")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_services_never_import_the_mcp_server() -> None:
    for path in sorted((ROOT / "services").rglob("*.py")):
        bad = {n for n in imported_modules(path) if n.split(".")[0] == "gateway_mcp"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: the MCP server is a client of the KB, not a library"


def test_the_mcp_server_talks_to_the_kb_only_through_the_protos() -> None:
    for path in sorted((ROOT / "gateway_mcp").rglob("*.py")):
        bad = {n for n in imported_modules(path) if n.split(".")[0] in ("services", "gateway_http")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: use gateway.v1 over gRPC"


def test_the_mcp_server_reads_no_environment() -> None:
    # The CLI passes the environment down; run() reads it, nothing else does.
    for path in sorted((ROOT / "gateway_mcp").rglob("*.py")):
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, f"{path.relative_to(ROOT)} reads the environment"
