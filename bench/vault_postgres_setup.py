"""The PostgreSQL vault bench's set-up: the clusters, the hosts' homes and KB processes, the one corpus both
backends hold, and the floor (what PostgreSQL itself costs for a round trip and an insert).

bench/vault_postgres.py's docstring says the method; nothing here decides a verdict.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import REPO
from harness.home import agent_entry, api_key, write_config
from harness.procs import Children, cpu_seconds, wait_until
from kb_bench_support import AGENT, START_TIMEOUT_S
from kb_corpus import CJK_JA, CJK_ZH
from kb_shared_vault import PROJECT, VaultGen, VaultInfo, prefill

# pg_support is the tests' throwaway cluster (tests/pg_support.py): no bench helper starts PostgreSQL, and
# a second way to start one would drift from the one the tests trust, so the tests folder goes on the path.
sys.path.insert(0, str(REPO / "tests"))
from pg_support import DURABLE_SETTINGS, Cluster, start_cluster

DATABASE = "bench_vault"
CJK_SHARE = 0.05  # of the pre-filled notes: Chinese or Japanese bodies (the trigram path's notes)
FLOOR_CALLS = 500
FLOOR_BODY = "x" * 1500  # about a note's median size


@dataclass
class Backend:
    """One vault backend under test: a host's KB process on its own home, and (PostgreSQL) its cluster."""

    label: str
    home: Path
    port: int
    cluster: Cluster | None = None
    dsn: str = ""
    pid: int = 0
    stub: Any = None
    channel: Any = None
    metadata: tuple[tuple[str, str], ...] = ()


@contextlib.contextmanager
def clusters() -> Iterator[dict[str, Cluster]]:
    """Two throwaway clusters, stopped and deleted on the way out: ``fast`` (pg_support's default: fsync,
    synchronous_commit and full_page_writes off) and ``durable`` (all three on, as in production)."""
    started: dict[str, Cluster] = {}
    try:
        started["fast"] = start_cluster()
        started["durable"] = start_cluster(DURABLE_SETTINGS)
        yield started
    finally:
        for cluster in started.values():
            cluster.stop()
            shutil.rmtree(cluster.root, ignore_errors=True)


def shared_block(dsn: str = "") -> dict[str, Any]:
    """``gateway.knowledge.shared`` of a bench home: the vault on (graph off: its report files are a SQLite
    backend's cost of its own), on PostgreSQL at ``dsn`` when one is given."""
    shared: dict[str, Any] = {"enabled": True, "project": PROJECT, "graph": False}
    if dsn:
        shared |= {"backend": "postgres", "postgres": {"dsn": dsn}}
    return {"knowledge": {"shared": shared}}


def make_home(root: Path, label: str, dsn: str = "") -> Backend:
    home = root / label
    port = write_config(home, [agent_entry(AGENT)], keys=[api_key([AGENT], write=True)], gateway=shared_block(dsn))["kb"]
    return Backend(label, home, port, dsn=dsn)


def start(backend: Backend, children: Children) -> None:
    """The backend's KB process, SERVING, with a gRPC stub on one channel and the internal token."""
    import grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2_grpc

    from gateway_cli.health_cli import grpc_serving

    name = f"kb-{backend.label}"
    proc = children.start(name, [sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(backend.home)])
    wait_until(children, lambda: grpc_serving(f"127.0.0.1:{backend.port}"), f"{name} SERVING", START_TIMEOUT_S, name=name)
    backend.pid = proc.pid
    backend.channel = grpc.insecure_channel(f"127.0.0.1:{backend.port}")
    backend.stub = kb_pb2_grpc.KnowledgeStub(backend.channel)
    backend.metadata = (("x-gateway-internal-token", read_internal_token(backend.home)),)


# =========================================================================== corpus


def fill(gen: VaultGen, vault_dir: Path, count: int) -> tuple[VaultInfo, int]:
    """The SQLite vault at ``vault_dir``: ``count`` generated notes (``CJK_SHARE`` of them rewritten as
    Chinese or Japanese notes) and its index; the info and how many are CJK."""
    from services.kb.vault import note_index

    notes = vault_dir / "notes"
    info = prefill(gen, notes, count)
    cjk = 0
    for name in gen.names:
        if gen.rng.random() < CJK_SHARE:
            words = gen.rng.sample(CJK_ZH + CJK_JA, 3)
            (notes / f"{name}.md").write_text(gen.writer.cjk_note("".join(words), int(gen.rng.lognormvariate(7.0, 0.6))),
                                              encoding="utf-8")  # fmt: skip
            cjk += 1
    conn = note_index.open_vault_index(vault_dir)
    try:
        note_index.refresh_vault(conn, vault_dir)
    finally:
        conn.close()
    return info, cjk


