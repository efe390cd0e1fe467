"""Nightly promotion of one durable dreamed fact into the shared vault (docs/concepts/promotion.md "Shared promotion").

``promote`` makes one promotion and returns its outcome; it never raises for
the vault's state (a refusal is the outcome ``declined`` with its reason, and
is logged), only for a malformed request (InvalidArgument). The rules, in order:

1. **Name** (``promotion_names.choose_name``): the topic slug, else the
   reason unless it is an editing instruction, else the fact's leading
   significant words. Nothing nameable: ``declined``.
2. **The fact** is the content with trailing whitespace removed; it is
   *present* in a note when its text, whitespace runs collapsed, occurs in the
   note's text so collapsed.
3. **Exact name** (a live note ``<name>`` exists): the fact lands in it as an
   *update*: appended when not present (``updated``), nothing written when it
   is (``unchanged``). The note's content is never replaced, and no
   near-duplicate search runs (the name already says which note it is).
4. **A retired name** (only ``stale__<name>`` exists): a recurrence. The fact
   is written as the live note ``<name>`` (``created``) with the retired body
   folded back in (rule 8); it is never merged into another note.
5. **No collision**: the near-duplicate search (``similar.score_candidates``:
   the capped seed of at most ``SEED_TERM_BUDGET`` (12) leading topic words,
   the OR-match recall, retired notes never candidates) is recall only. Each
   candidate's *containment* is the set of seed words its full note body holds
   (not the chunk that matched). Each seed word also has a *weight*, its
   specificity in the vault (``seed_weights``: ``ln(1 + chunks / (1 + chunks
   holding a word that starts with it))``), so a word found all over the vault
   weighs little. A candidate clears the **merge bar** when it holds at least
   ``MERGE_CONTAINMENT`` (half) of the seed words and at least
   ``MERGE_MIN_TERMS`` (3) of them (so a fact with a seed under 3 words never
   merges), *and* the words it holds carry at least ``MERGE_WEIGHT`` (60%) of
   the seed's weight: half of the fact's topic words, not just the common
   ones, which a long note holds whatever its subject. The best candidate
   clearing it (largest weight share, then most words, then name) gets the
   fact appended (``merged``; ``unchanged`` when it is present there). Below
   that bar the fact is written as its own note ``<name>`` (``created``): two
   notes are a recoverable tidy-up, two unrelated facts fused into one are not.
6. **Links**: every other candidate holding at least ``LINK_CONTAINMENT``
   (30%) of the seed words, at least ``LINK_MIN_TERMS`` (2) of them, and at
   least ``LINK_WEIGHT`` (30%) of the seed's weight (the **link bar**, lower
   than the merge bar: a link is an additive claim, a merge is not), in the
   same order, at most ``MAX_LINKS`` (5), is linked as ``[[name]]`` on one
   ``Related:`` line after the fact, whether the fact merged (the links go
   into the note it merged into) or became a new note (rules 4 and 5). A note
   already linked (``[[name]]`` or ``[[name|``) is not linked again, and a
   note never links itself.
7. **What is written**: a block of one marker line, the fact, and the
   ``Related:`` line when there are links::

       <!-- promoted: agent <agent> run <run> -->
       - The staging host is named hermes.

       Related: [[staging-network]]

   A new note is the block; an update or merge appends it after one blank
   line. The marker is a ``<!-- key: value -->`` comment, metadata to the
   index (it changes no entry hash and is never searched).
8. **Size cap**: a note is at most ``notes.MAX_NOTE_BYTES`` (102,400 bytes).
   A write the cap refuses writes nothing and is ``declined`` with the sizes.
   **Twins**: a write to ``<name>`` while ``stale__<name>`` exists (rules 3,
   4 and 5, merge targets included) folds the retired body in
   (``retirement.fold``) and deletes the twin only once the write landed.
   When the folded note would exceed the cap, or the twin is not valid UTF-8,
   the unfolded write goes ahead, the twin is kept (the search twin rule hides
   it) and the outcome says why (``twin_kept``).
9. **Writes** go through the store (``VaultStore.write``): a create must not
   find the note (``expected=None``), an append must find the bytes it read.
   On a conflict the whole decision is made again from the new state, up to
   ``PROMOTE_ATTEMPTS`` (8) times, then ``declined``. An I/O error is
   ``declined`` with the error, and so is a note to append to that is not
   valid UTF-8 (decoding it would replace the bytes it cannot read). Every
   write reindexes the touched notes at once.
10. **The write is reported** (``PromoteResult.write``, ``unpromote.written``):
    the note, the kind, the exact text added and removed, the note's hashes and
    a folded twin's text, so that a revert of the dream can undo it exactly
    (``unpromote.undo``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

import structlog

from gateway.atomic import WriteConflict
from gateway.errors import InvalidArgument
from gateway.promotion_write import PromotionWrite
from services.kb.vault import notes
from services.kb.vault.names import retired_name
from services.kb.vault.promotion_names import Naming, choose_name
from services.kb.vault.retirement import fold
from services.kb.vault.similar import Scored, score_candidates
from services.kb.vault.store import VaultStore
from services.kb.vault.unpromote import written

MERGE_CONTAINMENT: Final = 0.5
MERGE_MIN_TERMS: Final = 3
MERGE_WEIGHT: Final = 0.6
LINK_CONTAINMENT: Final = 0.3
LINK_MIN_TERMS: Final = 2
LINK_WEIGHT: Final = 0.3
MAX_LINKS: Final = 5
PROMOTE_ATTEMPTS: Final = 8
MARKER_FIELD_CHARS: Final = 80

CREATED: Final = "created"
MERGED: Final = "merged"
UPDATED: Final = "updated"
UNCHANGED: Final = "unchanged"
DECLINED: Final = "declined"

_TOPIC: Final = re.compile(r"^[a-z0-9-]{1,64}$")  # fullmatch: "$" alone lets "deploys\n" through
_UNSAFE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029>]")

log = structlog.get_logger()


@dataclass(frozen=True)
class PromoteResult:
    """One promotion's outcome (module docstring).

    ``outcome``: created, merged, updated, unchanged or declined. ``name``: the
    note written (or that already held the fact); for a decline, the note it was
    meant for ("" when nothing was nameable). ``name_from``: topic, reason or
    fact. ``passed_over``: a reason passed over as an editing instruction.
    ``linked``: the names the ``Related:`` line added. ``folded``: a retired
    twin was folded in and deleted; ``twin_kept``: it had to stay (the cap; the
    reason says so). ``held``/``seed``/``weight``: the merge target's seed words
    held, of the seed's size, and the share of the seed's weight they carry (0
    when there was no merge). ``reason``: why this outcome. ``write``: what was written, exactly
    enough to undo it (``unpromote``); None when nothing was. ``replayed``: the answer recorded for a
    request asked before (``promotion_record``); this call wrote nothing."""

    outcome: str
    name: str
    name_from: str
    reason: str
    passed_over: str = ""
    linked: tuple[str, ...] = ()
    folded: bool = False
    twin_kept: bool = False
    held: int = 0
    seed: int = 0
    weight: float = 0.0
    write: PromotionWrite | None = None
    replayed: bool = False

    @property
    def message(self) -> str:
        """One transport-neutral sentence."""
        if self.outcome == DECLINED:
            return f"promotion declined: {self.reason}"
        verb = {CREATED: "created", MERGED: "merged into", UPDATED: "updated", UNCHANGED: "already in"}[self.outcome]
        text = f"{verb} shared note {self.name!r}"
        if self.linked:
            text += ", linked to " + ", ".join(f"[[{n}]]" for n in self.linked)
        if self.folded:
            text += ", folding its retired twin back in"
        return text + f" ({self.reason})"


def required_terms(seed_size: int, ratio: float, minimum: int) -> int | None:
    """Seed words a candidate must hold to clear a bar of ``ratio`` with at least ``minimum`` words;
    None when a seed of ``seed_size`` words cannot clear it."""
    if seed_size < minimum:
        return None
    return max(minimum, math.ceil(ratio * seed_size - 1e-9))


def _collapsed(text: str) -> str:
    return " ".join(text.split())


def _marker(agent_id: str, run_id: str) -> str:
    def clean(value: str) -> str:
        return " ".join(_UNSAFE.sub(" ", value).split())[:MARKER_FIELD_CHARS] or "-"

    return f"<!-- promoted: agent {clean(agent_id)} run {clean(run_id)} -->"


def _linked_already(text: str, name: str) -> bool:
    return f"[[{name}]]" in text or f"[[{name}|" in text


def _block(marker: str, fact: str, links: list[str]) -> str:
    block = f"{marker}\n{fact}\n"
    if links:
        block += "\nRelated: " + ", ".join(f"[[{n}]]" for n in links) + "\n"
    return block


def _appended(old: str, block: str) -> str:
    head = old.rstrip("\n")
    return (head + "\n\n" if head.strip() else "") + block


@dataclass(frozen=True)
class _Plan:
    """One decision (rules 3-6): the note the fact goes to, and what goes with it."""

    target: str
    outcome: str
    reason: str
    old: bytes | None  # the target's bytes as read; None: a create
    links: tuple[str, ...] = ()
    held: int = 0
    seed: int = 0
    weight: float = 0.0


def seed_weights(store: VaultStore, seed: list[str]) -> dict[str, float]:
    """Each seed word's weight: its specificity in the vault, ``ln(1 + chunks / (1 + chunks holding a
    word that starts with it))`` over the vault index (rule 5). Equal weights when the index cannot say."""
    counts = store.term_counts(seed)
    chunks = store.chunk_count()
    if counts is None or chunks is None:
        return {term: 1.0 for term in seed}
    return {term: math.log1p(chunks / (1 + counts.get(term, 0))) for term in seed}


def _share(held: frozenset[str], weights: dict[str, float]) -> float:
    """The share of the seed's weight that ``held`` carries (0-1)."""
    total = sum(weights.values())
    return sum(weights[t] for t in held) / total if total > 0 else 0.0


