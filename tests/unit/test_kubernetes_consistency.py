"""deploy/kubernetes/ agrees with the code, the Dockerfile and itself, checked without a cluster.

Each rule returns the problems it finds in a rendered kustomization (tests/kustomize_render.py),
so the same rule runs on the real manifests and on mutated copies of them: every rule is shown
to fail on the mistake it is there to catch (a port that differs from config.json's defaults, a
probe that no longer asks ``gateway health``, the Secret mounted away from the DSN file, an image
tag other than the one the Dockerfile builds, a selector that selects nothing).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kustomize_render import render

from gateway_cli.launcher import SERVICES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
SECRET = "gateway-postgres"
# Container port name → the process whose metrics port it is (gateway.metrics; names are at most 15 characters).
METRICS_PORT_NAMES = {"metrics-fileapi": "fileApi", "metrics-watcher": "watcher", "metrics-kb": "kb",
                      "metrics-dream": "dreaming", "metrics-http": "http"}

Resources = list[dict[str, Any]]


@cache
def _rendered(folder: str) -> tuple[dict[str, Any], ...]:
    return tuple(render(DEPLOY / folder))


def _fresh(folder: str = "base") -> Resources:
    return copy.deepcopy(list(_rendered(folder)))


def _one(resources: Resources, kind: str) -> dict[str, Any]:
    found = [r for r in resources if r["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _pod(resources: Resources) -> dict[str, Any]:
    return _one(resources, "StatefulSet")["spec"]["template"]["spec"]


def _main(resources: Resources) -> dict[str, Any]:
    return _pod(resources)["containers"][0]


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}


def _settings(resources: Resources) -> dict[str, Any]:
    """The ConfigMap's ``settings``: dotted config key → value, as ``gateway config set`` parses it,
    an object's members as keys of their own."""
    text = _one(resources, "ConfigMap")["data"]["settings"]
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.strip().partition(" ")
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = value
            if isinstance(out[key], dict):
                out |= {f"{key}.{member}": v for member, v in out.pop(key).items()}
    return out


@cache
def _schema_defaults() -> dict[str, int]:
    gateway = json.loads((ROOT / "gateway" / "config_schema.json").read_text(encoding="utf-8"))["properties"]["gateway"]["properties"]
    metrics = {name: spec["default"] for name, spec in gateway["metrics"]["properties"].items() if name not in ("enabled", "host")}
    return {"http": gateway["api"]["properties"]["port"]["default"], **{f"metrics.{k}": v for k, v in metrics.items()}}