def copy_to_postgres(vault_dir: Path, dsns: list[str], scratch: Path) -> dict[str, float]:
    """Export the SQLite vault once (``gateway vault export``'s code) and import it into the vault of each
    PostgreSQL database (``gateway vault import``'s, the schema migrated first); the seconds of each import."""
    from gateway.config_model import VaultPostgresSettings
    from services.kb.index import schema as index_schema
    from services.kb.vault import note_index
    from services.kb.vault.export import export_vault
    from services.kb.vault.import_notes import import_vault, read_folder
    from services.kb.vault.sqlite_store import SqliteVaultStore
    from services.kb.vault_pg import pool
    from services.kb.vault_pg.store import PostgresVaultStore

    folder = scratch / "export"
    with contextlib.closing(index_schema.open_reader(vault_dir / note_index.INDEX_FILE)) as conn:
        export_vault(SqliteVaultStore(vault_dir, conn), folder)
    export = read_folder(folder)
    seconds: dict[str, float] = {}
    for dsn in dsns:
        t0 = time.perf_counter()
        conns = pool.open_pool(VaultPostgresSettings(dsn=dsn))
        try:
            pool.migrate(conns, "the bench vault")
            import_vault(PostgresVaultStore(conns, PROJECT), export)
        finally:
            pool.close_pools()
        seconds[dsn] = time.perf_counter() - t0
    shutil.rmtree(folder, ignore_errors=True)
    return seconds


def cjk_queries(gen: VaultGen, count: int) -> list[str]:
    """``count`` CJK queries: one word, two words run together, or two words apart."""
    words = CJK_ZH + CJK_JA
    rng = gen.rng
    makers = (lambda: rng.choice(words), lambda: rng.choice(words) + rng.choice(words),
              lambda: f"{rng.choice(words)} {rng.choice(words)}")  # fmt: skip
    return [rng.choice(makers)() for _ in range(count)]


# =========================================================================== the floor


def floor(cluster: Cluster, calls: int = FLOOR_CALLS) -> dict[str, list[float]]:
    """Seconds of ``calls`` bare ``SELECT 1`` round trips and of ``calls`` autocommitted one-row INSERTs of a
    1.5 KB text (each its own transaction, so a commit each) through one psycopg connection."""
    import psycopg

    out: dict[str, list[float]] = {"select": [], "insert": []}
    with psycopg.connect(cluster.dsn(DATABASE), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, body text NOT NULL)")
        for _ in range(20):
            conn.execute("SELECT 1").fetchone()
        for _ in range(calls):
            t0 = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            out["select"].append(time.perf_counter() - t0)
        for _ in range(calls):
            t0 = time.perf_counter()
            conn.execute("INSERT INTO bench_floor (body) VALUES (%s)", (FLOOR_BODY,))
            out["insert"].append(time.perf_counter() - t0)
        conn.execute("DROP TABLE bench_floor")
    return out


def postgres_size(dsn: str) -> dict[str, int]:
    """The vault's notes in PostgreSQL: how many, their text's bytes, the table with its indexes and TOAST,
    each GIN index, and the whole database."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), coalesce(sum(octet_length(head) + octet_length(body)), 0), "
            "pg_total_relation_size('gateway_vault.notes'), pg_relation_size('gateway_vault.notes_search'), "
            "pg_relation_size('gateway_vault.notes_trigram'), pg_database_size(current_database()) "
            "FROM gateway_vault.notes").fetchone()
    assert row is not None
    return dict(zip(("notes", "text", "table", "fts_index", "trigram_index", "database"), map(int, row), strict=True))


def sqlite_size(vault_dir: Path) -> dict[str, int]:
    """The SQLite vault: its note files' bytes and its index (``kb.sqlite`` with its WAL)."""
    from services.kb.vault import note_index

    files = [p for p in (vault_dir / "notes").iterdir() if p.suffix == ".md"]
    index = vault_dir / note_index.INDEX_FILE
    wal = index.with_name(index.name + "-wal")
    return {"notes": len(files), "text": sum(p.stat().st_size for p in files),
            "index": index.stat().st_size + (wal.stat().st_size if wal.exists() else 0)}


def postmaster_pid(cluster: Cluster) -> int:
    return int((cluster.data / "postmaster.pid").read_text().split("\n", 1)[0])


def cluster_cpu(cluster: Cluster | None) -> float:
    """CPU seconds used so far by the cluster's postmaster and its live children (its backends)."""
    if cluster is None:
        return 0.0
    root = postmaster_pid(cluster)
    total = cpu_seconds(root)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
            if ppid == root:
                total += cpu_seconds(int(entry))
    return total
