"""The KB's floor plan (services/kb/__init__.py and each wing's): a small top floor over six wings, each
importing only what its package docstring names."""

from __future__ import annotations

from pathlib import Path

from test_architecture import imported_names

KB = Path(__file__).resolve().parents[2] / "services" / "kb"
TOP_FLOOR = {"servicer", "vault_servicer", "main", "file_watch", "metrics", "rest_hints"}
# What each wing may import of the rest of the KB (another wing, or a module of the top floor).
WINGS: dict[str, set[str]] = {
    "index": set(),
    "graph": {"index"},
    "resources": set(),
    "archive": {"index", "resources", "file_watch", "metrics"},
    "vault": {"index", "graph", "resources", "archive", "file_watch"},
    "vault_pg": {"index", "graph", "archive", "vault"},
}


def _kb_part(name: str) -> str | None:
    """The wing or top-floor module an import of ``name`` reaches, or None outside the KB."""
    parts = name.split(".")
    return parts[2] if parts[:2] == ["services", "kb"] and len(parts) > 2 else None


def test_the_top_floor_holds_at_most_six_modules() -> None:
    modules = {path.stem for path in KB.glob("*.py")} - {"__init__"}
    assert modules == TOP_FLOOR and len(modules) <= 6
    assert {path.name for path in KB.iterdir() if (path / "__init__.py").is_file()} == set(WINGS)


def test_each_wing_imports_only_what_its_docstring_names() -> None:
    found = []
    for wing, allowed in WINGS.items():
        for path in sorted((KB / wing).rglob("*.py")):
            for name in sorted(imported_names(path.read_text())):
                part = _kb_part(name)
                if part is not None and part != wing and part not in allowed:
                    found.append(f"services/kb/{wing}/{path.name} imports {name}")
    assert found == []
