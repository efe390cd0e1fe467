"""The architecture's rules on imports and the environment, enforced."""

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


def sources_under(*packages: str) -> dict[str, str]:
    """``{path relative to the repository: source}`` of every module in ``packages`` but generated code."""
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if "v1" not in path.relative_to(ROOT).parts
    }


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
    """Only the entry point reads the environment; every other module of every package is handed what it needs."""
    sources = sources_under("services", "gateway", "gateway_cli", "gateway_http", "gateway_mcp")
    assert "gateway_mcp/server.py" in sources and "gateway_cli/cli.py" in sources and "gateway_cli/serve.py" in sources
    for path, source in sources.items():
        if path not in ("gateway_cli/cli.py", "gateway_cli/serve.py"):  # the two entry points
            assert "os.environ" not in source and "getenv" not in source, f"{path} reads the environment"


def test_every_config_key_is_described_and_documented_in_the_reference() -> None:
    from gateway.config_docs import reference_table

    schema = json.loads((ROOT / "gateway" / "config_schema.json").read_text())
    for name, node in [("(root)", schema), *schema["$defs"].items()]:
        for key, prop in node.get("properties", {}).items():
            assert prop.get("description") or "$ref" in prop, f"{name}.{key} has no description in config_schema.json"
    page = (ROOT / "docs" / "reference" / "config.md").read_text()
    assert reference_table() in page, "docs/reference/config.md is stale: run `python -m gateway_cli.docs_reference`"


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


# The layers, bottom up, and the packages each may import. ``gateway`` is the library under
# everything; the shim and the MCP server are two front ends that share it and nothing else;
# only the entry points (``gateway_cli``) see the whole suite.
LAYERS: dict[str, set[str]] = {
    "gateway": set(),
    "services": {"gateway"},
    "gateway_http": {"gateway"},
    "gateway_mcp": {"gateway"},
    "gateway_cli": {"gateway", "services", "gateway_http", "gateway_mcp"},
}


def imported_names(source: str) -> set[str]:
    """Every module ``source`` imports, wherever the import is (a function, ``TYPE_CHECKING``), and
    every module named to ``importlib.import_module``: a lazy import is still a dependency."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
    return out


def layer_violations(sources: dict[str, str]) -> list[str]:
    """One line per import of a package the importing module's layer may not see."""
    found = []
    for path, source in sources.items():
        own = path.split("/", 1)[0]
        for name in sorted(imported_names(source)):
            top = name.split(".", 1)[0]
            if top in LAYERS and top != own and top not in LAYERS[own]:
                found.append(f"{path} imports {name}: {own} may import only {sorted(LAYERS[own]) or 'itself'}")
    return found


