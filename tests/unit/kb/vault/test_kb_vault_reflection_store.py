"""The vault store's contract for the weekly reflection's rows (claim, plan, watermark, audit, journal), run
against every backend (docs/concepts/vault.md "Weekly reflection")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services.kb.vault.note_index import open_vault_index
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import MergeJournal, ReflectionAudit, ReflectionState, VaultStore
from services.kb.vault_pg.store import PostgresVaultStore

OpenStore = Callable[..., VaultStore]


@pytest.fixture
def vault_store(open_store: OpenStore) -> VaultStore:
    store = open_store()
    store.write("seed", b"a note, so the vault exists\n", expected=None)
    return store


def test_a_claim_is_one_runs_until_it_expires_or_is_released(vault_store: VaultStore) -> None:
    assert vault_store.reflection_state() == ReflectionState()
    assert vault_store.claim_reflection("R-1", now=100.0, expires_at=200.0) == ""
    assert vault_store.claim_reflection("R-2", now=150.0, expires_at=250.0) == "R-1"  # busy
    assert vault_store.reflection_state().claim_run == "R-1"
    assert vault_store.claim_reflection("R-1", now=150.0, expires_at=300.0) == ""  # renewed by its holder
    assert vault_store.reflection_state().claim_expires == pytest.approx(300.0)
    assert vault_store.claim_reflection("R-2", now=301.0, expires_at=400.0) == ""  # expired: taken over
    assert vault_store.reflection_state().claim_run == "R-2"
    vault_store.finish_reflection(ReflectionAudit("run", "R-2", 310.0, {"status": "ok"}), "rev-1", ["sig-a"])
    state = vault_store.reflection_state()
    assert (state.claim_run, state.watermark, state.reviewed, state.plan) == ("", "rev-1", ("sig-a",), {})
    assert vault_store.claim_reflection("R-3", now=320.0, expires_at=420.0) == ""


def test_the_plan_belongs_to_the_claim_and_a_new_claim_clears_it(vault_store: VaultStore) -> None:
    vault_store.claim_reflection("R-1", now=0.0, expires_at=100.0)
    plan: dict[str, dict[str, object]] = {"C-000000000001": {"notes": ["a", "b"], "sig": "s1"}}
    vault_store.set_reflection_plan("R-1", plan)
    vault_store.set_reflection_plan("R-9", {"C-x": {"notes": [], "sig": ""}})  # not the holder: nothing
    assert vault_store.reflection_state().plan == plan
    vault_store.claim_reflection("R-1", now=10.0, expires_at=110.0)
    assert vault_store.reflection_state().plan == plan  # renewed, kept
    vault_store.claim_reflection("R-2", now=200.0, expires_at=300.0)
    assert vault_store.reflection_state().plan == {}


def test_a_finish_by_another_run_keeps_the_claim_and_none_keeps_the_watermark(vault_store: VaultStore) -> None:
    vault_store.claim_reflection("R-1", now=0.0, expires_at=100.0)
    vault_store.finish_reflection(ReflectionAudit("run", "R-1", 1.0, {}), "rev-1", [])
    vault_store.claim_reflection("R-2", now=2.0, expires_at=100.0)
    vault_store.finish_reflection(ReflectionAudit("run", "R-old", 3.0, {}), None, ["x"])
    state = vault_store.reflection_state()
    assert (state.claim_run, state.watermark, state.reviewed) == ("R-2", "rev-1", ("x",))


def test_the_audit_is_newest_first_and_by_run(vault_store: VaultStore) -> None:
    assert vault_store.reflection_audit(10) == []
    vault_store.finish_reflection(ReflectionAudit("run", "R-1", 1.0, {"merged": 1}), "r", [])
    vault_store.add_reflection_audit(ReflectionAudit("run", "R-2", 2.0, {"merged": 0}))
    vault_store.add_reflection_audit(ReflectionAudit("revert", "R-1", 3.0, {"restored": ["a"]}))
    assert [(a.kind, a.run_id) for a in vault_store.reflection_audit(10)] == [
        ("revert", "R-1"), ("run", "R-2"), ("run", "R-1")]
    assert [a.kind for a in vault_store.reflection_audit(10, "R-1")] == ["revert", "run"]
    assert vault_store.reflection_audit(1)[0].record == {"restored": ["a"]}
    assert vault_store.reflection_audit(1)[0].at == pytest.approx(3.0)


def test_the_journal_keeps_merges_in_order_per_run(vault_store: VaultStore) -> None:
    assert vault_store.merges("R-1") == []
    entry: dict[str, object] = {"name": "ferry", "notes": {"ferry": {"before": "é\n", "after": None}}}
    vault_store.journal_merge(MergeJournal("M-2", "R-1", 5.0, entry))
    vault_store.journal_merge(MergeJournal("M-1", "R-1", 6.0, {"name": "kiln"}))
    vault_store.journal_merge(MergeJournal("M-3", "R-2", 7.0, {}))
    assert [m.merge_id for m in vault_store.merges("R-1")] == ["M-2", "M-1"]
    assert vault_store.merges("R-1")[0].entry == entry
    vault_store.drop_merge("M-2")
    assert [m.merge_id for m in vault_store.merges("R-1")] == ["M-1"]


def test_two_connections_to_one_sqlite_vault_share_the_claim(tmp_path: Path) -> None:
    """Two KB processes on one vault: the claim is taken in one BEGIN IMMEDIATE transaction of the index."""
    directory = tmp_path / "global"
    first, second = open_vault_index(directory), open_vault_index(directory)
    try:
        a, b = SqliteVaultStore(directory, first), SqliteVaultStore(directory, second)
        assert a.claim_reflection("R-1", now=0.0, expires_at=100.0) == ""
        assert b.claim_reflection("R-2", now=1.0, expires_at=100.0) == "R-1"
        b.finish_reflection(ReflectionAudit("run", "R-1", 2.0, {}), "rev", [])
        assert a.reflection_state().claim_run == "" and a.claim_reflection("R-2", now=3.0, expires_at=100.0) == ""
    finally:
        first.close()
        second.close()


def test_of_runs_claiming_at_once_exactly_one_holds_the_claim(open_store: OpenStore) -> None:
    store = open_store()
    store.write("seed", b"a note\n", expected=None)
    if isinstance(store, SqliteVaultStore):
        conns = [open_vault_index(store.directory) for _ in range(4)]
        stores: list[VaultStore] = [SqliteVaultStore(store.directory, c) for c in conns]
    else:
        assert isinstance(store, PostgresVaultStore)
        conns, stores = [], [PostgresVaultStore(store.pool, store.project) for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def claim(i: int) -> str:
        barrier.wait()
        return stores[i].claim_reflection(f"R-{i}", now=10.0, expires_at=100.0)

    try:
        with ThreadPoolExecutor(len(stores)) as pool:
            answers = list(pool.map(claim, range(len(stores))))
    finally:
        for conn in conns:
            conn.close()
    winners = [i for i, busy in enumerate(answers) if busy == ""]
    assert len(winners) == 1 and all(busy == f"R-{winners[0]}" for busy in answers if busy)
    assert store.reflection_state().claim_run == f"R-{winners[0]}"
