"""The shell that deploy/kubernetes/ runs in a host's pod, run here with ``sh`` and the real CLI.

The probes (``gateway health http``, DEGRADED passing) are run against a stand-in ``gateway``
that prints each answer the real one gives, and against the real one with nothing listening. The
init container's init-host.sh runs on a temporary home as two starts of one host would.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kustomize_render import render

from gateway.config import schema

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "kubernetes" / "base"
# Added to config.json's schema with the PostgreSQL vault store; until then init-host.sh runs without them.


def _base() -> list[dict[str, Any]]:
    return render(BASE)


def _probe() -> list[str]:
    statefulset = next(r for r in _base() if r["kind"] == "StatefulSet")
    command: list[str] = statefulset["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    return command


def _config_map() -> dict[str, str]:
    data: dict[str, str] = next(r for r in _base() if r["kind"] == "ConfigMap")["data"]
    return data


def _environment(tmp_path: Path, path_first: Path | None = None) -> dict[str, str]:
    """The test's environment for the CLI: this worktree's code, the venv's ``gateway`` on PATH."""
    path = os.pathsep.join(str(p) for p in (path_first, Path(sys.executable).parent) if p)
    return {**os.environ, "PATH": f"{path}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT),
            "GATEWAY_HOME": str(tmp_path / "home"), "GATEWAY_BIND_HOST": ""}


def _stand_in(tmp_path: Path, line: str, code: int) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "gateway"
    script.write_text(f"#!/bin/sh\necho '{line}'\nexit {code}\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


@pytest.mark.parametrize(("line", "code", "passes"), [
    ("http SERVING at 127.0.0.1:10850", 0, True),
    ("http DEGRADED at 127.0.0.1:10850: kb ran out of open files recently (…)", 1, True),
    ("http NOT_SERVING at 127.0.0.1:10850: /healthz answered 503 (kb: UNAVAILABLE)", 1, False),
    ("http unreachable at 127.0.0.1:10850: [Errno 111] Connection refused", 1, False),
])
def test_the_probe_passes_serving_and_degraded_only(tmp_path: Path, line: str, code: int, passes: bool) -> None:
    result = subprocess.run(_probe(), env=_environment(tmp_path, _stand_in(tmp_path, line, code)), capture_output=True, text=True, timeout=30)
    assert (result.returncode == 0) is passes, result
    assert result.stdout == ("" if passes else line + "\n")


def test_the_probe_fails_when_nothing_listens(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    subprocess.run(["gateway", "init"], env=env, capture_output=True, check=True, timeout=60)
    subprocess.run(["gateway", "config", "set", "gateway.api.port", "9"], env=env, capture_output=True, check=True, timeout=60)
    result = subprocess.run(_probe(), env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stdout.startswith("http unreachable at 127.0.0.1:9"), result


def _known(key: str, node: Any = None) -> bool:
    """Whether the dotted ``key`` names a property of config.json's schema (through $ref and its
    oneOf/anyOf/allOf branches)."""
    node = schema() if node is None else node
    while "$ref" in node:
        node = schema()["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    head, _, rest = key.partition(".")
    branches = [b for word in ("oneOf", "anyOf", "allOf") for b in node.get(word, [])]
    if any(_known(key, branch) for branch in branches):
        return True
    child = node.get("properties", {}).get(head)
    return child is not None and (not rest or _known(rest, child))


def _settings_keys() -> list[str]:
    lines = _config_map()["settings"].splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_every_setting_is_a_config_key() -> None:
    unknown = [key for key in _settings_keys() if not _known(key)]
    assert unknown == []


def _lay_out(tmp_path: Path, agents: str) -> Path:
    """The ConfigMap's files as the init container sees them, the settings this schema knows."""
    folder = tmp_path / "etc"
    folder.mkdir()
    data = _config_map()
    settings = [line for line in data["settings"].splitlines() if not line.strip() or line.lstrip().startswith("#") or _known(line.split()[0])]
    (folder / "settings").write_text("\n".join(settings) + "\n", encoding="utf-8")
    (folder / "agents").write_text(data["agents"] + agents, encoding="utf-8")
    (folder / "init-host.sh").write_text(data["init-host.sh"], encoding="utf-8")
    return folder / "init-host.sh"


def test_init_host_sets_up_a_home_once_and_adds_this_hosts_agents(tmp_path: Path) -> None:
    script = _lay_out(tmp_path, "bob gateway-host-1\ncarol gateway-host-0\n")
    env = {**_environment(tmp_path), "HOSTNAME": "gateway-host-0"}
    first = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "admin key, shown once" in first.stdout
    config = json.loads((tmp_path / "home" / "config.json").read_text(encoding="utf-8"))
    assert [a["id"] for a in config["agents"]] == ["alfred", "carol"]
    assert config["gateway"]["api"]["host"] == "0.0.0.0" and config["gateway"]["metrics"]["host"] == "0.0.0.0"
    assert "grpc" not in config["gateway"] or config["gateway"]["grpc"].get("host", "127.0.0.1") == "127.0.0.1"

    again = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "already initialised" in again.stdout and "admin key" not in again.stdout
    assert json.loads((tmp_path / "home" / "config.json").read_text(encoding="utf-8"))["agents"] == config["agents"]


def test_init_host_stops_on_a_setting_the_config_refuses(tmp_path: Path) -> None:
    script = _lay_out(tmp_path, "")
    settings = script.parent / "settings"
    settings.write_text(settings.read_text(encoding="utf-8") + "gateway.api.port 70000\n", encoding="utf-8")
    result = subprocess.run(["sh", str(script)], env={**_environment(tmp_path), "HOSTNAME": "gateway-host-0"},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "gateway.api.port" in result.stderr
