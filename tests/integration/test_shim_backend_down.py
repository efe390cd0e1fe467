"""The shim with its backend stopped (503, quickly) and restarted (recovers)."""

from __future__ import annotations

import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, wait_until

pytestmark = pytest.mark.integration

URL = "/api/v1/agents/alfred/files/SOUL.md"


def test_backend_down_is_503_then_recovers_without_restarting_the_shim(suite: Suite) -> None:
    shim_pid = suite.procs["http"].pid
    with httpx.Client(base_url=suite.base_url, timeout=10) as http:
        assert http.put(URL, headers={"X-Api-Key": ADMIN_KEY}, json={"content": "before"}).status_code == 200

        assert suite.stop("file_api") == 0  # graceful SIGTERM exits 0
        # A 10 s client timeout: a hang fails this test instead of passing slowly.
        for _ in range(3):
            response = http.get(URL, headers={"X-Api-Key": ADMIN_KEY})
            assert response.status_code == 503, response.text
            body = response.json()
            assert body["code"] == 14 and "unavailable" in body["message"]
        health = http.get("/healthz")
        assert health.status_code == 503
        assert health.json()["backends"]["file_api"] != "SERVING"

        suite.start("file_api")

        def recovered() -> bool:
            return http.get(URL, headers={"X-Api-Key": ADMIN_KEY}).status_code == 200

        wait_until(recovered, 15, "the shim to reach the restarted backend")
        assert http.get(URL, headers={"X-Api-Key": ADMIN_KEY}).json()["content"] == "before"
        assert http.get("/healthz").status_code == 200
    assert suite.procs["http"].pid == shim_pid and suite.procs["http"].poll() is None
