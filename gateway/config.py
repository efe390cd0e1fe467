"""config.json: defaults, validation, per-agent overrides and typed settings.

Read once in each process's entry point (``load_config``) and passed down as
frozen values; nothing deeper reads the file or the environment. Defaults and
documentation of every key live in ``config_schema.json``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from gateway.config_migrations import migrate
from gateway.config_model import (  # the typed settings, re-exported: importers use gateway.config
    GrpcSettings as GrpcSettings,
    MetricsSettings as MetricsSettings,
    FilesSettings as FilesSettings,
    ApiKey as ApiKey,
    ApiSettings as ApiSettings,
    MemorySettings as MemorySettings,
    StalenessSettings as StalenessSettings,
    DreamingSettings as DreamingSettings,
    ArchiveSettings as ArchiveSettings,
    VaultGcSettings as VaultGcSettings,
    VaultReflectionSettings as VaultReflectionSettings,
    WEEKDAYS as WEEKDAYS,
    VaultPostgresSettings as VaultPostgresSettings,
    SharedSettings as SharedSettings,
    KnowledgeSettings as KnowledgeSettings,
    AgentConfig as AgentConfig,
    Config as Config,
    SOCKETS_DIR as SOCKETS_DIR,
)
from gateway import http_workers
from gateway.errors import ConfigError, ConfigNotFound
from gateway.http_limits import HttpLimits

Raw = dict[str, Any]

OVER_BUDGET_LEVELS = ("warn", "error")


@cache
def schema() -> Raw:
    """The JSON schema of config.json (also its reference documentation)."""
    text = (Path(__file__).parent / "config_schema.json").read_text(encoding="utf-8")
    loaded: Raw = json.loads(text)
    return loaded


@cache
def _agent_id_rule() -> re.Pattern[str]:
    return re.compile(schema()["properties"]["agents"]["items"]["properties"]["id"]["pattern"].removesuffix("$"))


def is_agent_id(text: str) -> bool:
    """Whether ``text`` can be an agent id at all (the schema's ``agents[].id`` rule: one safe path
    segment), whether or not such an agent is configured."""
    return _agent_id_rule().fullmatch(text) is not None


def _resolve(node: Raw) -> Raw:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema()["$defs"][name]
    return node


def fill_defaults(instance: Raw, node: Raw | None = None) -> Raw:
    """Return a copy of ``instance`` with every missing key set to its schema default.

    Agent entries are not filled: their blocks are overrides of the gateway's.
    """
    node = _resolve(node if node is not None else schema())
    out = copy.deepcopy(instance)
    for key, prop in node.get("properties", {}).items():
        if key == "agents":
            continue
        if key not in out and "default" in prop:
            out[key] = copy.deepcopy(prop["default"])
        if isinstance(out.get(key), dict) and _resolve(prop).get("type") == "object":
            out[key] = fill_defaults(out[key], prop)
    return out


def deep_merge(base: Raw, override: Raw) -> Raw:
    """``override`` on top of ``base``; nested objects merge, other values replace."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


GRPC_PORT_KEYS = ("fileApi", "watcher", "kb", "dreaming")
METRICS_PORT_KEYS = {"fileApi": "file_api", "watcher": "watcher", "kb": "kb", "dreaming": "dreaming", "http": "http"}
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def _dict_at(raw: Raw, *path: str) -> Raw:
    node: Any = raw
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _default(*path: str) -> Any:
    """The schema default of a key under ``gateway`` (``_default("grpc", "kb")`` → 50053)."""
    node = schema()["properties"]["gateway"]
    for key in path:
        node = node["properties"][key]
    return node["default"]


def _same_host(a: object, b: object) -> bool:
    """Two listeners on these hosts and one port would collide (a wildcard collides with any)."""
    names = [{"localhost": "127.0.0.1"}.get(h, h) if isinstance(h, str) else h for h in (a, b)]
    return names[0] == names[1] or any(h in WILDCARD_HOSTS for h in names)


