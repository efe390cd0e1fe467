"""The audit of every run: ``.dreaming/DREAMS.md`` for people, ``.dreaming/audit.jsonl`` for tools.

- **DREAMS.md** gets one entry per run (both modes, and accepts and reverts):
  when, mode, trigger, the reviewer's summary, each op applied, skipped or
  proposed with its reason, and each file's size before and after. It keeps the
  newest ``DREAMS_KEPT`` entries (older ones are dropped when a new one is
  written; audit.jsonl keeps more).
- **audit.jsonl** gets one ``run`` record per run (its ``notPromoted`` says why
  the run promoted nothing to the shared vault, "" when it promoted), one ``op`` record per
  proposal (applied, skipped, proposed or restored, with its reason and the
  full proposal), one ``promotion`` record per applied durable add offered to
  the shared vault (its outcome, the note, the reason, the links added; a
  kept promotion a later run retried is that run's, with ``retryOf`` naming
  the run it came from),
  ``accepted`` records for proposals accepted later, ``rejected`` records (the
  id, when and by which key label: ``history/reject.py``), ``revert`` records (the
  ops undone, and what became of each shared promotion of them: ``vault``, and
  ``notesLeft``, the notes a revert had to leave in the vault), and
  ``skip`` records for scheduled runs that did not happen (the quiet window, a
  watcher that could not answer). Past ``AUDIT_MAX_BYTES`` the oldest records
  are dropped down to ``AUDIT_KEEP_BYTES`` (whole lines).

Pending proposals (propose mode) are read back from these records by
``history/pending.py``: proposed, not applied by any run since (nor reverted), and not
already in effect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from gateway.atomic import write_atomic
from services.dreaming.model.values import ACCEPT, OpResult, Proposal, RunReport
from services.dreaming.records import jsonl
from services.dreaming.records.metrics import observe_run

log = structlog.get_logger()

DREAMS = ".dreaming/DREAMS.md"
AUDIT = ".dreaming/audit.jsonl"
DREAMS_KEPT = 100
AUDIT_MAX_BYTES = 4 * 1024 * 1024
AUDIT_KEEP_BYTES = 2 * 1024 * 1024
ENTRY_MARK = "\n## "
_HEADER = (
    "# Dreams\n\nOne entry per dreaming run of this agent, newest last (the newest {kept} are kept; "
    "`audit.jsonl` beside this file has the full records, `journal.jsonl` every applied op).\n"
)

Record = jsonl.Record


def _one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _op_line(r: OpResult) -> str:
    p = r.proposal
    mark = {"applied": "applied", "skipped": "skipped", "proposed": "proposed", "restored": "restored"}.get(r.status, r.status)
    where = r.file or p.file or "?"
    what = f"{p.op}" + (f" ({p.tier})" if p.tier != "durable" else "")
    quoted = p.target or p.content
    line = f"  - **{mark}** `{r.op_id}` {what} in {where} (`{p.id}`): \"{_one_line(quoted)}\""
    if p.reason:
        line += f" — {_one_line(p.reason, 160)}"
    if r.reason:
        line += f"\n    - {_one_line(r.reason, 300)}"
    return line


def render(report: RunReport) -> str:
    """The DREAMS.md entry of ``report``."""
    lines = [f"## {report.started_at[:16].replace('T', ' ')} UTC · run {report.run_id} ({report.mode}, {report.trigger})", ""]
    applied = sum(1 for r in report.ops if r.status == "applied")
    result = f"- **Result:** {report.status}"
    if report.reason:
        result += f": {_one_line(report.reason, 300)}"
    if report.ops:
        result += f" · {applied} of {len(report.ops)} ops applied"
    lines.append(result)
    for change in report.files:
        lines.append(f"- **{change.file}:** {change.chars_before:,} → {change.chars_after:,} chars")
    if report.reviewer is not None:
        rv = report.reviewer
        said = f'"{_one_line(rv.reply.summary, 200)}"' if rv.reply.summary else "no summary"
        extra = f"{len(rv.reply.proposals)} proposals" + (f", {len(rv.reply.dropped)} dropped as malformed" if rv.reply.dropped else "")
        status = "" if rv.ok else f"; failed: {_one_line(rv.reason, 200)}"
        lines.append(f"- **Reviewer:** {said} ({extra}; {rv.seconds:.1f} s{status})")
    if report.ops:
        lines.append("- **Ops:**")
        lines += [_op_line(r) for r in report.ops]
    if report.steps:
        lines.append(f"- **Steps:** {' → '.join(report.steps)}")
    for note in report.notes:
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def write_entry(workspace: Path, entry: str) -> None:
    """Append ``entry`` to DREAMS.md, keeping the newest DREAMS_KEPT entries."""
    path = workspace / DREAMS
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        old = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        old = ""
    kept = old.split(ENTRY_MARK)[1:][-(DREAMS_KEPT - 1) :] if DREAMS_KEPT > 1 else []
    text = _HEADER.format(kept=DREAMS_KEPT) + "".join(ENTRY_MARK + p for p in kept) + "\n" + entry
    write_atomic(path, text.encode("utf-8"), mode=0o600, durable=False)  # a readable log; audit.jsonl and the journal are the records


def append_records(workspace: Path, records: list[Record]) -> None:
    """Append JSON lines to audit.jsonl (capped)."""
    jsonl.append(workspace / AUDIT, records, max_bytes=AUDIT_MAX_BYTES, keep_bytes=AUDIT_KEEP_BYTES, durable=False)


def run_records(report: RunReport) -> list[Record]:
    """The audit.jsonl records of one run: the run, then one per op, then one per promotion."""
    rv = report.reviewer
    out: list[Record] = [{
        "kind": "run", "run": report.run_id, "agent": report.agent_id, "mode": report.mode, "trigger": report.trigger,
        "status": report.status, "reason": report.reason, "startedAt": report.started_at,
        "finishedAt": report.finished_at, "summary": report.summary,
        "reviewer": None if rv is None else {
            "ok": rv.ok, "reason": rv.reason, "seconds": round(rv.seconds, 3), "stdoutBytes": rv.stdout_bytes,
            "proposals": len(rv.reply.proposals), "dropped": list(rv.reply.dropped),
        },
        "files": [{"file": f.file, "charsBefore": f.chars_before, "charsAfter": f.chars_after} for f in report.files],
        "notes": list(report.notes), "steps": list(report.steps), "notPromoted": report.not_promoted,
    }]
    for r in report.ops:
        out.append({
            "kind": "op", "run": report.run_id, "op": r.op_id, "id": r.proposal.id, "status": r.status,
            "reason": r.reason, "file": r.file, "charsRemoved": r.chars_removed, "charsInserted": r.chars_inserted,
            "proposal": r.proposal.to_json(),
        })
    for m in report.promotions:
        out.append({
            "kind": "promotion", "run": report.run_id, "op": m.op_id, "id": m.proposal_id, "outcome": m.outcome,
            "note": m.note, "reason": m.reason, "nameFrom": m.name_from, "passedOver": m.passed_over,
            "linked": list(m.linked), "folded": m.folded, "twinKept": m.twin_kept,
            **({"retryOf": m.retry_of} if m.retry_of else {}),
        })
    return out


def record_run(workspace: Path, report: RunReport) -> None:
    """Audit one finished run: its DREAMS.md entry and audit.jsonl records (an accept's ``accepted``
    records too), one ``dream_run`` log line and the run metrics. A write that fails is logged
    loudly; the run's outcome stands."""
    try:
        write_entry(workspace, render(report))
        records = run_records(report)
        if report.trigger == ACCEPT:
            records += [{"kind": "accepted", "run": report.run_id, "id": r.proposal.id} for r in report.ops if r.status == "applied"]
        append_records(workspace, records)
    except OSError as exc:
        log.error("dream_audit_failed", agent=report.agent_id, run=report.run_id, error=str(exc))
    log.info("dream_run", agent=report.agent_id, run=report.run_id, mode=report.mode, trigger=report.trigger,
             status=report.status, reason=report.reason or None,
             applied=sum(1 for r in report.ops if r.status == "applied"), ops=len(report.ops))
    observe_run(report)


def read_records(workspace: Path) -> list[Record]:
    return jsonl.read(workspace / AUDIT)


def proposal_from_json(raw: dict[str, Any]) -> Proposal:
    return Proposal(
        op=str(raw.get("op", "")), file=str(raw.get("file", "")), target=str(raw.get("target", "")),
        content=str(raw.get("content", "")), reason=str(raw.get("reason", "")), score=float(raw.get("score", 0.0)),
        recall_count=int(raw.get("recallCount", 0)), topic=str(raw.get("topic", "")), tier=str(raw.get("tier", "durable")),
    )

