"""The reflection's watermark moves only past the run's own writes (docs/concepts/vault.md "The watermark
and the claim"): a note another writer creates or edits while a run is under way is planned by the
next run, not swallowed by the run's watermark. On every backend; times are given."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.kb.vault.names import PRUNED_ARCHIVE
from services.kb.vault.reflection import merge as merging
from services.kb.vault.reflection import runs
from services.kb.vault.reflection.plan import PLAN_BASE, Plan, plan, revision
from services.kb.vault.reflection.runs import REVISION_DELTA
from services.kb.vault.store import VaultStore
from test_kb_vault_reflection import BACKUP_A, BACKUP_B, NOW, T, put, store  # noqa: F401 - store: the fixture

KILN = "# kiln\n\nThe pottery kiln fires at 1200 degrees on Thursdays.\n"
GLAZE = "Celadon glaze needs the [[kiln]] at cone 10.\n"
PAIR = ["nightly dumps", "staging backups"]


def backups(store: VaultStore) -> tuple[Plan, bytes]:
    """A vault of the kiln and two reworded backup notes, planned by run R-1: one cluster, the backups."""
    put(store, "kiln", KILN)
    put(store, "staging backups", BACKUP_A, age_days=20)
    b = put(store, "nightly dumps", BACKUP_B, age_days=15)
    p = plan(store, "R-1", T)
    assert names(p) == [PAIR]
    return p, b


def names(p: Plan) -> list[list[str]]:
    return [sorted(n.name for n in c.notes) for c in p.clusters]


def merge(store: VaultStore, p: Plan, name: str, content: str, run_id: str = "R-1") -> merging.MergeResult:
    [cluster] = p.clusters
    request = merging.check(merging.MergeRequest(run_id, cluster.id, name, content, ("staging backups", "nightly dumps"),
                                                 {n.name: n.sha256 for n in cluster.notes}))
    return merging.merge(store, request, NOW, lambda _content: "")


def record(store: VaultStore, p: Plan, run_id: str, outcome: str, merge_id: str = "") -> dict[str, object]:
    clusters = [{"cluster_id": c.id, "notes": sorted(n.name for n in c.notes), "outcome": outcome,
                 "merge_id": merge_id} for c in p.clusters]
    return runs.record(store, runs.RunRecord(run_id, "auto", "schedule", "ok", clusters=clusters), T + 5)


@pytest.mark.parametrize(("name", "content"), [
    ("staging backups", BACKUP_A + "Restores are tested on the first Monday of each month.\n"),  # archives two lines
    ("backups", BACKUP_A + BACKUP_B),  # a new name: both notes retired, nothing archived
])
def test_a_run_whose_only_writes_are_its_merges_sets_the_watermark(store: VaultStore, name: str,
                                                                    content: str) -> None:
    p, _ = backups(store)
    done = merge(store, p, name, content)
    assert done.outcome == "merged" and store.exists("stale__nightly dumps")
    assert (store.read(PRUNED_ARCHIVE) is not None) == (name == "staging backups")
    kept = record(store, p, "R-1", "merged", done.merge_id)
    assert kept["revision"] == revision(store) != p.revision
    again = plan(store, "R-2", T + 10)
    assert again.unchanged and again.clusters == () and again.watermark == revision(store)


def test_a_note_another_writer_creates_during_a_run_is_planned_by_the_next_run(store: VaultStore) -> None:
    p, _ = backups(store)
    done = merge(store, p, "backups", BACKUP_A + BACKUP_B)
    put(store, "glaze", GLAZE)  # an agent's create while the run is under way
    kept = record(store, p, "R-1", "merged", done.merge_id)
    assert kept["revision"] == ""  # the watermark stays as it was
    again = plan(store, "R-2", T + 10)
    assert not again.unchanged and names(again) == [["glaze", "kiln"]]
    record(store, again, "R-2", "left")
    assert plan(store, "R-3", T + 20).unchanged  # a run with no other writer moves it


def test_a_note_created_during_a_noop_run_is_planned_by_the_next_run(store: VaultStore) -> None:
    p, _ = backups(store)
    record(store, p, "R-1", "left")
    noop = plan(store, "R-2", T + 10)
    assert noop.unchanged
    put(store, "glaze", GLAZE)
    runs.record(store, runs.RunRecord("R-2", "auto", "schedule", "noop"), T + 11)
    again = plan(store, "R-3", T + 20)
    assert not again.unchanged and names(again) == [["glaze", "kiln"]]


def test_a_note_of_a_planned_cluster_edited_during_the_run_is_planned_again(store: VaultStore) -> None:
    p, b = backups(store)
    edited = b + b"Restores are tested monthly.\n"
    store.write("nightly dumps", edited, expected=b)  # a person's edit after the plan, before the merge
    changed = merge(store, p, "backups", BACKUP_A + BACKUP_B)
    assert changed.outcome == "changed" and store.merges("R-1") == []
    kept = record(store, p, "R-1", "changed")
    assert kept["revision"] == ""
    again = plan(store, "R-2", T + 10)
    assert not again.unchanged and names(again) == [PAIR]
    assert {n.name: n.content for n in again.clusters[0].notes}["nightly dumps"] == edited.decode()


def test_a_plan_or_a_merge_kept_before_the_upgrade_keeps_the_watermark(store: VaultStore) -> None:
    """A run in flight across the upgrade: its plan holds no revision, or its journal no delta."""
    p, _ = backups(store)
    state = store.reflection_state()
    store.set_reflection_plan("R-1", {k: v for k, v in state.plan.items() if k != PLAN_BASE})
    assert runs.record(store, runs.RunRecord("R-1", "auto", "schedule", "ok"), T + 5)["revision"] == ""
    again = plan(store, "R-2", T + 10)
    assert again.revision == p.revision and not again.unchanged and names(again) == [PAIR]
    done = merge(store, again, "backups", BACKUP_A + BACKUP_B, "R-2")
    [journaled] = store.merges("R-2")
    store.journal_merge(replace(journaled, entry={k: v for k, v in journaled.entry.items() if k != REVISION_DELTA}))
    assert record(store, again, "R-2", "merged", done.merge_id)["revision"] == ""
    assert not plan(store, "R-3", T + 20).unchanged
