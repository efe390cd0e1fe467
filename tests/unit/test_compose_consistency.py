"""compose.yaml and the Dockerfile agree with the code, checked without a Docker engine.

Each rule is a function returning the problems it finds in a compose document
(or a Dockerfile's text), so the same rule runs on the real file and on
mutated copies of it: every rule is shown to fail on the mistake it is
there to catch (a renamed subcommand, a missing process, a port that differs
from config.json's defaults, a base image without its digest, a COPY of a path
the repository lacks, ...). ``docker compose config`` runs too when
the ``docker`` CLI and its compose plugin are installed.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

import gateway_cli.cli
import gateway_cli.launcher

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
CODE_DIRS = ("gateway", "services", "gateway_http", "gateway_mcp")
# The metrics ports of the shared contract (gateway.metrics), used until the config schema has them.
METRICS_PORTS = {"file_api": 50061, "watcher": 50062, "kb": 50063, "dreaming": 50064, "http": 50065}
BUILD_TOOLS = re.compile(r"\b(apt-get|apt|apk|gcc|g\+\+|make|build-essential|pip|pip3)\b")
# A base image pinned by tag and digest: python:3.11-slim@sha256:<64 hex> (a registry path may come first).
PINNED_IMAGE = re.compile(r"[^\s:@]+:[\w][\w.-]*@sha256:[0-9a-f]{64}")

Doc = dict[str, Any]


@cache
def _compose_text() -> str:
    return COMPOSE_FILE.read_text(encoding="utf-8")


def _compose() -> Doc:
    loaded = yaml.safe_load(_compose_text())
    assert isinstance(loaded, dict)
    return loaded


def _subcommands() -> dict[str, Any]:
    """Subcommand name → its argparse parser, from the real ``gateway`` parser."""
    action = next(a for a in gateway_cli.cli._parser()._actions if a.dest == "command")
    return dict(action.choices)  # type: ignore[arg-type]


def _choices(command: str, dest: str = "name") -> tuple[str, ...]:
    parser = _subcommands()[command]
    return tuple(next(a for a in parser._actions if a.dest == dest).choices)


@cache
def _config_defaults() -> dict[str, int]:
    """Process → default port, from gateway/config_schema.json."""
    schema = json.loads((REPO / "gateway" / "config_schema.json").read_text(encoding="utf-8"))
    props = schema["properties"]["gateway"]["properties"]
    grpc = props["grpc"]["properties"]
    ports = {name: grpc[_camel(name)]["default"] for name in gateway_cli.launcher.GRPC_SERVICES}
    return {**ports, "http": props["api"]["properties"]["port"]["default"]}


def _metrics_defaults() -> dict[str, int]:
    schema = json.loads((REPO / "gateway" / "config_schema.json").read_text(encoding="utf-8"))
    metrics = schema["properties"]["gateway"]["properties"].get("metrics", {}).get("properties", {})
    found = {name: metrics[_camel(name)]["default"] for name in METRICS_PORTS if "default" in metrics.get(_camel(name), {})}
    return found or METRICS_PORTS


@cache
def _variables_read() -> frozenset[str]:
    """Every GATEWAY_* variable the code reads: literal names, and the names it builds as
    ``f"GATEWAY_{name.upper()}_HOST"`` for each gRPC process."""
    text = "\n".join(p.read_text(encoding="utf-8") for d in CODE_DIRS for p in (REPO / d).rglob("*.py"))
    names = set(re.findall(r"\bGATEWAY_[A-Z0-9_]*[A-Z0-9]\b", text))
    for suffix in re.findall(r'f"GATEWAY_\{name\.upper\(\)\}_([A-Z]+)"', text):
        names |= {f"GATEWAY_{n.upper()}_{suffix}" for n in gateway_cli.launcher.GRPC_SERVICES}
    return frozenset(names)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _argv(value: Any) -> list[str]:
    return value.split() if isinstance(value, str) else [str(v) for v in value or []]


def _servers(doc: Doc) -> dict[str, Doc]:
    """Every service but the one-shot init."""
    return {name: s for name, s in doc.get("services", {}).items() if _argv(s.get("command")) != ["init"]}


def _published(service: Doc) -> list[tuple[int, int]]:
    out = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            out.append((int(entry["published"]), int(entry["target"])))
        else:
            *host, target = str(entry).split(":")
            out.append((int(host[-1]) if host else int(target), int(target.split("/")[0])))
    return out


def _depends(service: Doc) -> dict[str, str]:
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        return {d: "service_started" for d in depends}
    return {k: v.get("condition", "service_started") for k, v in depends.items()}


# ---- the rules ---------------------------------------------------------------------------------

def every_process_is_served(doc: Doc) -> list[str]:
    problems = []
    subcommands = _subcommands()
    serve_choices = _choices("serve")
    commands = {name: _argv(s.get("command")) for name, s in _servers(doc).items()}
    for process in gateway_cli.launcher.SERVICES:
        if commands.get(process) != ["serve", process]:
            problems.append(f"no service {process!r} with command serve {process} (gateway up starts it)")
    for name, argv in commands.items():
        if not argv or argv[0] not in subcommands:
            problems.append(f"{name}: command {argv} is no gateway subcommand")
        elif argv[0] != "serve" or argv[1:] != [name] or name not in serve_choices:
            problems.append(f"{name}: command {argv} is not serve {name}")
    return problems


def init_runs_once_before_the_rest(doc: Doc) -> list[str]:
    services = doc.get("services", {})
    inits = [name for name, s in services.items() if _argv(s.get("command")) == ["init"]]
    if inits != ["init"] or "init" not in _subcommands():
        return [f"expected one service init with command [init] (a gateway subcommand), found {inits}"]
    problems = []
    if str(services["init"].get("restart")) != "no":
        problems.append("init: restart must be \"no\" (a one-shot)")
    if services["init"].get("depends_on") or services["init"].get("healthcheck"):
        problems.append("init depends on nothing and has no health check")
    for name, service in _servers(doc).items():
        if _depends(service).get("init") != "service_completed_successfully":
            problems.append(f"{name} does not wait for init to complete successfully")
        if service.get("restart") not in ("unless-stopped", "always"):
            problems.append(f"{name}: restart {service.get('restart')!r}, expected unless-stopped")
    return problems


def health_checks_probe_their_own_process(doc: Doc) -> list[str]:
    problems = []
    targets = _choices("health")
    for name, service in _servers(doc).items():
        test = (service.get("healthcheck") or {}).get("test")
        if test != ["CMD", "gateway", "health", name] or name not in targets:
            problems.append(f"{name}: healthcheck {test}, expected [CMD, gateway, health, {name}]")
    return problems


def the_shim_waits_for_healthy_backends(doc: Doc) -> list[str]:
    depends = _depends(doc.get("services", {}).get("http", {}))
    return [
        f"http does not wait for {backend} to be healthy"
        for backend in gateway_cli.launcher.GRPC_SERVICES
        if depends.get(backend) != "service_healthy"
    ]


def environment_is_read_by_the_code(doc: Doc) -> list[str]:
    problems = []
    services = doc.get("services", {})
    read = _variables_read()
    for name, service in services.items():
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        for var, value in env.items():
            if var not in read:
                problems.append(f"{name}: {var} is set but no code reads it")
            peer = re.fullmatch(r"GATEWAY_([A-Z_]+)_HOST", var)
            if peer and var != "GATEWAY_BIND_HOST" and value not in services:
                problems.append(f"{name}: {var}={value} names no service")
            elif peer and var != "GATEWAY_BIND_HOST" and _argv(services[value].get("command")) != ["serve", peer.group(1).lower()]:
                problems.append(f"{name}: {var}={value}, which does not serve {peer.group(1).lower()}")
        mounts = [str(v) for v in service.get("volumes") or []]
        if env.get("GATEWAY_HOME") is None or not any(m.split(":")[1:2] == [env["GATEWAY_HOME"]] for m in mounts):
            problems.append(f"{name}: GATEWAY_HOME is not where the home volume is mounted")
    return problems


def ports_match_the_config_defaults(doc: Doc) -> list[str]:
    problems = []
    defaults = _config_defaults()
    for name, service in doc.get("services", {}).items():
        published = _published(service)
        if name != "http" and published:
            problems.append(f"{name} publishes {published}: only the shim's port is published")
    if _published(doc.get("services", {}).get("http", {})) != [(defaults["http"], defaults["http"])]:
        problems.append(f"http must publish {defaults['http']}:{defaults['http']} (gateway.api.port's default)")
    metrics = _metrics_defaults()
    for name, service in _servers(doc).items():
        exposed = [int(str(p).split("/")[0]) for p in service.get("expose") or []]
        if exposed and exposed != [metrics.get(name)]:
            problems.append(f"{name} exposes {exposed}, expected its metrics port {metrics.get(name)}")
    return problems


RULES: list[Callable[[Doc], list[str]]] = [
    every_process_is_served,
    init_runs_once_before_the_rest,
    health_checks_probe_their_own_process,
    the_shim_waits_for_healthy_backends,
    environment_is_read_by_the_code,
    ports_match_the_config_defaults,
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_compose_file_agrees_with_the_code(rule: Callable[[Doc], list[str]]) -> None:
    assert rule(_compose()) == []


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        *parents, last = path.split("/")
        node = doc
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return mutate


MUTATIONS = {
    "renamed subcommand": (_set("services/kb/command", ["server", "kb"]), every_process_is_served),
    "missing process": (_set("services/dreaming", None), every_process_is_served),
    "service serves another process": (_set("services/watcher/command", ["serve", "kb"]), every_process_is_served),
    "init restarts": (_set("services/init/restart", "unless-stopped"), init_runs_once_before_the_rest),
    "kb does not wait for init": (_set("services/kb/depends_on", {}), init_runs_once_before_the_rest),
    "health check of another process": (_set("services/watcher/healthcheck/test", ["CMD", "gateway", "health", "kb"]),
                                        health_checks_probe_their_own_process),
    "health target the CLI lacks": (_set("services/kb/healthcheck/test", ["CMD", "gateway", "healthz", "kb"]),
                                    health_checks_probe_their_own_process),
    "shim starts before kb is healthy": (_set("services/http/depends_on/kb/condition", "service_started"),
                                         the_shim_waits_for_healthy_backends),
    "variable nobody reads": (_set("services/kb/environment/GATEWAY_KB_ADDR", "kb:50053"), environment_is_read_by_the_code),
    "peer host names no service": (_set("services/http/environment/GATEWAY_KB_HOST", "knowledge"), environment_is_read_by_the_code),
    "home not on the volume": (_set("services/file_api/environment/GATEWAY_HOME", "/home"), environment_is_read_by_the_code),
    "wrong published port": (_set("services/http/ports", ["10851:10851"]), ports_match_the_config_defaults),
    "a backend published": (_set("services/kb/ports", ["50053:50053"]), ports_match_the_config_defaults),
    "wrong metrics port": (_set("services/kb/expose", ["50062"]), ports_match_the_config_defaults),
}


@pytest.mark.parametrize("mistake", sorted(MUTATIONS))
def test_each_rule_catches_its_mistake(mistake: str) -> None:
    mutate, rule = MUTATIONS[mistake]
    doc = json.loads(json.dumps(_compose()))  # YAML anchors share objects; this gives each service its own
    mutate(doc)
    assert rule(doc), f"{rule.__name__} missed: {mistake}"


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no `docker` CLI on PATH: `docker compose config` not run (the schema test still ran)")
    try:
        version = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"`docker compose version` failed ({exc}): `docker compose config` not run")
    if version.returncode != 0:
        pytest.skip(f"the docker compose plugin is not installed ({(version.stderr or version.stdout).strip().splitlines()[0]})")
    done = subprocess.run([docker, "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr


# ---- the Dockerfile ----------------------------------------------------------------------------

def _stages(text: str) -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined, comments dropped), one list per stage."""
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[str]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def _instruction(stage: list[str], name: str) -> list[str]:
    return [ln.split(None, 1)[1] for ln in stage if ln.split(None, 1)[0].upper() == name]


