"""``gateway up`` probes the file locks of the home and of a workspace on another file system, and starts.

The refusal itself is in tests/unit/test_lock_probe.py, through ``gateway up``'s and ``gateway
serve``'s own functions with a probe that reports a fault: no file system here lets a second
process take a held lock.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import httpx
import pytest
from suite_support import ADMIN_KEY, make_home
from test_launcher import Up

from gateway.lock_probe import PROBE_NAME

pytestmark = pytest.mark.integration

SHM = Path("/dev/shm")  # a tmpfs on Linux: a file system other than the temp folder's


def test_up_with_a_workspace_on_another_file_system_starts_and_writes_there(tmp_path: Path) -> None:
    elsewhere = Path(tempfile.mkdtemp(dir=SHM, prefix="gateway-locks-"))
    try:
        assert elsewhere.stat().st_dev != tmp_path.stat().st_dev
        home, _, http_port = make_home(tmp_path, agents=[{"id": "alfred"}, {"id": "bob", "workspace": str(elsewhere / "bob")}])
        with Up(home) as up:
            up.ready_url()  # the launcher and each writer probed both file systems, and found their locks work
            with httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=10) as http:
                put = http.put("/api/v1/agents/bob/files/SOUL.md", headers={"X-Api-Key": ADMIN_KEY}, json={"content": "hi"})
            assert put.status_code == 200, put.text
            assert (elsewhere / "bob" / "SOUL.md").read_text(encoding="utf-8") == "hi"
        left = [p for root in (home, elsewhere) for p in root.rglob(f"*{PROBE_NAME}*")]
        assert left == []
    finally:
        shutil.rmtree(elsewhere)
