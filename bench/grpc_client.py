"""Python gRPC load client of bench/rest_files.py (one process of several).

Each process opens its own grpc.aio channel (one HTTP/2 connection) to the file
API and keeps ``inflight`` unary calls outstanding: ``inflight`` asyncio tasks,
each issuing the next call as soon as the previous one returns (closed loop,
like wrk's connections). After a warm-up, every process waits on a shared
barrier, then measures for ``duration`` seconds and reports its count, its
per-call latencies (seconds) and its errors by gRPC code.

This is a *Python* client: on a 2-core machine its own CPU use competes with
the server, so its numbers are a lower bound of what the server can do.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import grpc

from gateway.channels import CHANNEL_OPTIONS
from gateway.v1 import files_pb2, files_pb2_grpc


def run_worker(
    address: str,
    key: str,
    method: str,
    content: str,
    inflight: int,
    warmup: float,
    duration: float,
    barrier: Any,
    results: Any,
) -> None:
    """Entry point of one client process; puts one result dict on ``results``."""
    try:
        results.put(asyncio.run(_run(address, key, method, content, inflight, warmup, duration, barrier)))
    except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
        barrier.abort()
        results.put({"fatal": f"{type(exc).__name__}: {exc}"})


async def _run(
    address: str, key: str, method: str, content: str, inflight: int, warmup: float, duration: float, barrier: Any
) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        await asyncio.wait_for(channel.channel_ready(), 10)
        stub = files_pb2_grpc.WorkspaceFilesStub(channel)
        metadata = (("x-api-key", key),)
        if method == "GET":
            request: Any = files_pb2.GetFileRequest(agent_id="alfred", filename="MEMORY.md")
            call: Any = stub.GetFile
        else:
            request = files_pb2.PutFileRequest(agent_id="alfred", filename="MEMORY.md", content=content)
            call = stub.PutFile

        async def loop(until: float, latencies: list[float] | None, errors: Counter[str]) -> int:
            done = 0
            while time.perf_counter() < until:
                start = time.perf_counter()
                try:
                    await call(request, timeout=10, metadata=metadata)
                except grpc.aio.AioRpcError as err:
                    errors[err.code().name] += 1
                    continue
                if latencies is not None:
                    latencies.append(time.perf_counter() - start)
                done += 1
            return done

        warm_errors: Counter[str] = Counter()
        warm = await asyncio.gather(*(loop(time.perf_counter() + warmup, None, warm_errors) for _ in range(inflight)))
        barrier.wait(timeout=60)  # blocking on purpose: nothing else runs on this loop now
        latencies: list[float] = []
        errors: Counter[str] = Counter()
        start = time.perf_counter()
        counts = await asyncio.gather(*(loop(start + duration, latencies, errors) for _ in range(inflight)))
        elapsed = time.perf_counter() - start
    return {
        "count": sum(counts), "elapsed": elapsed, "latencies": latencies, "errors": dict(errors),
        # warm-up calls, for the CPU per call of a server that logs nothing (the bare one)
        "warm_count": sum(warm), "warm_errors": sum(warm_errors.values()),
    }  # fmt: skip