def test_every_layer_imports_only_what_is_below_it() -> None:
    """``gateway`` imports nothing of ours above it; ``gateway_http`` and ``gateway_mcp`` never each other."""
    assert set(LAYERS) == {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tests"}
    assert layer_violations(sources_under(*LAYERS)) == []


# Servicer methods that do not go through ``gateway.rpc.unary``, each with the reason.
UNWRAPPED_RPCS = {
    "Sessions.WatchDirectives": "server-streaming; unary() wraps one awaited reply, so this method maps its "
    "GatewayError, counts and logs its one rpc line itself (services/watcher/servicer.py)",
}


def _is_unary(decorator: ast.expr, source_imports_unary: bool) -> bool:
    if isinstance(decorator, ast.Name):
        return decorator.id == "unary" and source_imports_unary
    return isinstance(decorator, ast.Attribute) and decorator.attr == "unary" and ast.unparse(decorator.value) in (
        "rpc", "gateway.rpc")


def unwrapped_servicer_methods(source: str) -> list[str]:
    """``Class.method`` of each ``async def`` of a class deriving from a generated ``*Servicer``
    that is not decorated with ``gateway.rpc.unary``."""
    tree = ast.parse(source)
    imports_unary = any(
        isinstance(node, ast.ImportFrom) and node.module == "gateway.rpc"
        and any(a.name == "unary" and a.asname is None for a in node.names)
        for node in ast.walk(tree)
    )
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if not any(ast.unparse(base).endswith("Servicer") for base in cls.bases):
            continue
        for method in cls.body:
            if isinstance(method, ast.AsyncFunctionDef) and not any(
                _is_unary(d, imports_unary) for d in method.decorator_list
            ):
                found.append(f"{cls.name}.{method.name}")
    return found


def test_every_servicer_method_goes_through_the_error_mapping_wrapper() -> None:
    found: dict[str, str] = {}
    servicers = 0
    for path, source in sources_under("services", "gateway_http", "gateway_mcp").items():
        servicers += "Servicer)" in source
        found.update((name, path) for name in unwrapped_servicer_methods(source))
    assert servicers >= 4, "no servicer found: the rule would check nothing"
    assert set(found) - set(UNWRAPPED_RPCS) == set(), f"decorate with gateway.rpc.unary: {found}"
    assert set(UNWRAPPED_RPCS) <= set(found), "an allowed exception is gone: drop it from UNWRAPPED_RPCS"


# Writes that do not go through gateway.atomic, keyed by (package, function), each with the reason.
RAW_WRITES = {
    ("services/dreaming", "append"): "the append-only JSONL journal (services/dreaming/records/jsonl.py): one O_APPEND "
    "write, fsynced; a torn last line is skipped on read, and trimming it is an atomic rewrite",
    ("services/dreaming", "RunLock.acquire"): "the run lock's empty lock file, opened for flock, never written",
    ("services/kb", "SourceWatch._write_marker"): "an empty marker file created (O_EXCL) in the KB's own sync "
    "folder so the file watch sees an event; no content, not in a workspace",
    ("services/kb", "main"): "the parse worker's protocol stream: a dup of its own stdout pipe, not a file",
    ("services/kb", "_run"): "the opt-in memory trace (memory_trace) appends a line to a file the operator named, "
                             "outside any workspace",
}
OPEN_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _writes_in(call: ast.Call) -> str | None:
    """What ``call`` writes outside the atomic helper (``"os.replace"``, ``"open('w')"``...), or None."""
    func = call.func
    name = ast.unparse(func)
    kwargs = {k.arg: k.value for k in call.keywords}

    def mode(position: int) -> str | None:
        node = call.args[position] if len(call.args) > position else kwargs.get("mode")
        if node is None:
            return None
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "?"
        return text if text == "?" or set(text) & set("wax+") else None

    if name in ("os.replace", "os.rename", "os.renames", "shutil.move", "shutil.copy", "shutil.copy2",
                "shutil.copyfile", "shutil.copytree", "shutil.copyfileobj"):
        return name
    if name == "os.open":
        flags = call.args[1] if len(call.args) > 1 else kwargs.get("flags")
        named = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(flags)} if flags else set()
        return f"os.open({' | '.join(sorted(named & OPEN_WRITE_FLAGS))})" if named & OPEN_WRITE_FLAGS else None
    if name in ("open", "io.open", "os.fdopen"):
        found = mode(1)
        return f"{name}({found!r})" if found else None
    if isinstance(func, ast.Attribute):
        if func.attr in ("write_text", "write_bytes", "rename"):
            return f".{func.attr}()"
        if func.attr == "open":  # Path.open(mode)
            found = mode(0)
            return f".open({found!r})" if found else None
        if func.attr == "replace" and len(call.args) == 1 and not call.keywords:  # Path.replace(target)
            return ".replace()"
    return None