def _search(store: VaultStore, name: str, fact: str, *, may_merge: bool) -> _Plan:
    """Rules 4-6 for ``name``, which has no live note: merge into the best candidate over the merge
    bar (when ``may_merge``), else create; link the others over the link bar."""
    seed, scored = score_candidates(store, fact, exclude={name})
    size = len(seed)
    weights = seed_weights(store, seed)
    merge_need = required_terms(size, MERGE_CONTAINMENT, MERGE_MIN_TERMS)
    link_need = required_terms(size, LINK_CONTAINMENT, LINK_MIN_TERMS)
    share = {c.name: _share(c.held, weights) for c in scored}
    ranked = sorted(scored, key=lambda c: (-share[c.name], -c.shared, c.name))

    def clears(c: Scored, need: int | None, weight: float) -> bool:
        return need is not None and c.shared >= need and share[c.name] >= weight - 1e-9

    target = next((c for c in ranked if clears(c, merge_need, MERGE_WEIGHT)), None) if may_merge else None
    links = tuple(c.name for c in ranked if c is not target and clears(c, link_need, LINK_WEIGHT))[:MAX_LINKS]
    bar = f"a merge needs {merge_need} and {MERGE_WEIGHT:.0%}"
    if target is not None:
        old = store.read(target.name)
        if old is None:
            raise WriteConflict(f"{target.name!r} went away while the fact was being merged into it")
        why = (f"{target.name!r} holds {target.shared} of the fact's {size} leading topic words, "
               f"{share[target.name]:.0%} of their weight ({bar})")
        return _Plan(target.name, MERGED, why, old, links, target.shared, size, share[target.name])
    best = ranked[0] if ranked else None
    if not may_merge:
        why = f"a recurrence of the retired note {retired_name(name)!r}"
    elif best is None:
        why = "no similar shared note"
    elif merge_need is None:
        why = f"the fact has {size} leading topic word(s); a merge needs at least {MERGE_MIN_TERMS}"
    else:
        why = (f"the closest note {best.name!r} holds {best.shared} of the fact's {size} leading topic words, "
               f"{share[best.name]:.0%} of their weight; {bar}")
    return _Plan(name, CREATED, why, None, links)


