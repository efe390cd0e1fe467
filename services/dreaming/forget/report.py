"""The text of a forget's report and of a tombstone list, as ``gateway forget`` prints them
(docs/concepts/forget.md "The report"). Never the text forgotten: stores, paths, counts, lines."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.forgetting import SHARED_SCOPE, Tombstone
from services.dreaming.forget.places import TRANSCRIPTS
from services.dreaming.forget.run import Forgotten

SHOWN_LINES = 10  # line numbers per place in the text (the reply has up to 100)
PURGE_ADVICE = ("transcripts are the runtime's files and were left as they are: with the agent's session ended, "
                "delete each one listed or remove the lines named (docs/concepts/forget.md \"Transcripts\")")


def _lines(lines: Sequence[int]) -> str:
    if not lines:
        return ""
    shown = ", ".join(map(str, lines[:SHOWN_LINES]))
    return f" (line{'s' if len(lines) > 1 else ''} {shown}{', …' if len(lines) > SHOWN_LINES else ''})"


def forget_text(report: Forgotten) -> str:
    """The report as ``gateway forget`` prints it."""
    verb = "forgot" if report.applied else "would forget (dry run)"
    where = "the agent's files and archive" + (" and the shared vault" if report.shared else "")
    out = [f"{report.agent_id}: {verb} in {where}: {report.matches} match(es) in {len(report.places)} place(s)"
           + (f", {report.changed} rewritten" if report.applied else "")]
    if report.applied:
        out.append(f"marker: [forgotten {report.tombstone_id}]; tombstones written: {report.tombstones}")
    for p in report.places:
        state = " rewritten" if p.changed else ""
        left = f"; left: {p.left}" if p.left and report.applied else ""
        kind = "" if p.kind == "file" else f" [{p.kind}]"
        out.append(f"  {p.store}: {p.path}{kind}: {p.count}{_lines(p.lines)}{state}{left}")
    for purge in report.purges:
        out.append(f"  {purge.store}: bytes purged ({purge.bytes_before} -> {purge.bytes_after} bytes, {purge.seconds:.2f} s)")
    if any(p.store == TRANSCRIPTS for p in report.places):
        out.append("note: " + PURGE_ADVICE)
    if not report.places:
        out.append("  nowhere")
    return "\n".join(out) + "\n"


def tombstones_text(agent_id: str, tombstones: Sequence[Tombstone], *, lifted: bool = False) -> str:
    """A list of tombstones (or the ones a lift removed), without their digests."""
    if not tombstones:
        return f"{agent_id}: no tombstones\n"
    head = f"{agent_id}: lifted" if lifted else f"{agent_id}: {len(tombstones)} tombstone(s)"
    rows = [f"  {t.id}  {'shared' if t.scope == SHARED_SCOPE else t.scope}  {t.words} word(s)  {t.at}  by {t.by}  "
            f"{t.places} place(s)" for t in tombstones]
    return "\n".join([head, *rows]) + "\n"
