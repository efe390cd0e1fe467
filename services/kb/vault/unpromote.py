"""Undoing one nightly promotion (docs/concepts/proposals.md "Propose mode, accept, revert" and "Shared promotion").

Every promotion that writes a note reports its write (``PromotionWrite``,
built by ``written``): the note and the vault's project, the kind (``created``:
the note did not exist; ``appended``: the note's end was replaced by more text),
the splice (``offset`` in characters, the text ``removed`` from there, the text
``added``), the promoted ``block`` (marker, fact, ``Related:`` line; empty when
the write only folded a retired twin back in), the SHA-256 of the note's bytes
before and after, and the retired twin ``stale__<note>`` as it was when the
write folded it in and deleted it. Dreaming keeps it in the run's journal and
hands it back here when the run, or the op that caused the promotion, is
reverted. ``undo`` then, in this order:

1. **A note that is exactly as the write left it** (its SHA-256 is
   ``hash_after``) is put back exactly: a created note is deleted, an appended
   one gets its text before the write back (``removed`` at ``offset``; its hash
   must be ``hash_before``), and a folded twin is written back byte for byte
   (never over an existing ``stale__`` note).
2. **A note changed since** (another run's promotion appended to it, someone
   edited it) gets the promoted block taken out when that block still stands
   verbatim exactly once, on whole lines; the line ends around it are closed up
   as if it had never been written, and every other character is kept. A
   created note left with nothing else is deleted. When the write folded a twin
   in, only an unchanged note lets that be undone exactly: the note is left.
3. Otherwise the note is **left** as it is, and the outcome says why: the block
   is no longer there verbatim, or is there more than once; the note was
   retired since; it is not valid UTF-8; the agent's vault is another project
   now; the vault kept changing under the undo.

A missing note (deleted since, nothing retired under its name) is ``gone``:
nothing of the promotion is left in the vault. Writes and deletes go through
the store, compare-and-swap against the bytes read; a conflict makes the
decision again from the new state, up to ``UNDO_ATTEMPTS`` times.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Final

import structlog

from gateway.atomic import WriteConflict
from gateway.errors import FailedPrecondition, InvalidArgument
from gateway.promotion_write import PromotionWrite
from services.kb.vault import notes
from services.kb.vault.names import retired_name, validate_name
from services.kb.vault.store import VaultStore

CREATED_NOTE: Final = "created"
APPENDED: Final = "appended"
WRITE_KINDS: Final = (CREATED_NOTE, APPENDED)
UNDONE: Final = "undone"
GONE: Final = "gone"
LEFT: Final = "left"
UNDO_ATTEMPTS: Final = 8
MAX_FIELD_BYTES: Final = 2 * notes.MAX_NOTE_BYTES  # a note and a folded twin, with room for line ends

_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")

log = structlog.get_logger()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def written(project: str, note: str, old: str | None, new: str, block: str, twin: str) -> PromotionWrite:
    """The record of writing ``new`` over ``old`` (None: the note did not exist) in ``note``.

    The splice starts where ``old``'s trailing line ends begin (an append replaces them with its
    separator), at 0 when ``old`` is blank; ``twin``: the retired twin's text when it was folded in."""
    before = old or ""
    offset = len(before.rstrip("\n")) if before.strip() else 0
    if not new.startswith(before[:offset]):  # a write that is no append: the common prefix
        offset = len(os.path.commonprefix([before, new]))
    return PromotionWrite(
        note=note, project=project, kind=CREATED_NOTE if old is None else APPENDED, offset=offset,
        removed=before[offset:], added=new[offset:], block=block,
        hash_before="" if old is None else sha256(before.encode("utf-8")), hash_after=sha256(new.encode("utf-8")),
        folded_twin=twin,
    )


def check_write(write: PromotionWrite) -> PromotionWrite:
    """InvalidArgument naming the field of a malformed write record."""
    validate_name(write.note)
    if write.kind not in WRITE_KINDS:
        raise InvalidArgument(f"write.kind: {write.kind[:40]!r} is not a kind of write; accepted: {', '.join(WRITE_KINDS)}")
    if write.offset < 0:
        raise InvalidArgument(f"write.offset: {write.offset} is negative")
    if not _SHA256.fullmatch(write.hash_after):
        raise InvalidArgument("write.hash_after: not a SHA-256 in hex (64 lowercase hex digits)")
    if write.kind == APPENDED and not _SHA256.fullmatch(write.hash_before):
        raise InvalidArgument("write.hash_before: not a SHA-256 in hex; an appended write has one")
    for field, value in (("removed", write.removed), ("added", write.added), ("block", write.block),
                         ("folded_twin", write.folded_twin)):
        if len(value.encode("utf-8")) > MAX_FIELD_BYTES:
            raise InvalidArgument(f"write.{field}: over {MAX_FIELD_BYTES:,} bytes")
    return write


@dataclass(frozen=True)
class UndoResult:
    """``outcome``: undone, gone or left; ``reason``: why, in plain words; ``deleted``: the note
    file was removed; ``twin_restored``: the retired twin was written back."""

    outcome: str
    note: str
    reason: str
    deleted: bool = False
    twin_restored: bool = False

    @property
    def message(self) -> str:
        """One transport-neutral sentence."""
        if self.outcome == LEFT:
            return f"shared note {self.note!r} was left as it is: {self.reason}"
        return f"shared note {self.note!r}: {self.reason}"


