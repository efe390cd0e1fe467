"""The KB's vaults on the PostgreSQL backend (``vault_pg.registry.PostgresVaults``): the schema migrated by
the first call, the calls of the SQLite registry answered alike, recall rows folded by the GC, the graph
compiled from the rows, and nothing written under the vault's folder."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.config import build
from gateway.config_model import VaultPostgresSettings
from gateway.errors import FailedPrecondition
from services.kb.vault.gc import NoteRef
from services.kb.vault.reflection import merge as merging
from services.kb.vault.reflection import runs
from services.kb.vault.reflection.plan import plan
from services.kb.vault_pg.registry import PostgresVaults

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_the_postgres_vaults_answer_as_the_sqlite_ones(tmp_path: Path, pg_dsn: str) -> None:
    config = build({"agents": [{"id": "alfred"}, {"id": "bob"}]}, tmp_path)
    executor = ThreadPoolExecutor(max_workers=4)
    vaults = PostgresVaults(config.agents, executor, VaultPostgresSettings(dsn=pg_dsn), {}, clock=lambda: NOW)

    async def scenario() -> None:
        created = await vaults.create("alfred", "kiln", "The kiln fires at noon.\n\nSee [[glaze]].\n", False, "admin")
        assert created.created
        assert (await vaults.get("bob", "kiln")).content.startswith("The kiln")  # one vault per project
        result, refreshed = await vaults.search("bob", "kiln noon", 5, True)
        assert [h.path for h in result.hits] == ["notes/kiln.md"] and not refreshed
        page, authors = await vaults.list_notes("bob", 10, "", False)
        assert [n.name for n in page.notes] == ["kiln"] and authors["kiln"].created is not None
        assert authors["kiln"].created.agent_id == "alfred"
        vaults.record("bob", [NoteRef("notes/kiln.md", "h1")], "get")
        await vaults.settle()  # the recall row lands from a worker thread
        report = await vaults.collect("alfred")
        assert report.folded == 1
        graph = await vaults.graph("alfred")
        assert [(e.source, e.target, e.dangling) for e in graph.edges] == [("kiln", "glaze", True)]
        retired = await vaults.retire("bob", "kiln", "moved")
        assert retired.retired_name == "stale__kiln" and (await vaults.get("bob", "stale__kiln")).retired
        assert (await vaults.restore("alfred", "kiln")).name == "kiln"

    try:
        asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
    assert vaults.roots() == {} and not (tmp_path / "shared").exists()


def test_the_weekly_reflection_runs_on_the_postgres_vaults_by_project(tmp_path: Path, pg_dsn: str) -> None:
    config = build({"agents": [{"id": "carol", "knowledge": {"shared": {"project": "reflecting"}}}]}, tmp_path)
    executor = ThreadPoolExecutor(max_workers=4)
    vaults = PostgresVaults(config.agents, executor, VaultPostgresSettings(dsn=pg_dsn), {}, clock=lambda: NOW)

    async def scenario() -> None:
        await vaults.create("carol", "kiln", "The kiln fires at noon.\n", False, "admin")
        await vaults.create("carol", "glaze", "Celadon glaze needs the [[kiln]].\n", False, "admin")
        assert vaults.sharers("reflecting") == [("carol", tmp_path)]
        with pytest.raises(FailedPrecondition):
            await vaults.reflect("elsewhere", lambda store, now: None)
        planned = await vaults.reflect("reflecting", lambda store, now: plan(store, "R-pg", now.timestamp()))
        [cluster] = planned.clusters
        request = merging.check(merging.MergeRequest(
            "R-pg", cluster.id, "kiln", "The kiln fires at noon.\nCeladon glaze needs it.\n", ("kiln", "glaze"),
            {n.name: n.sha256 for n in cluster.notes}))
        done = await vaults.reflect("reflecting", lambda store, now: merging.merge(store, request, now, lambda c: ""))
        assert done.outcome == "merged" and done.retired == ("glaze",)
        assert (await vaults.get("carol", "stale__glaze")).retired
        await vaults.reflect("reflecting", lambda store, now: runs.record(
            store, runs.RunRecord("R-pg", "auto", "manual", "ok"), now.timestamp()))
        reverted = await vaults.reflect("reflecting", lambda store, now: runs.revert(store, "", True, now.timestamp()))
        assert reverted.restored == ("glaze", "kiln") and (await vaults.get("carol", "glaze")).content == (
            "Celadon glaze needs the [[kiln]].\n")

    try:
        asyncio.run(scenario())
    finally:
        vaults.close()
        executor.shutdown()
