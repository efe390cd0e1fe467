"""The secret guard loads detect-secrets without ``requests`` (``gateway.secrets_loading``) and finds
exactly what it finds with the real ``requests`` loaded first (tests/secret_samples.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCAN = """
import json, sys
sys.path.insert(0, "tests")
if {requests_first}:
    import requests
from secret_samples import NEAR_MISSES, PRIVATE_KEY_BLOCK, SECRETS
from gateway.secrets_guard import find_secrets
texts = [*SECRETS.values(), *NEAR_MISSES.values(), PRIVATE_KEY_BLOCK, "\\n".join(SECRETS.values())]
found = [[(f.line, f.detector) for f in find_secrets(text)] for text in texts]
print(json.dumps({{"found": found, "requests": type(sys.modules.get("requests")).__name__ if "requests" in sys.modules else None,
                  "urllib3": "urllib3" in sys.modules}}))
"""


def _scan(requests_first: bool) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCAN.format(requests_first=requests_first)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_guard_finds_the_same_without_requests_and_never_loads_it() -> None:
    lean, whole = _scan(requests_first=False), _scan(requests_first=True)
    assert lean["found"] == whole["found"]
    assert any(lean["found"]) and not all(lean["found"])  # secrets found, near misses passed
    assert (lean["requests"], lean["urllib3"]) == (None, False)
    assert whole["requests"] == "module"


DEFERRED = """
import sys
from gateway.secrets_guard import find_secrets
find_secrets("x = 1")
import detect_secrets.plugins.base as base
stand_in = base.requests
assert "requests" not in sys.modules and type(stand_in).__name__ == "_Deferred"
import requests  # the rest of the process imports the real package
assert requests is not stand_in and stand_in.exceptions.RequestException is requests.exceptions.RequestException
"""


def test_the_stand_in_answers_from_the_real_requests_once_used() -> None:
    done = subprocess.run([sys.executable, "-c", DEFERRED], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
