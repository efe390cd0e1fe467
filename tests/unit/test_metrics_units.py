"""Metrics: the ``gateway.metrics`` block, the registry helpers and the closed label sets."""

from __future__ import annotations

import ast
import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config import build
from gateway.errors import ConfigError
from gateway.ports import BindError
from gateway.live_config import with_deployment
from gateway import metrics
from gateway.metrics import REGISTRY, exposition, observe_rpc
from gateway.metrics_port import open_metrics
from gateway_http.app import ShimApp
from services.dreaming.records.metrics import reason_code, run_outcome
from services.dreaming.model.values import OpResult, Proposal, RunReport

ROOT = Path(__file__).resolve().parents[2]


def problems_of(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        build(raw, Path("/h"))
    return info.value.problems


def test_the_metrics_block_takes_its_defaults_and_the_grpc_host() -> None:
    config = build({}, Path("/h"))
    assert config.metrics.enabled is True
    assert [config.metrics.address(p) for p in ("file_api", "watcher", "kb", "dreaming", "http")] == [
        ("127.0.0.1", 50061), ("127.0.0.1", 50062), ("127.0.0.1", 50063), ("127.0.0.1", 50064), ("127.0.0.1", 50065)
    ]
    assert build({"gateway": {"grpc": {"host": "10.0.0.7"}}}, Path("/h")).metrics.address("kb") == ("10.0.0.7", 50063)
    own = build({"gateway": {"grpc": {"host": "10.0.0.7"}, "metrics": {"host": "127.0.0.2", "kb": 9100}}}, Path("/h"))
    assert own.metrics.address("kb") == ("127.0.0.2", 9100)
    assert build({"gateway": {"metrics": {"enabled": False}}}, Path("/h")).metrics.address("kb") is None
    assert with_deployment(own, {"GATEWAY_BIND_HOST": "0.0.0.0"}).metrics.address("kb") == ("0.0.0.0", 9100)


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"kb": 70000}, "gateway.metrics.kb: 70000 is greater than the maximum of 65535"),
        ({"http": "9100"}, "gateway.metrics.http: '9100' is not of type 'integer'"),
        ({"enabled": "yes"}, "gateway.metrics.enabled: 'yes' is not of type 'boolean'"),
        ({"host": ""}, "gateway.metrics.host: '' is too short: at least 1 character"),
        ({"bogus": 1}, "gateway.metrics: unknown key ('bogus' was unexpected)"),
        ({"kb": 50053}, "gateway.metrics.kb: port 50053 is also gateway.grpc.kb's; two services cannot listen on one port"),
    ],
)
def test_a_bad_metrics_block_names_the_field(block: dict[str, Any], problem: str) -> None:
    assert problems_of({"gateway": {"metrics": block}}) == [problem]


def test_metrics_off_clash_with_nothing() -> None:
    assert build({"gateway": {"metrics": {"enabled": False, "kb": 50053}}}, Path("/h")).metrics.enabled is False


def test_the_metrics_port_answers_the_registry_and_refuses_a_busy_port_in_one_line() -> None:
    assert open_metrics("kb", None) is None
    observe_rpc("UnitProbe", "OK", 0.002)
    port = open_metrics("kb", ("127.0.0.1", 0))
    assert port is not None
    number = int(port.address.rsplit(":", 1)[1])
    with pytest.raises(BindError) as info:
        open_metrics("kb", ("127.0.0.1", number))
    assert str(info.value).startswith(f"kb metrics (gateway.metrics): 127.0.0.1:{number} is already in use")

    async def scrape() -> str:
        await port.start()
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                return (await client.get(f"http://{port.address}/metrics")).text
        finally:
            await port.close()

    assert 'gateway_rpc_duration_seconds_count{code="OK",method="UnitProbe"}' in asyncio.run(scrape())


