"""A promotion request lands once and is undone once (vault.promotion_record), on every backend (``open_store``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.errors import InvalidArgument
from gateway.promotion_write import PromotionWrite
from services.kb.vault.promotion import CREATED, DECLINED, MERGED, UNCHANGED, UPDATED, PromoteResult
from services.kb.vault.promotion_record import check_request_id, promote_once, undo_once
from services.kb.vault.store import VaultStore
from services.kb.vault.unpromote import UndoResult

OpenStore = Callable[..., VaultStore]
FACT = "- The kiln in shed two fires at 1200 degrees on Fridays."


def once(store: VaultStore, request_id: str, content: str = FACT, topic: str = "kiln", run_id: str = "r1") -> PromoteResult:
    with store.writing():
        return promote_once(store, request_id=request_id, agent_id="alfred", topic=topic, reason="",
                            content=content, run_id=run_id, at=1_700_000_000.0)


def test_a_request_asked_again_gets_its_first_answer_and_writes_nothing(open_store: OpenStore) -> None:
    store = open_store()
    first = once(store, "alfred/r1/r1/2")
    assert first.outcome == CREATED and first.write is not None and not first.replayed
    written = store.read("kiln")
    again = once(store, "alfred/r1/r1/2", run_id="r9")
    assert again.replayed and (again.outcome, again.name, again.write) == (CREATED, "kiln", first.write)
    assert "answered 'created'" in again.reason
    assert store.read("kiln") == written and written is not None and written.decode().count(FACT) == 1
    fresh = once(store, "alfred/r2/r2/1")  # another request with the same fact: the rules decide it
    assert (fresh.outcome, fresh.replayed) == (UNCHANGED, False)


def test_links_and_the_outcome_come_back_from_the_record(open_store: OpenStore) -> None:
    store = open_store()
    once(store, "a/1", "- The kiln in shed two fires at 1200 degrees.", topic="kiln")
    first = once(store, "a/2", "- Shed two kiln fires at 1200 degrees; glaze batches dry overnight first.", topic="glaze")
    again = once(store, "a/2", "anything", topic="other")
    assert (again.outcome, again.name, again.linked) == (first.outcome, first.name, first.linked)
    assert first.outcome in (CREATED, MERGED, UPDATED)


def test_a_decline_is_not_recorded_so_a_retry_is_decided_again(open_store: OpenStore) -> None:
    store = open_store()
    declined = once(store, "a/1", "- " + "x" * 200_000)
    assert declined.outcome == DECLINED and store.promotion("a/1") is None
    assert once(store, "a/1").outcome == CREATED and store.promotion("a/1") is not None


def test_no_request_id_records_nothing(open_store: OpenStore) -> None:
    store = open_store()
    assert once(store, "").outcome == CREATED and once(store, "").outcome == UNCHANGED


def test_a_request_id_must_be_short_plain_text() -> None:
    check_request_id("alfred/20260601T020000Z-ab12/20260601T020000Z-ab12/3")
    for bad in ("x" * 513, "a\nb", "a\x00b"):
        with pytest.raises(InvalidArgument):
            check_request_id(bad)


def test_on_postgresql_the_note_and_its_answer_land_together(pg_opener: OpenStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store = pg_opener()

    def lost(record: object) -> bool:
        raise ConnectionError("the server went away before the answer was kept")

    monkeypatch.setattr(store, "record_promotion", lost)
    with pytest.raises(ConnectionError):
        once(store, "alfred/r1/r1/2")
    assert store.read("kiln") is None and store.promotion("alfred/r1/r1/2") is None
    monkeypatch.undo()
    assert once(store, "alfred/r1/r1/2").outcome == CREATED and store.promotion("alfred/r1/r1/2") is not None


def undo(store: VaultStore, request_id: str, write: PromotionWrite | None = None) -> UndoResult:
    with store.writing():
        return undo_once(store, write, request_id=request_id, agent_id="alfred", run_id="r1", op_id="r1/2",
                         at=1_700_000_100.0)


def test_an_undo_by_request_id_takes_out_the_recorded_write_once(open_store: OpenStore) -> None:
    store = open_store()
    once(store, "alfred/r1/r1/2")
    assert undo(store, "alfred/r9/r9/1").outcome == "gone"  # nothing landed under that id
    first = undo(store, "alfred/r1/r1/2")
    assert (first.outcome, first.note, first.deleted) == ("undone", "kiln", True) and store.read("kiln") is None
    record = store.promotion("alfred/r1/r1/2")
    assert record is not None and (record.undone_at, record.undo_outcome) == (1_700_000_100.0, "undone")
    again = undo(store, "alfred/r1/r1/2")
    assert again.outcome == "undone" and "was undone at" in again.reason


def test_an_undo_with_its_write_marks_the_record_too(open_store: OpenStore) -> None:
    store = open_store()
    landed = once(store, "alfred/r1/r1/2")
    assert landed.write is not None and undo(store, "alfred/r1/r1/2", landed.write).outcome == "undone"
    record = store.promotion("alfred/r1/r1/2")
    assert record is not None and record.undo_outcome == "undone"
    assert undo(store, "", landed.write).outcome == "gone"  # no id: the write alone decides


def test_another_agents_request_id_is_refused(open_store: OpenStore) -> None:
    store = open_store()
    once(store, "alfred/r1/r1/2")
    with pytest.raises(InvalidArgument), store.writing():
        promote_once(store, request_id="alfred/r1/r1/2", agent_id="bob", topic="kiln", reason="", content=FACT,
                     run_id="r1", at=1.0)
    with pytest.raises(InvalidArgument), store.writing():
        undo_once(store, None, request_id="alfred/r1/r1/2", agent_id="bob", run_id="r1", op_id="r1/2", at=1.0)
    assert store.read("kiln") is not None
