"""The KB benches' home and service: one agent's config, and the KB process started and refreshed.
Nothing here decides a verdict.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from harness.home import agent_entry, api_key, write_config
from harness.procs import Children, start_service
from harness.report import say

AGENT = "bench"
START_TIMEOUT_S = 60.0
REFRESH_DEADLINE_S = 600.0
MB = 1_000_000


def write_home(home: Path) -> int:
    """The home of agent ``AGENT`` (a read-only key for it); the KB's port."""
    return write_config(home, [agent_entry(AGENT)], keys=[api_key([AGENT], write=False)])["kb"]


def start_kb(home: Path, port: int, children: Children) -> tuple[Any, Any, tuple[tuple[str, str], ...], float, int]:
    """The KB service on ``home``, SERVING, then one ``Refresh(wait)`` of ``AGENT``: its stub, channel,
    internal-token metadata, the refresh's seconds and its pid."""
    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2, kb_pb2_grpc

    pid = start_service(children, "kb", home, port, START_TIMEOUT_S)
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    stub = kb_pb2_grpc.KnowledgeStub(channel)
    t0 = time.perf_counter()
    reply = stub.Refresh(kb_pb2.RefreshRequest(agent_id=AGENT, wait=True), metadata=metadata, timeout=REFRESH_DEADLINE_S)
    refresh_s = time.perf_counter() - t0
    say(f"kb SERVING on {address} (pid {pid}); Refresh(wait) {refresh_s * 1000:.1f} ms: "
        f"generation {reply.generation}, indexed {reply.report.indexed}, skipped {reply.report.skipped}, "
        f"errors {len(reply.report.errors)}")  # fmt: skip
    return stub, channel, metadata, refresh_s, pid


def settled_bytes(db: Path) -> int:
    """The bytes of ``db`` once its WAL is checkpointed into it (retried while a checkpoint is busy)."""
    import apsw

    deadline = time.monotonic() + 120
    while True:
        conn = apsw.Connection(os.fspath(db))
        try:
            conn.setbusytimeout(10_000)
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0]
        finally:
            conn.close()
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
