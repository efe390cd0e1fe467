"""Which proposals are pending (``pending.py``): proposed in propose mode, not applied by any run
since (nor reverted since), not already in effect, and an op of the applier."""

from __future__ import annotations

from typing import Any

from services.dreaming.apply.applier import already_done, plan
from services.dreaming.history.pending import Ledger, pending, read_ledger, why_not
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import Proposal

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
FILLER = "".join(f"- Quay {n} has a crane.\n" for n in range(20))  # room under the bounded-loss cap
MEMORY = "# Memory\n\n- The harbour office opens at 7.\n- The ferry leaves at noon.\n" + FILLER
FACT = Proposal(op="add", file="MEMORY.md", content="- Jan prefers email over phone.", reason="said so")
FERRY = Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.", content="- The ferry leaves at one.")
OFFICE = Proposal(op="remove", file="MEMORY.md", target="- The harbour office opens at 7.")


def op(run: str, n: int, p: Proposal, status: str, reason: str = "") -> dict[str, Any]:
    return {"kind": "op", "run": run, "op": f"{run}/{n}", "id": p.id, "status": status, "reason": reason,
            "proposal": p.to_json()}


def texts(memory: str = MEMORY) -> dict[str, str]:
    return {"MEMORY.md": memory, "USER.md": ""}


def waiting(ledger: Ledger, memory: str = MEMORY) -> list[str]:
    return list(pending(ledger, texts(memory), BUDGETS))


def test_proposed_ops_are_pending_until_a_run_applies_them() -> None:
    records = [op("r1", 1, FACT, "proposed"), op("r1", 2, FERRY, "proposed"), op("r1", 3, OFFICE, "proposed")]
    assert waiting(read_ledger(records)) == [FACT.id, FERRY.id, OFFICE.id]
    # An auto run that applied the same op (the same id), and an accept: both end it.
    records += [op("r2", 1, FACT, "applied"), op("r3", 1, FERRY, "applied"), {"kind": "accepted", "run": "r3", "id": FERRY.id}]
    ledger = read_ledger(records)
    assert waiting(ledger) == [OFFICE.id]
    assert why_not(ledger, FACT.id, texts(), BUDGETS) == "already applied by run r2 as r2/1"
    assert why_not(ledger, FERRY.id, texts(), BUDGETS) == "already accepted (run r3)"


def test_a_proposal_made_after_an_auto_run_applied_it_is_not_pending() -> None:
    # The case to guard: applied by an auto run, then re-proposed by a propose run.
    after = MEMORY + FACT.content + "\n"
    records = [op("r1", 1, FACT, "applied"),
               op("r2", 1, FACT, "proposed", "the applier would skip it now: already in MEMORY.md")]
    assert waiting(read_ledger(records), after) == []
    # Even when the line was edited by hand since: the id was applied and not reverted.
    assert waiting(read_ledger(records), MEMORY) == []


def test_what_is_already_in_effect_is_not_pending() -> None:
    records = [op("r1", 1, FACT, "proposed"), op("r1", 2, FERRY, "proposed"), op("r1", 3, OFFICE, "proposed")]
    ledger = read_ledger(records)
    done = MEMORY.replace("noon", "one").replace("- The harbour office opens at 7.\n", "") + FACT.content + "\n"
    assert waiting(ledger, done) == []
    assert why_not(ledger, FACT.id, texts(done), BUDGETS) == "already in MEMORY.md"
    assert why_not(ledger, FERRY.id, texts(done), BUDGETS).startswith("already in MEMORY.md: its anchor is gone")
    assert why_not(ledger, OFFICE.id, texts(done), BUDGETS).startswith("the anchor was not found in the file: nothing is left to remove")
    # A replace whose anchor changed but whose new text is not there is still pending: it is not done.
    changed = MEMORY.replace("noon", "two")
    assert FERRY.id in waiting(ledger, changed)
    assert "anchor was not found" in pending(ledger, texts(changed), BUDGETS)[FERRY.id].note


def test_the_note_is_what_the_applier_would_do_now() -> None:
    ledger = read_ledger([op("r1", 1, FERRY, "proposed", "the applier would skip it now: stale")])
    assert pending(ledger, texts(), BUDGETS)[FERRY.id].note == ""
    twice = MEMORY + "- The ferry leaves at noon.\n"
    assert "occurs 2 times" in pending(ledger, texts(twice), BUDGETS)[FERRY.id].note
    # Files that cannot be read: the recorded note stands and nothing is judged done.
    assert pending(ledger, None, BUDGETS)[FERRY.id].note == "the applier would skip it now: stale"


def test_a_revert_makes_an_id_applicable_again_but_only_a_later_proposal_is_pending() -> None:
    records = [op("r1", 1, FACT, "proposed"), op("r2", 1, FACT, "applied"), {"kind": "accepted", "run": "r2", "id": FACT.id},
               {"kind": "revert", "run": "r2", "by": "r9", "ops": ["r2/1"], "already": []}]
    ledger = read_ledger(records)
    assert waiting(ledger) == []  # the operator undid it: the old proposal does not come back
    assert "reverted" in why_not(ledger, FACT.id, texts(), BUDGETS)
    ledger = read_ledger([*records, op("r3", 1, FACT, "proposed")])
    assert waiting(ledger) == [FACT.id]


def test_a_revert_of_an_older_apply_leaves_a_newer_one_in_force() -> None:
    records = [op("r1", 1, FACT, "applied"), op("r2", 4, FACT, "applied"),
               {"kind": "revert", "run": "r1", "ops": ["r1/1"]}, op("r3", 1, FACT, "proposed")]
    ledger = read_ledger(records)
    assert FACT.id in ledger.applied and waiting(ledger) == []


def test_an_op_the_recall_check_restored_was_never_applied() -> None:
    records = [op("r1", 1, OFFICE, "restored"), op("r2", 1, OFFICE, "proposed")]
    assert waiting(read_ledger(records)) == [OFFICE.id]


def test_the_moves_of_the_passes_are_never_pending_nor_applied_by_an_accept() -> None:
    move = Proposal(op="compact", file="MEMORY.md", target="- The ferry leaves at noon.", topic="completed")
    ledger = read_ledger([op("r1", 1, move, "proposed")])
    assert waiting(ledger) == [] and "not a proposal to accept" in why_not(ledger, move.id, texts(), BUDGETS)
    result = plan(texts(), [("r/1", move)], BUDGETS)  # the applier never runs one either
    assert result.results[0].status == "skipped" and result.texts["MEMORY.md"] == MEMORY


def test_an_unknown_id_has_no_reason() -> None:
    assert why_not(read_ledger([]), "p-000000000000", texts(), BUDGETS) == ""


def test_already_done_for_each_op() -> None:
    crlf = MEMORY.replace("\n", "\r\n")
    assert already_done(FACT, MEMORY, "MEMORY.md") == ""
    assert already_done(FACT, MEMORY + "-  Jan prefers   email over phone.\n", "MEMORY.md") == "already in MEMORY.md"
    assert already_done(FERRY, MEMORY, "MEMORY.md") == ""
    assert already_done(OFFICE, crlf, "MEMORY.md") == ""  # a CRLF file holds an LF anchor
    assert already_done(OFFICE, MEMORY.replace("at 7", "at 8"), "MEMORY.md") != ""
    episodic = Proposal(op="add", tier="episodic", topic="log", content="- The harbour office opens at 7.")
    assert already_done(episodic, MEMORY, "MEMORY.md") == ""  # appended to its topic note: never judged here