def take_out(text: str, block: str, tail: str) -> tuple[str | None, int]:
    """``(text without block, 1)`` when ``block`` stands in ``text`` exactly once on whole lines, else
    ``(None, times found)``. The line ends around it are closed up: what followed it moves up to
    where the block began; a block that ended the text leaves its predecessor ending with ``tail``
    (the line ends the write replaced)."""
    core = block.rstrip("\n")
    if not core:
        return None, 0
    found = []
    start = text.find(core)
    while start >= 0:
        end = start + len(core)
        if (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end] == "\n"):
            found.append(start)
        start = text.find(core, start + 1)
    if len(found) != 1:
        return None, len(found)
    pre, post = text[: found[0]], text[found[0] + len(core) :]
    if not post.strip("\n"):
        return (pre.rstrip("\n") + tail if pre.strip() else ""), 1
    return pre + post.lstrip("\n"), 1


def _attempt(store: VaultStore, w: PromotionWrite) -> UndoResult:
    """One decision and its writes. Raises WriteConflict when the vault changed under it, OSError."""

    def left(reason: str) -> UndoResult:
        return UndoResult(LEFT, w.note, reason)

    if w.project != store.project:
        return left(f"the promotion went to the vault of project {w.project!r}; this agent's vault is "
                    f"{store.project!r} now")
    try:
        data = store.read(w.note)
    except FailedPrecondition as exc:
        return left(exc.message)
    if data is None:
        if store.exists(retired_name(w.note)) and not w.folded_twin:
            return left(f"it was retired since (as {retired_name(w.note)!r}), with the promoted text in it")
        return UndoResult(GONE, w.note, "the note no longer exists; nothing of this promotion is left in the vault")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return left("it is not valid UTF-8 now; a note that cannot be read exactly is never rewritten")
    if sha256(data) == w.hash_after:
        return _exact(store, w, data, text)
    if w.folded_twin:
        return left("it was edited since, and this promotion also folded its retired twin back in, which can be "
                    "undone exactly only while the note is as the promotion left it")
    tail = w.removed if w.kind == APPENDED else "\n"
    new, times = take_out(text, w.block, tail)
    if new is None:
        where = "the promoted block is no longer there verbatim" if times == 0 else f"the promoted block is there {times} times"
        return left(f"it was edited since the promotion ({where})")
    if w.kind == CREATED_NOTE and not new.strip():
        store.delete(w.note, expected=data)
        return UndoResult(UNDONE, w.note, "deleted the note this promotion created (only line ends were left once "
                                          "its block was taken out)", deleted=True)
    store.write(w.note, new.encode("utf-8"), expected=data)
    return UndoResult(UNDONE, w.note, "took the promoted block out; the note had changed since the promotion, and the rest of it was kept")


def _exact(store: VaultStore, w: PromotionWrite, data: bytes, text: str) -> UndoResult:
    """Rule 1: the note is exactly as the write left it."""
    twin = retired_name(w.note)
    before = text[: w.offset] + w.removed
    if w.kind == APPENDED and sha256(before.encode("utf-8")) != w.hash_before:
        return UndoResult(LEFT, w.note, "the recorded write does not match the note (its text before does not "
                                        "hash to the recorded SHA-256)")
    if w.folded_twin and store.exists(twin):
        return UndoResult(LEFT, w.note, f"the retired note {twin!r} this promotion folded in "
                                        "exists again; neither is changed")
    if w.folded_twin:
        store.write(twin, w.folded_twin.encode("utf-8"), expected=None)
    try:
        if w.kind == CREATED_NOTE:
            store.delete(w.note, expected=data)
        else:
            store.write(w.note, before.encode("utf-8"), expected=data)
    except BaseException:
        if w.folded_twin:  # the live note changed meanwhile: the twin goes again, the decision is made again
            store.delete(twin)
        raise
    what = "deleted the note this promotion created" if w.kind == CREATED_NOTE else "took out the text this promotion appended"
    if w.folded_twin:
        what += f", and put back the retired note {twin!r} it had folded in"
    return UndoResult(UNDONE, w.note, what, deleted=w.kind == CREATED_NOTE, twin_restored=bool(w.folded_twin))


def undo(store: VaultStore, write: PromotionWrite, *, run_id: str = "", op_id: str = "") -> UndoResult:
    """Undo one promotion's write (module docstring). Never raises for the vault's state: a note that
    cannot be put back exactly is the outcome ``left`` with the reason, and is logged."""
    result: UndoResult | None = None
    attempt = 0
    while result is None:
        attempt += 1
        try:
            result = _attempt(store, write)
        except WriteConflict as exc:
            if attempt >= UNDO_ATTEMPTS:
                result = UndoResult(LEFT, write.note, f"the vault kept changing while the promotion was being undone "
                                                      f"({UNDO_ATTEMPTS} attempts; last: {exc.message})")
            else:
                notes.backoff(attempt)
        except OSError as exc:
            result = UndoResult(LEFT, write.note, f"the write failed: {type(exc).__name__}: {exc.strerror or exc}")
    (log.warning if result.outcome == LEFT else log.info)(
        "vault_promotion_left" if result.outcome == LEFT else "vault_promotion_undone", note=write.note,
        run=run_id or None, op=op_id or None, outcome=result.outcome, reason=result.reason,
    )
    return result
