"""The suite's processes run on uvloop (gateway.event_loop), and grpc.aio works on it.

Dreaming stays on asyncio's loop: it spawns reviewers through the loop, and
uvloop's fork() beside gRPC's threads lost a reviewer in its kill -9 test.

The rest of the integration suite exercises the processes on this loop; this
module checks that they really are on it, and that the shim's one channel to
the file API carries many calls at once on it without losing or mixing any.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from suite_support import ADMIN_KEY, READER_KEY, Suite

pytestmark = pytest.mark.integration

LOOPS = {"file_api": "uvloop", "watcher": "uvloop", "kb": "uvloop", "http": "uvloop", "dreaming": "asyncio"}


def test_each_process_says_which_loop_it_listens_on(suite: Suite) -> None:
    for name, loop in LOOPS.items():
        listening = [line for line in suite.log_lines(name) if line.get("event") == "listening"]
        assert listening, f"{name} logged no listening line"
        assert listening[-1].get("loop") == loop, (name, listening[-1])


def test_concurrent_calls_through_the_shim_on_uvloop_each_get_their_own_answer(suite: Suite) -> None:
    # 96 calls, 32 at a time, over the shim's one HTTP/2 channel to the file API: PUTs of six
    # different files and GETs of each, every answer the one its own request asked for.
    names = ["SOUL.md", "USER.md", "MEMORY.md", "AGENTS.md", "HEARTBEAT.md", "IDENTITY.md"]
    texts = {name: f"# {name}\n\n" + name[0] * (4000 + i) for i, name in enumerate(names)}
    with httpx.Client(base_url=suite.base_url, timeout=30) as client:

        def put(name: str) -> tuple[str, int, str]:
            reply = client.put(f"/api/v1/agents/alfred/files/{name}", headers={"X-Api-Key": ADMIN_KEY}, json={"content": texts[name]})
            return name, reply.status_code, reply.json()["filename"]

        def get(name: str) -> tuple[str, int, str]:
            reply = client.get(f"/api/v1/agents/alfred/files/{name}", headers={"X-Api-Key": READER_KEY})
            return name, reply.status_code, reply.json()["content"]

        with ThreadPoolExecutor(32) as pool:
            assert sorted(pool.map(put, names)) == sorted((n, 200, n) for n in names)
            answers = list(pool.map(get, names * 15))
    assert len(answers) == 90
    for name, status, content in answers:
        assert status == 200
        assert content == texts[name]
