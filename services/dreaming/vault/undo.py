"""A revert reaches the shared vault: the promotions of the reverted ops are undone through the KB.

docs/concepts/proposals.md "Propose mode, accept, revert". The journal keeps, besides each op's
``edit`` records, one ``promotion`` record per shared promotion that wrote a
note (``promotion.write_record``: the op, and the KB's report of the write, ``PromotionWrite``:
note, project, kind, the exact text added and removed with its offset, the
promoted block, the note's SHA-256 before and after, a folded twin's text).
Dreaming never writes the vault itself: a revert hands each record back to the
KB (``UndoPromotion``), which undoes it exactly or leaves the note as it is.

- **Which:** the promotions of the ops the revert covers (the ops it undoes now
  and those already undone before), newest op first, so that two promotions of
  one run into one note come out in the reverse order they went in.
- **By request id too:** each undo names the promotion's request id
  (``kept.request_id``), so the KB marks its record undone.
- **Once:** an ``unpromote`` record marks each promotion whose undo happened
  (``undone``, or ``gone``: the note no longer existed); a later revert never
  undoes it again. A promotion ``left`` (the note was edited since, the KB
  could not answer) gets no record: the next revert of that run or op tries it
  again and reports it again.
- **Never fatal:** the local revert stands whatever the vault said. Once the
  KB is unreachable (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``) the rest are left
  without a call. Each left note is named, with the reason and what to do, in
  the revert's answer and in its audit (DREAMS.md and audit.jsonl).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

import structlog

from gateway.promotion_write import PromotionWrite
from services.dreaming.model.values import VaultUndo
from services.dreaming.records.jsonl import Record
from services.dreaming.vault import kept
from services.dreaming.vault.promotion import PROMOTION, UNREACHABLE, Promoter

log = structlog.get_logger()

UNPROMOTE = "unpromote"  # a journal record kind: a promotion undone
UNDONE, GONE, LEFT = "undone", "gone", "left"


def _write(record: Record) -> PromotionWrite:
    return PromotionWrite(
        note=str(record.get("note", "")), project=str(record.get("project", "")), kind=str(record.get("write", "")),
        offset=int(record.get("offset", 0)), removed=str(record.get("removed", "")), added=str(record.get("added", "")),
        block=str(record.get("block", "")), hash_before=str(record.get("hashBefore", "")),
        hash_after=str(record.get("hashAfter", "")), folded_twin=str(record.get("foldedTwin", "")),
    )


def pending(records: Sequence[Record], run_id: str, ops: Sequence[str]) -> list[tuple[str, PromotionWrite]]:
    """``(op id, write)`` of every promotion of ``run_id``'s ``ops`` not undone yet, newest op first."""
    wanted = set(ops)
    done = {str(r.get("op")) for r in records if r.get("kind") == UNPROMOTE and r.get("run") == run_id}
    found = [(str(r.get("op")), _write(r)) for r in records
             if r.get("kind") == PROMOTION and r.get("run") == run_id and r.get("op") in wanted and r.get("op") not in done]
    return sorted(found, key=lambda item: _number(item[0]), reverse=True)


def _number(op_id: str) -> int:
    tail = op_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def unpromote_record(run_id: str, undo: VaultUndo, at: str, by: str) -> Record:
    return {"kind": UNPROMOTE, "run": run_id, "op": undo.op_id, "note": undo.note, "outcome": undo.outcome, "at": at, "by": by}


def by_hand(agent_id: str, note: str) -> str:
    """What to do about a note left with the fact in it."""
    return (f"take the fact out by hand if it should go (PUT /api/v1/agents/{quote(agent_id, safe='')}/shared/notes/"
            f"{quote(note, safe='')}, or the memory_shared_update tool)")


async def undo_all(promoter: Promoter | None, agent_id: str, run_id: str, writes: Sequence[tuple[str, PromotionWrite]]) -> list[VaultUndo]:
    """Ask the KB to undo each write, in order (module docstring). Never raises but for a cancellation."""
    out: list[VaultUndo] = []
    unreachable = ""
    for op_id, w in writes:
        def left(reason: str, op_id: str = op_id, w: PromotionWrite = w) -> VaultUndo:
            return VaultUndo(op_id, w.note, w.project, LEFT, reason)

        if promoter is None:
            out.append(left("this dreaming process has no KB to ask; revert the run again when it has"))
            continue
        if unreachable:
            out.append(left(f"not attempted: {unreachable}; revert the run again once the KB answers"))
            continue
        try:
            reply = await promoter.undo_promotion(agent_id, run_id, op_id, w, kept.request_id(agent_id, op_id))
        except Exception as exc:  # noqa: BLE001 - the KB could not undo it: the local revert stands
            if getattr(exc, "code", None) in UNREACHABLE:
                unreachable = f"the KB was unreachable ({exc})"
            out.append(left(f"the KB could not undo it ({exc}); the note was not changed; revert the run again "
                            "once the KB answers"))
            continue
        reason = reply.reason
        if reply.outcome == LEFT:
            reason += "; " + by_hand(agent_id, w.note)
        out.append(VaultUndo(op_id, w.note, w.project, reply.outcome, reason, reply.deleted))
    for undo in out:
        (log.warning if undo.outcome == LEFT else log.info)(
            "dream_promotion_reverted", agent=agent_id, run=run_id, op=undo.op_id, note=undo.note, project=undo.project,
            outcome=undo.outcome, reason=undo.reason)
    return out


def done_records(run_id: str, undos: Sequence[VaultUndo], at: str, by: str) -> list[Record]:
    """The journal's ``unpromote`` records of the undos that happened (``by``: the revert's id)."""
    return [unpromote_record(run_id, u, at, by) for u in undos if u.outcome in (UNDONE, GONE)]


def line(undo: VaultUndo) -> str:
    """One line about ``undo`` (the answer, DREAMS.md)."""
    what = {UNDONE: "undone", GONE: "nothing to undo", LEFT: "LEFT as it is"}.get(undo.outcome, undo.outcome)
    return f"shared note {undo.note!r} ({undo.project}, promoted by {undo.op_id}): {what}: {undo.reason}"
