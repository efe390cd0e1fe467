"""``gateway health NAME``: is that process of the suite serving? One line, exit 0 or 1.

The probe compose runs in each container (and an operator can run by hand).
It asks where the process listens, as config.json and the deployment
variables (``GATEWAY_BIND_HOST``) say: a gRPC process through
grpc.health.v1 Check of its own gRPC service's name (so another process of
the suite answering on that port is not taken for it), the REST shim through
``GET /healthz`` (which is 200 only when its backends are up; with several shim workers on the
port, whichever the kernel hands the connection answers, and the line names it). A wildcard listen address (0.0.0.0, ::) is
asked on loopback, since the probe runs beside the process. A process that serves but ran out of
open files, disk or memory recently (``gateway.resources``: its health for ``gateway.resources``),
or that cannot reach a server it needs (``gateway.dependencies``: the KB's PostgreSQL vault), is
reported DEGRADED, naming what ran out or what it cannot reach, and exits 1 too: a healthcheck flags it.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.channels import HEALTH_DEADLINE_S, sync_channel
from gateway.config import Config
from gateway.dependencies import DEPENDENCIES_SERVICE, REASON_METADATA
from gateway.resources import NAMES, RESOURCES_SERVICE
from gateway.v1 import dreaming_pb2, files_pb2, kb_pb2, watcher_pb2
from gateway_cli.launcher import SERVICES

# The gRPC service each process serves (and reports SERVING under, besides "").
GRPC_SERVICE = {
    "file_api": files_pb2.DESCRIPTOR.services_by_name["WorkspaceFiles"].full_name,
    "watcher": watcher_pb2.DESCRIPTOR.services_by_name["Sessions"].full_name,
    "kb": kb_pb2.DESCRIPTOR.services_by_name["Knowledge"].full_name,
    "dreaming": dreaming_pb2.DESCRIPTOR.services_by_name["Dreaming"].full_name,
}

# A degraded process still answers: its log and its 503 answers say more (docs/operations.md).
DEGRADED_HINT = "it answers 503 when that happens again; see its log and docs/operations.md"
# A process that cannot reach a server it needs answers every call that does not need it.
DEPENDENCY_HINT = "the calls that need it answer 503 until it is back; see docs/operations.md"
# Short enough for compose's healthcheck timeout (5 s), long enough for a loaded machine.
DEADLINE_S = 3.0
WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1", "[::]": "::1"}


def grpc_serving(address: str, service: str = "") -> bool:
    """True when the gRPC health service at ``address`` answers SERVING for ``service``
    (a server that does not know ``service`` answers NOT_FOUND: False)."""
    with sync_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=HEALTH_DEADLINE_S
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def http_healthy(url: str, instance: str | None = None) -> bool:
    """True when ``GET url`` answers 200 with status ok (and, when given, this ``instance``)."""
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_DEADLINE_S) as reply:
            body = json.load(reply)
            return bool(reply.status == 200 and body.get("status") == "ok" and (instance is None or body.get("instance") == instance))
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return False


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    health = sub.add_parser("health", help="ask one process whether it is serving; one line, exit 0 only when SERVING")
    health.add_argument("name", choices=SERVICES)
    health.add_argument("--home", help="gateway home")


def probe_address(config: Config, name: str) -> str:
    """``host:port`` to ask about ``name``: its listen address, a wildcard host made loopback."""
    if name == "http":
        host, port = config.api.host, config.api.port
    else:
        host, _, port_text = config.grpc.bind_address(name).rpartition(":")
        port = int(port_text)
    host = WILDCARDS.get(host, host)
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def check(config: Config, name: str) -> tuple[bool, str]:
    """(serving, the one line to print) for process ``name``."""
    address = probe_address(config, name)
    if name == "http":
        return _check_http(address)
    request = health_pb2.HealthCheckRequest(service=GRPC_SERVICE[name])
    with sync_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=DEADLINE_S)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"{name} unreachable at {address}: no answer within {DEADLINE_S:g} s"
            if code == grpc.StatusCode.UNAVAILABLE:
                return False, f"{name} unreachable at {address}: {_first_line(exc)}"
            if code == grpc.StatusCode.NOT_FOUND:
                return False, f"{name} NOT_SERVING at {address}: the server there does not serve {request.service} (not {name})"
            return False, f"{name} NOT_SERVING at {address}: health check answered {code.name if code else 'an error'}"
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        if status == "SERVING":
            said = _said(_degraded(channel), _unreachable(channel))
            if said:
                return False, f"{name} DEGRADED at {address}: {said}"
    return status == "SERVING", f"{name} {status} at {address}"


def _said(ran_out: list[str], unreachable: list[str]) -> str:
    """What a degraded process's line says: what it ran out of, what it cannot reach; "" for neither."""
    parts = [f"ran out of {' and '.join(ran_out)} recently ({DEGRADED_HINT})"] if ran_out else []
    parts += [f"cannot reach {what} ({DEPENDENCY_HINT})" for what in unreachable]
    return "; ".join(parts)


