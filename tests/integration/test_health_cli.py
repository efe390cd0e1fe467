"""``gateway health NAME`` against a real running suite, then against its stopped processes."""

from __future__ import annotations

import subprocess
from dataclasses import replace
import sys
from pathlib import Path

import pytest
from suite_support import Suite, env_without_home, make_home

from gateway.live_config import loader
from gateway_cli.health_cli import check
from gateway_cli.launcher import SERVICES

pytestmark = pytest.mark.integration


def health(name: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "health", name, "--home", str(home)],
                          capture_output=True, text=True, timeout=60, env={**env_without_home(), **env})


def test_health_says_serving_then_unreachable_once_stopped(tmp_path: Path) -> None:
    """One real ``gateway health`` run per outcome (serving, unreachable, the shim's backend down); the
    other processes are asked through the same ``check`` the command prints."""
    home, ports, http_port = make_home(tmp_path)
    suite = Suite(home, http_port, ports)
    addresses = {name: suite.address(name) for name in SERVICES if name != "http"} | {"http": f"127.0.0.1:{http_port}"}
    try:
        suite.start(*SERVICES)
        # compose sets GATEWAY_BIND_HOST=0.0.0.0: the probe then asks loopback
        result = health("kb", home, GATEWAY_BIND_HOST="0.0.0.0")
        assert (result.returncode, result.stdout, result.stderr) == (0, f"kb SERVING at {addresses['kb']}\n", "")
        wildcard = loader(home, {"GATEWAY_BIND_HOST": "0.0.0.0"})()
        for name in SERVICES:
            assert check(wildcard, name) == (True, f"{name} SERVING at {addresses[name]}")

        assert suite.stop("kb") == 0
        down = health("kb", home)
        assert down.returncode == 1
        assert down.stdout.startswith(f"kb unreachable at {addresses['kb']}: ") and down.stdout.count("\n") == 1
        shim = health("http", home)  # the shim is up but one of its backends is not: /healthz is 503
        assert shim.returncode == 1
        assert shim.stdout.startswith(f"http NOT_SERVING at {addresses['http']}: /healthz answered 503 (")
        assert "kb: UNAVAILABLE" in shim.stdout
        config = loader(home, {})()
        assert check(config, "file_api")[0]  # the others still serve
        # a port that another process of the suite answers on is not taken for the one asked about
        swapped = replace(config, grpc=replace(config.grpc, watcher=ports["fileApi"]))
        assert check(swapped, "watcher") == (
            False, f"watcher NOT_SERVING at {addresses['file_api']}: the server there does not serve gateway.v1.Sessions (not watcher)")
    finally:
        suite.stop_all()

    config = loader(home, {})()
    for name in SERVICES:
        serving, line = check(config, name)
        assert not serving and line.startswith(f"{name} unreachable at {addresses[name]}: "), line


def test_health_refuses_an_unknown_name(tmp_path: Path) -> None:
    result = health("files", tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "argument name: invalid choice: 'files'" in result.stderr