def raw_writes(source: str) -> list[tuple[str, str]]:
    """``(function, what)`` for each write in ``source`` that bypasses ``gateway.atomic``; the
    function is ``Class.method``, ``function`` or ``<module>``."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Call):
                what = _writes_in(child)
                if what:
                    found.append((".".join(scope) or "<module>", what))
            visit(child, scope)

    visit(ast.parse(source), [])
    return found


def test_every_write_goes_through_the_atomic_helper() -> None:
    """No module of the services, the shim or the MCP server writes a file by hand: the atomic helper
    (temp file, fsync, rename) is how nothing stored is ever half-written. SQLite writes its own files."""
    found = {}
    for path, source in sources_under("services", "gateway_http", "gateway_mcp").items():
        package = "/".join(path.split("/")[:2]) if path.startswith("services/") else path.split("/")[0]
        for function, what in raw_writes(source):
            found[(package, function)] = f"{path}: {what} in {function}"
    unexpected = {key: where for key, where in found.items() if key not in RAW_WRITES}
    assert not unexpected, f"write through gateway.atomic (or add the exception, with its reason): {unexpected}"
    assert set(RAW_WRITES) <= set(found), "an allowed exception is gone: drop it from RAW_WRITES"


def test_the_layer_rule_fails_on_planted_imports() -> None:
    planted = {
        "gateway/fine.py": "from gateway.errors import GatewayError\n",
        "gateway/lazy.py": "def run():\n    from services.kb.main import run\n",
        "gateway/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gateway_cli.cli\n",
        "gateway_http/mount.py": "import importlib\nm = importlib.import_module('gateway_mcp.server')\n",
        "gateway_mcp/tools.py": "from gateway_http.errors import http_status\n",
        "services/kb/x.py": "import gateway_http.app\n",
        "gateway_cli/cli.py": "import gateway_http.main, gateway_mcp.server, services.kb.main\n",
    }
    found = layer_violations(planted)
    assert [line.split(" ")[0] for line in found] == [
        "gateway/lazy.py", "gateway/typed.py", "gateway_http/mount.py", "gateway_mcp/tools.py", "services/kb/x.py"
    ], found


def test_the_servicer_rule_fails_on_an_undecorated_method() -> None:
    planted = (
        "from gateway.rpc import unary\n"
        "from gateway import rpc\n"
        "class Files(files_pb2_grpc.WorkspaceFilesServicer):\n"
        "    @unary\n    async def GetFile(self, request, context): ...\n"
        "    @rpc.unary\n    async def PutFile(self, request, context): ...\n"
        "    async def ListFiles(self, request, context): ...\n"
        "    @other\n    async def DeleteFile(self, request, context): ...\n"
        "    def _helper(self): ...\n"
        "class Plain:\n    async def Anything(self): ...\n"
    )
    assert unwrapped_servicer_methods(planted) == ["Files.ListFiles", "Files.DeleteFile"]
    assert unwrapped_servicer_methods(planted.replace("from gateway.rpc import unary\n", "")) == [
        "Files.GetFile", "Files.ListFiles", "Files.DeleteFile"
    ], "a bare @unary counts only when it is gateway.rpc's"


def test_the_write_rule_fails_on_planted_writes() -> None:
    planted = (
        "import os, shutil\n"
        "open(p).read()\n"
        "with open(p, 'rb') as f: ...\n"
        "p.open().read()\n"
        "s.replace('a', 'b')\n"
        "when.replace(tzinfo=UTC)\n"
        "os.open(p, os.O_RDONLY)\n"
        "def save(p, m):\n"
        "    open(p, 'w')\n"
        "    open(p, mode='ab')\n"
        "    open(p, m)\n"
        "class Store:\n"
        "    def put(self, p):\n"
        "        p.write_text('x')\n"
        "        p.write_bytes(b'x')\n"
        "        p.open('x')\n"
        "        os.replace(a, b)\n"
        "        os.rename(a, b)\n"
        "        p.replace(q)\n"
        "        p.rename(q)\n"
        "        shutil.move(a, b)\n"
        "        os.open(p, os.O_WRONLY | os.O_CREAT)\n"
        "        os.fdopen(fd, 'wb')\n"
    )
    assert raw_writes(planted) == [
        ("save", "open('w')"), ("save", "open('ab')"), ("save", "open('?')"),
        ("Store.put", ".write_text()"), ("Store.put", ".write_bytes()"), ("Store.put", ".open('x')"),
        ("Store.put", "os.replace"), ("Store.put", "os.rename"), ("Store.put", ".replace()"),
        ("Store.put", ".rename()"), ("Store.put", "shutil.move"), ("Store.put", "os.open(O_CREAT | O_WRONLY)"),
        ("Store.put", "os.fdopen('wb')"),
    ]
