"""A server a process needs (``gateway.dependencies``): learnt from the calls, probed only when health is
asked and the news is stale, and reported by the health service, ``/healthz`` and ``gateway health``."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway import grpc_server
from gateway.dependencies import DEPENDENCIES, DEPENDENCIES_SERVICE, Dependency
from gateway_cli import health_cli
from gateway_http.app import ShimApp
from gateway_http.descriptors import all_routes

LABEL = "the shared vault (PostgreSQL)"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_calls_outcomes_say_whether_it_is_down_and_nothing_is_probed_while_the_news_is_fresh() -> None:
    clock, probes = Clock(), []
    vault = Dependency("shared-vault", LABEL, lambda: probes.append(1) or None, clock=clock, cache_s=2)
    vault.failed("its PostgreSQL server cannot be reached")
    assert vault.check() == "its PostgreSQL server cannot be reached" and not probes
    vault.succeeded()
    assert vault.check() is None and not probes
    clock.now += 2
    assert vault.check() is None and probes == [1]  # stale: probed once, and that answer is cached
    assert vault.check() is None and probes == [1]


def test_a_probe_that_does_not_answer_in_time_leaves_the_last_news_and_finishes_on_its_own() -> None:
    clock, release = Clock(), threading.Event()

    def slow() -> str:
        release.wait(5)
        return "no connection to its PostgreSQL server in time"

    vault = Dependency("shared-vault", LABEL, slow, clock=clock)
    assert vault.check(wait_s=0.01) is None  # the last news (none yet: reachable)
    release.set()
    assert vault.check(wait_s=5) == "no connection to its PostgreSQL server in time"  # the same probe, finished
    clock.now += 0.5
    assert vault.check() == "no connection to its PostgreSQL server in time"  # fresh news: no probe


def test_a_probe_that_breaks_says_the_server_cannot_be_reached() -> None:
    def broken() -> str | None:
        raise OSError("boom")

    assert Dependency("shared-vault", LABEL, broken).check(wait_s=5) == "its check failed (OSError)"


@pytest.fixture
def vault_down() -> Iterator[Dependency]:
    vault = Dependency("shared-vault", LABEL)
    vault.failed("its PostgreSQL server cannot be reached")
    DEPENDENCIES.add(vault)
    try:
        yield vault
    finally:
        DEPENDENCIES.remove("shared-vault")


@asynccontextmanager
async def health_server() -> AsyncIterator[str]:
    server = grpc.aio.server()
    servicer = grpc_server._Health()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


def test_health_healthz_and_the_cli_name_the_dependency_and_the_process_still_serves(vault_down: Dependency) -> None:
    said = f"{LABEL}: its PostgreSQL server cannot be reached"

    async def main() -> tuple[list[int], httpx.Response, list[str]]:
        async with health_server() as address:
            async with grpc.aio.insecure_channel(address) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                statuses = [(await stub.Check(health_pb2.HealthCheckRequest(service=s))).status
                            for s in ("", DEPENDENCIES_SERVICE, f"{DEPENDENCIES_SERVICE}/shared-vault")]
            app = ShimApp({"kb": address}, tuple(r for r in all_routes() if r.backend == "kb"))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://shim") as client:
                healthz = await client.get("/healthz")
            with grpc.insecure_channel(address) as sync:
                cli = await asyncio.to_thread(health_cli._unreachable, sync)
        return statuses, healthz, cli

    statuses, healthz, cli = asyncio.run(main())
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    assert statuses == [serving, not_serving, not_serving]
    assert healthz.status_code == 200, healthz.text
    body = json.loads(healthz.text)
    assert body["status"] == "degraded" and body["dependencies"] == {"kb": [said]}, body
    assert cli == [said]
    assert health_cli._said([], cli) == f"cannot reach {said} ({health_cli.DEPENDENCY_HINT})"
    assert health_cli._body_said(body) == f"kb cannot reach {said} ({health_cli.DEPENDENCY_HINT})"


def test_a_process_with_no_dependency_reports_none() -> None:
    async def main() -> int:
        async with health_server() as address, grpc.aio.insecure_channel(address) as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=DEPENDENCIES_SERVICE))
            return int(reply.status)

    assert asyncio.run(main()) == health_pb2.HealthCheckResponse.SERVING
