"""The applier: a run's proposals applied to MEMORY.md and USER.md behind every guard.

Pure: texts in, texts and a record of every splice out (``plan``); writing
them (backups, the pruned archive, compare-and-swap, the journal) is
``commit.py``. The guards, in the order each op meets them:

1. **Anchors.** A replace or remove finds its ``target`` in the current text
   (after the run's earlier ops): missing, or found more than once, the op is
   skipped with that reason. A file with CRLF line endings also matches a
   target written with LF. The splice is by index, so ``$1``, ``\\1`` or ``$&``
   in the new text are literal. A remove of whole lines takes their line end
   too. An add is appended at the end of the file, or after the line holding
   its ``target`` when it names one (found exactly once); an add whose text is
   already in the file (whitespace aside) is skipped.
2. **Pinned sections** (``sections.py``: ``## User``, ``## Feedback``,
   ``## Preference(s)``, ``## Profile``) are never removed or shrunk: a replace
   or remove whose span touches one is skipped. An add may land in one, but
   no op may leave a pinned line outside its section (an added heading that
   ends the section early, a code fence opened or closed so that its heading
   is no longer one): such an op is skipped too, or a later op of the run
   could remove those lines.
3. **Over budget** (the file the applier starts from, after the deterministic
   passes, is over its soft budget: the file the reviewer was shown): the run
   is net-shrink, so a durable add, or a replace whose new text is longer than
   its anchor, is skipped. **Under budget**, an add or a replace that would
   take the file over its budget is skipped too: once a file fits, dreaming
   never makes it overflow again.
4. **Bounded loss.** Each file's *gross* deletion is counted: every char a
   remove cuts and every char of a replace's anchor, whatever is inserted, so
   an add can never mask a delete. An op that would take the total past 25%
   of the file as it was when the run began (``began``: before the compactor
   and the route-out; 90% when it began over budget: removals are the shrink
   lever) is skipped, and so is an op that would leave a non-empty file empty.
   What the passes moved is not counted: those are moves, each found again in
   its destination by the recall check, not the reviewer's deletions.
5. **Episodic adds** (``tier: episodic``, only with ``writeRouting``) go to
   ``<episodicArchiveDir>/<topic>.md``, appended; they never touch MEMORY.md
   and count against nothing above. ``commit.py`` confines the path.

First of all, **the secret guard** (docs/concepts/secrets.md): an add or a
replace whose new text holds a secret (``gateway.secrets_guard``) is skipped,
its reason ``secret: <detector>`` with the lines; the op as recorded
(``Plan.withheld``) has that text, and its anchor and reason when they hold
one, replaced by a ``WITHHELD`` line, so the audit never keeps the value.
Then **the tombstones** (docs/concepts/forget.md "Where tombstones are checked"):
an add or a replace whose new text brings back forgotten text (``forgotten``,
``gateway.forget_guard``) is skipped, its reason ``forgotten: F-…``, and
recorded with that text replaced by the forget's marker; one whose new text
holds a forget's marker that its anchor does not (a proposal a forget
scrubbed) is skipped too. Neither is ever a pending proposal.

Before the guards, an op **already in effect** is skipped (``already_done``):
an add whose text is in the file, a replace whose anchor is gone and whose new
text is there, a remove whose anchor is gone. ``Plan.done`` names those ops:
they are not pending proposals (``history/pending.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from gateway import forget_guard
from gateway.forget_guard import Check, nothing_forgotten
from gateway.forgetting import marker
from gateway.secrets_guard import find_secrets, skip_reason
from services.dreaming.apply import sections
from services.dreaming.model.budgets import Budgets, over_budget
from services.dreaming.model.edit import CONTEXT_CHARS, Edit, sha256
from services.dreaming.model.values import EPISODIC, MEMORY_FILES, OPS, OpResult, Proposal

LOSS_UNDER_BUDGET = 0.25
LOSS_OVER_BUDGET = 0.90
_TOPIC = re.compile(r"^[a-z0-9-]{1,64}$")  # fullmatch: "$" alone lets "deploys\n" through, a file name with a newline


@dataclass
class Plan:
    """The outcome of ``plan``: final texts, the splices that lead there, and every op's fate."""

    originals: dict[str, str]
    texts: dict[str, str]
    edits: list[Edit] = field(default_factory=list)
    appends: list[tuple[str, str, OpResult]] = field(default_factory=list)  # (workspace path, text, result)
    results: list[OpResult] = field(default_factory=list)
    done: set[str] = field(default_factory=set)  # op ids skipped as already in effect (``already_done``)
    withheld: set[str] = field(default_factory=set)  # op ids skipped by the secret guard or a tombstone, recorded without their text

    def changed(self) -> list[str]:
        """Durable files whose text differs from the original, in MEMORY.md, USER.md order."""
        return [f for f in MEMORY_FILES if f in self.texts and self.texts[f] != self.originals.get(f, "")]


