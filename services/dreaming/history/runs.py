"""An agent's runs, newest first, from audit.jsonl and the journal: what the console's dreams page draws.

Each run comes with its ops, each op with its status *now* (docs/concepts/proposals.md):

- an op a run applied is ``applied``, or ``reverted`` once a revert undid it;
  ``restored`` when the recall check undid it;
- an op a run in propose mode proposed is ``accepted`` or ``rejected`` once an
  accept or a reject decided its id after it, else ``proposed``, and ``pending``
  when accepting would still apply it (``pending.pending``);
- ``skipped`` ops keep the guard's reason.

What an op changed is the journal's ``edit`` records of it (the removed and the
inserted text, per file) for an op that was applied, else what its proposal
would change. Lines are those of the text in the file as it is now, when it is
found there once. Answers are bounded: a text is cut at ``MAX_TEXT`` characters,
a run lists at most ``MAX_OPS`` ops, and a page ends early past ``MAX_PAGE_CHARS``
characters of text (always with at least one run); ``Page.cut`` says what was cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.config import AgentConfig
from gateway.errors import InvalidArgument
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.history import pending
from services.dreaming.model.budgets import budgets_of
from services.dreaming.records import audit, journal

MAX_TEXT = 4000
MAX_OPS = 200
MAX_PAGE_CHARS = 1_000_000
DEFAULT_PAGE = 20
MAX_PAGE = 100


@dataclass(frozen=True)
class Change:
    file: str
    before: str
    after: str
    start_line: int = 0
    end_line: int = 0
    cut: bool = False


@dataclass(frozen=True)
class RunOp:
    op_id: str
    proposal_id: str
    op: str
    file: str
    tier: str
    topic: str
    status: str
    reason: str
    proposal_reason: str
    pending: bool = False
    changes: tuple[Change, ...] = ()
    decided_by: str = ""
    decided_at: str = ""


@dataclass(frozen=True)
class Run:
    record: dict[str, Any]
    ops: tuple[RunOp, ...]
    ops_total: int


@dataclass
class Page:
    runs: list[Run] = field(default_factory=list)
    next_token: str = ""
    cut: list[str] = field(default_factory=list)


def page_size(asked: int) -> int:
    """``DEFAULT_PAGE`` for 0; raises InvalidArgument outside 0..MAX_PAGE."""
    if asked < 0 or asked > MAX_PAGE:
        raise InvalidArgument(f"page_size: {asked}; at most {MAX_PAGE} (0 for {DEFAULT_PAGE})")
    return asked or DEFAULT_PAGE


class _Files:
    """The agent's files as they are now, read once each; None for one that cannot be read."""

    def __init__(self, agent: AgentConfig) -> None:
        self._agent = agent
        self._texts: dict[str, str | None] = {}

    def text(self, name: str) -> str | None:
        if name not in self._texts:
            try:
                self._texts[name] = read_text(self._agent.workspace, name)
            except (Unsafe, OSError, ValueError):
                self._texts[name] = None
        return self._texts[name]


def _lines(text: str | None, start: int, length: int) -> tuple[int, int]:
    if text is None or start < 0:
        return 0, 0
    first = text.count("\n", 0, start) + 1
    return first, first + text.count("\n", start, start + max(length - 1, 0))


def _cut(text: str) -> tuple[str, bool]:
    return (text[:MAX_TEXT], True) if len(text) > MAX_TEXT else (text, False)


def _change(file: str, before: str, after: str, lines: tuple[int, int]) -> Change:
    (before, cut_before), (after, cut_after) = _cut(before), _cut(after)
    return Change(file, before, after, lines[0], lines[1], cut_before or cut_after)


def _journaled(edits: list[dict[str, Any]], files: _Files, in_effect: bool) -> tuple[Change, ...]:
    out = []
    for e in edits:
        text, lines = files.text(str(e.get("file", ""))), (0, 0)
        if in_effect and text is not None:
            try:
                lines = _lines(text, journal.locate(text, e), len(str(e.get("inserted", ""))))
            except (journal.RevertRefused, KeyError):
                lines = (0, 0)
        out.append(_change(str(e.get("file", "")), str(e.get("removed", "")), str(e.get("inserted", "")), lines))
    return tuple(out)


def _proposed(raw: dict[str, Any], file: str, files: _Files) -> tuple[Change, ...]:
    target, content = str(raw.get("target", "")), str(raw.get("content", ""))
    op = str(raw.get("op", ""))
    before = target if op != "add" else ""
    after = content if op in ("add", "replace") else ""
    text = files.text(file)
    found = text.find(before) if text is not None and before and text.count(before) == 1 else -1
    return (_change(file, before, after, _lines(text, found, len(before))),)


