"""Rejecting proposals (``history/reject.py``): recorded with who and when, gone from the pending
list, all or nothing, and a later run drops a reviewer proposal of the same text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import agent_with_memory, dream

from gateway.config import AgentConfig
from gateway.errors import FailedPrecondition, NotFound
from services.dreaming.history.pending import pending, read_ledger, rejection_key, why_not
from services.dreaming.history.reject import reject
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import PROPOSE, Proposal

BUDGETS = Budgets(memory_chars=0, user_chars=0, write_routing=True)
MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + "".join(f"- Quay {n} has a crane.\n" for n in range(20))
FACT = Proposal(op="add", file="MEMORY.md", content="- Jan prefers email over phone.", reason="said so")
FERRY = Proposal(op="replace", file="MEMORY.md", target="- The ferry leaves at noon.", content="- The ferry leaves at one.")
AT = "2026-12-01T09:00:00Z"


def op(run: str, n: int, p: Proposal, status: str) -> dict[str, Any]:
    return {"kind": "op", "run": run, "op": f"{run}/{n}", "id": p.id, "status": status, "reason": "", "proposal": p.to_json()}


def rejected(p: Proposal, by: str = "ops") -> dict[str, Any]:
    return {"kind": "rejected", "id": p.id, "at": AT, "by": by}


def agent_in(home: Path) -> AgentConfig:
    return agent_with_memory(home, MEMORY)


def audit_of(agent: AgentConfig) -> list[dict[str, Any]]:
    path = agent.workspace / ".dreaming" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def propose(agent: AgentConfig, *proposals: Proposal, run_id: str) -> None:
    dream(agent, PROPOSE, *proposals, run_id=run_id)


def test_a_rejected_proposal_leaves_the_pending_list_and_says_who_rejected_it() -> None:
    ledger = read_ledger([op("r1", 1, FACT, "proposed"), op("r1", 2, FERRY, "proposed"), rejected(FACT)])
    texts = {"MEMORY.md": MEMORY, "USER.md": ""}
    assert list(pending(ledger, texts, BUDGETS)) == [FERRY.id]
    assert why_not(ledger, FACT.id, texts, BUDGETS) == "already rejected on 2026-12-01 by ops"
    assert ledger.rejected_texts[rejection_key(FACT)].says() == "rejected on 2026-12-01 by ops"


def test_a_rejection_of_a_proposal_not_pending_is_ignored_by_the_ledger() -> None:
    ledger = read_ledger([op("r1", 1, FACT, "applied"), rejected(FACT)])
    assert FACT.id in ledger.applied and not ledger.rejected and not ledger.rejected_texts


def test_the_rejection_key_folds_case_and_spacing() -> None:
    again = Proposal(op="add", file="MEMORY.md", content="-  jan prefers EMAIL over phone. ", reason="other words")
    assert rejection_key(again) == rejection_key(FACT)
    assert rejection_key(Proposal(op="remove", file="MEMORY.md", target=FACT.content)) != rejection_key(FACT)


def test_reject_records_each_id_with_its_label_and_time(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    propose(agent, FACT, FERRY, run_id="r1")
    done = reject(agent, [FACT.id, FACT.id], "ops-key", AT)
    assert [(r.proposal_id, r.by, r.at, r.proposal.content) for r in done] == [(FACT.id, "ops-key", AT, FACT.content)]
    assert audit_of(agent)[-1] == {"kind": "rejected", "id": FACT.id, "at": AT, "by": "ops-key", "file": "MEMORY.md"}
    assert (agent.workspace / "MEMORY.md").read_text() == MEMORY


def test_reject_is_all_or_nothing_and_names_the_ids_refused(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    propose(agent, FACT, FERRY, run_id="r1")
    before = audit_of(agent)
    with pytest.raises(NotFound, match="p-000000000000: never proposed"):
        reject(agent, [FERRY.id, "p-000000000000"], "ops", AT)
    reject(agent, [FACT.id], "ops", AT)
    with pytest.raises(FailedPrecondition, match=f"{FACT.id}: already rejected on 2026-12-01 by ops"):
        reject(agent, [FERRY.id, FACT.id], "ops", AT)
    assert [r for r in audit_of(agent) if r["kind"] == "rejected"] == [rejected(FACT) | {"file": "MEMORY.md"}]
    assert len(audit_of(agent)) == len(before) + 1


def test_the_next_run_does_not_propose_the_rejected_text_again(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    propose(agent, FACT, FERRY, run_id="r1")
    reject(agent, [FACT.id], "ops", AT)
    reworded = Proposal(op="add", file="MEMORY.md", content="- Jan prefers  EMAIL over phone.", reason="again")
    propose(agent, reworded, FERRY, run_id="r2")
    ops = [r for r in audit_of(agent) if r["kind"] == "op" and r["run"] == "r2"]
    assert [(r["id"], r["status"], r["reason"]) for r in ops] == [
        (reworded.id, "skipped", "rejected on 2026-12-01 by ops"), (FERRY.id, "proposed", ""),
    ]
