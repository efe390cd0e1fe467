"""The bench modules, imported for tests the way the bench scripts import each other."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def bench(name: str) -> ModuleType:
    """Import a bench module the way the scripts do (bench/ on the path, its siblings beside it)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
