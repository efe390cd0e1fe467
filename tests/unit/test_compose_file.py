"""compose.yaml and the Dockerfile, checked without a Docker engine.

The compose file is validated against the Compose Specification's JSON schema
(tests/data/compose-spec.json, draft-07), and its services share one image
and one home. test_compose_consistency.py checks commands, health checks,
ports and environment against the code.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

import gateway.live_config
import gateway_cli.cli
import gateway_cli.launcher
import gateway_cli.serve

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose.yaml"
SPEC_SCHEMA = REPO / "tests" / "data" / "compose-spec.json"
CONFIG_SCHEMA = REPO / "gateway" / "config_schema.json"

HOST_VAR = re.compile(r"^GATEWAY_([A-Z0-9_]+)_HOST$")


@cache
def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "compose.yaml must be a mapping"
    return loaded


def _services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    assert isinstance(services, dict)
    return services


def _config_defaults() -> dict[str, Any]:
    schema = json.loads(CONFIG_SCHEMA.read_text(encoding="utf-8"))
    gateway_props = schema["properties"]["gateway"]["properties"]
    return {
        "api.port": gateway_props["api"]["properties"]["port"]["default"],
        "grpc": {k: v["default"] for k, v in gateway_props["grpc"]["properties"].items() if k != "host"},
    }


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _published(service: dict[str, Any]) -> list[tuple[int, int]]:
    """(host port, container port) for each published port, short or long syntax."""
    out = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            out.append((int(entry["published"]), int(entry["target"])))
        else:
            *host, target = str(entry).split(":")
            out.append((int(host[-1]), int(target.split("/")[0])))
    return out


def test_compose_file_is_valid_against_the_compose_spec() -> None:
    schema = json.loads(SPEC_SCHEMA.read_text(encoding="utf-8"))
    assert "draft-07" in schema["$schema"]
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(_compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def test_the_schema_catches_a_broken_compose_file() -> None:
    """The validation above is not vacuous: a misspelt key fails it."""
    schema = json.loads(SPEC_SCHEMA.read_text(encoding="utf-8"))
    broken = {"services": {"file_api": {"image": "x", "comand": ["serve", "file_api"]}}}
    assert not jsonschema.Draft7Validator(schema).is_valid(broken)


def test_cli_serve_choices_match_serve_names() -> None:
    parser = gateway_cli.cli._parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    serve = subparsers.choices["serve"]  # type: ignore[index]
    name_arg = next(a for a in serve._actions if a.dest == "name")
    assert tuple(name_arg.choices) == tuple(gateway_cli.serve.SERVE_NAMES)


def test_every_service_uses_the_one_image_and_the_shared_home() -> None:
    services = _services()
    images = {s.get("image") for s in services.values()}
    assert len(images) == 1, f"one image for every service, got {images}"
    volumes = _compose().get("volumes") or {}
    for name, service in services.items():
        assert service["build"]["context"] == "."
        assert service["build"].get("dockerfile", "Dockerfile") == "Dockerfile"
        env = _environment(service)
        assert env["GATEWAY_HOME"] == "/data", name
        assert env["GATEWAY_BIND_HOST"] == "0.0.0.0", name
        mounts = [str(v) for v in service.get("volumes", [])]
        assert any(m.endswith(":/data") for m in mounts), f"{name} does not mount the home at /data"
        for mount in mounts:
            source = mount.split(":", 1)[0]
            assert source in volumes, f"{name} mounts {source!r}, not a named volume of this file"
        if name == "init":  # the one-shot: it exits by itself
            continue
        assert service["restart"] == "unless-stopped"
        assert service["stop_signal"] == "SIGTERM"
        assert service.get("stop_grace_period")


def test_every_server_runs_serve_through_python_m_gateway_cli() -> None:
    # gateway_cli.__main__ hands serve to gateway_cli.serve: the service's own stack, not every command's.
    for name, service in _services().items():
        if name != "init":
            assert service.get("entrypoint") == ["python", "-m", "gateway_cli"], name
            assert service["command"] == ["serve", name], name


def test_http_publishes_the_default_api_port() -> None:
    port = _config_defaults()["api.port"]
    assert port == 10850
    assert (port, port) in _published(_services()["http"])


def test_only_the_shim_is_published() -> None:
    published = {name for name, s in _services().items() if _published(s)}
    assert published == {"http"}


def test_peer_host_variables_name_existing_services() -> None:
    services = _services()
    seen = set()
    for name, service in services.items():
        for var, value in _environment(service).items():
            match = HOST_VAR.match(var)
            if not match or var == "GATEWAY_BIND_HOST":
                continue
            peer = match.group(1).lower()
            assert peer in gateway.live_config.GRPC_SERVICES, f"{name}: {var} names no gRPC service"
            assert value == peer, f"{name}: {var}={value}, expected the service name {peer}"
            assert value in services, f"{name}: {var}={value} is not a service of compose.yaml"
            seen.add(peer)
    # Every gRPC service that runs in compose is reachable by its peers.
    assert {n for n in gateway_cli.launcher.GRPC_SERVICES} <= seen


def test_dockerignore_keeps_local_state_out() -> None:
    ignored = {ln.strip() for ln in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()}
    assert {".venv", "var", ".git"} <= ignored
