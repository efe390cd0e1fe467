"""Step 9 of a run: shared promotion of the durable adds the applier wrote (docs/concepts/promotion.md "Shared promotion").

When the agent's ``knowledge.shared`` is ``enabled`` and its ``mode`` is
``auto``, each op of the run that is an **applied durable add** (status
``applied`` after the recall check, tier ``durable``, op ``add``, written to
MEMORY.md or USER.md) is offered to the shared vault, in op order, one KB
``PromoteFact`` call each. Never a skipped, proposed or restored op, never a
replace or remove, never an episodic add, never a move of the deterministic
passes. In ``propose`` mode nothing is promoted (a note says how many adds
stayed local); with the shared KB off nothing is said.

**Never a secret** (docs/concepts/secrets.md): an add whose text holds one is ``skipped``, its
reason ``secret: <detector>`` (``gateway.secrets_guard``), never sent nor kept on the host. The
applier already skips such an add; this guard also holds for a fact written before it.

**Never forgotten text** (docs/concepts/forget.md "Where tombstones are checked"): an add, or a
kept promotion, whose fact brings back text a forget of this agent (or a shared one) took out, or
holds a forget's marker, is ``skipped`` with the reason ``forgotten: F-…``, never sent; a kept one
leaves the queue.

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
reason and the links added; ``skipped`` for an add with no fact. Any failure
of the call never fails the local dream. When the KB, or the vault behind it,
is unavailable (``UNREACHABLE``: ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``), the
promotion is ``pending``: kept on the host (``kept``) and retried by a later
run, and the remaining adds are kept without a call. Any other failure is
``declined`` with the error. A run cancelled during promotion keeps the
promotion asked and the rest, is audited, and then the cancellation goes on
(``Step.cancelled``). Declines are logged (``dream_promotion`` at warning level).

**Kept and retried.** Every promotion is asked under a request id stable across
retries (``kept.request_id``: ``<agent>/<run>/<n>``); the KB answers an id once,
so a promotion whose answer was lost (a deadline passed while the KB wrote) is
never written twice. Step 9 of every run of the agent in ``auto`` mode begins
with the kept promotions (``retry_kept``), oldest first, before (or without)
the run's own: one whose op was reverted or restored since is ``dropped``, not
sent (the KB is asked to undo whatever landed under its request id: a promotion
whose answer was lost); one the KB answers leaves the queue, its outcome reported by this run with
``retry_of`` naming the run it came from, and its write journaled under that
run and op, so reverting the original run or op takes it out of the vault; one
still unreachable stays, and so do the rest. A promotion the KB refuses on a
retry for another reason is ``declined`` and leaves the queue. The queue holds at
most ``kept.MAX_KEPT`` promotions: a newer one past the cap is ``declined``
(saying so), logged and noted in the run's audit. A run's own promotions are
kept before they are asked (``kept.keep_ahead``) and leave the queue once their
writes are journaled, so a process killed between the KB's write and the
journal's leaves them for the next run's retry, which journals the KB's answer.

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
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

import structlog

from gateway import forget_guard
from gateway.config import AgentConfig
from gateway.forget_guard import Check
from gateway.promotion_write import PromotionWrite
from gateway.secrets_guard import find_secrets, skip_reason
from services.dreaming.model.values import DURABLE, MEMORY_FILES, PROPOSE, OpResult, Promotion
from services.dreaming.records import journal
from services.dreaming.records.jsonl import Record
from services.dreaming.vault import kept
from services.dreaming.vault.kept import Kept

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
PENDING: Final = "pending"  # kept on the host, retried by a later run
DROPPED: Final = "dropped"  # a kept promotion whose op was reverted: never sent
STEP: Final = "promotion"
LANDED: Final = frozenset({"created", "merged", "updated"})  # the outcomes that wrote the fact to the vault
_MISSED: Final = {"unchanged": "already in the shared vault", SKIPPED: "skipped (no fact, a secret or forgotten text)",
                  DECLINED: "refused", PENDING: "kept on this host to retry (the KB was unavailable)",
                  DROPPED: "dropped (their op was reverted)"}

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

    async def promote(self, agent_id: str, topic: str, reason: str, content: str, run_id: str,
                      request_id: str) -> PromotionReply:
        """One promotion, asked under ``request_id`` (the KB answers an id once). Raises when the KB cannot
        answer; an exception whose ``code`` attribute is in UNREACHABLE means the KB or its vault is unavailable."""
        ...

    async def undo_promotion(self, agent_id: str, run_id: str, op_id: str, write: PromotionWrite | None,
                             request_id: str) -> UndoReply:
        """Undo one promotion's write, else the write the KB recorded under ``request_id`` (a revert; a kept
        promotion whose op was reverted). Raises when the KB cannot answer, as ``promote``."""
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


def _not_offered(text: str, forgotten: Check) -> str:
    """Why the fact ``text`` (``fact_text``) is not offered to the vault, "" when it is: no fact, a secret,
    or forgotten text (``forgotten``: the agent's tombstone check) or a forget's marker."""
    if not text:
        return ("the add carries no fact: it is only MEMORY.md index pointers (and headings), whose links resolve "
                "only in this agent's workspace")
    found = find_secrets(text)
    return skip_reason(found) if found else forget_guard.why_forgotten(text, forgotten)


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


def _from_reply(op_id: str, proposal_id: str, reply: PromotionReply, retry_of: str = "") -> Promotion:
    return Promotion(op_id, proposal_id, reply.outcome, reply.name, reply.reason, reply.name_from, reply.passed_over,
                     reply.linked, reply.folded, reply.twin_kept, reply.write, retry_of)


def _unreachable(exc: BaseException) -> bool:
    return getattr(exc, "code", None) in UNREACHABLE


async def retry_kept(agent: AgentConfig, promoter: Promoter, at: str, step: Step) -> str:
    """The kept promotions, oldest first (module docstring "Kept and retried"), reported in ``step``;
    why the KB is still unreachable ("" when it answered them all). Never raises."""
    ws = agent.workspace
    queue = kept.read(ws)
    if not queue:
        return ""
    step.steps.append(STEP)
    forgotten = forget_guard.checker(agent.home, agent.id)
    records = journal.read(ws)
    undone = {(r.get("run"), r.get("op")) for r in records if r.get("kind") in ("revert", "restore")}
    journaled = {(r.get("run"), r.get("op")) for r in records if r.get("kind") == PROMOTION}
    left: list[Kept] = []
    landed: list[tuple[Kept, Promotion]] = []
    unreachable = ""
    for k in queue:
        if unreachable or step.cancelled:
            left.append(k)
            continue
        if (k.run_id, k.op_id) in undone:
            try:
                dropped = await _drop(agent.id, promoter, k)
            except asyncio.CancelledError:
                step.cancelled = True
                left.append(k)
                continue
            if dropped is None:
                unreachable = "the KB could not say whether a reverted op's promotion had landed"
                left.append(k)
            else:
                step.add(dropped, f"dropped: {dropped.reason}")
            continue
        why = forget_guard.why_forgotten(k.fact, forgotten)
        if why:  # a forget since it was kept: it leaves the queue unsent
            step.add(Promotion(k.op_id, k.proposal_id, SKIPPED, "", why, retry_of=k.run_id), f"skipped: {why}")
            continue
        try:
            reply = await promoter.promote(agent.id, k.topic, k.reason, k.fact, k.run_id, k.request_id)
        except asyncio.CancelledError:
            step.cancelled = True
            left.append(k)
            continue
        except Exception as exc:  # noqa: BLE001 - the KB could not promote it: kept, or declined
            if _unreachable(exc):
                unreachable = str(exc)
                left.append(replace(k, error=str(exc)))
                continue
            why = f"kept since run {k.run_id}, the KB could not promote it on a retry ({exc}); no longer kept"
            step.add(Promotion(k.op_id, k.proposal_id, DECLINED, "", why, retry_of=k.run_id), f"declined: {why}")
            continue
        promotion = _from_reply(k.op_id, k.proposal_id, reply, k.run_id)
        step.add(promotion, f"{reply.message} (kept since run {k.run_id}, retried)")
        if promotion.write is not None and (k.run_id, k.op_id) not in journaled:
            landed.append((k, promotion))
    step.notes += _settle_kept(agent, at, left, landed)
    if left:
        step.notes.append(f"{len(left)} kept promotion(s) still wait for the shared vault"
                          + (f" (the KB: {unreachable})" if unreachable else "") + "; the next run retries them.")
    return unreachable


async def _drop(agent_id: str, promoter: Promoter, k: Kept) -> Promotion | None:
    """``k``, whose op was reverted since it was kept, dropped unsent; a promotion of it that landed while
    its answer was lost is undone by its request id. None when the KB is unreachable (``k`` stays kept)."""
    why = f"kept since run {k.run_id}, whose op was reverted since: not sent"
    try:
        reply = await promoter.undo_promotion(agent_id, k.run_id, k.op_id, None, k.request_id)
    except Exception as exc:  # noqa: BLE001 - unreachable: kept; any other failure: said, dropped
        if _unreachable(exc):
            return None
        why += f"; the KB could not say whether it had landed ({exc})"
        return Promotion(k.op_id, k.proposal_id, DROPPED, "", why, retry_of=k.run_id)
    if reply.outcome == "undone":
        why += f"; it had landed in shared note {reply.note!r} (its answer was lost) and was taken out again"
    elif reply.outcome != "gone":
        why += (f"; it had landed in shared note {reply.note!r} (its answer was lost) and was left there: "
                f"{reply.reason}; take the fact out by hand if it should go")
    return Promotion(k.op_id, k.proposal_id, DROPPED, reply.note if reply.outcome != "gone" else "", why,
                     retry_of=k.run_id)


def _settle_kept(agent: AgentConfig, at: str, left: list[Kept], landed: list[tuple[Kept, Promotion]]) -> list[str]:
    """Journal the retried writes under their original run, then rewrite the queue with ``left``; notes of the
    run when either fails. A write not journaled stays kept: its retry gets the KB's recorded answer back."""
    notes: list[str] = []
    try:
        journal.append(agent.workspace, [write_record(k.run_id, p, at) for k, p in landed])
    except OSError as exc:
        log.error("dream_promotion_not_journaled", agent=agent.id, error=str(exc))
        notes.append(f"The retried promotions could not be journaled ({exc}); they stay kept and are retried again.")
        left = [*left, *(k for k, _ in landed)]
    try:
        kept.write(agent.workspace, left)
    except OSError as exc:
        log.error("dream_promotions_kept_not_written", agent=agent.id, error=str(exc))
        notes.append(f"The kept promotions could not be rewritten ({exc}); the next run asks them again, and the KB "
                     "answers each request once.")
    return notes


def _keep(agent: AgentConfig, at: str, step: Step, waiting: list[tuple[int, Kept]]) -> None:
    """Keep ``waiting`` (their index in ``step``, reported ``pending``); one refused (the cap, a write that
    failed) is ``declined`` instead, logged and noted."""
    if not waiting:
        return
    try:
        refused = {k.request_id for k in kept.add(agent.workspace, [k for _, k in waiting])}
        why = f"not kept: the host already keeps {kept.MAX_KEPT:,} promotions waiting for the shared vault"
    except OSError as exc:
        refused = {k.request_id for _, k in waiting}
        why = f"not kept: {kept.PENDING} could not be written ({exc})"
    for index, k in waiting:
        if k.request_id in refused:
            log.error("dream_promotion_not_kept", agent=agent.id, op=k.op_id, reason=why)
            step.promotions[index] = replace(step.promotions[index], outcome=DECLINED, reason=f"{k.error}; {why}")
            step.notes[index] = f"Shared promotion of {k.op_id}: declined: {k.error}; {why}"
    if refused:
        step.notes.append(f"{len(refused)} promotion(s) of this run were dropped, {why}.")


async def promote_applied(agent: AgentConfig, promoter: Promoter | None, run_id: str, at: str,
                          results: Sequence[OpResult]) -> Step:
    """Step 9 for a run whose ops are ``results`` (module docstring): the kept promotions first, then the
    run's own, each write journaled at ``at`` so a revert can take it out. Never raises: a cancellation is
    reported in ``Step.cancelled``."""
    step = Step()
    shared = agent.knowledge.shared
    adds = promotable(results)
    if not shared.enabled or promoter is None:
        return step
    if shared.mode != "auto":
        if adds:
            step.notes.append(f"Shared promotion is off (knowledge.shared.mode is {shared.mode!r}): "
                              f"{len(adds)} applied durable add(s) stay in this agent's memory only.")
        return step
    unreachable = await retry_kept(agent, promoter, at, step)
    first = len(step.promotions)
    if adds and STEP not in step.steps:
        step.steps.append(STEP)
    waiting: list[tuple[int, Kept]] = []
    forgotten = forget_guard.checker(agent.home, agent.id)
    facts = {r.op_id: fact_text(r.proposal.content) for r in adds}
    not_offered = {op: _not_offered(text, forgotten) for op, text in facts.items()}
    asks = {r.op_id: Kept(kept.request_id(agent.id, r.op_id), run_id, r.op_id, r.proposal.id, r.proposal.topic,
                          r.proposal.reason, facts[r.op_id], at, kept.ASKED) for r in adds if not not_offered[r.op_id]}
    ahead = kept.keep_ahead(agent.id, agent.workspace, list(asks.values()) if not (step.cancelled or unreachable) else [])
    for r in adds:
        p = r.proposal
        why = not_offered[r.op_id]
        if why:
            step.add(Promotion(r.op_id, p.id, SKIPPED, "", why), f"skipped: {why}")
            continue
        ask = replace(asks[r.op_id], error="")
        if step.cancelled or unreachable:
            why = "the run was cancelled before it was asked" if step.cancelled else f"not asked: the KB is unavailable ({unreachable})"
            waiting.append((len(step.promotions), replace(ask, error=why)))
            step.add(Promotion(r.op_id, p.id, PENDING, "", f"{why}; kept on this host, a later run retries it"),
                     f"pending: {why}; kept on this host, a later run retries it")
            continue
        try:
            reply = await promoter.promote(agent.id, p.topic, p.reason, ask.fact, run_id, ask.request_id)
        except asyncio.CancelledError:
            step.cancelled = True
            why = "the run was cancelled while the KB was asked (it may have landed: the retry gets the KB's answer)"
            waiting.append((len(step.promotions), replace(ask, error=why)))
            step.add(Promotion(r.op_id, p.id, PENDING, "", f"{why}; kept on this host"), f"pending: {why}; kept on this host")
            continue
        except Exception as exc:  # noqa: BLE001 - the KB could not promote: the local dream stands
            why = f"the KB could not promote it ({exc})"
            if _unreachable(exc):
                unreachable = str(exc)
                waiting.append((len(step.promotions), replace(ask, error=why)))
                step.add(Promotion(r.op_id, p.id, PENDING, "", f"{why}; kept on this host, a later run retries it"),
                         f"pending: {why}; kept on this host, a later run retries it")
                continue
            step.add(Promotion(r.op_id, p.id, DECLINED, "", why), f"declined: {why}")
            continue
        step.add(_from_reply(r.op_id, p.id, reply), reply.message)
    _keep(agent, at, step, [(i, k) for i, k in waiting if k.request_id not in ahead])
    for promotion in step.promotions:
        (log.warning if promotion.outcome in (DECLINED, PENDING) else log.info)(
            "dream_promotion", agent=agent.id, run=run_id, op=promotion.op_id, outcome=promotion.outcome,
            note=promotion.note or None, reason=promotion.reason, retry_of=promotion.retry_of or None)
    not_journaled = _journaled(agent, run_id, at, step.promotions[first:])
    step.notes += not_journaled
    if not not_journaled:  # journaled: the answered ones kept ahead leave the queue; the waiting ones say why
        step.notes += kept.settle_ahead(agent.id, agent.workspace, ahead, [k for _, k in waiting])
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
