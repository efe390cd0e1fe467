"""No import loops: the modules of a package, linked by their imports, form no cycle.

A loop makes the order of imports matter (the module entered second sees the first half-built), and
the usual way out, an import moved into a function, hides the loop rather than removing it: so an
import inside a function counts here as well. Only imports under ``if TYPE_CHECKING:`` do not (they
never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from test_architecture import sources_under

PACKAGES = ("gateway", "gateway_http", "gateway_mcp", "gateway_cli", "services")


def _module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and below it (functions, classes, blocks) but under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, field, []):
                yield from _statements(child.body if isinstance(child, ast.ExceptHandler) else [child])


def _imported(module: str, node: ast.stmt, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``node`` (a statement of ``module``) imports."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        package = module.split(".")[: -node.level] if not module.endswith("__init__") else module.split(".")
        base = ".".join([*package, *([base] if base else [])])
    found = {f"{base}.{alias.name}" for alias in node.names} & known
    return found | ({base} & known if len(found) < len(node.names) else set())


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over ``sources`` (``{path: source}``)."""
    modules = {_module_name(path): source for path, source in sources.items()}
    known = set(modules)
    return {
        name: set().union(*(_imported(name, node, known) for node in _statements(ast.parse(source).body)))
        for name, source in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One loop (``[a, b, ..., a]``) for each group of modules that import each other, sorted."""
    found: list[list[str]] = []
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                found.append([*stack[stack.index(target):], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_package_imports_itself_in_a_loop() -> None:
    for package in PACKAGES:
        graph = import_graph(sources_under(package))
        assert len(graph) > 1, f"{package}: no modules found, the rule would check nothing"
        assert cycles(graph) == [], f"{package} has import loops: {cycles(graph)}"


def test_the_loop_rule_fails_on_planted_loops() -> None:
    planted = {
        "gateway/a.py": "from gateway.b import B\n",
        "gateway/b.py": "from gateway import c\n",
        "gateway/c.py": "import gateway.a\n",
        "gateway/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gateway.e import E\n",
        "gateway/e.py": "from gateway.d import D\n",
        "gateway/f.py": "from .g import G\n",
        "gateway/g.py": "try:\n    from gateway.f import F\nexcept ImportError:\n    pass\n",
        "gateway/h.py": "def later():\n    from gateway.i import I\n",
        "gateway/i.py": "class I:\n    def run(self):\n        with x:\n            import gateway.h\n",
    }
    assert cycles(import_graph(planted)) == [
        ["gateway.a", "gateway.b", "gateway.c", "gateway.a"],
        ["gateway.f", "gateway.g", "gateway.f"],
        ["gateway.h", "gateway.i", "gateway.h"],
    ]
