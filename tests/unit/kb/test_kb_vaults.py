"""The KB's vaults manager: one write at a time per vault, also when a caller is cancelled."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gateway.config import build
from services.kb import vault
from services.kb.vaults import Vaults


def make(tmp_path: Path, executor: ThreadPoolExecutor) -> Vaults:
    config = build({"agents": [{"id": "alfred"}, {"id": "bob"}]}, tmp_path)
    return Vaults(config.agents, executor)


def test_a_cancelled_write_holds_the_vault_until_its_worker_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An RPC cancelled (deadline, caller gone) while its worker thread writes must not let the next
    write run on the same connection beside it: the lock is held until the worker returns."""
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(conn: Any, directory: Path, name: str, content: str, *, confirm: bool = False) -> None:
        entered.set()
        assert release.wait(30)
        order.append("first write done")

    def second(conn: Any, directory: Path, name: str) -> None:
        order.append("second write ran")

    monkeypatch.setattr(vault, "create", slow)
    monkeypatch.setattr(vault, "delete", second)
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = make(tmp_path, executor)

    async def scenario() -> tuple[bool, bool]:
        first = asyncio.ensure_future(vaults.create("alfred", "n", "x", False))
        await asyncio.to_thread(entered.wait, 30)
        first.cancel()
        await asyncio.sleep(0)  # a yield: the cancellation reaches the write
        held = not first.done()
        follower = asyncio.ensure_future(vaults.delete("bob", "n"))
        await asyncio.sleep(0)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await first
        await follower
        return held, first.cancelled()

    try:
        held, cancelled = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown(wait=True)
    assert held and cancelled
    assert order == ["first write done", "second write ran"]
