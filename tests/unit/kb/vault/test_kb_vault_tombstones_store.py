"""The vault's tombstones on each backend (``VaultStore.share_tombstones`` and the rest; docs/concepts/forget.md
"Shared tombstones across hosts"): kept by id with their own salt, lifted with their siblings, and a mark
that changes with every add and lift."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import OpenStore

from gateway.forgetting import SHARED_SCOPE, Tombstones


def _shared(tmp_path: Path, forget_id: str, *texts: str) -> list:
    at = f"2026-12-07T05:00:{forget_id[-2:]}Z"  # in the order of the ids
    return Tombstones(tmp_path / "home").add(forget_id, texts, scope=SHARED_SCOPE, at=at, by="admin", places=0)


def test_tombstones_are_kept_with_their_salt_and_lifted_with_their_siblings(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    assert store.tombstones() == [] and store.tombstones_mark() == (0, 0)
    one = _shared(tmp_path, "F-0000000000a1", "Marguerite Pellworth", "Hunter's lodge key 4471")
    two = _shared(tmp_path, "F-0000000000b2", "the third forgotten thing")
    assert store.share_tombstones(one) == 2 and store.share_tombstones(two) == 1
    assert store.tombstones() == [*one, *two]  # every field back as written, the salt included
    assert store.tombstones_mark() == (3, 0)
    assert store.share_tombstones([replace(t, places=7) for t in one]) == 0  # known: places only
    assert [t.places for t in store.tombstones()] == [7, 7, 0]
    assert store.lift_tombstone("F-0000000000a1", "2026-12-07T06:00:00Z") == 2
    assert store.tombstones() == two and store.tombstones_mark() == (3, 2)
    assert store.lift_tombstone("F-0000000000a1", "2026-12-07T06:00:01Z") == 0  # lifted already
    assert store.lift_tombstone("F-0000000000b", "2026-12-07T06:00:01Z") == 0  # a prefix is not a sibling
    assert store.share_tombstones(one) == 0 and store.tombstones() == two  # a lift is not undone by a resend


def test_the_tombstones_hold_no_word_of_the_text(open_store: OpenStore, tmp_path: Path) -> None:
    store = open_store()
    store.share_tombstones(_shared(tmp_path, "F-0000000000c3", "Marguerite Pellworth"))
    held = repr(store.tombstones()).lower()
    assert "marguerite" not in held and "pellworth" not in held


@pytest.mark.parametrize("project_count", [2])
def test_each_vault_has_its_own_tombstones(open_store: OpenStore, tmp_path: Path, project_count: int) -> None:
    stores = [open_store() for _ in range(project_count)]
    stores[0].share_tombstones(_shared(tmp_path, "F-0000000000d4", "Marguerite Pellworth"))
    assert [len(s.tombstones()) for s in stores] == [1, 0]
