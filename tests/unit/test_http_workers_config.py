"""``gateway.api.workers``: how many shim processes, their names, their metrics ports, and the key's validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import http_workers
from gateway.config import build, port_clashes, validate
from gateway.config_migrations import CURRENT_VERSION
from gateway_cli import launcher


def _raw(**api: object) -> dict[str, object]:
    return {"configVersion": CURRENT_VERSION, "gateway": {"api": api}, "agents": []}


@pytest.mark.parametrize(("cores", "workers"), [(1, 1), (2, 1), (3, 1), (4, 2), (6, 2), (16, 2), (64, 2)])
def test_auto_is_one_worker_per_two_cores_up_to_two(cores: int, workers: int) -> None:
    assert http_workers.auto_workers(cores) == workers


def test_a_cgroup_cpu_quota_caps_the_cores(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")
    assert http_workers.cores(cpu_max) == min(2, http_workers.cores(tmp_path / "none"))
    cpu_max.write_text("max 100000\n")
    assert http_workers.cores(cpu_max) == http_workers.cores(tmp_path / "none") >= 1


def test_worker_names_and_indexes_round_trip() -> None:
    assert http_workers.names(3) == ("http", "http-2", "http-3")
    assert [http_workers.index(n) for n in ("http", "http-2", "http-12")] == [1, 2, 12]
    assert [http_workers.index(n) for n in ("file_api", "http-", "http-1", "http-x", "kb-2")] == [None] * 5


def test_a_number_is_kept_and_auto_follows_the_cores() -> None:
    assert build(_raw(workers=3), Path("/h")).api.workers == 3
    assert build(_raw(), Path("/h")).api.workers == http_workers.auto_workers(http_workers.cores())


@pytest.mark.parametrize("value", [0, 65, -1, "many", 1.5, True, None, [2]])
def test_a_bad_value_is_one_line_naming_the_key(value: object) -> None:
    problems = validate(_raw(workers=value))
    assert problems == [f'gateway.api.workers: {value!r} is not "auto" nor a whole number of processes from 1 to 64'], problems


def test_worker_n_serves_its_metrics_on_the_http_port_plus_n_minus_one() -> None:
    metrics = build(_raw(), Path("/h")).metrics
    http_port = metrics.address("http")[1]  # type: ignore[index]
    assert metrics.address("http-3") == (metrics.host, http_port + 2)
    assert build(_raw(), Path("/h")).metrics.address("kb") == (metrics.host, 50063)


def test_a_worker_metrics_port_that_another_port_has_is_refused() -> None:
    raw = _raw(workers=2)
    raw["gateway"]["metrics"] = {"http": 50065, "kb": 50066}  # type: ignore[index]
    assert port_clashes(raw) == [
        "gateway.metrics.http + 1 (shim worker http-2 of gateway.api.workers): port 50066 is also gateway.metrics.kb's; "
        "two services cannot listen on one port"
    ]
    raw["gateway"]["api"]["workers"] = 1  # type: ignore[index]
    assert port_clashes(raw) == []


def test_the_launcher_runs_each_worker_on_the_one_port(tmp_path: Path) -> None:
    config = build(_raw(workers=3), tmp_path)
    names = launcher.processes(config)
    assert names == ("file_api", "watcher", "kb", "dreaming", "http", "http-2", "http-3")
    addresses = launcher.listen_addresses(config, config.api.port)
    assert addresses["http-3 metrics"] == (addresses["http metrics"][0], addresses["http metrics"][1] + 2)
    commands = launcher.commands(tmp_path, 8080, "nonce", [], names)
    assert list(commands) == list(names)
    assert commands["http"][-4:] == ["--port", "8080", "--worker", "1"]
    assert commands["http-3"][-4:] == ["--port", "8080", "--worker", "3"]
    assert "--worker" not in launcher.commands(tmp_path, 8080, "nonce", [], launcher.processes(build(_raw(workers=1), tmp_path)))["http"]
