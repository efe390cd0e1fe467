"""Loading detect-secrets for the secret guard without ``requests`` (docs/operations.md "Memory at rest").

detect-secrets imports ``requests`` in its plugins' base and its filters for one thing: verifying a
finding against the provider's API (``verify``), which runs only under a verification filter the
guard never turns on (``gateway.secrets_guard``; its scan calls no network). Imported for nothing,
``requests`` and what it imports (urllib3, charset_normalizer, idna, certifi, http.client, email…)
were about 6.4 of the 8 MiB the guard added to the file API and dreaming at their first scan.

``load`` imports every module of detect-secrets' plugins and filters (all of them: detect-secrets
maps its secret types to plugin classes by importing every plugin module) while ``requests`` in
``sys.modules`` is a stand-in, then takes the stand-in out, so the rest of the process imports the
real package as ever. The stand-in is what those modules keep as their ``requests``: it holds
``Response`` for the two return annotations Python evaluates at import, and any other name (a
``verify`` call, an ``except requests.exceptions…`` reached) imports the real ``requests`` then and
answers from it. The findings are detect-secrets' own either way: ``tests/unit/test_secrets_guard.py``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from types import ModuleType
from typing import Any

PACKAGES = ("detect_secrets.plugins", "detect_secrets.filters")


class _Response:
    """Stands for ``requests.Response`` in return annotations (never made: no request is sent)."""


class _Deferred(ModuleType):
    """``requests`` as detect-secrets' modules hold it: the real package from its first use."""

    Response = _Response

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


_lock = threading.Lock()


def _real() -> ModuleType:
    with _lock:
        if isinstance(sys.modules.get("requests"), _Deferred):
            del sys.modules["requests"]
        return importlib.import_module("requests")


def load() -> None:
    """Import detect-secrets' scanner, plugins and filters, with ``requests`` deferred (module
    docstring); nothing when ``requests`` is already imported in this process."""
    if "requests" in sys.modules:
        return
    stand_in = _Deferred("requests")
    sys.modules["requests"] = stand_in
    try:
        importlib.import_module("detect_secrets.core.scan")
        for name in PACKAGES:
            package = importlib.import_module(name)
            for found in pkgutil.iter_modules(package.__path__, f"{name}."):
                importlib.import_module(found.name)
    finally:
        if sys.modules.get("requests") is stand_in:
            del sys.modules["requests"]