def _decide(store: VaultStore, name: str, fact: str) -> _Plan:
    """Rule 3 (exact name), else rules 4-6."""
    old = store.read(name)
    if old is not None:
        return _Plan(name, UPDATED, "a shared note of this name exists", old)
    recurrence = store.exists(retired_name(name))
    return _search(store, name, fact, may_merge=not recurrence)


def _fold(store: VaultStore, name: str, text: str) -> tuple[str, str, str]:
    """``(text to write, the twin's text when it is folded in else "", why the twin stays or "")`` for a
    write of ``text`` under ``name`` (rule 8)."""
    retired = store.read(retired_name(name))
    if retired is None:
        return text, "", ""
    try:
        twin = retired.decode("utf-8")
    except UnicodeDecodeError:
        why = f"the retired twin {retired_name(name)!r} was kept: it is not valid UTF-8, so it is never folded in"
        log.warning("vault_promotion_twin_kept", note=name, reason=why)
        return text, "", why
    merged = fold(text, retired)
    size = len(merged.encode("utf-8"))
    if size > notes.MAX_NOTE_BYTES:
        why = (f"the retired twin {retired_name(name)!r} was kept: folded in, the note would be {size:,} bytes, "
               f"over the {notes.MAX_NOTE_BYTES:,}-byte cap")
        log.warning("vault_promotion_twin_kept", note=name, reason=why)
        return text, "", why
    return merged, twin, ""


