"""A promotion request lands once (docs/concepts/vault.md "Promotion requests").

Dreaming names each promotion with a request id that stays the same when it asks again
(``<agent>/<run>/<op>``): its answer was lost (a deadline passed while the KB wrote), or the vault was
unavailable and the host kept the promotion to retry on a later run. ``promote_once`` looks the id up
first: a request answered before gets that answer back (``replayed``) and nothing is written. Else the
promotion is made (``promotion.promote``) and its answer recorded under the id by the same write
decision: on PostgreSQL in the transaction that wrote the note, so the note and its answer land together
or not at all.

A ``declined`` promotion wrote nothing and is not recorded: asked again, it is decided again from the
vault as it is then (a decline may have been the vault changing under it). The recorded answer is the
outcome, the note and the write (``PromotionWrite``, what a revert needs); the links are read back from
the write's block, and the reason says that this is the answer first given, and when.

**Undone once.** ``undo_once`` undoes a promotion (``unpromote.undo``) from the write given, or, with
none, from the write recorded under the request id: how dreaming takes out a promotion whose answer it
never got (the op was reverted while the promotion waited on the host). A request with no write recorded
is ``gone`` (nothing of it landed). An undo that took the promotion out (``undone``, ``gone``) marks the
record (``undone_at``, ``undo_outcome``), and a request undone before is answered so without another
undo. A request asked again after its undo still gets its first answer (and writes nothing).
"""

from __future__ import annotations

import re
from dataclasses import asdict, fields
from datetime import datetime, timezone
from typing import Final

import structlog

from gateway.errors import InvalidArgument
from gateway.promotion_write import PromotionWrite
from services.kb.vault import promotion, unpromote
from services.kb.vault.store import PromotionRecord, VaultStore

MAX_REQUEST_ID_CHARS: Final = 512

_RELATED: Final = re.compile(r"^Related: (.*)$", re.MULTILINE)
_LINK: Final = re.compile(r"\[\[([^\[\]|\n]+)\]\]")

log = structlog.get_logger()


def record_of(request_id: str, agent_id: str, run_id: str, result: promotion.PromoteResult, at: float) -> PromotionRecord:
    """The record of ``result``, the answer to request ``request_id``."""
    write = None if result.write is None else asdict(result.write)
    return PromotionRecord(request_id, agent_id, run_id, result.outcome, result.name, write, at)


def write_of(raw: dict[str, object]) -> PromotionWrite:
    """A recorded write back as ``PromotionWrite`` (a field it lacks is empty)."""
    values: dict[str, object] = {}
    for f in fields(PromotionWrite):
        value = raw.get(f.name, 0 if f.name == "offset" else "")
        values[f.name] = int(str(value)) if f.name == "offset" else str(value)
    return PromotionWrite(**values)  # type: ignore[arg-type]


def replayed(record: PromotionRecord) -> promotion.PromoteResult:
    """The answer ``record`` keeps, as a result marked ``replayed``."""
    write = None if record.write is None else write_of(record.write)
    block = write.block if write is not None else ""
    related = _RELATED.findall(block)
    linked = tuple(_LINK.findall(related[-1])) if related else ()
    reason = (f"this request ({record.request_id}) was answered {record.outcome!r} at {_when(record.at)}; that answer is given "
              "again and nothing more was written")
    return promotion.PromoteResult(record.outcome, record.note, "", reason, linked=linked,
                                   folded=bool(write is not None and write.folded_twin), write=write, replayed=True)


def promote_once(store: VaultStore, *, request_id: str, agent_id: str, topic: str, reason: str, content: str,
                 run_id: str, at: float) -> promotion.PromoteResult:
    """``promotion.promote`` answered once per ``request_id`` (module docstring; "" : every call is a new
    request). Run inside the store's ``writing``. Raises as ``promote``."""
    if request_id:
        found = _mine(store, request_id, agent_id)
        if found is not None:
            log.info("vault_promotion_replayed", agent=agent_id, run=run_id or None, request=request_id,
                     outcome=found.outcome, note=found.note or None)
            return replayed(found)
    result = promotion.promote(store, agent_id=agent_id, topic=topic, reason=reason, content=content, run_id=run_id)
    if request_id and result.outcome != promotion.DECLINED:
        store.record_promotion(record_of(request_id, agent_id, run_id, result, at))
    return result


def check_request_id(request_id: str) -> None:
    """InvalidArgument for a request id longer than ``MAX_REQUEST_ID_CHARS`` or holding a control character."""
    if len(request_id) > MAX_REQUEST_ID_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in request_id):
        raise InvalidArgument(f"request_id: at most {MAX_REQUEST_ID_CHARS} characters, no control character")


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _mine(store: VaultStore, request_id: str, agent_id: str) -> PromotionRecord | None:
    """``request_id``'s record; InvalidArgument when another agent's promotion was asked under it."""
    found = store.promotion(request_id)
    if found is not None and found.agent_id != agent_id:
        raise InvalidArgument(f"request_id: {request_id[:80]!r} names a promotion of another agent")
    return found


def undo_once(store: VaultStore, write: PromotionWrite | None, *, request_id: str, agent_id: str, run_id: str,
              op_id: str, at: float) -> unpromote.UndoResult:
    """Undo a promotion from ``write``, else from the write recorded under ``request_id`` (module docstring
    "Undone once"). Run inside the store's ``writing``. Never raises for the vault's state."""
    found = _mine(store, request_id, agent_id) if request_id else None
    if found is not None and found.undone_at is not None:
        return unpromote.UndoResult(found.undo_outcome or unpromote.GONE, found.note,
                                    f"this promotion was undone at {_when(found.undone_at)}; nothing more to do")
    if write is None:
        if found is None or found.write is None:
            what = "nothing was written" if found is not None else "nothing landed"
            return unpromote.UndoResult(unpromote.GONE, "" if found is None else found.note,
                                        f"under request {request_id!r} {what}: nothing to undo")
        write = unpromote.check_write(write_of(found.write))
    result = unpromote.undo(store, write, run_id=run_id, op_id=op_id)
    if found is not None and result.outcome in (unpromote.UNDONE, unpromote.GONE):
        store.promotion_undone(request_id, result.outcome, at)
    return result
