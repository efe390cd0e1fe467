"""A library's submodules without its package ``__init__``, where that ``__init__`` imports much the
process never uses (docs/operations.md "Memory at rest").

prometheus_client's ``__init__`` imports its HTTP servers and push-gateway client (with http.server,
wsgiref, urllib.request, email…) for a registry and its metrics; uvicorn's imports its command line
(click) and its process supervisors (multiprocessing) for a ``Server`` run from code. ``without_init``
puts the package in ``sys.modules`` as a module whose ``__init__`` has not run: importing a
submodule (``prometheus_client.metrics``, ``uvicorn.server``) loads that submodule and what it
imports, nothing more. ``names`` are taken from their submodules (``uvicorn.Config``, which
uvicorn's own modules import by that name). Any other name the ``__init__`` defines (``from
prometheus_client import start_http_server``, ``uvicorn.run``, ``__version__``) runs the
``__init__`` then, once, and the package is whole again: code that expects the whole package still
gets it, only later. Other dunder names (what ``inspect`` or ``copy`` probe a module for) are
answered as absent, without running it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any


INIT_DUNDERS = ("__all__", "__version__")  # dunder names a package's ``__init__`` sets, which run it


def without_init(package: str, names: Mapping[str, str] | None = None) -> ModuleType:
    """``package`` as ``sys.modules`` holds it: loaded without its ``__init__`` (module docstring),
    where each of ``names`` (name -> the submodule that defines it) is taken from its submodule when
    first asked for. A package already imported is returned as it is (whole, or lean from an earlier
    call). Nothing is imported here."""
    loaded = sys.modules.get(package)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec(package)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{package} is not an installed package")
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)
    folders = list(spec.submodule_search_locations)
    submodules = {entry.removesuffix(".py") for folder in folders for entry in os.listdir(folder)
                  if entry.endswith(".py") or os.path.isfile(os.path.join(folder, entry, "__init__.py"))}
    lock = threading.RLock()

    def whole(name: str) -> Any:
        """A name the package does not hold yet: a submodule's (imported alone), else the ``__init__``'s."""
        if name.startswith("__") and name not in INIT_DUNDERS:  # a probe (``__wrapped__``…): not the package's
            raise AttributeError(name)
        if name in submodules:  # ``from . import values`` in the library itself
            return importlib.import_module(f"{package}.{name}")
        if name in given:
            value = getattr(importlib.import_module(given[name]), name)
            setattr(module, name, value)
            return value
        with lock:
            if vars(module).get("__getattr__") is whole:
                del vars(module)["__getattr__"]
                loader.exec_module(module)
        return getattr(module, name)

    given = dict(names or {})
    vars(module)["__getattr__"] = whole
    sys.modules[package] = module
    return module


def is_lean(module: ModuleType) -> bool:
    """Whether ``module`` was loaded by ``without_init`` and its ``__init__`` has not run since."""
    return "__getattr__" in vars(module) and getattr(vars(module)["__getattr__"], "__name__", "") == "whole"
