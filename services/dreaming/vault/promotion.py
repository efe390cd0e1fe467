"""Step 9 of a run: shared promotion of the durable adds the applier wrote (docs/concepts/promotion.md "Shared promotion").

When the agent's ``knowledge.shared`` is ``enabled`` and its ``mode`` is
``auto``, each op of the run that is an **applied durable add** (status
``applied`` after the recall check, tier ``durable``, op ``add``, written to
MEMORY.md or USER.md) is offered to the shared vault, in op order, one KB
``PromoteFact`` call each. Never a skipped, proposed or restored op, never a
replace or remove, never an episodic add, never a move of the deterministic
passes. In ``propose`` mode nothing is promoted (a note says how many adds
stayed local); with the shared KB off nothing is said.

**Only a real fact is promoted.** MEMORY.md index pointers resolve only in
the promoting agent's own workspace, so they are cut from the text first
(``fact_text``); an add left with no line that is not blank, a heading or a
pointer is ``skipped`` and never sent. A line is an **index pointer**
(``is_pointer``) when, its list bullet and task box removed, it

- holds at least one *local reference*: a ``[[wikilink]]``, a Markdown link
  ``[label](target)`` whose target has no URL scheme (``https:``, ``mailto:``…),
  or a bare path ending in ``.md``/``.markdown`` or under ``memory/``; and
- with those references removed, has at most ``POINTER_LABEL_WORDS`` (4)
  words (letter/digit runs; a Markdown link's label counts) outside
  ``POINTER_WORDS`` ("see", "details", "more", "also", "in", "under"…).

So ``- see memory/projects.md``, ``- [[projects]]``, ``- Details: memory/x.md``
and ``- [Deploys](memory/deploy.md) — runbook`` are pointers, while ``- The
staging host is hermes; see memory/hosts.md`` is a fact (five words of its own)
and ``- Docs: https://example.com/guide.md`` is not a local reference.

**Outcomes.** Each promotion's outcome goes into the run's report (one note
line per promotion) and audit.jsonl (one ``promotion`` record each): the KB's
``created``, ``merged``, ``updated``, ``unchanged`` or ``declined`` with its
reason and the links added; ``skipped`` for an add with no fact. A KB that
cannot answer, or any other failure of the call, is ``declined`` with the
error and never fails the local dream; once the KB is unreachable
(``UNAVAILABLE``, ``DEADLINE_EXCEEDED``), the remaining adds are declined
without a call. Declines are logged (``dream_promotion`` at warning level).
A run cancelled during promotion declines the rest, is audited, and then the
cancellation goes on (``Step.cancelled``).

**Nothing promoted.** When no promotion of a run landed (created, merged or
updated), ``not_promoted`` says why in plain words, audited as the run record's
``notPromoted``: shared promotion off for the agent, a propose run, no
candidate, or each candidate's outcome (already in the vault, no fact, refused
with the first refusal's reason).

**What was written** (``Promotion.write``, the KB's report of the write) goes
to the run's journal (``undo.py``), so that reverting the run, or the op,
takes it out of the vault again.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import structlog

from gateway.config import AgentConfig
from gateway.promotion_write import PromotionWrite
from services.dreaming.model.values import DURABLE, MEMORY_FILES, PROPOSE, OpResult, Promotion
from services.dreaming.records import journal
from services.dreaming.records.jsonl import Record

log = structlog.get_logger()

POINTER_LABEL_WORDS: Final = 4
POINTER_WORDS: Final = frozenset(
    """
    see also details detail more info in at under on for about cf ref refs reference references file files
    here there moved archived full notes note index link links the and or to of
    """.split()
)
UNREACHABLE: Final = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
PROMOTION: Final = "promotion"  # the journal record kind of a promotion's write
SKIPPED: Final = "skipped"
DECLINED: Final = "declined"
STEP: Final = "promotion"
LANDED: Final = frozenset({"created", "merged", "updated"})  # the outcomes that wrote the fact to the vault
_MISSED: Final = {"unchanged": "already in the shared vault", SKIPPED: "no fact (index pointers only)",
                  DECLINED: "refused"}

_BULLET: Final = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")
_HEADING: Final = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_WIKILINK: Final = re.compile(r"!?\[\[[^\[\]\n]+\]\]")
_MD_LINK: Final = re.compile(r"!?\[([^\[\]\n]*)\]\(\s*<?([^()\s<>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_PATH: Final = re.compile(
    r"(?<![\w/.:-])(?:\.{1,2}/)?(?:[\w.-]+/)*[\w.-]+\.(?:md|markdown)\b|(?<![\w/.:-])memory/[\w./-]*", re.IGNORECASE
)
_WORD: Final = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class PromotionReply:
    """What the KB said about one promotion (``PromoteFact``)."""

    outcome: str
    name: str
    reason: str
    message: str
    name_from: str = ""
    passed_over: str = ""
    linked: tuple[str, ...] = ()
    folded: bool = False
    twin_kept: bool = False
    write: PromotionWrite | None = None


@dataclass(frozen=True)
class UndoReply:
    """What the KB said about undoing one promotion (``UndoPromotion``): ``outcome`` undone, gone or left."""

    outcome: str
    note: str
    reason: str
    deleted: bool = False


class Promoter(Protocol):
    """The shared vault as dreaming sees it (the KB over gRPC)."""

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str) -> PromotionReply:
        """One promotion. Raises when the KB cannot answer; an exception whose ``code`` attribute is
        in UNREACHABLE means the KB cannot be reached at all."""
        ...

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite) -> UndoReply:
        """Undo one promotion's write (a revert). Raises when the KB cannot answer, as ``promote``."""
        ...