def _copy_sources(stage: list[str]) -> list[str]:
    """What the stage's COPY instructions read from the build context (a COPY --from= reads a stage)."""
    sources: list[str] = []
    for copy in _instruction(stage, "COPY"):
        words = copy.split()
        if any(w.startswith("--from=") for w in words):
            continue
        paths = json.loads(copy) if copy.startswith("[") else [w for w in words if not w.startswith("--")]
        sources += paths[:-1]
    return sources


def _ignored(path: str) -> bool:
    """Whether .dockerignore leaves ``path`` out of the build context (its plain patterns; none negated here)."""
    patterns = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    kept = [p.strip() for p in patterns if p.strip() and not p.startswith("#")]
    return any(fnmatch.fnmatch(path.rstrip("/"), p.rstrip("/")) for p in kept if not p.startswith("!"))


def dockerfile_problems(text: str) -> list[str]:
    """The problems of a Dockerfile built with this repository as its context."""
    problems = []
    stages = _stages(text)
    if len(stages) < 2:
        return ["not a multi-stage build"]
    for stage in stages:
        image = next(w for w in _instruction(stage, "FROM")[0].split() if not w.startswith("--"))
        if not PINNED_IMAGE.fullmatch(image):
            problems.append(f"FROM {image} is not pinned by tag and digest (IMAGE:TAG@sha256:DIGEST)")
        for source in _copy_sources(stage):
            if not (REPO / source).exists():
                problems.append(f"COPY {source}: not in the repository")
            elif _ignored(source):
                problems.append(f"COPY {source}: left out of the build context by .dockerignore")
    final = stages[-1]
    base = _instruction(final, "FROM")[0]
    if not base.startswith("python:3.11-slim"):
        problems.append(f"final stage is FROM {base}, expected python:3.11-slim")
    for run in _instruction(final, "RUN"):
        if BUILD_TOOLS.search(re.sub(r"(python -m )?pip uninstall[^&|;]*", "", run)):  # removing pip is fine
            problems.append(f"final stage installs or runs a build tool: RUN {run}")
    if not any("--from=build" in c for c in _instruction(final, "COPY")):
        problems.append("final stage copies nothing from the build stage")
    if any(not c.startswith("--from=") for c in _instruction(final, "COPY")):
        problems.append("final stage copies sources from the context")
    users = _instruction(final, "USER")
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append(f"final stage runs as {users[-1] if users else 'root'}")
    entrypoint = _instruction(final, "ENTRYPOINT")
    if not entrypoint or json.loads(entrypoint[-1]) != ["gateway"]:
        problems.append(f"ENTRYPOINT {entrypoint}, expected [\"gateway\"]")
    cmd = _instruction(final, "CMD")
    if not cmd or json.loads(cmd[-1])[0] not in _subcommands():
        problems.append(f"CMD {cmd} is no gateway subcommand")
    exposed = {int(p) for e in _instruction(final, "EXPOSE") for p in e.split()}
    if not set(_config_defaults().values()) <= exposed:
        problems.append(f"EXPOSE {sorted(exposed)} lacks a default port of {_config_defaults()}")
    if any("[test]" in run for stage in stages for run in _instruction(stage, "RUN")):
        problems.append("the image installs the test extras")
    return problems