class _Skip(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Done(_Skip):
    """The op is already in effect: skipped, and not a pending proposal."""


class _Withheld(_Skip):
    """The op's new text holds a secret or forgotten text (or a forget's marker): skipped, recorded
    without it, and never a pending proposal."""


WITHHELD = "[withheld by the secret guard: {}]"


def _secret_free(p: Proposal) -> None:
    """Raise _Withheld when the text ``p`` would write holds a secret (module docstring)."""
    found = find_secrets(p.content) if p.op in ("add", "replace") else []
    if found:
        raise _Withheld(skip_reason(found))


def _not_forgotten(p: Proposal, forgotten: Check) -> None:
    """Raise _Withheld when the text ``p`` would write brings back forgotten text, or a forget's
    marker its anchor does not hold (module docstring)."""
    if p.op not in ("add", "replace"):
        return
    why = forget_guard.why_forgotten(p.content, forgotten, p.target if p.op == "replace" else "")
    if why:
        raise _Withheld(why)


def withheld(p: Proposal, forgotten: Check = nothing_forgotten) -> Proposal:
    """``p`` as the audit may keep it: its new text, and its anchor and reason, replaced by a
    ``WITHHELD`` line naming the detectors when they hold a secret, and by the forgets' markers when
    they bring back forgotten text (``forgotten``)."""
    def cut(text: str) -> str:
        found = find_secrets(text)
        if found:
            return WITHHELD.format(", ".join(dict.fromkeys(f.detector for f in found)))
        ids = forgotten(text) if text else []
        return " ".join(marker(i) for i in ids) if ids else text
    return replace(p, content=cut(p.content), target=cut(p.target), reason=cut(p.reason))


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _anchors(target: str) -> list[str]:
    """``target`` as written, then with CRLF line ends (a CRLF file matches an LF target)."""
    return list(dict.fromkeys([target, target.replace("\r\n", "\n").replace("\n", "\r\n")]))


def already_done(p: Proposal, text: str, name: str) -> str:
    """Why durable proposal ``p`` is already in effect in ``text`` (file ``name``), or "" when it is not.

    An add whose text is in the file (whitespace aside); a replace whose
    anchor is no longer in the file and whose new text is; a remove whose
    anchor is no longer in the file (nothing is left to remove). Accepting
    such a proposal would change nothing, so it is never pending.
    """
    if p.tier == EPISODIC or p.op not in OPS:
        return ""
    if p.op == "add":
        return f"already in {name}" if _normalized(p.content) in _normalized(text) else ""
    if any(anchor in text for anchor in _anchors(p.target)):
        return ""
    if p.op == "remove":
        return f"the anchor was not found in the file: nothing is left to remove (already gone from {name}, or changed since)"
    if _normalized(p.content) and _normalized(p.content) in _normalized(text):
        return f"already in {name}: its anchor is gone and its new text is there"
    return ""


def _locate(text: str, target: str) -> tuple[int, int]:
    """The span of ``target`` in ``text``, found exactly once. Raises _Skip otherwise."""
    for candidate in _anchors(target):
        count = text.count(candidate)
        if count == 1:
            start = text.index(candidate)
            return start, start + len(candidate)
        if count > 1:
            raise _Skip(f"the anchor occurs {count} times in the file; an ambiguous anchor is never applied")
    raise _Skip("the anchor was not found in the file (it may have changed since the reviewer read it)")


def _whole_lines(text: str, start: int, end: int) -> int:
    """``end`` extended over the line ending when [start, end) covers whole lines."""
    at_line_start = start == 0 or text[start - 1] == "\n"
    if not at_line_start:
        return end
    if text.startswith("\r\n", end):
        return end + 2
    if text.startswith("\n", end):
        return end + 1
    return end


def _line_end(text: str, position: int) -> int:
    """The offset just past the line that holds ``position`` (its newline included)."""
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline + 1


def _as_block(text: str, at: int, content: str) -> str:
    """``content`` as whole lines for insertion at ``at`` in ``text`` (newlines added as needed)."""
    block = content if content.endswith("\n") else content + "\n"
    if at > 0 and text[at - 1] != "\n":
        block = "\n" + block
    return block


class _File:
    """One durable file being edited during a plan.

    ``original``: the text the applier starts from (after the deterministic
    passes); the net-shrink and stay-in-budget guards look at it. ``began``:
    the file as the run began (before the passes); the bounded-loss cap is a
    share of it, 90% when it began over budget, and counts only this plan's
    deletions (module docstring, guard 4)."""

    def __init__(self, name: str, original: str, budget: int, began: str | None = None) -> None:
        self.name = name
        self.original = original
        self.text = original
        self.budget = budget
        self.over = over_budget(original, budget)
        self.began = len(original if began is None else began)
        self.began_over = over_budget(original if began is None else began, budget)
        self.share = LOSS_OVER_BUDGET if self.began_over else LOSS_UNDER_BUDGET
        self.cap = int(self.began * self.share)
        self.deleted = 0  # gross chars deleted by this plan's ops so far

    def splice(self, start: int, end: int, inserted: str) -> str:
        """The text with [start, end) replaced, after the loss guard. Raises _Skip."""
        removed = end - start
        if removed and self.deleted + removed > self.cap:
            over = ", over its budget" if self.began_over else ""
            raise _Skip(
                f"bounded loss: this op would delete {removed} chars, {self.deleted + removed} in this run; the cap "
                f"is {self.cap:,} chars ({int(self.share * 100)}%) of the {self.began:,} chars {self.name} had when "
                f"the run began{over}"
            )
        new = self.text[:start] + inserted + self.text[end:]
        if self.text.strip() and not new.strip():
            raise _Skip("this op would leave the file empty; a non-empty file is never emptied")
        if not self.over and len(new) > len(self.text) and over_budget(new, self.budget):
            raise _Skip(f"this op would take {self.name} over its soft budget ({len(new):,} of {self.budget:,} chars)")
        return new


def _around(text: str, start: int, end: int) -> str:
    """The whole lines of ``text`` that [start, end) touches (the line holding ``start`` when empty)."""
    return text[text.rfind("\n", 0, start) + 1 : _line_end(text, max(start, end - 1))]


def _moves_sections(old: str, new: str, start: int, end: int, inserted: int) -> bool:
    """Whether splicing ``inserted`` chars over [start, end) of ``old`` (giving ``new``) may move a
    section's bounds: only when a line it rewrote is, or becomes, a heading or a fence line (the
    other lines are the same in both texts). The full pinned-lines comparison runs only then."""
    return sections.structural(_around(old, start, end)) or sections.structural(_around(new, start, start + inserted))


def _edit(op_id: str, f: _File, kind: str, start: int, end: int, inserted: str, new: str, reason: str) -> Edit:
    tail = start + len(inserted)
    lines = f.text[f.text.rfind("\n", 0, start) + 1 : _line_end(f.text, end - 1)] if end > start else ""
    return Edit(
        op_id=op_id, file=f.name, kind=kind, offset=start, removed=f.text[start:end], inserted=inserted,
        before=new[max(0, start - CONTEXT_CHARS) : start], after=new[tail : tail + CONTEXT_CHARS],
        hash_before=sha256(f.text), hash_after=sha256(new), reason=reason,
        heading_path=sections.heading_path(f.text, start),
        at_start=start <= CONTEXT_CHARS, at_end=tail + CONTEXT_CHARS >= len(new), lines=lines,
    )


def _durable(op_id: str, p: Proposal, f: _File) -> tuple[Edit, OpResult]:
    """Apply one durable proposal to ``f`` or raise _Skip naming the guard."""
    text = f.text
    done = already_done(p, text, f.name)
    if done:
        raise _Done(done)
    if p.op == "add":
        if f.over:
            raise _Skip("over budget: the run is net-shrink, so adds are skipped")
        at = len(text)
        if p.target:
            _, anchor_end = _locate(text, p.target)
            at = _line_end(text, anchor_end - 1 if anchor_end else 0)
        block = _as_block(text, at, p.content)
        new = f.splice(at, at, block)
        edit = _edit(op_id, f, "add", at, at, block, new, p.reason)
    else:
        start, end = _locate(text, p.target)
        if sections.touches_pinned(text, start, end):
            raise _Skip("the anchor is in a pinned section (User, Feedback, Preferences, Profile), which is never removed or shrunk")
        if p.op == "remove":
            end = _whole_lines(text, start, end)
            inserted = ""
        else:
            inserted = p.content
            if f.over and len(inserted) > end - start:
                raise _Skip("over budget: this replace would grow the file")
        new = f.splice(start, end, inserted)
        edit = _edit(op_id, f, p.op, start, end, inserted, new, p.reason)
    if _moves_sections(text, new, edit.offset, edit.offset + len(edit.removed), len(edit.inserted)) and sections.unpins(text, new):
        raise _Skip("this op would leave lines of a pinned section outside it (a heading or a code fence that "
                    "splits or hides the section); pinned sections are never removed or shrunk")
    f.deleted += len(edit.removed)
    f.text = new
    result = OpResult(op_id, p, "applied", file=f.name, chars_removed=len(edit.removed), chars_inserted=len(edit.inserted))
    return edit, result


def episodic_path(episodic_dir: str, topic: str) -> str:
    """Workspace-relative path of an episodic topic note."""
    return f"{episodic_dir.strip('/')}/{topic}.md"


def plan(texts: Mapping[str, str], proposals: Sequence[tuple[str, Proposal]], budgets: Budgets,
         began: Mapping[str, str] | None = None, forgotten: Check = nothing_forgotten) -> Plan:
    """Apply ``proposals`` (``(op_id, proposal)`` in order) to ``texts`` (file → current content,
    "" for a missing file). ``began``: the files as the run began, before the deterministic passes
    (the bounded-loss base; default ``texts``). ``forgotten``: the agent's tombstone check
    (``gateway.forget_guard.checker``; none by default). Never raises for a bad proposal: each is
    applied or skipped with a reason."""
    files = {name: _File(name, texts.get(name, ""), budgets.of(name), None if began is None else began.get(name, ""))
             for name in MEMORY_FILES}
    result = Plan(originals={n: f.original for n, f in files.items()}, texts={})
    for op_id, p in proposals:
        try:
            _secret_free(p)
            _not_forgotten(p, forgotten)
            if p.tier == EPISODIC:
                if not budgets.write_routing:
                    raise _Skip("episodic ops need gateway.memory.writeRouting; it is off")
                if p.op != "add" or not _TOPIC.fullmatch(p.topic):
                    raise _Skip("an episodic op must be an add with a topic slug ^[a-z0-9-]{1,64}$")
                path = episodic_path(budgets.episodic_dir, p.topic)
                block = p.content if p.content.endswith("\n") else p.content + "\n"
                op_result = OpResult(op_id, p, "applied", file=path, chars_inserted=len(block))
                result.appends.append((path, block, op_result))
                result.results.append(op_result)
                continue
            if p.op not in OPS:  # a move of the passes is listed by propose mode; it is never an op to apply
                raise _Skip(f"{p.op!r} is not an op of the applier (add, replace or remove)")
            if p.file not in files:
                raise _Skip(f"{p.file!r} is not a memory file (MEMORY.md or USER.md)")
            edit, op_result = _durable(op_id, p, files[p.file])
        except _Skip as skip:
            result.results.append(OpResult(op_id, withheld(p, forgotten) if isinstance(skip, _Withheld) else p,
                                            "skipped", skip.reason, file=p.file))
            if isinstance(skip, _Done):
                result.done.add(op_id)
            if isinstance(skip, _Withheld):
                result.withheld.add(op_id)
            continue
        result.edits.append(edit)
        result.results.append(op_result)
    result.texts = {name: f.text for name, f in files.items()}
    return result