def is_pointer(line: str) -> bool:
    """Whether ``line`` is a MEMORY.md index pointer (rules in the module docstring)."""
    text = _BULLET.sub("", line, count=1).replace("`", " ")
    references = 0
    labels: list[str] = []

    def markdown_link(match: re.Match[str]) -> str:
        nonlocal references
        target = match.group(2)
        if not target or _SCHEME.match(target) or target.startswith("#"):
            return match.group(0)  # a URL or an anchor: not a local reference, its words count
        references += 1
        labels.append(match.group(1))
        return " "

    text = _MD_LINK.sub(markdown_link, text)
    for pattern in (_WIKILINK, _PATH):
        text, found = pattern.subn(" ", text)
        references += found
    if not references:
        return False
    words = [w for w in _WORD.findall(" ".join([text, *labels]).casefold()) if w not in POINTER_WORDS]
    return len(words) <= POINTER_LABEL_WORDS


def fact_text(content: str) -> str:
    """``content`` without its index-pointer lines, blank lines at either end removed; "" when no line
    is left that is not blank, a heading or a pointer (the add carries no fact)."""
    kept = [line for line in content.splitlines() if not (line.strip() and is_pointer(line))]
    if not any(line.strip() and not _HEADING.match(line) for line in kept):
        return ""
    return "\n".join(kept).strip("\n")


def promotable(results: Sequence[OpResult]) -> list[OpResult]:
    """The ops of a run that are applied durable adds to MEMORY.md or USER.md."""
    return [r for r in results if r.status == "applied" and r.proposal.tier == DURABLE and r.proposal.op == "add"
            and r.file in MEMORY_FILES]


def not_promoted(agent: AgentConfig, promoter: Promoter | None, mode: str, results: Sequence[OpResult],
                 promotions: Sequence[Promotion]) -> str:
    """Why a run whose ops are ``results`` promoted nothing to the shared vault, in plain words
    (audited as the run's ``notPromoted``); "" when one of ``promotions`` landed."""
    if any(p.outcome in LANDED for p in promotions):
        return ""
    shared = agent.knowledge.shared
    if not shared.enabled:
        return "shared promotion is off for this agent (knowledge.shared.enabled is false)"
    if shared.mode != "auto":
        return f"shared promotion is off for this agent (knowledge.shared.mode is {shared.mode!r})"
    if promoter is None:
        return "the dreaming service has no shared KB to promote to"
    if mode == PROPOSE:
        return "a propose run promotes nothing"
    candidates = promotable(results)
    if not candidates:
        return "no candidate: the run applied no durable add to MEMORY.md or USER.md"
    counts = Counter(p.outcome for p in promotions)
    why = f"none of its {len(candidates)} candidate(s) landed: " + ", ".join(
        f"{n} {_MISSED.get(outcome, outcome)}" for outcome, n in counts.items())
    refused = next((p.reason for p in promotions if p.outcome == DECLINED), "")
    return why + (f" (the first refusal: {refused})" if refused else "")


