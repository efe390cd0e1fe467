"""A forget in a PostgreSQL vault: the notes (live and retired) and the promotion records scrubbed, and
after ``VACUUM (FULL)`` (and a checkpoint, which writes the pages out) not one 8-character run of the
text left in the database's table files, while a plain update left its old row version there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
from forget_support import PLANTED, TOMBSTONE, residue
from pg_support import Cluster

from gateway.config import build
from gateway.config_model import VaultPostgresSettings
from gateway.forgetting import Target, marker
from services.kb.index.purge import StoreForget
from services.kb.vault.store import PromotionRecord, VaultStore
from services.kb.vault_pg.forget import forget_postgres, vacuum
from services.kb.vault_pg.registry import PostgresVaults
from services.kb.vault_pg.store import PostgresVaultStore


def _table_files(postgres: Cluster, dsn: str) -> list[Path]:
    """Every file of the test's database (``base/<oid>/``), its pages written out first."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    assert oid is not None
    return sorted(p for p in (postgres.data / "base" / str(oid[0])).iterdir() if p.is_file())


def test_a_postgres_vault_forget_scrubs_rows_and_vacuums_their_old_versions_away(
        postgres: Cluster, pg_dsn: str, pg_opener: Callable[..., VaultStore]) -> None:
    store = pg_opener()
    assert isinstance(store, PostgresVaultStore)
    store.write("park-notes", f"# Park notes\n\nA bench by the pond.\n\n{PLANTED}\n".encode(), expected=None)
    store.write("stale__old-keys", f"# Old keys\n\n{PLANTED.lower()}\n".encode(), expected=None)
    store.write("garden", b"# Garden\n\nThe tamarind tree fruits in March.\n", expected=None)
    write = {"note": "park-notes", "project": "global", "kind": "appended", "offset": 0, "removed": "",
             "added": f"- {PLANTED}", "block": f"- {PLANTED}", "hash_before": "", "hash_after": "0" * 64, "folded_twin": ""}
    store.record_promotion(PromotionRecord("req-1", "alfred", "run-1", "updated", "park-notes", write, 1.0))
    assert residue(_table_files(postgres, pg_dsn)), "planted: the check below can fail"
    target = Target.parse(PLANTED, None)

    dry = forget_postgres(store, target, "", apply=False)
    with store.writing():
        applied = forget_postgres(store, target, TOMBSTONE, apply=True)
    assert residue(_table_files(postgres, pg_dsn)), "an update leaves the old row version in the table's pages"
    purged = vacuum(store)

    found = [(p.where, p.kind, p.count) for p in dry.places]
    assert found == [("notes/park-notes.md", "note", 1), ("notes/stale__old-keys.md", "note", 1),
                     ("promotions", "table", 2)]
    assert [(p.where, p.kind, p.count) for p in applied.places] == found and applied.left == []
    assert purged.bytes_after > 0
    assert residue(_table_files(postgres, pg_dsn)) == []
    assert marker(TOMBSTONE) in (store.read("park-notes") or b"").decode()
    record = store.promotion("req-1")
    assert record is not None and record.write is not None
    assert json.dumps(record.write).count(marker(TOMBSTONE)) == 2 and record.write["hash_after"] == "0" * 64
    assert [h.path for h in store.search("tamarind", 10).hits] == ["notes/garden.md"]
    assert store.search("Quabbleworth", 10).hits == []


def test_the_postgres_vaults_forget_through_the_registry(tmp_path: Path, pg_dsn: str) -> None:
    """The registry's call: one write decision for the rows, then the vacuum; a second apply finds nothing."""
    text = "Marigold Vexworth owes the ledger 4471 crowns"
    config = build({"agents": [{"id": "alfred"}]}, tmp_path)
    executor = ThreadPoolExecutor(max_workers=2)
    vaults = PostgresVaults(config.agents, executor, VaultPostgresSettings(dsn=pg_dsn), {})
    target = Target.parse(text, None)

    async def scenario() -> tuple[StoreForget, StoreForget, StoreForget, str]:
        await vaults.create("alfred", "debts", f"# Debts\n\n{text}.\n", True, "admin")
        dry = await vaults.forget("alfred", target, "", False)
        applied = await vaults.forget("alfred", target, TOMBSTONE, True)
        again = await vaults.forget("alfred", target, TOMBSTONE, True)
        return dry, applied, again, (await vaults.get("alfred", "debts")).content

    try:
        dry, applied, again, content = asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    assert [(p.where, p.count, p.lines) for p in dry.places] == [("notes/debts.md", 1, (3,))] and dry.purge is None
    assert applied.store == "vault:global" and applied.purge is not None and applied.left == []
    assert again.places == [] and content == f"# Debts\n\n{marker(TOMBSTONE)}.\n"