def test_dockerfile_is_pinned_slim_non_root_copies_what_exists_and_runs_gateway() -> None:
    assert dockerfile_problems(DOCKERFILE.read_text(encoding="utf-8")) == []


BASE = _stages(DOCKERFILE.read_text(encoding="utf-8"))[-1][0].split()[1]  # the final stage's image, as pinned


@pytest.mark.parametrize(
    ("mistake", "old", "new"),
    [
        ("compiler in the final stage", "USER gateway", "RUN apt-get install -y gcc\nUSER gateway"),
        ("root user", "USER gateway", "USER root"),
        ("other entrypoint", 'ENTRYPOINT ["gateway"]', 'ENTRYPOINT ["python"]'),
        ("renamed default command", 'CMD ["up"]', 'CMD ["start"]'),
        ("single stage", f"\nFROM {BASE}\n", "\n"),
        ("build stage without its digest", f"FROM {BASE} AS build", "FROM python:3.11-slim AS build"),
        ("final stage without its digest", f"\nFROM {BASE}\n", "\nFROM python:3.11-slim\n"),
        ("final stage without its tag", f"\nFROM {BASE}\n", f"\nFROM python@{BASE.split('@')[1]}\n"),
        ("a short digest", f"FROM {BASE} AS build", f"FROM {BASE[:-1]} AS build"),
        ("a COPY of a path the repository lacks", "COPY gateway_mcp ./gateway_mcp", "COPY gateway_mcps ./gateway_mcp"),
        ("a COPY of a file left out of the context", "constraints.txt ./", "constraints.txt .gitignore ./"),
        ("a default port not exposed", "EXPOSE 50051 ", "EXPOSE 50055 "),
    ],
)
def test_dockerfile_rules_catch_their_mistake(mistake: str, old: str, new: str) -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert old in text
    broken = text.replace(old, new, 1)
    assert dockerfile_problems(broken), mistake