@dataclass
class Step:
    """What step 9 did: the promotions, one note line each, the step's name when it ran, and
    whether the run was cancelled during it (the caller audits, then re-raises)."""

    promotions: list[Promotion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    cancelled: bool = False

    def add(self, promotion: Promotion, message: str) -> None:
        self.promotions.append(promotion)
        self.notes.append(f"Shared promotion of {promotion.op_id}: {message}")


def _declined(r: OpResult, reason: str) -> Promotion:
    return Promotion(r.op_id, r.proposal.id, DECLINED, "", reason)


async def promote_applied(agent: AgentConfig, promoter: Promoter | None, run_id: str, at: str,
                          results: Sequence[OpResult]) -> Step:
    """Step 9 for a run whose ops are ``results`` (module docstring), each write journaled at ``at``
    so a revert can take it out. Never raises: a cancellation is reported in ``Step.cancelled``."""
    step = Step()
    shared = agent.knowledge.shared
    adds = promotable(results)
    if not adds or not shared.enabled or promoter is None:
        return step
    if shared.mode != "auto":
        step.notes.append(f"Shared promotion is off (knowledge.shared.mode is {shared.mode!r}): "
                          f"{len(adds)} applied durable add(s) stay in this agent's memory only.")
        return step
    step.steps.append(STEP)
    unreachable = ""
    for r in adds:
        p = r.proposal
        text = fact_text(p.content)
        if not text:
            why = ("the add carries no fact: it is only MEMORY.md index pointers (and headings), whose links resolve "
                   "only in this agent's workspace")
            step.add(Promotion(r.op_id, p.id, SKIPPED, "", why), f"skipped: {why}")
            continue
        if step.cancelled or unreachable:
            why = "the run was cancelled before this promotion" if step.cancelled else f"not attempted: {unreachable}"
            step.add(_declined(r, why), f"declined: {why}")
            continue
        try:
            reply = await promoter.promote(agent.id, p.topic, p.reason, text, run_id)
        except asyncio.CancelledError:
            step.cancelled = True
            why = "the run was cancelled while this promotion was asked of the KB; it may or may not have landed"
            step.add(_declined(r, why), f"declined: {why}")
            continue
        except Exception as exc:  # noqa: BLE001 - the KB could not promote: the local dream stands
            why = f"the KB could not promote it ({exc})"
            if getattr(exc, "code", None) in UNREACHABLE:
                unreachable = f"the KB was unreachable for an earlier promotion of this run ({exc})"
            step.add(_declined(r, why), f"declined: {why}")
            continue
        step.add(Promotion(r.op_id, p.id, reply.outcome, reply.name, reply.reason, reply.name_from, reply.passed_over,
                           reply.linked, reply.folded, reply.twin_kept, reply.write), reply.message)
    for promotion in step.promotions:
        (log.warning if promotion.outcome == DECLINED else log.info)(
            "dream_promotion", agent=agent.id, run=run_id, op=promotion.op_id, outcome=promotion.outcome,
            note=promotion.note or None, reason=promotion.reason)
    step.notes += _journaled(agent, run_id, at, step.promotions)
    return step


def write_record(run_id: str, promotion: Promotion, at: str) -> Record:
    """The journal record of ``promotion``'s write (``promotion.write`` must be set)."""
    w = promotion.write
    assert w is not None
    return {
        "kind": PROMOTION, "run": run_id, "op": promotion.op_id, "outcome": promotion.outcome, "note": w.note,
        "project": w.project, "write": w.kind, "offset": w.offset, "removed": w.removed, "added": w.added,
        "block": w.block, "hashBefore": w.hash_before, "hashAfter": w.hash_after, "foldedTwin": w.folded_twin, "at": at,
    }


def _journaled(agent: AgentConfig, run_id: str, at: str, promotions: Sequence[Promotion]) -> list[str]:
    """Journal what each promotion wrote to the vault, so a revert can take it out (``undo.py``);
    a note of the run when that fails."""
    records = [write_record(run_id, p, at) for p in promotions if p.write is not None]
    try:
        journal.append(agent.workspace, records)
    except OSError as exc:
        log.error("dream_promotion_not_journaled", agent=agent.id, run=run_id, error=str(exc))
        return [f"The shared promotions of this run could not be journaled ({exc}); a revert cannot take them "
                "out of the vault."]
    return []