def _check_http(address: str) -> tuple[bool, str]:
    url = f"http://{address}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=DEADLINE_S) as reply:
            body = json.load(reply)
    except urllib.error.HTTPError as exc:  # 503: a backend is down; the body says which
        return False, f"http NOT_SERVING at {address}: /healthz answered {exc.code}{_backends(exc)}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"http unreachable at {address}: {reason}"
    except ValueError:
        return False, f"http NOT_SERVING at {address}: /healthz answered 200 without a JSON body"
    if isinstance(body, dict) and body.get("status") == "ok":
        worker = body.get("worker")  # one of gateway up's shim workers on the port (gateway.http_workers)
        return True, f"http SERVING at {address}" + (f" (answered by worker {worker})" if isinstance(worker, str) else "")
    said = _body_said(body) if isinstance(body, dict) else ""
    if said:
        return False, f"http DEGRADED at {address}: {said}"
    return False, f"http NOT_SERVING at {address}: /healthz answered {json.dumps(body)[:200]}"


def _body_said(body: dict[str, object]) -> str:
    """What a degraded /healthz body's ``resources`` and ``dependencies`` say, by backend; "" for neither."""
    parts: list[str] = []
    resources, dependencies = body.get("resources"), body.get("dependencies")
    if isinstance(resources, dict) and resources:
        said = "; ".join(f"{k} ran out of {' and '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sorted(resources.items()))
        parts.append(f"{said} recently ({DEGRADED_HINT})")
    if isinstance(dependencies, dict):
        parts += [f"{k} cannot reach {what} ({DEPENDENCY_HINT})" for k, v in sorted(dependencies.items())
                  for what in (v if isinstance(v, list) else [v])]
    return "; ".join(parts)


def _unreachable(channel: grpc.Channel) -> list[str]:
    """``label: reason`` of each server the process behind ``channel`` needs and cannot reach
    (``gateway.dependencies``); [] when it reaches them all, or does not say (an older version)."""
    try:
        reply, call = health_pb2_grpc.HealthStub(channel).Check.with_call(
            health_pb2.HealthCheckRequest(service=DEPENDENCIES_SERVICE), timeout=DEADLINE_S)
    except grpc.RpcError:
        return []
    if reply.status == health_pb2.HealthCheckResponse.SERVING:
        return []
    said = [bytes(v).decode(errors="replace") for k, v in call.trailing_metadata() or () if k == REASON_METADATA]
    return said or ["a server it needs"]


def _degraded(channel: grpc.Channel) -> list[str]:
    """What the process behind ``channel`` ran out of recently (``gateway.resources``); [] when
    nothing did, or when it does not say (an older version)."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=RESOURCES_SERVICE), timeout=DEADLINE_S)
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            return []
        out = [what for what, short in NAMES.items() if stub.Check(
            health_pb2.HealthCheckRequest(service=f"{RESOURCES_SERVICE}/{short}"), timeout=DEADLINE_S
        ).status != health_pb2.HealthCheckResponse.SERVING]
    except grpc.RpcError:
        return []
    return out or ["a resource"]


def _backends(exc: urllib.error.HTTPError) -> str:
    """`` (file_api: UNAVAILABLE)`` from a /healthz error body, or "" when it has none."""
    try:
        backends = json.load(exc).get("backends")
    except (ValueError, AttributeError, OSError):
        return ""
    if not isinstance(backends, dict) or not backends:
        return ""
    return " (" + ", ".join(f"{k}: {v}" for k, v in sorted(backends.items())) + ")"


def _first_line(exc: grpc.RpcError) -> str:
    """gRPC's reason (e.g. "failed to connect to all addresses; ..."), cut to one short line."""
    details = (exc.details() if isinstance(exc, grpc.Call) else None) or str(exc)
    lines = details.strip().splitlines()
    return lines[0][:200] if lines else "unavailable"
