"""The vault's weekly reflection, the KB's side (``vault.reflection``): clusters, the watermark, the claim,
the merge guards, the pruned archive and revert, on every backend (docs/concepts/vault.md "Weekly
reflection"). Times are given; note ages are set through the store (``keep_time``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from gateway.config import VaultGcSettings
from gateway.errors import FailedPrecondition, InvalidArgument, NotFound
from gateway.forgetting import Target
from services.kb.index.search import SearchResult
from services.kb.vault import listing, notes
from services.kb.vault.forget import forget_sqlite
from services.kb.vault.gc import plan as gc_plan
from services.kb.vault.names import PRUNED_ARCHIVE, PRUNED_UNTRUSTED, note_path
from services.kb.vault.reflection import merge as merging
from services.kb.vault.reflection import runs
from services.kb.vault.reflection.plan import Plan, plan
from services.kb.vault.retirement import read_marker, retire, strip_marker
from services.kb.vault.similar import find_similar
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import VaultStore
from services.kb.vault_pg.forget import forget_postgres

OpenStore = Callable[..., VaultStore]
NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
T = NOW.timestamp()

BACKUP_A = ("# staging backups\n\nThe staging database backup runs nightly on hermes with pg_dump.\n"
            "Backups are kept for fourteen days in the quillfeather bucket.\n")
BACKUP_B = ("# nightly dumps\n\nNightly, hermes dumps the staging database with pg_dump as its backup.\n"
            "Retention: backups kept fourteen days, quillfeather bucket.\n")
UNRELATED = {
    "kiln": "# kiln\n\nThe pottery kiln fires at 1200 degrees on Thursdays.\n",
    "ferry": "# ferry\n\nThe island ferry leaves the harbour at seven and returns at noon.\n",
    "rota": "# rota\n\nMondays: Ann waters the greenhouse tomatoes and orchids.\n",
}


@pytest.fixture
def store(open_store: OpenStore) -> VaultStore:
    return open_store()


def put(store: VaultStore, name: str, text: str, age_days: float = 10.0) -> bytes:
    data = text.encode()
    store.write(name, data, expected=None)
    store.keep_time(name, T - age_days * 86_400)
    return data


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def planned(store: VaultStore, run_id: str = "R-1", **kw: Any) -> Plan:
    return plan(store, run_id, T, **kw)


def by_names(p: Plan) -> list[list[str]]:
    return [sorted(n.name for n in c.notes) for c in p.clusters]


def no_screen(_content: str) -> str:
    return ""


def merge(store: VaultStore, p: Plan, names: list[str], name: str, content: str, run_id: str = "R-1",
          **kw: Any) -> merging.MergeResult:
    screen = kw.pop("screen", no_screen)
    cluster = next(c for c in p.clusters if {n.name for n in c.notes} >= set(names))
    request = merging.check(merging.MergeRequest(
        run_id, cluster.id, name, content, tuple(names), {n.name: n.sha256 for n in cluster.notes if n.name in names},
        **kw))
    return merging.merge(store, request, NOW, screen)


# --- clusters -----------------------------------------------------------------------------


def test_linked_notes_cluster_and_singletons_do_not(store: VaultStore) -> None:
    for name, text in UNRELATED.items():
        put(store, name, text)
    put(store, "glaze", "# glaze\n\nCeladon glaze needs the [[kiln]] at cone 10.\n")
    p = planned(store)
    assert by_names(p) == [["glaze", "kiln"]] and p.clusters[0].joined_by == "links"
    assert p.notes == 4 and not p.unchanged and not p.clusters[0].contradiction
    assert p.clusters[0].notes[0].sha256 == sha(store.read(p.clusters[0].notes[0].name) or b"")


def test_reworded_duplicates_cluster_by_the_merge_bar_without_a_link(store: VaultStore) -> None:
    for name, text in UNRELATED.items():
        put(store, name, text)
    put(store, "staging backups", BACKUP_A)
    put(store, "nightly dumps", BACKUP_B)
    p = planned(store)
    assert by_names(p) == [["nightly dumps", "staging backups"]] and p.clusters[0].joined_by == "similar"


def test_retired_notes_and_the_pruned_archive_are_never_clustered(store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    put(store, "glaze", "Celadon glaze needs the [[kiln]].\n")
    retire(store, "glaze", "by hand", NOW)
    store.write(PRUNED_ARCHIVE, b"The pottery kiln fires at 1200 degrees, see [[kiln]].\n", expected=None)
    p = planned(store)
    assert p.clusters == () and p.notes == 1


def test_clusters_are_ordered_by_size_then_age_and_capped(store: VaultStore) -> None:
    put(store, "a1", "alpha [[a2]] [[a3]]\n", age_days=5)
    put(store, "a2", "alpha two\n", age_days=5)
    put(store, "a3", "alpha three\n", age_days=5)
    put(store, "young1", "young [[young2]]\n", age_days=1)
    put(store, "young2", "young two\n", age_days=1)
    put(store, "old1", "old [[old2]]\n", age_days=30)
    put(store, "old2", "old two\n", age_days=30)
    p = planned(store)
    assert by_names(p) == [["a1", "a2", "a3"], ["old1", "old2"], ["young1", "young2"]] and p.remaining == 0
    runs.record(store, runs.RunRecord("R-1", "auto", "manual", "ok"), T)
    put(store, "new", "a new note\n")
    p2 = plan(store, "R-2", T + 1, max_clusters=2)
    assert by_names(p2) == [["a1", "a2", "a3"], ["old1", "old2"]] and p2.remaining == 1


def test_a_component_over_the_byte_cap_is_cut_into_windows_of_its_oldest_notes(store: VaultStore) -> None:
    put(store, "hub", "hub [[s1]] [[s2]] [[s3]] [[s4]] [[s5]]\n" + "x" * 45, age_days=9)
    for i, age in ((1, 8), (2, 7), (3, 6), (4, 5), (5, 4)):
        put(store, f"s{i}", f"s{i} " + "y" * 80 + "\n", age_days=age)
    p = planned(store, max_cluster_bytes=260)
    assert by_names(p) == [["hub", "s1", "s2"], ["s3", "s4", "s5"]] and all(c.cut for c in p.clusters)
    assert [n.name for n in p.clusters[0].notes] == ["hub", "s1", "s2"]  # oldest first
    runs.record(store, runs.RunRecord("R-1", "auto", "manual", "ok", clusters=[
        {"cluster_id": p.clusters[0].id, "notes": ["hub", "s1", "s2"], "outcome": "left"}], remaining=1), T)
    assert by_names(plan(store, "R-2", T + 1, max_cluster_bytes=260)) == [["s3", "s4", "s5"]]  # the next window
    small = plan(store, "R-2", T + 2, max_cluster_bytes=100)
    assert small.busy_with == "" and not small.unchanged and small.clusters == ()  # no two notes fit together


def test_contradicting_claims_mark_the_cluster(store: VaultStore) -> None:
    put(store, "port a", "---\nclaims:\n  - id: db-port\n    text: 5432\n---\nSee [[port b]].\n")
    put(store, "port b", "---\nclaims:\n  - id: db-port\n    text: 5433\n---\nThe database port.\n")
    [cluster] = planned(store).clusters
    assert "db-port" in cluster.contradiction and "'port a'" in cluster.contradiction


# --- the watermark and the claim ----------------------------------------------------------


def test_a_vault_unchanged_since_the_watermark_builds_no_cluster(store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    put(store, "glaze", "Celadon glaze needs the [[kiln]].\n")
    first = planned(store)
    assert first.clusters and first.watermark == ""
    kept = runs.record(store, runs.RunRecord("R-1", "auto", "schedule", "ok", clusters=[
        {"cluster_id": first.clusters[0].id, "notes": ["glaze", "kiln"], "outcome": "left", "reason": "fine"}]), T)
    assert kept["revision"] == first.revision
    again = plan(store, "R-2", T + 10)
    assert again.unchanged and again.clusters == () and again.revision == again.watermark == first.revision
    runs.record(store, runs.RunRecord("R-2", "auto", "schedule", "noop"), T + 11)
    put(store, "ferry", UNRELATED["ferry"])
    changed = plan(store, "R-3", T + 20)
    assert not changed.unchanged and changed.clusters == ()  # the left cluster is not planned again
    runs.record(store, runs.RunRecord("R-3", "auto", "schedule", "ok"), T + 21)
    assert plan(store, "R-3b", T + 22).unchanged
    runs.record(store, runs.RunRecord("R-3b", "auto", "schedule", "noop"), T + 23)
    store.write("glaze", b"Celadon glaze needs the [[kiln]] at cone 10.\n",
                expected=b"Celadon glaze needs the [[kiln]].\n")
    assert by_names(plan(store, "R-4", T + 30)) == [["glaze", "kiln"]]  # its notes changed: planned again


def test_a_failed_run_or_one_with_clusters_left_keeps_the_watermark(store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    planned(store)
    runs.record(store, runs.RunRecord("R-1", "auto", "schedule", "failed", "reviewer down"), T)
    assert not plan(store, "R-2", T + 1).unchanged
    runs.record(store, runs.RunRecord("R-2", "auto", "schedule", "ok", remaining=3), T + 2)
    assert not plan(store, "R-3", T + 3).unchanged


def test_a_cluster_whose_reviewer_failed_is_asked_about_again_and_keeps_the_watermark(store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    put(store, "glaze", "Celadon glaze needs the [[kiln]].\n")
    [cluster] = planned(store).clusters
    runs.record(store, runs.RunRecord("R-1", "propose", "schedule", "ok", clusters=[
        {"cluster_id": cluster.id, "notes": ["glaze", "kiln"], "outcome": "unreviewed",
         "reason": "the reviewer failed: timed out"}]), T)
    again = plan(store, "R-2", T + 1)
    assert not again.unchanged and by_names(again) == [["glaze", "kiln"]]  # neither behind the watermark nor reviewed


def test_the_claim_makes_a_second_run_busy_until_it_expires_or_is_recorded(store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    assert planned(store, "R-1", claim_seconds=60).busy_with == ""
    busy = plan(store, "R-2", T + 30)
    assert busy.busy_with == "R-1" and busy.clusters == () and busy.revision == ""
    assert plan(store, "R-2", T + 61).busy_with == ""  # expired: taken over
    assert plan(store, "R-1", T + 62).busy_with == "R-2"
    runs.record(store, runs.RunRecord("R-2", "auto", "manual", "ok"), T + 63)
    assert plan(store, "R-1", T + 64).busy_with == ""


# --- merges -------------------------------------------------------------------------------


def backup_vault(store: VaultStore) -> tuple[Plan, bytes, bytes]:
    for name, text in UNRELATED.items():
        put(store, name, text)
    a = put(store, "staging backups", BACKUP_A, age_days=20)
    b = put(store, "nightly dumps", BACKUP_B, age_days=15)
    return planned(store), a, b


MERGED = BACKUP_A + "Restores are tested on the first Monday of each month.\n"


def test_a_merge_writes_retires_archives_and_journals_and_revert_puts_back_exactly(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    before = {n: store.read(n) for n in store.names(include_retired=True)}
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED, reason="duplicates")
    assert (r.outcome, r.retired) == ("merged", ("nightly dumps",)) and r.merge_id.startswith("M-")
    assert r.distinct_lines == 4 and r.pruned_lines == 2
    assert store.read("staging backups") == MERGED.encode() and store.read("nightly dumps") is None
    stale = store.read("stale__nightly dumps") or b""
    marker = read_marker(stale)
    assert strip_marker(stale) == (b, True) and marker is not None and marker.reason.startswith(
        "vault reflection: merged into staging backups (run R-1, M-")
    archive = (store.read(PRUNED_ARCHIVE) or b"").decode()
    assert "Retention: backups kept fourteen days, quillfeather bucket." in archive
    assert "Nightly, hermes dumps the staging database with pg_dump as its backup." in archive
    assert any(h.path == note_path(PRUNED_ARCHIVE) for h in store.search("Retention quillfeather", 20).hits)
    assert [m.merge_id for m in store.merges("R-1")] == [r.merge_id]
    runs.record(store, runs.RunRecord("R-1", "auto", "manual", "ok", clusters=[
        {"cluster_id": p.clusters[0].id, "notes": ["nightly dumps", "staging backups"], "outcome": "merged",
         "merge_id": r.merge_id}]), T + 5)
    reverted = runs.revert(store, "", True, T + 10)
    assert reverted.run_id == "R-1" and reverted.restored == ("nightly dumps", "staging backups") and reverted.left == ()
    after = {n: store.read(n) for n in store.names(include_retired=True) if n != PRUNED_ARCHIVE}
    assert after == before and after["staging backups"] == a and after["nightly dumps"] == b
    [listed] = runs.runs(store)
    assert listed["run_id"] == "R-1" and listed["reverted_at"] == pytest.approx(T + 10)
    with pytest.raises(NotFound):
        runs.revert(store, "", True, T + 11)  # nothing left to revert


def test_a_merge_into_a_new_name_is_deleted_by_revert(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    r = merge(store, p, ["staging backups", "nightly dumps"], "backups", BACKUP_A + BACKUP_B)
    assert r.outcome == "merged" and set(r.retired) == {"staging backups", "nightly dumps"} and r.pruned_lines == 0
    assert store.read(PRUNED_ARCHIVE) is None
    reverted = runs.revert(store, "R-1", False, T + 1)
    assert reverted.restored == ("backups", "nightly dumps", "staging backups")
    assert store.read("backups") is None and store.read("staging backups") == a and store.read("nightly dumps") == b
    assert not store.exists("stale__staging backups")


def test_revert_leaves_a_note_changed_since_the_run_with_the_reason(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED)
    store.write("staging backups", b"edited by a person\n", expected=MERGED.encode())
    reverted = runs.revert(store, "R-1", False, T + 1)
    assert reverted.restored == ("nightly dumps",) and store.read("nightly dumps") == b
    assert reverted.left == ("staging backups: changed since the run; left as it is",)
    assert store.read("staging backups") == b"edited by a person\n"


def test_a_note_changed_since_the_plan_leaves_the_cluster_alone(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    store.write("nightly dumps", b + b"One more line.\n", expected=b)
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED)
    assert r.outcome == "changed" and "'nightly dumps' changed since the plan" in r.reason
    assert store.read("staging backups") == a and store.merges("R-1") == [] and store.read(PRUNED_ARCHIVE) is None


def test_a_merge_dropping_more_than_the_share_is_refused(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", "# staging backups\n\nBackups.\n",
              max_drop_share=0.5)
    assert r.outcome == "refused" and "drops 4 of the cluster's 4 distinct lines" in r.reason
    assert store.read("staging backups") == a and store.read("nightly dumps") == b


def test_a_dry_run_checks_every_guard_and_writes_nothing(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    names = store.names(include_retired=True)
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED, dry_run=True)
    assert r.outcome == "merged" and r.merge_id == "" and r.pruned_lines == 2
    assert store.names(include_retired=True) == names and store.read("staging backups") == a


def test_contradicting_claims_are_refused_for_a_person(store: VaultStore) -> None:
    put(store, "port a", "---\nclaims:\n  - id: db-port\n    text: 5432\n---\nSee [[port b]].\n")
    put(store, "port b", "---\nclaims:\n  - id: db-port\n    text: 5433\n---\nThe database port.\n")
    p = planned(store)
    r = merge(store, p, ["port a", "port b"], "port a", "---\nclaims:\n  - id: db-port\n    text: 5432\n---\nPort.\n")
    assert r.outcome == "refused" and "contradicting frontmatter claims" in r.reason and store.read("port b")


def test_a_merge_never_reaches_beyond_its_cluster(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    cluster = p.clusters[0]
    kiln = store.read("kiln") or b""
    request = merging.check(merging.MergeRequest(
        "R-1", cluster.id, "staging backups", MERGED, ("staging backups", "nightly dumps", "kiln"),
        {**{n.name: n.sha256 for n in cluster.notes}, "kiln": sha(kiln)}))
    r = merging.merge(store, request, NOW, no_screen)
    assert r.outcome == "refused" and "outside cluster" in r.reason and store.read("kiln") == kiln
    over = merging.check(merging.MergeRequest("R-1", cluster.id, "kiln", MERGED, ("staging backups",),
                                              {"staging backups": cluster.notes[0].sha256}))
    assert "exists and is not one of replaces" in merging.merge(store, over, NOW, no_screen).reason
    with pytest.raises(FailedPrecondition):
        merging.merge(store, merging.check(merging.MergeRequest(
            "R-9", cluster.id, "x", MERGED, ("kiln",), {"kiln": sha(kiln)})), NOW, no_screen)


def test_the_screen_refuses_the_merged_content(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED,
              screen=lambda content: "the merged content holds a secret (aws-access-key, line 2)")
    assert r.outcome == "refused" and "secret" in r.reason and store.read("staging backups") == a


class Blind:
    """The vault's store whose search never finds the pruned archive (the recall probe's seam)."""

    def __init__(self, store: VaultStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def search(self, query: str, limit: int | None) -> SearchResult:
        found = self._store.search(query, limit)
        return SearchResult([h for h in found.hits if h.path != note_path(PRUNED_ARCHIVE)], found.generation, found.stale)


def test_a_dropped_line_the_recall_probe_does_not_find_refuses_the_merge_and_undoes_the_archive(
        store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    cluster = p.clusters[0]
    request = merging.check(merging.MergeRequest(
        "R-1", cluster.id, "staging backups", MERGED, ("staging backups", "nightly dumps"),
        {n.name: n.sha256 for n in cluster.notes}))
    r = merging.merge(Blind(store), request, NOW, no_screen)  # type: ignore[arg-type]
    assert r.outcome == "refused" and "recall probe" in r.reason
    assert store.read(PRUNED_ARCHIVE) is None and store.read("nightly dumps") == b and store.merges("R-1") == []


def test_malformed_requests_are_invalid_arguments() -> None:
    good = merging.MergeRequest("R-1", "C-0123456789ab", "n", "text\n", ("n",), {"n": "0" * 64})
    assert merging.check(good).max_drop_share == 0.5
    for bad, field in [
        ({"run_id": ""}, "run_id"), ({"cluster_id": "C-1"}, "cluster_id"), ({"name": "stale__n"}, "reserved"),
        ({"name": PRUNED_ARCHIVE}, "reserved"), ({"content": "x" * 102_401}, "content"), ({"replaces": ()}, "replaces"),
        ({"expected": {}}, "expected_sha256"), ({"max_drop_share": 1.5}, "max_drop_share"),
    ]:
        with pytest.raises(InvalidArgument, match=field):
            merging.check(good.__class__(**{**good.__dict__, **bad}))
    with pytest.raises(InvalidArgument, match="mode"):
        runs.check(runs.RunRecord("R-1", "sometimes", "manual", "ok"))


def test_a_forget_scrubs_the_journal_the_audit_and_the_archive_and_revert_still_puts_back(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    r = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED)
    runs.record(store, runs.RunRecord("R-1", "propose", "manual", "ok", proposals=[
        {"cluster_id": p.clusters[0].id, "name": "x", "content": "Retention: backups kept fourteen days", "state": "pending"}]),
        T + 1)
    target = Target.parse("quillfeather", None)
    if isinstance(store, SqliteVaultStore):
        found, table = forget_sqlite(store, target, "F-0123456789ab", True), "kb_reflection"
    else:
        with store.writing():
            found, table = forget_postgres(store, target, "F-0123456789ab", True), "reflection"  # type: ignore[arg-type]
    assert (table, "table", 5) in [(p.where, p.kind, p.count) for p in found.places]
    journal = json.dumps([m.entry for m in store.merges("R-1")]) + json.dumps([a.record for a in store.reflection_audit(10)])
    assert "quillfeather" not in journal and "[forgotten F-0123456789ab]" in journal
    assert b"quillfeather" not in (store.read(PRUNED_ARCHIVE) or b"")
    reverted = runs.revert(store, "R-1", False, T + 2)
    assert reverted.left == () and set(reverted.restored) == {"nightly dumps", "staging backups"}
    assert store.read("nightly dumps") == b.replace(b"quillfeather", b"[forgotten F-0123456789ab]") and r.merge_id


def test_a_merge_proposed_by_one_run_is_accepted_by_a_later_one(store: VaultStore) -> None:
    p, a, b = backup_vault(store)
    cluster = p.clusters[0]
    shas = {n.name: n.sha256 for n in cluster.notes}
    proposed = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED, dry_run=True)
    assert proposed.outcome == "merged" and store.read("nightly dumps") == b
    runs.record(store, runs.RunRecord("R-1", "propose", "schedule", "ok", clusters=[
        {"cluster_id": cluster.id, "notes": sorted(shas), "outcome": "proposed"}], proposals=[
        {"cluster_id": cluster.id, "name": "staging backups", "content": MERGED,
         "replaces": ["staging backups", "nightly dumps"], "expected_sha256": shas, "state": "pending"}]), T)
    decide = plan(store, "R-2", T + 10, max_clusters=1)
    assert decide.unchanged and decide.clusters == ()  # nothing to plan: the proposal is what is decided
    accept = merging.check(merging.MergeRequest("R-2", cluster.id, "staging backups", MERGED,
                                                ("staging backups", "nightly dumps"), shas))
    beyond = merging.check(merging.MergeRequest("R-2", cluster.id, "staging backups", MERGED,
                                                ("staging backups", "kiln"), {**shas, "kiln": "0" * 64}))
    assert "outside cluster" in merging.merge(store, beyond, NOW, no_screen).reason
    other = merging.check(merging.MergeRequest("R-2", "C-0123456789ab", "x", MERGED, ("kiln",), {"kiln": "0" * 64}))
    assert "neither in run R-2's plan nor a proposal" in merging.merge(store, other, NOW, no_screen).reason
    done = merging.merge(store, accept, NOW, no_screen)
    assert done.outcome == "merged" and done.retired == ("nightly dumps",) and store.read("staging backups") == MERGED.encode()
    assert [m.merge_id for m in store.merges("R-2")] == [done.merge_id]


UNTRUSTED_B = "---\nprovenance: untrusted\n---\n" + BACKUP_B


def test_a_merge_never_raises_trust_and_untrusted_lines_keep_theirs_in_the_archive(store: VaultStore) -> None:
    for name, text in UNRELATED.items():
        put(store, name, text)
    put(store, "staging backups", BACKUP_A, age_days=20)
    put(store, "nightly dumps", UNTRUSTED_B, age_days=15)
    p = planned(store)
    assert by_names(p) == [["nightly dumps", "staging backups"]]
    trusted = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", MERGED)
    assert trusted.outcome == "refused" and "'nightly dumps' is untrusted" in trusted.reason
    marked = "---\nprovenance: untrusted\n---\n" + MERGED
    done = merge(store, p, ["staging backups", "nightly dumps"], "staging backups", marked)
    assert done.outcome == "merged" and done.pruned_lines == 2 and store.read(PRUNED_ARCHIVE) is None
    archive = (store.read(PRUNED_UNTRUSTED) or b"").decode()
    assert archive.startswith("---\nprovenance: untrusted\n---\n<!-- pruned: ") and "Retention: backups kept" in archive
    hits = store.search("Retention quillfeather", 20).hits
    assert [h.provenance for h in hits if h.path == note_path(PRUNED_UNTRUSTED)] == ["untrusted"]


def test_the_pruned_archive_is_read_and_searched_but_never_written_listed_collected_or_a_candidate(
        store: VaultStore) -> None:
    put(store, "kiln", UNRELATED["kiln"])
    store.write(PRUNED_ARCHIVE, b"<!-- pruned: x -->\nThe pottery kiln fires at 1200 degrees on Thursdays.\n", expected=None)
    store.keep_time(PRUNED_ARCHIVE, T - 1_000 * 86_400)
    for write in (lambda: notes.create(store, "pruned__x", "text\n", confirm=True),
                  lambda: notes.update(store, PRUNED_ARCHIVE, "text\n", confirm=True)):
        with pytest.raises(InvalidArgument, match="pruned"):
            write()
    assert notes.get(store, PRUNED_ARCHIVE).content.endswith("on Thursdays.\n")
    assert listing.names(store, include_retired=True) == ["kiln"]
    due = gc_plan(store.ages().live, set(), {}, VaultGcSettings(True, 1, 50), T)
    assert [d.name for d in due.retire] == ["kiln"] and due.skipped == ()  # the archive, 1,000 days idle, is not due
    assert [r.name for r in find_similar(store, UNRELATED["kiln"], exclude={"kiln"})] == []