def port_clashes(raw: Raw) -> list[str]:
    """One line per service whose port (default included) another service on the same host has.

    Every gRPC service, the REST shim and (when on) every metrics port listen at
    once, so two on one port cannot both start. Port 0 (the kernel picks one) never clashes.
    """
    grpc, api = _dict_at(raw, "gateway", "grpc"), _dict_at(raw, "gateway", "api")
    grpc_host = grpc.get("host", _default("grpc", "host"))
    listeners = [(f"gateway.grpc.{key}", grpc_host, grpc.get(key, _default("grpc", key))) for key in GRPC_PORT_KEYS]
    listeners.append(("gateway.api.port", api.get("host", _default("api", "host")), api.get("port", _default("api", "port"))))
    metrics = _dict_at(raw, "gateway", "metrics")
    if metrics.get("enabled", True) is not False:
        host = metrics.get("host", grpc_host)
        listeners += [(f"gateway.metrics.{key}", host, metrics.get(key, _default("metrics", key))) for key in METRICS_PORT_KEYS]
        listeners += _worker_metrics(api, host, metrics.get("http", _default("metrics", "http")))
    problems = []
    for i, (name, host, port) in enumerate(listeners):
        if not isinstance(port, int) or isinstance(port, bool) or port == 0:
            continue
        for other, other_host, other_port in listeners[:i]:
            if other_port == port and _same_host(host, other_host):
                problems.append(f"{name}: port {port} is also {other}'s; two services cannot listen on one port")
                break
    return problems


def _worker_metrics(api: Raw, host: object, port: object) -> list[tuple[str, object, object]]:
    """The metrics listeners of shim workers 2 and on (``gateway.http_workers``): the http port + N − 1."""
    if not isinstance(port, int) or isinstance(port, bool) or port == 0:
        return []
    count = http_workers.resolve(api.get("workers", http_workers.AUTO))
    return [(f"gateway.metrics.http + {n - 1} (shim worker {http_workers.name(n)} of gateway.api.workers)", host, port + n - 1)
            for n in range(2, count + 1)]


# Digests (``content_digest``) of configs known to pass the schema: the launcher's check, handed to its children.
_trusted: set[str] = set()


