"""How an agent's dreaming has gone lately, from audit.jsonl and its state file: what ``dream status``
and the console's agents page show beside the last run.

- **The last run's ops**: its ``op`` records counted by status (applied, skipped, proposed).
- **Failures**: the runs started in the last ``WINDOW`` (7 days, by the dreaming clock) that
  failed: status ``failed`` or ``interrupted``, or a reviewer that failed (the run went on
  without its proposals). A run the state file records as failed or interrupted and the audit
  does not hold (the pipeline raised, or its process died) counts too. The newest one's time
  and reason are kept.
- **Shared promotion**: how many notes the last run wrote to the shared vault (promotion
  outcomes created, merged, updated) and, when none, why (its run record's ``notPromoted``).

The records are read once into ``AuditFacts`` (``audit_facts``); the health at a given ``now`` is
computed from those (``health_of``), so a status can keep the facts while audit.jsonl is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.dreaming.model.values import FAILED, INTERRUPTED
from services.dreaming.records.jsonl import Record
from services.dreaming.schedule.state import RunSummary
from services.dreaming.vault.promotion import LANDED

WINDOW = timedelta(days=7)
COUNTED = ("applied", "skipped", "proposed")


@dataclass(frozen=True)
class OpCounts:
    applied: int = 0
    skipped: int = 0
    proposed: int = 0


@dataclass(frozen=True)
class Health:
    failures: int = 0
    last_failure_at: str = ""
    last_failure_reason: str = ""
    promoted: int = 0
    not_promoted: str = ""


def _started(raw: object) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(raw))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _failure(record: Record) -> str | None:
    """Why the run of ``record`` failed; None when it did not."""
    reviewer = record.get("reviewer")
    if record.get("status") in (FAILED, INTERRUPTED):
        return str(record.get("reason") or record.get("status"))
    if isinstance(reviewer, dict) and reviewer.get("ok") is False:
        return str(record.get("reason") or reviewer.get("reason") or "the reviewer failed")
    return None


@dataclass(frozen=True)
class AuditFacts:
    """What the health needs of audit.jsonl for one last run: a small digest of the records, so a
    status need not read them again while the file is unchanged (``history/digest.py``)."""

    failures: tuple[tuple[datetime, str], ...] = ()  # every failed run audited: (start, why), in audit order
    audited: bool = False  # the last run has a run record
    ops: OpCounts = OpCounts()
    promoted: int = 0
    not_promoted: str = ""  # the last run record's notPromoted


def audit_facts(records: Sequence[Record], run_id: str) -> AuditFacts:
    """The facts of ``records`` (audit.jsonl, oldest first) about every failure and about run ``run_id``."""
    runs = [r for r in records if r.get("kind") == "run"]
    failures = tuple((at, why) for r in runs if (at := _started(r.get("startedAt"))) is not None
                     and (why := _failure(r)) is not None)
    statuses = [r.get("status") for r in records if r.get("kind") == "op" and r.get("run") == run_id]
    applied, skipped, proposed = (statuses.count(s) for s in COUNTED)
    run = next((r for r in reversed(runs) if r.get("run") == run_id), None)
    promoted = sum(1 for r in records if r.get("kind") == "promotion" and r.get("run") == run_id and r.get("outcome") in LANDED)
    return AuditFacts(
        failures=failures, audited=run is not None, ops=OpCounts(applied, skipped, proposed), promoted=promoted,
        not_promoted=str(run.get("notPromoted") or "") if run is not None else "",
    )


def _failures(facts: AuditFacts, last: RunSummary | None, since: datetime) -> list[tuple[datetime, str]]:
    found = [(at, why) for at, why in facts.failures if at >= since]
    if last is not None and last.status in (FAILED, INTERRUPTED) and not facts.audited:
        at = _started(last.started_at)
        if at is not None and at >= since:
            found.append((at, last.reason or last.status))
    return sorted(found, key=lambda pair: pair[0])


def health_of(facts: AuditFacts, last: RunSummary | None, now: datetime) -> Health:
    """The agent's run health at ``now`` (module docstring) from ``facts`` about ``last``, the state
    file's last run."""
    failures = _failures(facts, last, now - WINDOW)
    newest = failures[-1] if failures else None
    return Health(
        failures=len(failures),
        last_failure_at=newest[0].isoformat(timespec="seconds").replace("+00:00", "Z") if newest else "",
        last_failure_reason=newest[1] if newest else "",
        promoted=facts.promoted,
        not_promoted=facts.not_promoted if not facts.promoted else "",
    )
