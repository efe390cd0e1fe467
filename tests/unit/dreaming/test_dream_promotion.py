"""Step 9, shared promotion: which ops are offered, index pointers, outcomes in the report and audit,
a KB that fails or is cancelled never failing the dream (a KB that is unavailable: the promotion kept)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from dreaming_helpers import NOW

from gateway.config import AgentConfig, build
from gateway.config_migrations import CURRENT_VERSION
from services.dreaming import nightly
from services.dreaming.apply.recall import Hit
from services.dreaming.model.values import EPISODIC, MANUAL, PROPOSE, OpResult, Proposal, ReviewerOutcome, ReviewerReply
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.vault import kept, promotion
from services.dreaming.vault.promotion import PromotionReply, fact_text, is_pointer, promotable, promote_applied

AT = "2026-01-01T03:00:00Z"  # when the run journals its promotions
FACT = "- The staging host is named hermes."


# --- index pointers (pure) ------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "- see memory/projects.md",
        "- [[projects]]",
        "- Details: memory/x.md",
        "* More in `memory/deploy.md`",
        "1. [Deploys](memory/deploy.md) — the runbook",
        "- [ ] see also [[hosts|the hosts]] and [[racks]]",
        "- Projects → memory/projects.md",
        "- Staging hosts: ./notes/hosts.md",
        "[[index]]",
        "- see MEMORY.md",
        "- memory/archive/",
    ],
)
def test_index_pointer_lines(line: str) -> None:
    assert is_pointer(line)


@pytest.mark.parametrize(
    "line",
    [
        "- The staging host is named hermes; see memory/hosts.md",  # five words of its own: a fact
        "- Docs: https://example.com/guide.md",  # a URL resolves anywhere
        "- [Docs](https://example.com/guide)",
        "- [the anchor](#install)",
        "- The staging host is named hermes.",
        "- projects",  # no reference at all
        "",
    ],
)
def test_lines_that_are_not_index_pointers(line: str) -> None:
    assert not is_pointer(line)


def test_the_fact_text_drops_pointer_lines_and_is_empty_without_a_fact() -> None:
    assert fact_text("- see memory/projects.md\n- [[projects]]\n- Details: memory/x.md\n") == ""
    assert fact_text("## Projects\n\n- see memory/projects.md\n") == ""  # headings carry no fact
    assert fact_text("\n## Hosts\n- see memory/hosts.md\n- The staging host is named hermes.\n\n") == (
        "## Hosts\n- The staging host is named hermes."
    )


def _op(n: int, proposal: Proposal, status: str = "applied", file: str | None = None) -> OpResult:
    return OpResult(f"r1/{n}", proposal, status, file=proposal.file if file is None else file)


def test_only_applied_durable_adds_to_memory_files_are_promotable() -> None:
    add = Proposal(op="add", file="MEMORY.md", content=FACT)
    ops = [
        _op(1, add),
        _op(2, Proposal(op="add", file="USER.md", content="- Ada prefers tea.")),
        _op(3, add, "skipped"),
        _op(4, add, "restored"),
        _op(5, add, "proposed"),
        _op(6, Proposal(op="replace", file="MEMORY.md", target="x", content="y")),
        _op(7, Proposal(op="remove", file="MEMORY.md", target="x")),
        _op(8, Proposal(op="add", tier=EPISODIC, topic="log", content="- 2026-11-30 met Bob"), file="memory/log.md"),
        _op(9, Proposal(op="compact", file="MEMORY.md", target="- [x] done"), file="memory/archive/completed.md"),
    ]
    assert [r.op_id for r in promotable(ops)] == ["r1/1", "r1/2"]


# --- promote_applied with a stand-in KB --------------------------------------------------


class FakeKb:
    """A ``Promoter`` that records calls and answers from ``replies`` (an exception is raised)."""

    def __init__(self, *replies: PromotionReply | BaseException) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, str, str, str, str]] = []
        self.requests: list[str] = []

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str = "") -> PromotionReply:
        self.calls.append((agent_id, topic, reason, content, run_id))
        self.requests.append(request_id)
        reply = self.replies.pop(0) if self.replies else PromotionReply("created", "n", "no similar shared note", "created 'n'")
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def refresh(self, agent_id: str, paths: Sequence[str] = ()) -> None:
        return None

    async def search(self, agent_id: str, query: str, limit: int) -> Sequence[Hit]:
        return []

    async def probe(self, agent_id: str, probes: Sequence[tuple[str, str, str]]) -> list[bool]:
        return [True] * len(probes)


def agent_in(home: Path, shared: dict[str, Any] | None = None) -> AgentConfig:
    entry: dict[str, Any] = {"id": "alfred", "knowledge": {"shared": shared or {}}}
    config = build({"configVersion": CURRENT_VERSION, "agents": [entry]}, home)
    agent = config.agents[0]
    agent.workspace.mkdir(parents=True, exist_ok=True)
    return agent


ADDS = [
    _op(1, Proposal(op="add", file="MEMORY.md", content=FACT, reason="staging host", topic="staging-host")),
    _op(2, Proposal(op="add", file="MEMORY.md", content="- see memory/projects.md\n- [[projects]]")),
    _op(3, Proposal(op="add", file="MEMORY.md", content="- Kestrel ships in March.\n- see memory/kestrel.md", reason="release")),
]


def test_each_applied_add_is_offered_in_order_and_pointer_only_adds_are_skipped(tmp_path: Path) -> None:
    kb = FakeKb(PromotionReply("created", "staging-host", "no similar shared note", "created shared note 'staging-host'"),
                PromotionReply("merged", "kestrel", "'kestrel' holds 3 of 3", "merged into shared note 'kestrel'",
                               linked=("releases",)))
    step = asyncio.run(promote_applied(agent_in(tmp_path), kb, "r1", AT, ADDS))
    assert kb.calls == [("alfred", "staging-host", "staging host", FACT, "r1"),
                        ("alfred", "", "release", "- Kestrel ships in March.", "r1")]  # its pointer line is cut
    assert [(p.op_id, p.outcome, p.note) for p in step.promotions] == [
        ("r1/1", "created", "staging-host"), ("r1/2", "skipped", ""), ("r1/3", "merged", "kestrel")]
    assert step.promotions[2].linked == ("releases",)
    assert "only MEMORY.md index pointers" in step.promotions[1].reason
    assert step.notes == [
        "Shared promotion of r1/1: created shared note 'staging-host'",
        f"Shared promotion of r1/2: skipped: {step.promotions[1].reason}",
        "Shared promotion of r1/3: merged into shared note 'kestrel'",
    ]
    assert step.steps == ["promotion"] and not step.cancelled


def test_propose_mode_promotes_nothing(tmp_path: Path) -> None:
    kb = FakeKb()
    step = asyncio.run(promote_applied(agent_in(tmp_path, {"mode": "propose"}), kb, "r1", AT, ADDS))
    assert kb.calls == [] and step.promotions == [] and step.steps == []
    assert step.notes == ["Shared promotion is off (knowledge.shared.mode is 'propose'): 3 applied durable add(s) "
                          "stay in this agent's memory only."]


def test_a_disabled_shared_kb_or_no_add_is_silent(tmp_path: Path) -> None:
    kb = FakeKb()
    off = asyncio.run(promote_applied(agent_in(tmp_path, {"enabled": False}), kb, "r1", AT, ADDS))
    none = asyncio.run(promote_applied(agent_in(tmp_path), kb, "r1", AT, [_op(1, Proposal(op="remove", file="MEMORY.md", target="x"))]))
    assert kb.calls == [] and off == promotion.Step() and none == promotion.Step()


def test_an_unavailable_kb_keeps_the_rest_pending_without_a_call(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    kb = FakeKb(PeerUnavailable("kb: UNAVAILABLE: connection refused", "UNAVAILABLE"))
    step = asyncio.run(promote_applied(agent, kb, "r1", AT, ADDS))
    assert len(kb.calls) == 1 and kb.requests == ["alfred/r1/1"]
    assert [(p.outcome, p.reason) for p in step.promotions] == [
        ("pending", "the KB could not promote it (kb: UNAVAILABLE: connection refused); kept on this host, "
                    "a later run retries it"),
        ("skipped", step.promotions[1].reason),
        ("pending", "not asked: the KB is unavailable (kb: UNAVAILABLE: connection refused); kept on this host, "
                    "a later run retries it"),
    ]
    assert [(k.request_id, k.run_id, k.op_id, k.fact) for k in kept.read(agent.workspace)] == [
        ("alfred/r1/1", "r1", "r1/1", FACT), ("alfred/r1/3", "r1", "r1/3", "- Kestrel ships in March.")]


def test_another_failure_declines_that_add_only(tmp_path: Path) -> None:
    kb = FakeKb(PeerUnavailable("kb: INTERNAL: internal error", "INTERNAL"), RuntimeError("boom"))
    step = asyncio.run(promote_applied(agent_in(tmp_path), kb, "r1", AT, ADDS))
    assert len(kb.calls) == 2
    assert [p.outcome for p in step.promotions] == ["declined", "skipped", "declined"]
    assert step.promotions[2].reason == "the KB could not promote it (boom)"


def test_a_cancellation_during_promotion_keeps_the_asked_one_and_the_rest(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    kb = FakeKb(asyncio.CancelledError())
    step = asyncio.run(promote_applied(agent, kb, "r1", AT, ADDS))
    assert step.cancelled and len(kb.calls) == 1
    assert [p.outcome for p in step.promotions] == ["pending", "skipped", "pending"]
    assert "may have landed" in step.promotions[0].reason and "cancelled before it was asked" in step.promotions[2].reason
    assert [k.op_id for k in kept.read(agent.workspace)] == ["r1/1", "r1/3"]


# --- in a whole run ---------------------------------------------------------------------------


def reviewer(*proposals: Proposal) -> nightly.Review:
    async def review(agent: AgentConfig, prompt: str) -> ReviewerOutcome:
        return ReviewerOutcome(ReviewerReply("scripted", tuple(proposals)), ok=True)

    return review


def audit(agent: AgentConfig) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (agent.workspace / ".dreaming" / "audit.jsonl").read_text().splitlines()]


PROPOSALS = (
    Proposal(op="add", file="MEMORY.md", content=FACT, reason="staging host", topic="staging-host"),
    Proposal(op="add", file="MEMORY.md", content="- see memory/projects.md"),
    Proposal(op="add", file="MEMORY.md", content="- The on-call phone is in drawer 3.", reason="insert after the cron section"),
)


def test_a_run_promotes_what_it_wrote_and_audits_every_outcome(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    (agent.workspace / "MEMORY.md").write_text("# Memory\n\n- The office opens at 7.\n")
    kb = FakeKb(PromotionReply("created", "staging-host", "no similar shared note", "created shared note 'staging-host'"),
                PromotionReply("declined", "on-call-phone-drawer", "the note-size cap refuses it: …",
                               "promotion declined: the note-size cap refuses it: …", name_from="fact",
                               passed_over="insert after the cron section"))
    deps = nightly.Deps(index=kb, review=reviewer(*PROPOSALS), now=lambda: NOW, promoter=kb)
    report = asyncio.run(nightly.run(agent, deps, mode="auto", trigger=MANUAL, run_id="r1"))
    assert report.status == "applied" and [r.status for r in report.ops] == ["applied"] * 3
    assert report.steps[-2:] == ("promotion", "audit")
    assert [c[1:4] for c in kb.calls] == [("staging-host", "staging host", FACT),
                                          ("", "insert after the cron section", "- The on-call phone is in drawer 3.")]
    assert "Shared promotion of r1/3: promotion declined: the note-size cap refuses it: …" in report.notes
    records = [r for r in audit(agent) if r["kind"] == "promotion"]
    assert [(r["op"], r["outcome"], r["note"]) for r in records] == [
        ("r1/1", "created", "staging-host"), ("r1/2", "skipped", ""), ("r1/3", "declined", "on-call-phone-drawer")]
    assert records[2]["reason"] == "the note-size cap refuses it: …" and records[2]["passedOver"] == "insert after the cron section"
    assert records[0]["id"] == PROPOSALS[0].id
    dreams = (agent.workspace / ".dreaming" / "DREAMS.md").read_text()
    assert "Shared promotion of r1/1: created shared note 'staging-host'" in dreams and "promotion → audit" in dreams


def test_a_failing_kb_never_fails_the_dream(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    (agent.workspace / "MEMORY.md").write_text("# Memory\n")
    kb = FakeKb(PeerUnavailable("kb: DEADLINE_EXCEEDED: deadline exceeded", "DEADLINE_EXCEEDED"))
    deps = nightly.Deps(index=kb, review=reviewer(*PROPOSALS), now=lambda: NOW, promoter=kb)
    report = asyncio.run(nightly.run(agent, deps, mode="auto", trigger=MANUAL, run_id="r1"))
    assert report.status == "applied" and FACT in (agent.workspace / "MEMORY.md").read_text()
    assert [p.outcome for p in report.promotions] == ["pending", "skipped", "pending"]
    run = next(r for r in audit(agent) if r["kind"] == "run")
    assert run["status"] == "applied" and "promotion" in run["steps"]
    assert "2 kept on this host to retry" in run["notPromoted"]


def test_a_run_in_propose_mode_promotes_nothing(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    kb = FakeKb()
    deps = nightly.Deps(index=kb, review=reviewer(*PROPOSALS), now=lambda: NOW, promoter=kb)
    report = asyncio.run(nightly.run(agent, deps, mode=PROPOSE, trigger=MANUAL, run_id="r1"))
    assert report.status == "proposed" and kb.calls == [] and report.promotions == ()
    assert "promotion" not in report.steps and not [r for r in audit(agent) if r["kind"] == "promotion"]


def test_a_run_cancelled_during_promotion_is_audited_then_cancelled(tmp_path: Path) -> None:
    agent = agent_in(tmp_path)
    (agent.workspace / "MEMORY.md").write_text("# Memory\n")
    kb = FakeKb(asyncio.CancelledError())
    deps = nightly.Deps(index=kb, review=reviewer(*PROPOSALS), now=lambda: NOW, promoter=kb)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(nightly.run(agent, deps, mode="auto", trigger=MANUAL, run_id="r1"))
    run = next(r for r in audit(agent) if r["kind"] == "run")
    assert run["status"] == "applied" and any("cancelled" in n for n in run["notes"])
    assert [r["outcome"] for r in audit(agent) if r["kind"] == "promotion"] == ["pending", "skipped", "pending"]