def _attempt(store: VaultStore, naming: Naming, fact: str, marker: str) -> PromoteResult:
    """One decision and its write. Raises WriteConflict when the vault changed under it, OSError."""
    plan = _decide(store, naming.name, fact)

    def result(outcome: str, reason: str, linked: tuple[str, ...] = (), folded: bool = False, kept: str = "",
               write: PromotionWrite | None = None) -> PromoteResult:
        reason += f"; {kept}" if kept else ""
        return PromoteResult(outcome, plan.target, naming.source, reason, naming.passed_over, linked, folded,
                             bool(kept), plan.held, plan.seed, plan.weight, write)

    try:
        old_text = "" if plan.old is None else plan.old.decode("utf-8")
    except UnicodeDecodeError:  # decoding it would replace the bytes it cannot read
        return result(DECLINED, f"{plan.target!r} is not valid UTF-8; a promotion never rewrites a note it cannot "
                                "read exactly; nothing was written")
    present = plan.old is not None and _collapsed(fact) in _collapsed(old_text)
    links: tuple[str, ...] = ()
    block = ""
    if present:
        text, reason = old_text, f"the fact is already in {plan.target!r}"
    else:
        links = tuple(n for n in plan.links if not _linked_already(old_text, n))
        block = _block(marker, fact, list(links))
        text, reason = (block if plan.old is None else _appended(old_text, block)), plan.reason
    size = len(text.encode("utf-8"))
    if size > notes.MAX_NOTE_BYTES:
        what = "the new note" if plan.old is None else f"{plan.target!r} with the fact appended"
        return result(DECLINED, f"the note-size cap refuses it: {what} would be {size:,} bytes, over the "
                                f"{notes.MAX_NOTE_BYTES:,}-byte cap; nothing was written")
    text, twin, kept = _fold(store, plan.target, text)
    folded = bool(twin)
    if present and not folded:
        return result(UNCHANGED, reason, kept=kept)
    store.write(plan.target, text.encode("utf-8"), expected=plan.old,
                drop=(retired_name(plan.target),) if folded else ())  # the twin goes once the write landed
    write = written(store.project, plan.target, None if plan.old is None else old_text, text, block, twin)
    return result(UPDATED if present else plan.outcome, reason, links, folded, kept, write)


def check_request(topic: str, content: str) -> None:
    """InvalidArgument for a malformed promotion: a topic that is not a kebab slug, or no content."""
    if topic and not _TOPIC.fullmatch(topic):
        raise InvalidArgument(f"topic: {topic[:70]!r} is not a kebab slug ^[a-z0-9-]{{1,64}}$ (or empty)")
    if not content.strip():
        raise InvalidArgument("content is required: the fact to promote")


def promote(
    store: VaultStore,
    *,
    agent_id: str,
    topic: str,
    reason: str,
    content: str,
    run_id: str = "",
) -> PromoteResult:
    """Promote one fact into the vault (module docstring). Raises InvalidArgument (``check_request``);
    every other refusal is a ``declined`` result, logged with its reason."""
    check_request(topic, content)
    fact = "\n".join(line.rstrip() for line in content.strip("\n").splitlines()).strip("\n")
    naming = choose_name(topic, reason, fact)
    result: PromoteResult | None = None
    if not naming.name:
        why = "nothing nameable: no topic, " + (
            "a reason that is an editing instruction" if naming.passed_over else "no usable reason"
        ) + ", and no significant word in the fact"
        result = PromoteResult(DECLINED, "", "", why, naming.passed_over)
    attempt = 0
    while result is None:
        attempt += 1
        try:
            result = _attempt(store, naming, fact, _marker(agent_id, run_id))
        except WriteConflict as exc:
            if attempt >= PROMOTE_ATTEMPTS:
                result = PromoteResult(DECLINED, naming.name, naming.source, (
                    f"the vault kept changing while the fact was being written ({PROMOTE_ATTEMPTS} attempts; "
                    f"last: {exc.message})"), naming.passed_over)
            else:
                notes.backoff(attempt)
        except OSError as exc:
            result = PromoteResult(DECLINED, naming.name, naming.source,
                                   f"the write failed: {type(exc).__name__}: {exc.strerror or exc}", naming.passed_over)
    declined = result.outcome == DECLINED
    (log.warning if declined else log.info)(
        "vault_promotion_declined" if declined else "vault_promoted", agent=agent_id, run=run_id or None,
        outcome=result.outcome, note=result.name or None, name_from=result.name_from or None, reason=result.reason,
        linked=list(result.linked) or None, folded=result.folded or None, twin_kept=result.twin_kept or None,
    )
    return result
