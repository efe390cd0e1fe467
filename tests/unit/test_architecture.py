"""The architecture rules of STYLE.md, enforced."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = {"grpc", "grpc_health", "grpc_reflection", "starlette", "uvicorn", "mcp"}
# Modules allowed to speak a transport: servicers, entry points, clients.
TRANSPORT_MODULES = re.compile(r"(servicer|main|client|server|mcp_server|rpc_client)\.py$")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def service_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "services").rglob("*.py"))


def test_services_import_each_other_only_through_the_protos() -> None:
    for path in service_modules():
        own = path.relative_to(ROOT / "services").parts[0]
        for name in imports_of(path):
            if name.startswith("services."):
                assert name.split(".")[1] == own, f"{path.relative_to(ROOT)} imports {name}: talk through gateway.v1 instead"


def test_domain_code_does_not_import_transports() -> None:
    for path in service_modules():
        if TRANSPORT_MODULES.search(path.name):
            continue
        bad = {n for n in imports_of(path) if n.split(".")[0] in TRANSPORTS}
        assert not bad, f"{path.relative_to(ROOT)} is domain code but imports {sorted(bad)}"


def test_the_shim_knows_no_service_internals() -> None:
    for path in (ROOT / "gateway_http").rglob("*.py"):
        assert not any(n.startswith("services") for n in imports_of(path)), path


def test_nothing_deep_reads_the_environment() -> None:
    allowed = {ROOT / "gateway_cli" / "cli.py"}
    for path in [*service_modules(), *(ROOT / "gateway").glob("*.py"), *(ROOT / "gateway_cli").glob("*.py"),
                 *(ROOT / "gateway_http").glob("*.py")]:
        if path in allowed:
            continue
        assert "os.environ" not in path.read_text() and "getenv" not in path.read_text(), f"{path.relative_to(ROOT)} reads the environment"


def test_every_config_key_is_described_and_documented_in_the_readme() -> None:
    from gateway.config_docs import BEGIN, END, reference_table

    schema = json.loads((ROOT / "gateway" / "config_schema.json").read_text())
    for name, node in [("(root)", schema), *schema["$defs"].items()]:
        for key, prop in node.get("properties", {}).items():
            assert prop.get("description") or "$ref" in prop, f"{name}.{key} has no description in config_schema.json"
    readme = (ROOT / "README.md").read_text()
    assert BEGIN in readme and END in readme, "README.md lacks the generated config reference"
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == reference_table(), "README's config reference is stale: run `python -m gateway.config_docs`"


def test_every_generated_rpc_is_implemented() -> None:
    """protoc's servicer base classes answer UNIMPLEMENTED; each of ours overrides every RPC."""
    from gateway.v1 import dreaming_pb2_grpc, files_pb2_grpc, kb_pb2_grpc, watcher_pb2_grpc
    from services.dreaming.servicer import Dreaming
    from services.file_api.servicer import WorkspaceFiles
    from services.kb.servicer import Knowledge
    from services.watcher.servicer import Sessions

    pairs = [
        (files_pb2_grpc.WorkspaceFilesServicer, WorkspaceFiles),
        (kb_pb2_grpc.KnowledgeServicer, Knowledge),
        (watcher_pb2_grpc.SessionsServicer, Sessions),
        (dreaming_pb2_grpc.DreamingServicer, Dreaming),
    ]
    for base, implementation in pairs:
        rpcs = [name for name in vars(base) if not name.startswith("_")]
        assert rpcs
        missing = [name for name in rpcs if getattr(implementation, name) is getattr(base, name)]
        assert not missing, f"{implementation.__name__} leaves {missing} unimplemented"
