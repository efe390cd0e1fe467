"""A forget of text a note's own name holds, on each backend (docs/concepts/vault.md "Forget"): the note
and its retired twin renamed (``forgotten F-… contacts``), its authors, lifecycle, retrieval-log and
promotion rows following the new name, the links to it rewritten as links to the new name (a dangling
one with the name-safe marker), and nothing of the old name left in any row; a name taken gets `` 2``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gateway.forgetting import Target, marker
from services.kb.index.purge import StoreForget
from services.kb.vault import forget_names
from services.kb.vault.forget import NAME_ROWS, forget_sqlite
from services.kb.vault.sqlite_store import SqliteVaultStore
from services.kb.vault.store import PromotionRecord, VaultStore, Writer
from services.kb.vault_pg.forget import forget_postgres
from services.kb.vault_pg.store import PostgresVaultStore

ID = "F-0123456789ab"
TEXT = "Ottoline Brasswick"
OLD = f"{TEXT} contacts"
NEW = f"forgotten {ID} contacts"
LINKS = f"# Index\n\n- [[{OLD}]]\n- [[{OLD}|{TEXT}'s card]]\n- [[{TEXT} diary#May]]\n- [[garden]]\n"
WRITER = Writer("alfred", "admin", "run-1", 1_700_000_000.0)


@dataclass(frozen=True)
class Hit:
    path: str
    entry_hash: str | None = "e" * 64


def _forget(store: VaultStore, apply: bool, target: Target = Target(text=TEXT)) -> StoreForget:
    if isinstance(store, SqliteVaultStore):
        return forget_sqlite(store, target, ID if apply else "", apply)
    assert isinstance(store, PostgresVaultStore)
    with store.writing():
        return forget_postgres(store, target, ID if apply else "", apply)


def _plant(store: VaultStore) -> None:
    store.write(f"stale__{OLD}", f"# Contacts (old)\n\n{TEXT} lived in York.\n".encode(), expected=None)
    store.write(OLD, f"# Contacts\n\n{TEXT} moved to Leeds.\n".encode(), expected=None)
    store.record_author(OLD, WRITER, created=True)
    store.write("index", LINKS.encode(), expected=None)
    store.write("garden", b"# Garden\n\nThe tamarind tree fruits in March.\n", expected=None)
    write = {"note": OLD, "project": "global", "kind": "appended", "offset": 0, "removed": "", "added": "- Leeds",
             "block": "- Leeds", "hash_before": "", "hash_after": "0" * 64, "folded_twin": ""}
    store.record_promotion(PromotionRecord("req-1", "alfred", "run-1", "updated", OLD, write, 1.0))
    store.log_retrievals([Hit(f"notes/{OLD}.md")], "search", 2.0)
    store.set_retired(OLD, None)  # a lifecycle row under the name


def test_a_note_named_with_the_text_is_renamed_with_its_twin_rows_and_links(open_store: Callable[..., VaultStore]) -> None:
    store = open_store()
    _plant(store)
    dry = _forget(store, apply=False)
    assert store.exists(OLD) and dry.left == []  # a dry run renames nothing, and would leave nothing
    named = [(p.where, p.kind) for p in dry.places if p.kind in ("name", "table")]
    assert (f"notes/{OLD}.md", "name") in named and (f"notes/stale__{OLD}.md", "name") in named
    assert any(p.where == NAME_ROWS and p.count >= 3 for p in dry.places)

    applied = _forget(store, apply=True)
    assert applied.left == []
    assert store.names(include_retired=True) == sorted(["garden", "index", NEW, f"stale__{NEW}"])
    assert (store.read(NEW) or b"").decode() == f"# Contacts\n\n{marker(ID)} moved to Leeds.\n"
    index = (store.read("index") or b"").decode()
    assert index == (f"# Index\n\n- [[{NEW}]]\n- [[{NEW}|forgotten {ID}'s card]]\n- [[forgotten {ID} diary#May]]\n"
                     "- [[garden]]\n")
    assert store.authors([NEW])[NEW].created == WRITER and store.authors([OLD]) == {}
    record = store.promotion("req-1")
    assert record is not None and record.note == NEW and record.write is not None and record.write["note"] == NEW
    assert TEXT not in " ".join(store.lifecycle()) and NEW in store.lifecycle()
    assert [h.path for h in store.search("Leeds", 10).hits] == [f"notes/{NEW}.md"]
    assert store.search("Brasswick", 10).hits == []
    again = _forget(store, apply=True)
    assert again.places == [] and again.left == []


def test_a_pattern_names_what_it_matched_in_note_names_and_promotion_records(
        open_store: Callable[..., VaultStore]) -> None:
    """A pattern's tombstones hold each string it matched: in the vault, a note's name and a promotion
    record's text count as much as a note's text."""
    store = open_store()
    store.write("badge 4471-K holders", b"# Holders\n\nThe list is at the desk.\n", expected=None)
    write = {"note": "holders", "project": "global", "kind": "appended", "offset": 0, "removed": "",
             "added": "- gate badge 9902-Q", "block": "- gate badge 9902-Q", "hash_before": "", "hash_after": "0" * 64,
             "folded_twin": ""}
    store.record_promotion(PromotionRecord("req-2", "alfred", "run-2", "updated", "holders", write, 1.0))
    done = _forget(store, True, Target.parse(None, r"badge [0-9]{4}-[A-Z]"))
    assert done.matched == {"badge 4471-K", "badge 9902-Q"} and done.left == []
    assert store.names(include_retired=False) == [f"forgotten {ID} holders"]


def test_a_new_name_already_taken_gets_a_number() -> None:
    planned = forget_names.plan([OLD, NEW, "ottoline brasswick contacts"], Target.parse(TEXT, None), ID)
    assert planned == {OLD: f"{NEW} 2", "ottoline brasswick contacts": f"{NEW} 3"}


@pytest.mark.parametrize(("name", "new"), [
    ("x" * 100 + f" {TEXT}", f"forgotten {ID}"),  # too long once renamed: the marker alone
    (f"{TEXT}", f"forgotten {ID}"),
    (f"stale__{OLD}", f"stale__{NEW}"),  # a retired name stays retired
    ("garden", None),
])
def test_the_renamer(name: str, new: str | None) -> None:
    assert forget_names.renamer({}, Target.parse(TEXT, None), ID)(name) == new
