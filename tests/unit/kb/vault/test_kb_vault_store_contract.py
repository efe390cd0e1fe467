"""The vault store's contract (``store.VaultStore``), run against every backend through one fixture, so a
difference between backends is a failing test (docs/architecture.md "The vault store")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gateway.atomic import WriteConflict
from gateway.config import VaultGcSettings
from services.kb.archive.retrieval_log import FOLD_AT_ROWS
from services.kb.vault.gc import NoteRef, plan
from services.kb.vault.store import Authors, NoteState, PromotionRecord, VaultStore, Writer

OpenStore = Callable[..., VaultStore]
ALFRED = Writer("alfred", "admin", "", 10.0)
BOB = Writer("bob", "bob-key", "run-1", 20.0)


@pytest.fixture
def vault_store(open_store: OpenStore) -> VaultStore:
    return open_store()


def hits(store: VaultStore, query: str) -> list[str]:
    return [h.path for h in store.search(query, 20).hits]


def test_a_create_lands_the_note_and_its_index_and_only_once(vault_store: VaultStore) -> None:
    assert vault_store.project == "global"
    assert vault_store.read("kiln") is None and not vault_store.exists("kiln")
    with vault_store.writing():
        vault_store.write("kiln", b"The kiln fires at 1200 degrees.\n", expected=None)
    assert vault_store.read("kiln") == b"The kiln fires at 1200 degrees.\n" and vault_store.exists("kiln")
    assert hits(vault_store, "kiln degrees") == ["notes/kiln.md"]
    with pytest.raises(WriteConflict):
        vault_store.write("kiln", b"a second create\n", expected=None)
    assert vault_store.read("kiln") == b"The kiln fires at 1200 degrees.\n"


def test_an_update_is_compare_and_swap(vault_store: VaultStore) -> None:
    vault_store.write("rota", b"Mondays: Ann\n", expected=None)
    vault_store.write("rota", b"Mondays: Bea\n", expected=b"Mondays: Ann\n")
    with pytest.raises(WriteConflict):
        vault_store.write("rota", b"Mondays: Cid\n", expected=b"Mondays: Ann\n")
    assert vault_store.read("rota") == b"Mondays: Bea\n"
    assert hits(vault_store, "Bea") == ["notes/rota.md"] and hits(vault_store, "Cid") == []


def test_a_write_drops_the_names_it_replaces_once_it_landed(vault_store: VaultStore) -> None:
    vault_store.write("stale__ferry", b"old ferry times\n", expected=None)
    vault_store.write("ferry", b"new ferry times\nold ferry times\n", expected=None, drop=("stale__ferry",))
    assert not vault_store.exists("stale__ferry") and vault_store.names(include_retired=True) == ["ferry"]
    assert hits(vault_store, "ferry") == ["notes/ferry.md"]


def test_a_delete_takes_the_note_and_its_rows_and_may_be_compare_and_swap(vault_store: VaultStore) -> None:
    vault_store.write("vpn", b"The VPN gateway is vpn.example.org.\n", expected=None)
    vault_store.write("dns", b"DNS is served by unbound.\n", expected=None)
    assert vault_store.delete("vpn") and vault_store.read("vpn") is None and hits(vault_store, "gateway") == []
    assert not vault_store.delete("vpn")
    with pytest.raises(WriteConflict):
        vault_store.delete("dns", expected=b"something else\n")
    assert vault_store.delete("dns", expected=b"DNS is served by unbound.\n") and vault_store.names(include_retired=True) == []


def test_names_are_sorted_and_retired_ones_only_when_asked(vault_store: VaultStore) -> None:
    for name in ("b", "stale__c", "a", "Z"):
        vault_store.write(name, f"note {name}\n".encode(), expected=None)
    assert vault_store.names(include_retired=False) == ["Z", "a", "b"]
    assert vault_store.names(include_retired=True) == ["Z", "a", "b", "stale__c"]


def test_a_move_needs_a_free_target_and_an_unchanged_source(vault_store: VaultStore) -> None:
    vault_store.write("kiln", b"kiln rota\n", expected=None)
    vault_store.move("kiln", "stale__kiln", b"<!-- retired -->\nkiln rota\n", expected=b"kiln rota\n")
    assert vault_store.read("kiln") is None and vault_store.read("stale__kiln") == b"<!-- retired -->\nkiln rota\n"
    assert hits(vault_store, "rota") == ["notes/stale__kiln.md"]
    vault_store.write("kiln", b"a new kiln note\n", expected=None)
    with pytest.raises(WriteConflict):  # the target is taken: nothing moves
        vault_store.move("kiln", "stale__kiln", b"x\n", expected=b"a new kiln note\n")
    with pytest.raises(WriteConflict):  # the source changed since it was read: nothing moves
        vault_store.move("stale__kiln", "other", b"x\n", expected=b"kiln rota\n")
    assert not vault_store.exists("other") and vault_store.read("kiln") == b"a new kiln note\n"
    assert vault_store.read("stale__kiln") == b"<!-- retired -->\nkiln rota\n"


def test_stat_and_ages_describe_the_notes(vault_store: VaultStore) -> None:
    vault_store.write("big", b"# Big\n" + b"x" * 5000 + b"\n", expected=None)
    vault_store.write("stale__old", b"old\n", expected=None)
    stat = vault_store.stat("big", 6)
    assert stat is not None and (stat.head, stat.size_bytes) == (b"# Big\n", 5007) and stat.updated_at > 0
    assert vault_store.stat("missing", 6) is None
    ages = vault_store.ages()
    assert set(ages.live) == {"big"} and ages.twins == {"old"}



def test_keep_time_sets_a_notes_last_change_and_nothing_else(vault_store: VaultStore) -> None:
    vault_store.write("kiln", b"# Kiln\n\nFire at 1200 degrees.\n", expected=None)
    vault_store.write("stale__old", b"old\n", expected=None)
    vault_store.record_author("kiln", ALFRED, created=True)
    vault_store.keep_time("kiln", 1_700_000_000.25)
    vault_store.keep_time("stale__old", 1_600_000_000.0)
    vault_store.keep_time("missing", 1.0)
    assert vault_store.ages().live == {"kiln": pytest.approx(1_700_000_000.25, abs=1e-6)}
    assert (vault_store.stat("stale__old", 4) or pytest.fail()).updated_at == pytest.approx(1_600_000_000.0, abs=1e-6)
    assert vault_store.read("kiln") == b"# Kiln\n\nFire at 1200 degrees.\n" and not vault_store.exists("missing")
    assert vault_store.authors(["kiln"])["kiln"].created == ALFRED
    assert hits(vault_store, "degrees") == ["notes/kiln.md"]

def test_search_ranks_and_applies_the_twin_rule(vault_store: VaultStore) -> None:
    vault_store.write("tides", b"High tide at the harbour is at noon.\n", expected=None)
    vault_store.write("stale__tides", b"High tide at the harbour was at dawn.\n", expected=None)
    vault_store.write("boats", b"Boats leave the harbour at dusk.\n", expected=None)
    assert sorted(hits(vault_store, "harbour")) == ["notes/boats.md", "notes/tides.md"]  # the twin hidden
    assert hits(vault_store, "noon tide")[0] == "notes/tides.md"
    assert isinstance(hits(vault_store, 'harbour" OR (tide* NEAR'), list)  # user input never raises
    vault_store.delete("tides")
    assert "notes/stale__tides.md" in hits(vault_store, "harbour")


def test_words_in_no_single_note_fall_back_to_the_notes_holding_some(vault_store: VaultStore) -> None:
    vault_store.write("kiln", b"The kiln fires at 1200 degrees.\n", expected=None)
    vault_store.write("glaze", b"A blue glaze needs cobalt.\n", expected=None)
    vault_store.write("both", b"Glaze before the kiln, glaze after.\n", expected=None)
    vault_store.write("other", b"Nothing about pottery.\n", expected=None)
    found = vault_store.search("kiln glaze", 20).hits
    assert [h.path for h in found][0] == "notes/both.md"  # every word: ahead of every partial match
    assert sorted(h.path for h in found) == ["notes/both.md", "notes/glaze.md", "notes/kiln.md"]
    assert found[0].score > 1 > max(h.score for h in found[1:])
    assert sorted(hits(vault_store, "cobalt degrees")) == ["notes/glaze.md", "notes/kiln.md"]
    assert sorted(hits(vault_store, "cobalt and degrees")) == ["notes/glaze.md", "notes/kiln.md"]  # "and" drives none
    assert hits(vault_store, "cobalt") == ["notes/glaze.md"] and hits(vault_store, "cobalt zebra") == ["notes/glaze.md"]
    assert [h.path for h in vault_store.search("kiln glaze", 1).hits] == ["notes/both.md"]


def test_cjk_words_in_no_single_note_fall_back_too(open_store: OpenStore) -> None:
    for tokenizer in ("unicode61", "trigram"):
        store = open_store(tokenizer)
        store.write("天気", "東京の天気は晴れです。\n".encode(), expected=None)
        store.write("電車", "大阪行きの電車は九時に出ます。\n".encode(), expected=None)
        assert sorted(hits(store, "天気 電車")) == ["notes/天気.md", "notes/電車.md"]
        assert hits(store, "晴れ 東京") == ["notes/天気.md"]


def test_a_trigram_vault_finds_cjk_text(open_store: OpenStore) -> None:
    store = open_store("trigram")
    store.write("天気", "東京の天気は晴れです。\n".encode(), expected=None)
    store.write("電車", "大阪行きの電車は九時に出ます。\n".encode(), expected=None)
    assert hits(store, "天気は晴れ") == ["notes/天気.md"]
    assert hits(store, "電車は九時") == ["notes/電車.md"]


def test_recall_and_the_vocabulary_feed_the_near_duplicate_check(vault_store: VaultStore) -> None:
    vault_store.write("backups", b"Nightly backups go to the acme bucket.\n", expected=None)
    vault_store.write("deploys", b"Deploys roll the prod cluster nightly.\n", expected=None)
    vault_store.write("stale__backups", b"Backups went to tape.\n", expected=None)
    recalled = vault_store.recall(["backup", "acme"], 200)
    assert recalled[0][0] == "backups" and "the acme bucket" in recalled[0][1]  # the chunk that matched
    assert {name for name, _ in recalled} == {"backups", "stale__backups"}
    assert vault_store.recall(['quo"te'], 200) == []  # terms are quoted, never parsed
    counts = vault_store.term_counts(["nightly", "backup", "zebra"])
    assert counts == {"nightly": 2, "backup": 2, "zebra": 0}
    assert vault_store.chunk_count() == 3


def test_term_counts_count_the_notes_holding_a_word_that_starts_with_the_term(vault_store: VaultStore) -> None:
    vault_store.write("deploys", b"Deploys roll the cluster nightly.\n", expected=None)
    vault_store.write("twice", b"Deploy once, then deploy at noon.\n", expected=None)
    vault_store.write("script", b"The redeploy script rolls back.\n", expected=None)
    vault_store.write("stale__old", b"Deploying by hand, nightly.\n", expected=None)
    counts = vault_store.term_counts(["deploy", "roll", "nightly", "redeploy", "noon", "zebra", "--"])
    assert counts == {"deploy": 3, "roll": 2, "nightly": 2, "redeploy": 1, "noon": 1, "zebra": 0, "--": 0}
    assert vault_store.term_counts([]) == {}


def test_authors_keep_the_creation_and_follow_changes(vault_store: VaultStore) -> None:
    assert vault_store.authors(["n"]) == {}
    vault_store.write("n", b"a note\n", expected=None)
    vault_store.write("hand", b"a note written by hand\n", expected=None)
    vault_store.record_author("n", ALFRED, created=True)
    vault_store.record_author("n", BOB, created=False)
    vault_store.record_author("hand", BOB, created=False)
    assert vault_store.authors(["n", "hand", "other"]) == {"n": Authors(ALFRED, BOB), "hand": Authors(None, BOB)}
    vault_store.forget_author("n")
    assert vault_store.authors(["n"]) == {}


def test_a_name_held_only_retired_keeps_its_authors(vault_store: VaultStore) -> None:
    vault_store.write("stale__gone", b"retired\n", expected=None)
    vault_store.record_author("gone", ALFRED, created=True)
    assert vault_store.authors(["gone"]) == {"gone": Authors(ALFRED, ALFRED)}


def test_the_retrieval_log_folds_once_per_claimed_day(vault_store: VaultStore) -> None:
    refs = [NoteRef("notes/a.md", "h1"), NoteRef("notes/stale__b.md", "h2"), NoteRef("notes/a.md", None)]
    assert vault_store.log_retrievals(refs, "search", 100.0) == 2
    assert vault_store.log_retrievals([NoteRef("notes/a.md", "h1")], "get", 150.0) == 1
    claim = vault_store.claim_day("2026-06-01", '{"finished": false}')
    assert (claim.summary, claim.folded) == (None, 3)
    states = vault_store.lifecycle()
    assert (states["a"].retrieval_count, states["a"].last_retrieved) == (2, 150.0)
    assert (states["b"].retrieval_count, states["b"].retired_at) == (1, None)
    again = vault_store.claim_day("2026-06-01", '{"finished": false}')
    assert (again.summary, again.folded) == ('{"finished": false}', 0)
    vault_store.finish_day('{"finished": true}')
    assert vault_store.claim_day("2026-06-01", "{}").summary == '{"finished": true}'
    vault_store.set_retired("a", 200.0)
    assert vault_store.lifecycle()["a"].retired_at == 200.0
    vault_store.set_retired("a", None)
    vault_store.log_retrievals([NoteRef("notes/a.md", "h1")], "get", 300.0)
    assert vault_store.claim_day("2026-06-02", "{}").folded == 1
    assert vault_store.lifecycle()["a"] == replace(states["a"], retrieval_count=3, last_retrieved=300.0)


def test_the_retrieval_log_stays_bounded_without_a_claimed_day_and_the_gc_decides_the_same(
    vault_store: VaultStore,
) -> None:
    """Hits over simulated months, no GC in between: the log folds itself at ``FOLD_AT_ROWS`` rows, and
    the GC's plan then is the plan of every hit counted at once."""
    day, start = 86_400.0, 1_750_000_000.0
    names = [f"n{k}" for k in range(40)]
    expected: dict[str, tuple[int, float]] = {}
    batch = 997
    for step in range(26):  # 25,922 hits over 200 days; notes n20.. are last read on day 40
        at = start + step * 8 * day
        pool = names if step <= 5 else names[:20]
        picked = [pool[(step + k) % len(pool)] for k in range(batch)]
        assert vault_store.log_retrievals([NoteRef(f"notes/{n}.md", "h") for n in picked], "search", at) == batch
        for n in picked:
            expected[n] = (expected.get(n, (0, at))[0] + 1, at)
    assert vault_store.claim_day("2026-06-30", "{}").folded < FOLD_AT_ROWS  # the rest was folded on the way
    states = vault_store.lifecycle()
    assert {n: (s.retrieval_count, s.last_retrieved) for n, s in states.items()} == expected
    now = start + 210 * day
    live = {n: start for n in names}
    every_hit = {n: NoteState(last, count) for n, (count, last) in expected.items()}
    gc_settings = VaultGcSettings(enabled=True, stale_days=90, max_retirements_per_run=50)
    decided = plan(live, set(), states, gc_settings, now)
    assert decided == plan(live, set(), every_hit, gc_settings, now)
    assert {d.name for d in decided.retire} == set(names[20:])


def test_a_promotion_answer_is_kept_once_under_its_request_id(vault_store: VaultStore) -> None:
    assert vault_store.promotion("alfred/r1/r1/2") is None
    write = {"note": "kiln", "project": "global", "kind": "created", "offset": 0, "removed": "", "added": "x\n",
             "block": "x\n", "hash_before": "", "hash_after": "ab", "folded_twin": ""}
    first = PromotionRecord("alfred/r1/r1/2", "alfred", "r1", "created", "kiln", write, 1_700_000_000.5)
    with vault_store.writing():
        assert vault_store.record_promotion(first)
    assert not vault_store.record_promotion(replace(first, outcome="updated", note="other", write=None))
    assert vault_store.promotion("alfred/r1/r1/2") == first
    unchanged = PromotionRecord("alfred/r1/r1/3", "alfred", "r1", "unchanged", "kiln", None, 5.0)
    assert vault_store.record_promotion(unchanged) and vault_store.promotion("alfred/r1/r1/3") == unchanged