def count(name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(exposition()[0].decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def test_observe_rpc_counts_each_call_and_is_cheap() -> None:
    before = count("gateway_rpc_duration_seconds_count", method="UnitCost", code="NOT_FOUND")
    calls = 100_000
    start = time.perf_counter()
    for _ in range(calls):
        observe_rpc("UnitCost", "NOT_FOUND", 0.0001)
    per_call_us = (time.perf_counter() - start) / calls * 1e6
    assert count("gateway_rpc_duration_seconds_count", method="UnitCost", code="NOT_FOUND") == before + calls
    print(f"observe_rpc: {per_call_us:.2f} us per observation")  # reported, not asserted (a noisy machine)


def test_a_queued_observation_is_applied_before_any_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # Requests queue their observations; a read (a scrape, exposition, get_sample_value) applies them first.
    def sample() -> float | None:
        return REGISTRY.get_sample_value("gateway_rpc_duration_seconds_count", {"method": "UnitQueued", "code": "OK"})

    before = sample() or 0.0
    observe_rpc("UnitQueued", "OK", 0.001)
    assert len(metrics._pending.observations) >= 1  # queued, not applied
    assert sample() == before + 1
    assert metrics._pending.observations == []
    monkeypatch.setattr(metrics, "MAX_PENDING", 3)
    for _ in range(3):
        observe_rpc("UnitQueued", "OK", 0.001)
    assert metrics._pending.observations == []  # the third filled the queue: applied at once
    assert count("gateway_rpc_duration_seconds_count", method="UnitQueued", code="OK") == before + 4


def test_every_name_in_the_registry_starts_with_gateway() -> None:
    assert all(f.name.startswith("gateway_") for f in REGISTRY.collect())


def _opening_words(path: Path, exception: str) -> list[str]:
    """The literal start of every ``raise exception(...)`` message in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == exception and node.args:
            first = node.args[0]
            part = first.values[0] if isinstance(first, ast.JoinedStr) else first
            out.append(part.value if isinstance(part, ast.Constant) else "'{p.file!r}' is not a memory file")
    return out


def test_every_reason_the_applier_gives_has_a_code() -> None:
    openings = _opening_words(ROOT / "services" / "dreaming" / "apply" / "applier.py", "_Skip")
    assert len(openings) >= 12
    assert [o for o in openings if reason_code(o) == "other"] == []
    assert reason_code("aborted: MEMORY.md changed since the run read it") == "aborted_cas"
    assert reason_code("the same op was proposed twice in this run") == "duplicate"
    assert reason_code("'notes.txt' is not a memory file (MEMORY.md or USER.md)") == "not_memory_file"
    assert reason_code("something nobody wrote down") == "other"


def _report(status: str, *ops: tuple[str, str]) -> RunReport:
    proposal = Proposal(op="add", file="MEMORY.md", content="x", reason="r")
    return RunReport(run_id="r", agent_id="a", mode="auto", trigger="manual", status=status,
                     ops=tuple(OpResult(f"r/{i}", proposal, s, why) for i, (s, why) in enumerate(ops)))


def test_run_outcomes_are_a_closed_set_with_cas_aborts_first() -> None:
    assert run_outcome(_report("applied", ("applied", ""))) == "applied"
    assert run_outcome(_report("applied", ("applied", ""), ("skipped", "aborted: USER.md changed"))) == "aborted_cas"
    assert run_outcome(_report("nothing")) == "skipped"
    assert run_outcome(_report("proposed")) == "proposed"
    assert run_outcome(_report("interrupted")) == "failed"
    assert run_outcome(_report("failed")) == "failed"


def test_the_shim_labels_a_route_by_its_template_never_the_raw_path() -> None:
    app = ShimApp({"file_api": f"127.0.0.1:{_closed_port()}"})

    async def calls() -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shim") as client:
            assert (await client.get("/api/v1/agents/alfred/secret-unit-name/x")).status_code == 404
            too_long = {"X-Api-Key": "k" * 5000}  # refused by the shim itself, after the route matched
            assert (await client.get("/api/v1/agents/alfred/files/SOUL.md", headers=too_long)).status_code == 401
            metrics = await client.get("/metrics")
            assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
            return metrics.text

    text = asyncio.run(calls())
    assert 'route="unmatched"' in text and "secret-unit-name" not in text
    assert 'gateway_http_requests_total{method="GET",route="/api/v1/agents/{agent_id}/files/{filename}",status="401"}' in text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
