"""Plain-text renderings that ``gateway dream …`` prints (the RPC replies carry them as ``text``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.dreaming.model.values import PROPOSE, OpResult, RunReport
from services.dreaming.vault.undo import LEFT, line

if TYPE_CHECKING:
    from services.dreaming.dreamer import Status
    from services.dreaming.history.health import Health
    from services.dreaming.history.reject import Rejection
    from services.dreaming.history.revert import RevertResult


def _quote(text: str, limit: int = 70) -> str:
    flat = " ".join(text.split())
    return '"' + (flat if len(flat) <= limit else flat[: limit - 1] + "…") + '"'


def op_line(r: OpResult) -> str:
    p = r.proposal
    what = p.op + (" (episodic)" if p.tier == "episodic" else "")
    line = f"  {r.op_id}  {r.status:<8} {what} {r.file or p.file}  {_quote(p.target or p.content)}  [{p.id}]"
    if r.reason:
        line += f"\n      {r.reason}"
    return line


def report_text(report: RunReport) -> str:
    run = f"dream {report.run_id}" if report.run_id else "dream"
    head = f"{run} for {report.agent_id} ({report.mode}, {report.trigger}): {report.status}"
    lines = [head + (f": {report.reason}" if report.reason else "")]
    rv = report.reviewer
    if rv is not None:
        how = f"ok in {rv.seconds:.1f} s" if rv.ok else f"failed after {rv.seconds:.1f} s ({rv.reason})"
        lines.append(f"  reviewer: {how}; {len(rv.reply.proposals)} proposals, {len(rv.reply.dropped)} dropped"
                     + (f"; {_quote(rv.reply.summary, 120)}" if rv.reply.summary else ""))
        lines += [f"    dropped: {d}" for d in rv.reply.dropped]
    lines += [f"  {f.file}: {f.chars_before:,} -> {f.chars_after:,} chars" for f in report.files]
    lines += [op_line(r) for r in report.ops]
    lines += [f"  note: {n}" for n in report.notes]
    if report.steps:
        lines.append(f"  steps: {' -> '.join(report.steps)}")
    return "\n".join(lines) + "\n"


def status_text(status: Status) -> str:
    lines = [f"dreaming for {status.agent_id}: {'scheduled' if status.scheduled else 'not scheduled'} ({status.mode} mode)"]
    if status.scheduled:
        lines.append(f"  next run: {status.next_run_at or 'unknown'}")
    elif status.why_not:
        lines.append(f"  {status.why_not}")
    if status.last_night:
        lines.append(f"  last scheduled night claimed: {status.last_night}")
    if status.running:
        lines.append(f"  a run is in progress, at step {status.running}")
    last = status.last_run
    if last is not None:
        lines.append(f"  last run: {last.run_id} ({last.trigger}, {last.mode}) {last.status} at {last.started_at}"
                     + (f": {last.reason}" if last.reason else ""))
        ops = status.last_ops
        lines.append(f"    ops: {ops.applied} applied, {ops.skipped} skipped"
                     + (f", {ops.proposed} proposed" if last.mode == PROPOSE or ops.proposed else ""))
    else:
        lines.append("  last run: none yet")
    lines += health_lines(status.health, last is not None)
    if status.kept_promotions:
        lines.append(f"  shared vault: {status.kept_promotions} promotion(s) kept on this host (the KB or its vault was "
                     "unavailable); the next run retries them")
    if status.pending:
        lines.append(f"  pending proposals ({len(status.pending)}): accept with `gateway dream accept {status.agent_id} ID…`")
        for r in status.pending:
            p = r.proposal
            line = f"  {p.id}  {p.op}{' (episodic)' if p.tier == 'episodic' else ''} {r.file or p.file}  {_quote(p.target or p.content)}"
            line += f"  (run {r.op_id.rsplit('/', 1)[0]})"
            if r.reason:
                line += f"\n      {r.reason}"
            lines.append(line)
    return "\n".join(lines) + "\n"


def health_lines(health: Health, ran: bool) -> list[str]:
    """The run-health lines of ``dream status``: failures of the last 7 days, then the last run's shared promotion."""
    if health.failures:
        lines = [f"  health: {health.failures} failed run(s) in the last 7 days; the last at {health.last_failure_at}: "
                 f"{health.last_failure_reason}"]
    else:
        lines = ["  health: no failed run in the last 7 days"]
    if health.promoted:
        lines.append(f"  shared vault: the last run promoted {health.promoted} note(s)")
    elif ran and health.not_promoted:
        lines.append(f"  shared vault: the last run promoted nothing: {health.not_promoted}")
    return lines


def reject_text(agent_id: str, rejected: list[Rejection]) -> str:
    lines = [f"rejected {len(rejected)} proposal(s) of agent {agent_id}; a later run does not propose the same text again"]
    lines += [f"  {r.proposal_id} {r.proposal.op} {r.proposal.file} {_quote(r.proposal.content or r.proposal.target)}: "
              f"rejected on {r.at[:10]} by {r.by}" for r in rejected]
    return "\n".join(lines) + "\n"


def revert_text(result: RevertResult) -> str:
    """The revert's answer: the ops undone, the files, then one line per shared promotion of those ops
    (undone, nothing to undo, or left with the reason), and the notes left named once more at the end."""
    if not result.reverted and not result.vault:
        return f"nothing to revert in {result.run_id}: {', '.join(result.already)} already undone\n"
    if result.reverted:
        lines = [f"reverted {', '.join(result.reverted)} of {result.run_id}"]
        if result.already:
            lines.append(f"  already undone before: {', '.join(result.already)}")
    else:
        lines = [f"nothing more to revert in the files of {result.run_id} ({', '.join(result.already)} already undone); "
                 "its shared promotions not yet undone were tried again"]
    lines += [f"  {f.file}: {f.chars_before:,} -> {f.chars_after:,} chars" for f in result.files]
    lines += [f"  {line(u)}" for u in result.vault]
    left = [u.note for u in result.vault if u.outcome == LEFT]
    if left:
        lines.append(f"  left in the shared vault: {', '.join(repr(n) for n in left)}")
    return "\n".join(lines) + "\n"