def _decisions(records: list[audit.Record]) -> dict[str, tuple[str, str, str]]:
    """Op id of each proposed op → (accepted or rejected, by, at), for ids decided after it."""
    undecided: dict[str, list[str]] = {}
    out: dict[str, tuple[str, str, str]] = {}
    for r in records:
        kind, pid = r.get("kind"), str(r.get("id", ""))
        if kind == "op" and r.get("status") == "proposed":
            undecided.setdefault(pid, []).append(str(r.get("op", "")))
        elif kind == "accepted":
            out |= {op: ("accepted", str(r.get("run", "")), "") for op in undecided.pop(pid, [])}
        elif kind == "rejected":
            out |= {op: ("rejected", str(r.get("by", "")), str(r.get("at", ""))) for op in undecided.pop(pid, [])}
    return out


def _start(runs: list[dict[str, Any]], token: str) -> int:
    if not token:
        return 0
    for n, run in enumerate(runs):
        if run.get("run") == token:
            return n
    raise InvalidArgument(f"page_token: {token[:40]!r} names no run of the audit log (it may have been trimmed); "
                          "start again without a page_token")


def list_runs(agent: AgentConfig, size: int, token: str) -> Page:
    """A page of ``size`` runs (newest first) from the run ``token`` names (module docstring).
    Raises InvalidArgument for a token that names no run."""
    records = audit.read_records(agent.workspace)
    runs = [r for r in reversed(records) if r.get("kind") == "run" and r.get("run")]
    first = _start(runs, token)
    ops: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "op":
            ops.setdefault(str(r.get("run", "")), []).append(r)
    edits: dict[str, list[dict[str, Any]]] = {}
    for e in journal.read(agent.workspace):
        if e.get("kind") == "edit":
            edits.setdefault(str(e.get("op", "")), []).append(e)
    reverted = {str(op) for r in records if r.get("kind") == "revert" for op in r.get("ops") or []}
    ledger = pending.read_ledger(records)
    waiting = {p.op for p in pending.pending(ledger, pending.current_texts(agent), budgets_of(agent)).values()}
    decided, files, page, chars = _decisions(records), _Files(agent), Page(), 0
    for n, run in enumerate(runs[first : first + size], start=first):
        if page.runs and chars > MAX_PAGE_CHARS:
            page.cut.append(f"the page ended after {len(page.runs)} runs (about {MAX_PAGE_CHARS} characters of text)")
            page.next_token = str(run["run"])
            return page
        listed = ops.get(str(run["run"]), [])
        shown = tuple(_op(r, edits.get(str(r.get("op", "")), []), files, reverted, waiting, decided) for r in listed[:MAX_OPS])
        if len(listed) > MAX_OPS:
            page.cut.append(f"run {run['run']}: {len(listed) - MAX_OPS} ops past the first {MAX_OPS} left out")
        page.cut += [f"{o.op_id}: a text cut at {MAX_TEXT} characters" for o in shown if any(c.cut for c in o.changes)]
        chars += sum(len(c.before) + len(c.after) for o in shown for c in o.changes)
        page.runs.append(Run(run, shown, len(listed)))
        if n + 1 < len(runs) and n + 1 == first + size:
            page.next_token = str(runs[n + 1]["run"])
    return page


def _op(r: dict[str, Any], edits: list[dict[str, Any]], files: _Files, reverted: set[str], waiting: set[str],
        decided: dict[str, tuple[str, str, str]]) -> RunOp:
    proposal = r.get("proposal")
    raw: dict[str, Any] = proposal if isinstance(proposal, dict) else {}
    op_id, status, file = str(r.get("op", "")), str(r.get("status", "")), str(r.get("file", "") or raw.get("file", ""))
    by = at = ""
    if status == "applied" and op_id in reverted:
        status = "reverted"
    elif status == "proposed" and op_id in decided:
        status, by, at = decided[op_id]
    changes = _journaled(edits, files, status == "applied") if edits else _proposed(raw, file, files)
    return RunOp(
        op_id=op_id, proposal_id=str(r.get("id", "")), op=str(raw.get("op", "")), file=file,
        tier=str(raw.get("tier", "")), topic=str(raw.get("topic", "")), status=status, reason=str(r.get("reason", "")),
        proposal_reason=str(raw.get("reason", "")), pending=status == "proposed" and op_id in waiting,
        changes=changes, decided_by=by, decided_at=at,
    )