def content_digest(raw: Raw) -> str:
    """SHA-256 of ``raw`` as canonical JSON: equal for equal contents, whatever the file's spacing."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def trust(digest: str) -> None:
    """Take the content of ``digest`` as checked against the schema (``validate`` skips that check
    for it). A child of ``gateway up`` is handed the digest of what its launcher validated, so it
    needs no jsonschema unless the file changes (docs/operations.md "Memory at rest")."""
    _trusted.add(digest)


def validate(raw: Raw) -> list[str]:
    """One line per problem with ``raw`` (``key: reason``); empty when valid. The schema is checked
    unless ``raw`` is one of the contents this process was told passed it (``trust``)."""
    problems: list[str] = []
    if content_digest(raw) not in _trusted:
        from gateway.config_schema_check import schema_problems  # jsonschema: only for content not yet checked

        problems = schema_problems(raw, schema())
    seen: set[str] = set()
    for i, agent in enumerate(raw.get("agents", []) if isinstance(raw.get("agents"), list) else []):
        agent_id = agent.get("id") if isinstance(agent, dict) else None
        if isinstance(agent_id, str):
            if agent_id in seen:
                problems.append(f"agents[{i}].id: duplicate agent id {agent_id!r}")
            seen.add(agent_id)
    keys = raw.get("gateway", {}).get("api", {}).get("keys", []) if isinstance(raw.get("gateway"), dict) else []
    for i, entry in enumerate(keys if isinstance(keys, list) else []):
        if isinstance(entry, dict) and ("key" in entry) == ("keySha256" in entry):
            problems.append(f"gateway.api.keys[{i}]: needs exactly one of key or keySha256")
    problems.extend(vault_backend_problems(raw))
    problems.extend(port_clashes(raw))
    return problems


DSN_KEYS = ("dsn", "dsnFile", "dsnEnv")


def vault_backend_problems(raw: Raw) -> list[str]:
    """One line per problem with the shared vault's backend: chosen gateway-wide only; with ``postgres``,
    exactly one of ``dsn``, ``dsnFile``, ``dsnEnv`` (more than one is an error whatever the backend);
    ``minSize`` at most ``maxSize``. No line shows a DSN."""
    where = "gateway.knowledge.shared"
    shared = _dict_at(raw, "gateway", "knowledge", "shared")
    pg = _dict_at(shared, "postgres")
    given = [k for k in DSN_KEYS if k in pg]
    problems = []
    if len(given) > 1:
        both = "both" if len(given) == 2 else "all"
        problems.append(f"{where}.postgres: {' and '.join(given)} are {both} set; give exactly one of dsn, dsnFile or dsnEnv")
    elif not given and shared.get("backend") == "postgres":
        problems.append(f'{where}.postgres: backend is "postgres" but none of dsn, dsnFile or dsnEnv is set; give exactly one')
    pool = schema()["$defs"]["vaultPostgres"]["properties"]
    low, high = pg.get("minSize", pool["minSize"]["default"]), pg.get("maxSize", pool["maxSize"]["default"])
    if isinstance(low, int) and isinstance(high, int) and low > high:
        problems.append(f"{where}.postgres: minSize {low} is over maxSize {high}")
    for i, agent in enumerate(raw.get("agents", []) if isinstance(raw.get("agents"), list) else []):
        override = _dict_at(agent, "knowledge", "shared")
        for key in ("backend", "postgres"):
            if key in override:
                problems.append(f"agents[{i}].knowledge.shared.{key}: the vault's backend is gateway-wide only "
                                f"(set {where}.{key})")
    return problems


def _memory(raw: Raw) -> MemorySettings:
    level = raw["overBudget"] if raw["overBudget"] in OVER_BUDGET_LEVELS else "warn"
    return MemorySettings(
        memory_budget_chars=raw["memoryBudgetChars"],
        user_budget_chars=raw["userBudgetChars"],
        over_budget=level,
        write_routing=raw["writeRouting"],
        episodic_archive_dir=raw["episodicArchiveDir"],
    )


def _dreaming(raw: Raw) -> DreamingSettings:
    st = raw["staleness"]
    return DreamingSettings(
        enabled=raw["enabled"],
        mode=raw["mode"],
        dream_hour=raw["dreamHour"],
        dream_minute=raw["dreamMinute"],
        dream_timezone=raw["dreamTimezone"],
        quiet_minutes=raw["quietMinutes"],
        lookback_days=raw["lookbackDays"],
        max_changes_per_run=raw["maxChangesPerRun"],
        stagger_window_minutes=min(max(raw["staggerWindowMinutes"], 0), 55),
        auto_route_out=raw["autoRouteOut"],
        reviewer_command=tuple(raw["reviewerCommand"]),
        reviewer_timeout_seconds=raw["reviewerTimeoutSeconds"],
        staleness=StalenessSettings(
            enabled=st["enabled"],
            stale_ttl_days=st["staleTtlDays"],
            keep_importance=st["keepImportance"],
            min_retrieval_keep=st["minRetrievalKeep"],
            supersession=st["supersession"],
            record_retrievals=st["recordRetrievals"],
            max_invalidations_per_run=st["maxInvalidationsPerRun"],
        ),
    )


def _knowledge(raw: Raw, home: Path) -> KnowledgeSettings:
    ar, sh = raw["archive"], raw["shared"]
    chunk_tokens = ar["chunkTokens"]
    return KnowledgeSettings(
        archive=ArchiveSettings(
            enabled=ar["enabled"],
            tokenizer=ar["tokenizer"],
            chunk_tokens=chunk_tokens,
            chunk_overlap=min(ar["chunkOverlap"], chunk_tokens - 1),
        ),
        shared=SharedSettings(
            enabled=sh["enabled"],
            project=sh["project"],
            root=home / Path(sh["root"]).expanduser(),
            mode=sh["mode"],
            graph=sh["graph"],
            gc=VaultGcSettings(
                enabled=sh["gc"]["enabled"],
                stale_days=sh["gc"]["staleDays"],
                max_retirements_per_run=sh["gc"]["maxRetirementsPerRun"],
            ),
            backend=sh["backend"],
            postgres=_vault_postgres(sh["postgres"], home),
            reflection=_reflection(sh["reflection"], sh["mode"]),
        ),
        max_open_archives=raw.get("maxOpenArchives", 0),
    )


def _reflection(raw: Raw, shared_mode: str) -> VaultReflectionSettings:
    return VaultReflectionSettings(
        enabled=raw["enabled"],
        weekday=WEEKDAYS.index(raw["weekday"]),
        hour=raw["hour"],
        minute=raw["minute"],
        timezone=raw["timezone"],
        max_clusters_per_run=raw["maxClustersPerRun"],
        mode=raw.get("mode", shared_mode),
        max_drop_share=float(raw["maxDropShare"]),
    )


def _vault_postgres(raw: Raw, home: Path) -> VaultPostgresSettings:
    return VaultPostgresSettings(
        dsn=raw.get("dsn"),
        dsn_file=home / Path(raw["dsnFile"]).expanduser() if "dsnFile" in raw else None,
        dsn_env=raw.get("dsnEnv"),
        min_size=raw["minSize"],
        max_size=raw["maxSize"],
        connect_timeout_s=float(raw["connectTimeoutS"]),
        statement_timeout_ms=raw["statementTimeoutMs"],
        tombstones_every_s=float(raw["tombstonesEveryS"]),
    )


def _key(index: int, raw: Raw) -> ApiKey:
    if "key" in raw:
        digest = hashlib.sha256(raw["key"].encode("utf-8")).digest()
    else:
        digest = bytes.fromhex(raw["keySha256"])
    agents = raw["agents"]
    return ApiKey(
        digest=digest,
        agents=None if agents == "*" else frozenset(agents),
        write=raw.get("write", False),
        label=raw.get("name", f"keys[{index}]"),
    )


def build(raw: Raw, home: Path) -> Config:
    """Typed settings from a migrated config dict. Raises ConfigError when invalid."""
    problems = validate(raw)
    if problems:
        raise ConfigError(problems)
    full = fill_defaults(raw)
    gw = full["gateway"]
    # An agent without an override shares the gateway's settings objects (frozen): merging and
    # typing the same blocks again for each of a thousand agents would be most of a load's time.
    memory, dreaming, knowledge = _memory(gw["memory"]), _dreaming(gw["dreaming"]), _knowledge(gw["knowledge"], home)
    agents = []
    for entry in raw.get("agents", []):
        agent_id = entry["id"]
        agents.append(
            AgentConfig(
                id=agent_id,
                home=home,
                workspace=home / Path(entry.get("workspace", f"agents/{agent_id}/workspace")).expanduser(),
                transcripts_dir=home
                / Path(entry.get("transcriptsDir", f"agents/{agent_id}/sessions")).expanduser(),
                memory=_memory(deep_merge(gw["memory"], entry["memory"])) if entry.get("memory") else memory,
                dreaming=_dreaming(deep_merge(gw["dreaming"], entry["dreaming"])) if entry.get("dreaming") else dreaming,
                knowledge=(_knowledge(deep_merge(gw["knowledge"], entry["knowledge"]), home) if entry.get("knowledge")
                           else knowledge),
            )
        )
    grpc, metrics = gw["grpc"], gw["metrics"]
    return Config(
        home=home,
        config_version=full["configVersion"],
        grpc=GrpcSettings(grpc["host"], grpc["fileApi"], grpc["watcher"], grpc["kb"], grpc["dreaming"],
                          sockets=home / SOCKETS_DIR if grpc["transport"] == "unix" else None),
        api=ApiSettings(
            host=gw["api"]["host"],
            port=gw["api"]["port"],
            keys=tuple(_key(i, k) for i, k in enumerate(gw["api"]["keys"])),
            limits=HttpLimits.from_api(gw["api"]),
            workers=http_workers.resolve(gw["api"]["workers"]),
            mcp_idle_seconds=gw["api"]["mcpIdleSeconds"],
        ),
        memory=memory,
        dreaming=dreaming,
        knowledge=knowledge,
        agents=tuple(agents),
        metrics=MetricsSettings(
            enabled=metrics["enabled"],
            host=metrics.get("host", grpc["host"]),
            ports=tuple((process, metrics[key]) for key, process in METRICS_PORT_KEYS.items()),
        ),
        files=FilesSettings(read_cache_mib=gw["files"]["readCacheMiB"],
                            require_working_locks=gw["files"]["requireWorkingLocks"]),
        digest=content_digest(raw),
    )


def read_raw(path: Path) -> Raw:
    """Parse config.json. Raises ConfigError with one line when it is not a JSON object."""
    return read_config_file(path)[0]


def read_config_file(path: Path) -> tuple[Raw, bytes]:
    """config.json parsed, and the bytes it was parsed from (for a compare-and-swap write).

    Raises ConfigError with one line when it is missing, unreadable or not a JSON object.
    """
    try:
        data = path.read_bytes()
        raw = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigNotFound(path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read ({exc})"]) from None
    except json.JSONDecodeError as exc:
        raise ConfigError([f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]) from None
    if not isinstance(raw, dict):
        raise ConfigError([f"{path}: must hold a JSON object"])
    return raw, data


def load_config(home: Path) -> Config:
    """Read, migrate in memory, validate and type ``<home>/config.json``.

    Raises ConfigError listing every problem, one line each.
    """
    raw = read_raw(home / "config.json")
    try:
        migrated, _ = migrate(raw)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    return build(migrated, home)
