"""Dreaming's wings, enforced: each imports only the wings below it, and nothing outside the
service reaches into a wing (docs/architecture.md "Dreaming's wings")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DREAMING = ROOT / "services" / "dreaming"
PACKAGE = "services.dreaming"
# Bottom up: a wing may import the wings before it in this list, never one after it, and never the
# top floor (the modules directly in services/dreaming/).
WINGS = ("model", "records", "schedule", "review", "apply", "passes", "vault", "history", "forget", "reflect")
# Production code outside the service; tests and benchmarks may reach into a wing.
OUTSIDE = ("gateway", "gateway_cli", "gateway_http", "gateway_mcp", "services")


def imports_in(source: str, module: str) -> set[str]:
    """Every module ``source`` (the source of ``module``) imports, wherever the import stands, with
    each name imported from a package two levels deep (``services.dreaming.apply``) as a possible
    submodule; relative imports resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: -node.level]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            if base.count(".") <= 2:
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def wing_of(name: str) -> str | None:
    """The wing ``name`` (a dotted module) is in or is; "" for the top floor; None outside dreaming."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    parts = name.split(".")
    if len(parts) < 3:
        return ""
    return parts[2] if parts[2] in WINGS else ""


def upward_imports(sources: dict[str, str]) -> list[str]:
    """One line per import of a wing above the importing wing, or of the top floor, by a wing."""
    found = []
    for module, source in sources.items():
        own = wing_of(module)
        if not own:
            continue
        for name in sorted(imports_in(source, module)):
            other = wing_of(name)
            if other == "" and name != PACKAGE:
                found.append(f"{module} imports {name}: a wing never imports the top floor")
            elif other and WINGS.index(other) > WINGS.index(own):
                found.append(f"{module} imports {name}: {own} is below {other}")
    return found


def reaching_in(sources: dict[str, str]) -> list[str]:
    """One line per import of a dreaming wing by a module outside the service."""
    return [
        f"{module} imports {name}: outside dreaming, import only its top floor"
        for module, source in sources.items() if wing_of(module) is None
        for name in sorted(imports_in(source, module)) if wing_of(name)
    ]


def modules_under(*folders: Path) -> dict[str, str]:
    """``{dotted module: source}`` of every module under ``folders`` but generated code."""
    out = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            if "v1" in rel.parts:
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(parts)] = path.read_text()
    return out


def test_the_wings_are_the_subpackages_in_their_order() -> None:
    assert set(WINGS) == {p.name for p in DREAMING.iterdir() if (p / "__init__.py").is_file()}


def test_each_wing_says_what_it_does_and_what_it_must_not_import() -> None:
    for wing in WINGS:
        doc = ast.get_docstring(ast.parse((DREAMING / wing / "__init__.py").read_text())) or ""
        assert 2 <= len(doc.splitlines()) <= 3 and "import" in doc.lower(), f"services/dreaming/{wing}/__init__.py: {doc!r}"


def test_no_wing_imports_a_wing_above_it() -> None:
    sources = modules_under(DREAMING)
    assert sum(1 for module in sources if wing_of(module)) > 30, "no wing found: the rule would check nothing"
    assert upward_imports(sources) == []


def test_nothing_outside_dreaming_imports_a_wing() -> None:
    sources = modules_under(*(ROOT / top for top in OUTSIDE))
    assert any("services.dreaming" in source for source in sources.values())
    assert reaching_in(sources) == []


def test_the_wing_rules_fail_on_planted_imports() -> None:
    planted = {
        "services.dreaming.apply.lazy": "def f():\n    from services.dreaming.passes import moves\n",
        "services.dreaming.records.back": "from ..history import pending\n",
        "services.dreaming.model.up": "from services.dreaming import nightly\n",
        "services.dreaming.review.fine": "from services.dreaming.model import values\nimport gateway.markdown\n",
        "services.dreaming.nightly": "from services.dreaming.history import pending\n",
        "gateway_cli.reach": "from services.dreaming.schedule.state import StateStore\n",
        "services.kb.reach": "from services.dreaming import review\n",
        "gateway_cli.top": "from services.dreaming import migration\n",
    }
    assert upward_imports(planted) == [
        "services.dreaming.apply.lazy imports services.dreaming.passes: apply is below passes",
        "services.dreaming.apply.lazy imports services.dreaming.passes.moves: apply is below passes",
        "services.dreaming.records.back imports services.dreaming.history: records is below history",
        "services.dreaming.records.back imports services.dreaming.history.pending: records is below history",
        "services.dreaming.model.up imports services.dreaming.nightly: a wing never imports the top floor",
    ]
    assert reaching_in(planted) == [
        "gateway_cli.reach imports services.dreaming.schedule.state: outside dreaming, import only its top floor",
        "services.kb.reach imports services.dreaming.review: outside dreaming, import only its top floor",
    ]