def _dockerfile_tag() -> str:
    match = re.search(r"docker build -t (\S+) \.", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    assert match, "the Dockerfile no longer says which tag it is built as"
    return match.group(1)


def _dockerfile_uid() -> int:
    match = re.search(r"useradd[^\n]*--uid (\d+)", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    assert match
    return int(match.group(1))


# ---- the rules ---------------------------------------------------------------------------------

def ports_are_the_suites(resources: Resources) -> list[str]:
    defaults = _schema_defaults()
    expected = {"http": defaults["http"], **{name: defaults[f"metrics.{p}"] for name, p in METRICS_PORT_NAMES.items()}}
    problems = []
    ports = {p["name"]: p["containerPort"] for p in _main(resources).get("ports", [])}
    if ports != expected:
        problems.append(f"container ports {ports}, expected the API port and the metrics ports {expected}")
    service = next(r for r in resources if r["kind"] == "Service")
    for port in service["spec"]["ports"]:
        if expected.get(port["targetPort"]) != port["port"]:
            problems.append(f"Service port {port['name']} ({port['port']}) targets {port['targetPort']!r}, not a container port of that number")
    ingress = _one(resources, "NetworkPolicy")["spec"]["ingress"]
    opened = {(p["port"], p.get("endPort", p["port"])) for rule in ingress for p in rule["ports"]}
    metrics = sorted(v for k, v in expected.items() if k != "http")
    if opened != {(expected["http"], expected["http"]), (metrics[0], metrics[-1])} or metrics != list(range(metrics[0], metrics[-1] + 1)):
        problems.append(f"NetworkPolicy opens {sorted(opened)}, expected the API port and the metrics range {metrics}")
    return problems


def probes_ask_gateway_health(resources: Resources) -> list[str]:
    main = _main(resources)
    probes = {kind: main.get(kind, {}).get("exec", {}).get("command") for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
    problems = []
    for kind, command in probes.items():
        if not command or command[:2] != ["sh", "-c"] or not re.search(r"\bgateway health http\b", command[-1]):
            problems.append(f"{kind}: {command} does not run gateway health http")
    if len({json.dumps(c) for c in probes.values()}) != 1:
        problems.append("the three probes run different commands (they differ in timing only)")
    if "http" not in SERVICES:
        problems.append("gateway health has no process http")
    return problems


def init_container_initialises_the_home(resources: Resources) -> list[str]:
    pod = _pod(resources)
    inits = pod.get("initContainers", [])
    if len(inits) != 1:
        return [f"expected one init container, found {len(inits)}"]
    init, problems = inits[0], []
    config_map = _one(resources, "ConfigMap")
    script = config_map["data"].get("init-host.sh", "")
    mount = _mounts(init).get("host-settings")
    if init.get("command") != ["sh", f"{mount}/init-host.sh"]:
        problems.append(f"init container runs {init.get('command')}, not the ConfigMap's init-host.sh at {mount}")
    if not re.search(r"^gateway init$", script, re.MULTILINE):
        problems.append("init-host.sh does not run gateway init")
    volume = next((v for v in pod["volumes"] if v["name"] == "host-settings"), {})
    if volume.get("configMap", {}).get("name") != config_map["metadata"]["name"]:
        problems.append("the host-settings volume is not the ConfigMap")
    if {i["key"] for i in volume.get("configMap", {}).get("items", [])} != set(config_map["data"]):
        problems.append("the host-settings volume does not carry every key of the ConfigMap")
    return problems


def the_home_is_the_claim(resources: Resources) -> list[str]:
    statefulset = _one(resources, "StatefulSet")
    claims = [c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]]
    problems = [] if claims == ["home"] else [f"volumeClaimTemplates {claims}, expected one: home"]
    pod = _pod(resources)
    for container in pod["initContainers"] + pod["containers"]:
        home = _env(container).get("GATEWAY_HOME")
        if home is None or _mounts(container).get("home") != home:
            problems.append(f"{container['name']}: GATEWAY_HOME {home!r} is not where the home claim is mounted")
    return problems


def the_secret_is_where_dsn_file_points(resources: Resources) -> list[str]:
    settings, main = _settings(resources), _main(resources)
    dsn_file = PurePosixPath(str(settings.get("gateway.knowledge.shared.postgres.dsnFile")))
    problems = []
    if settings.get("gateway.knowledge.shared.backend") != "postgres":
        problems.append("the settings do not choose the postgres backend")
    mounted = {path: name for name, path in _mounts(main).items()}
    volume_name = mounted.get(str(dsn_file.parent))
    volume = next((v for v in _pod(resources)["volumes"] if v["name"] == volume_name), {})
    files = {i["path"]: (s["secret"]["name"], i["key"]) for s in volume.get("projected", {}).get("sources", []) for i in s["secret"]["items"]}
    if dsn_file.name not in files:
        problems.append(f"dsnFile {dsn_file} is in no Secret mounted in the gateway container ({files or 'nothing'} at {dsn_file.parent})")
    root_cert = PurePosixPath(_env(main).get("PGSSLROOTCERT", ""))
    if _env(main).get("PGSSLMODE") != "verify-full" or root_cert.parent != dsn_file.parent or root_cert.name not in files:
        problems.append(f"PGSSLMODE is not verify-full, or PGSSLROOTCERT {root_cert} is not the mounted CA")
    secrets = [r for r in resources if r["kind"] == "Secret"]
    if [s["metadata"]["name"] for s in secrets] not in ([], [SECRET]):
        problems.append(f"Secrets {[s['metadata']['name'] for s in secrets]}, expected none (the operator's) or {SECRET}")
    for secret in secrets:
        if set(secret.get("stringData", {})) != {key for name, key in files.values() if name == SECRET}:
            problems.append(f"Secret {SECRET} holds {sorted(secret.get('stringData', {}))}, the volume mounts {sorted(files)}")
        query = parse_qs(urlsplit(secret["stringData"].get("dsn", "")).query)
        if query.get("sslmode") != ["verify-full"] or query.get("sslrootcert") != [str(root_cert)]:
            problems.append(f"the example DSN does not verify the server against {root_cert}")
    return problems


def the_image_is_the_dockerfiles(resources: Resources) -> list[str]:
    tag, pod = _dockerfile_tag(), _pod(resources)
    problems = []
    for container in pod["initContainers"] + pod["containers"]:
        image = container["image"]
        if image != tag or image.endswith(":latest") or ":" not in image:
            problems.append(f"{container['name']}: image {image!r}, expected the Dockerfile's {tag!r} (never latest)")
    return problems


def labels_and_selectors_agree(resources: Resources) -> list[str]:
    statefulset = _one(resources, "StatefulSet")
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    selectors = {
        "StatefulSet selector": statefulset["spec"]["selector"]["matchLabels"],
        "Service selector": _one(resources, "Service")["spec"]["selector"],
        "NetworkPolicy podSelector": _one(resources, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
    }
    problems = [f"{what} {sel} does not select the pods ({labels})" for what, sel in selectors.items() if not sel or sel.items() - labels.items()]
    service = _one(resources, "Service")
    if statefulset["spec"]["serviceName"] != service["metadata"]["name"] or service["spec"].get("clusterIP") != "None":
        problems.append("the StatefulSet's serviceName is not the headless Service: hosts would have no stable names")
    host = re.compile(re.escape(statefulset["metadata"]["name"]) + r"-\d+")
    table = _one(resources, "ConfigMap")["data"]["agents"]
    for line in table.splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#") and (len(fields) != 2 or not host.fullmatch(fields[1])):
            problems.append(f"agents: {line!r} is not AGENT {statefulset['metadata']['name']}-N")
    return problems


def pods_run_locked_down(resources: Resources) -> list[str]:
    pod = _pod(resources)
    security = pod.get("securityContext", {})
    problems = []
    if not security.get("runAsNonRoot") or security.get("runAsUser") != _dockerfile_uid() or security.get("fsGroup") != _dockerfile_uid():
        problems.append(f"pod securityContext {security}: not the Dockerfile's non-root user and group")
    if security.get("seccompProfile") != {"type": "RuntimeDefault"}:
        problems.append("the pod's seccomp profile is not RuntimeDefault")
    for container in pod["initContainers"] + pod["containers"]:
        context = container.get("securityContext", {})
        if context != {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}:
            problems.append(f"{container['name']}: securityContext {context}")
        if "memory" not in container.get("resources", {}).get("limits", {}) or "requests" not in container.get("resources", {}):
            problems.append(f"{container['name']}: no resource requests or memory limit")
    if pod.get("automountServiceAccountToken") is not False:
        problems.append("the pod mounts a service account token it never uses")
    return problems


RULES: tuple[Callable[[Resources], list[str]], ...] = (
    ports_are_the_suites, probes_ask_gateway_health, init_container_initialises_the_home, the_home_is_the_claim,
    the_secret_is_where_dsn_file_points, the_image_is_the_dockerfiles, labels_and_selectors_agree, pods_run_locked_down,
)


@pytest.mark.parametrize("folder", ["base", "examples/external-postgres"])
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_the_manifests_keep_the_rule(rule: Callable[[Resources], list[str]], folder: str) -> None:
    assert rule(_fresh(folder)) == []


def _set_port(resources: Resources) -> None:
    _main(resources)["ports"][0]["containerPort"] = 8080


def _grpc_port(resources: Resources) -> None:
    _main(resources)["ports"].append({"name": "kb", "containerPort": 50053})


def _probe_curl(resources: Resources) -> None:
    _main(resources)["livenessProbe"]["exec"]["command"] = ["sh", "-c", "curl -f http://127.0.0.1:10850/healthz"]


def _init_skipped(resources: Resources) -> None:
    config_map = _one(resources, "ConfigMap")
    config_map["data"]["init-host.sh"] = config_map["data"]["init-host.sh"].replace("gateway init\n", "")


def _home_elsewhere(resources: Resources) -> None:
    _main(resources)["volumeMounts"][0]["mountPath"] = "/home/gateway"


def _dsn_elsewhere(resources: Resources) -> None:
    config_map = _one(resources, "ConfigMap")
    config_map["data"]["settings"] = config_map["data"]["settings"].replace("/etc/gateway/postgres/dsn", "/etc/postgres/dsn")


def _latest(resources: Resources) -> None:
    _pod(resources)["initContainers"][0]["image"] = "claude-gateway:latest"


def _selector_typo(resources: Resources) -> None:
    _one(resources, "Service")["spec"]["selector"]["app.kubernetes.io/component"] = "agent-hosts"


def _root(resources: Resources) -> None:
    _main(resources)["securityContext"]["readOnlyRootFilesystem"] = False


MUTATIONS = [
    (ports_are_the_suites, _set_port, "container ports"),
    (ports_are_the_suites, _grpc_port, "container ports"),
    (probes_ask_gateway_health, _probe_curl, "livenessProbe"),
    (init_container_initialises_the_home, _init_skipped, "does not run gateway init"),
    (the_home_is_the_claim, _home_elsewhere, "GATEWAY_HOME"),
    (the_secret_is_where_dsn_file_points, _dsn_elsewhere, "dsnFile /etc/postgres/dsn"),
    (the_image_is_the_dockerfiles, _latest, "never latest"),
    (labels_and_selectors_agree, _selector_typo, "Service selector"),
    (pods_run_locked_down, _root, "securityContext"),
]


@pytest.mark.parametrize(("rule", "mutate", "expected"), MUTATIONS, ids=lambda v: getattr(v, "__name__", ""))
def test_each_rule_fails_on_the_mistake_it_catches(rule: Callable[[Resources], list[str]], mutate: Callable[[Resources], None], expected: str) -> None:
    resources = _fresh()
    mutate(resources)
    problems = rule(resources)
    assert problems and any(expected in p for p in problems), problems


def test_the_image_tag_is_composes_too() -> None:
    assert f"image: {_dockerfile_tag()}" in (ROOT / "compose.yaml").read_text(encoding="utf-8")
