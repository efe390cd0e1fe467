"""The typed settings of config.json: frozen values every process passes down.

``gateway.config`` builds them from the file (defaults, validation, per-agent
overrides) and re-exports them; import them from there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from gateway import http_workers
from gateway.http_limits import HttpLimits


# A Unix socket's path is at most 107 bytes (sun_path holds 108 with its NUL).
SOCKET_PATH_MAX = 107
SOCKETS_DIR = "run"


@dataclass(frozen=True)
class GrpcSettings:
    host: str
    file_api: int
    watcher: int
    kb: int
    dreaming: int
    # Deployment overrides set by the entry point from GATEWAY_BIND_HOST and
    # GATEWAY_<SERVICE>_HOST (compose: bind 0.0.0.0, reach peers by name).
    bind_host: str | None = None
    peer_hosts: tuple[tuple[str, str], ...] = ()
    # gateway.grpc.transport "unix": the folder of every service's socket (<home>/run); None: TCP only.
    sockets: Path | None = None

    def unix_socket(self, service: str) -> Path | None:
        """The Unix socket ``service`` listens on beside its port (None on TCP); its peers use it only
        when ``socket_fits`` (docs/operations.md "Processes, ports and volumes")."""
        return None if self.sockets is None else self.sockets / f"{service}.sock"

    def address(self, service: str) -> str:
        """Where ``service`` (``file_api``, ``watcher``, ``kb``, ``dreaming``) is reached: ``unix:PATH`` when
        it is local and listens on a socket, else ``host:port``."""
        peers = dict(self.peer_hosts)
        path = self.unix_socket(service)
        if service not in peers and path is not None and socket_fits(path):
            return f"unix:{path}"
        return f"{peers.get(service, self.host)}:{getattr(self, service)}"

    def bind_address(self, service: str) -> str:
        """``host:port`` that ``service`` listens on."""
        return f"{self.bind_host or self.host}:{getattr(self, service)}"


def socket_fits(path: Path) -> bool:
    """Whether ``path`` is short enough for a Unix socket."""
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX


@dataclass(frozen=True)
class MetricsSettings:
    """``gateway.metrics``: each process's Prometheus port (docs/operations.md "Metrics and alerts")."""

    enabled: bool
    host: str  # gateway.grpc.host when unset; GATEWAY_BIND_HOST replaces it (live_config.with_deployment)
    ports: tuple[tuple[str, int], ...]  # process name (file_api, watcher, kb, dreaming, http) → port

    def address(self, process: str) -> tuple[str, int] | None:
        """``(host, port)`` where ``process`` serves its metrics; None when metrics are off. Shim
        worker N (``http-N``) serves them on the ``http`` port + N − 1 (port 0 stays 0: the kernel picks)."""
        if not self.enabled:
            return None
        worker = http_workers.index(process)
        if worker is None:
            return (self.host, dict(self.ports)[process])
        port = dict(self.ports)[http_workers.FIRST]
        return (self.host, port + worker - 1 if port else 0)


