"""``gateway.lean_import``: a package's submodules without its ``__init__``, whole again at the first
name only the ``__init__`` gives (here on uvicorn, as the shim loads it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEAN_THEN_WHOLE = """
import sys
from gateway.lean_import import is_lean, without_init
uvicorn = without_init("uvicorn", {"Config": "uvicorn.config"})
assert without_init("uvicorn") is uvicorn and is_lean(uvicorn)
assert "uvicorn.config" not in sys.modules  # nothing imported until asked for
from uvicorn.server import Server
from uvicorn import Config  # a given name: from its submodule
assert Config is sys.modules["uvicorn.config"].Config and uvicorn.server.Server is Server
assert "click" not in sys.modules and "uvicorn.main" not in sys.modules and is_lean(uvicorn)
assert not hasattr(uvicorn, "__wrapped__") and is_lean(uvicorn)  # a probe's dunder: no __init__ for it
assert callable(uvicorn.run)  # a name only the __init__ gives: it runs now, once
assert "click" in sys.modules and not is_lean(uvicorn)
"""

VERSION = """
from gateway.lean_import import is_lean, without_init
uvicorn = without_init("uvicorn")
assert uvicorn.__version__ and not is_lean(uvicorn)  # set by the __init__: it runs for it
"""

WHOLE_STAYS = """
import sys
import uvicorn
from gateway.lean_import import is_lean, without_init
assert without_init("uvicorn") is uvicorn and not is_lean(uvicorn)
"""

SHIM = """
import sys
from gateway import unused_extras
unused_extras.refuse("http")
import gateway_cli.serve, gateway_http.main
import uvicorn.lifespan.on, uvicorn.protocols.http.httptools_impl
from gateway.lean_import import is_lean
assert is_lean(sys.modules["uvicorn"])
loaded = sorted({"click", "multiprocessing", "uvicorn.main", "uvicorn.supervisors"} & set(sys.modules))
assert loaded == [], loaded
"""


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_lean_package_imports_only_the_submodules_asked_for_until_a_name_of_its_init() -> None:
    _run(LEAN_THEN_WHOLE)


def test_the_version_the_init_sets_runs_it() -> None:
    _run(VERSION)


def test_a_package_imported_whole_is_left_whole() -> None:
    _run(WHOLE_STAYS)


def test_the_shim_runs_uvicorn_without_its_command_line_or_supervisors() -> None:
    _run(SHIM)


SERVICE = """
import sys
from gateway import unused_extras
unused_extras.refuse("file_api")
import gateway_cli.serve, services.file_api.main
from gateway.lean_import import is_lean
from gateway.logs import configure
configure("file_api").info("probe", n=1)  # the suite's logging, on structlog's core alone
assert is_lean(sys.modules["structlog"])
loaded = sorted({"structlog.stdlib", "structlog.testing", "structlog.threadlocal"} & set(sys.modules))
assert loaded == [], loaded
"""


def test_a_service_logs_on_structlogs_core_without_its_stdlib_testing_or_threadlocal_modules() -> None:
    done = subprocess.run([sys.executable, "-c", SERVICE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "probe" in done.stdout  # the line was written