@dataclass(frozen=True)
class ApiKey:
    """One API key. Only its SHA-256 digest is held, never the key itself."""

    digest: bytes
    agents: frozenset[str] | None  # None means every agent ("*")
    write: bool
    label: str

    def covers(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents


@dataclass(frozen=True)
class ApiSettings:
    host: str
    port: int
    keys: tuple[ApiKey, ...]
    limits: HttpLimits = HttpLimits()
    workers: int = 1  # REST shim processes gateway up runs ("auto" resolved on this host: gateway.http_workers)
    mcp_idle_seconds: int = 120  # the shim's MCP child stops after this long without a request; 0: never


@dataclass(frozen=True)
class FilesSettings:
    """``gateway.files``: the file API's read cache; the check of file locks at start (``gateway.lock_probe``)."""

    read_cache_mib: int = 32
    require_working_locks: bool = True


@dataclass(frozen=True)
class MemorySettings:
    memory_budget_chars: int
    user_budget_chars: int
    over_budget: str  # "warn" or "error"; anything else was normalised to "warn"
    write_routing: bool
    episodic_archive_dir: str


@dataclass(frozen=True)
class StalenessSettings:
    enabled: bool
    stale_ttl_days: int
    keep_importance: int
    min_retrieval_keep: int
    supersession: bool
    record_retrievals: bool
    max_invalidations_per_run: int


@dataclass(frozen=True)
class DreamingSettings:
    enabled: bool
    mode: str
    dream_hour: int
    dream_minute: int
    dream_timezone: str
    quiet_minutes: int
    lookback_days: int
    max_changes_per_run: int
    stagger_window_minutes: int  # clamped to [0, 55]
    auto_route_out: bool
    reviewer_command: tuple[str, ...]
    reviewer_timeout_seconds: int
    staleness: StalenessSettings


@dataclass(frozen=True)
class ArchiveSettings:
    enabled: bool
    tokenizer: str
    chunk_tokens: int
    chunk_overlap: int  # clamped below chunk_tokens


@dataclass(frozen=True)
class VaultGcSettings:
    """``knowledge.shared.gc``: the vault's own nightly GC (docs/concepts/vault.md "Shared vault")."""

    enabled: bool
    stale_days: int
    max_retirements_per_run: int


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class VaultReflectionSettings:
    """``knowledge.shared.reflection``: the vault's weekly reflection (docs/concepts/vault.md "Weekly reflection").
    ``mode`` is already resolved (the block's own, else ``knowledge.shared.mode``); ``weekday`` is
    0 (Monday) to 6 (Sunday)."""

    enabled: bool = True
    weekday: int = 6
    hour: int = 4
    minute: int = 0
    timezone: str = "UTC"
    max_clusters_per_run: int = 20
    mode: str = "auto"
    max_drop_share: float = 0.5


@dataclass(frozen=True)
class VaultPostgresSettings:
    """``knowledge.shared.postgres``: where the PostgreSQL vault is (exactly one of the three, when the
    backend is ``postgres``) and its pool. The DSN is never in a repr: it may hold a password."""

    dsn: str | None = field(default=None, repr=False)
    dsn_file: Path | None = None
    dsn_env: str | None = None
    min_size: int = 1
    max_size: int = 10
    connect_timeout_s: float = 5.0
    statement_timeout_ms: int = 15_000
    tombstones_every_s: float = 60.0  # how often the KB checks the vault's tombstones (docs/concepts/forget.md)


@dataclass(frozen=True)
class SharedSettings:
    enabled: bool
    project: str
    root: Path
    mode: str
    graph: bool
    gc: VaultGcSettings
    backend: str = "sqlite"
    reflection: VaultReflectionSettings = VaultReflectionSettings()
    postgres: VaultPostgresSettings = VaultPostgresSettings()

    @property
    def vault_dir(self) -> Path:
        return self.root / self.project


@dataclass(frozen=True)
class KnowledgeSettings:
    archive: ArchiveSettings
    shared: SharedSettings
    max_open_archives: int = 0  # gateway-wide only (0: derived from the KB's open-files limit)


@dataclass(frozen=True)
class AgentConfig:
    """One agent with the gateway settings and its own overrides merged."""

    id: str
    home: Path
    workspace: Path
    transcripts_dir: Path
    memory: MemorySettings
    dreaming: DreamingSettings
    knowledge: KnowledgeSettings

    @property
    def agent_dir(self) -> Path:
        """``<home>/agents/<id>``: the agent's own folder beside its workspace (docs/architecture.md "Home layout")."""
        return self.home / "agents" / self.id

    @property
    def kb_path(self) -> Path:
        return self.agent_dir / "kb.sqlite"


@dataclass(frozen=True)
class Config:
    home: Path
    config_version: str
    grpc: GrpcSettings
    api: ApiSettings
    memory: MemorySettings
    dreaming: DreamingSettings
    knowledge: KnowledgeSettings
    agents: tuple[AgentConfig, ...]
    metrics: MetricsSettings = MetricsSettings(False, "127.0.0.1", ())
    files: FilesSettings = FilesSettings()
    digest: str = field(default="", compare=False)  # gateway.config.content_digest of what it was built from

    def agent(self, agent_id: str) -> AgentConfig | None:
        """The agent with this id, or None (a lookup: every RPC asks, and a home may hold many agents)."""
        return self._agents_by_id.get(agent_id)

    @cached_property
    def _agents_by_id(self) -> dict[str, AgentConfig]:
        return {agent.id: agent for agent in self.agents}
