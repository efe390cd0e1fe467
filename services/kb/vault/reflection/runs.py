"""A weekly reflection run's end, the list of runs, and a run's revert (docs/concepts/vault.md "Weekly
reflection", The audit and Revert).

Pure domain code over the vault's store, each a write decision of the vault (the list only reads).

- ``record`` ends a run: its record (counts, outcomes, proposals) appended to the vault's reflection
  audit, the claim released, the signatures of the clusters it left, refused or proposed kept as
  reviewed (not planned again while their notes are unchanged), and the watermark set to the vault's
  revision now, its own writes included, but only when they are the only change since its plan: the
  revision now must be the plan's (kept with the claim, ``plan.base_revision``) moved by the revision
  deltas its merges journaled (``REVISION_DELTA``, ``merge``). A note another writer created,
  edited, retired or deleted while the run was under way (a note of a planned cluster too, which its
  merge found ``changed``) keeps the watermark as it was, so the next run plans again and sees it. So
  does a run that failed, left clusters for the next run, or has a cluster ``unreviewed`` (its reviewer
  failed), or that no longer holds the claim; an unreviewed cluster is not kept as reviewed either.
  Recording a run twice keeps the first record.
- ``runs`` lists the recorded runs, newest first, each with when it was reverted (the last revert).
- ``revert`` undoes every merge of a run, newest first, from the journal: each note that still holds
  what the merge wrote gets its bytes from before the merge back (a created note deleted, a retired note
  moved back under its name, exactly); a note already as it was is left so; any other note changed
  since and is left, with the reason. The pruned archive keeps its lines (copies only). Each revert is
  a record of the audit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from gateway.atomic import WriteConflict
from gateway.errors import GatewayError, InvalidArgument, NotFound
from services.kb.vault.names import live_name, retired_name
from services.kb.vault.reflection.plan import MAX_REVIEWED, REVISION, base_revision, revision, shifted
from services.kb.vault.store import MergeJournal, ReflectionAudit, VaultStore

MODES: Final = ("auto", "propose")
TRIGGERS: Final = ("schedule", "manual")
STATUSES: Final = ("ok", "noop", "failed")
OUTCOMES: Final = ("merged", "proposed", "left", "refused", "changed", "unreviewed")
PROPOSAL_STATES: Final = ("pending", "accepted", "rejected", "stale")
REVIEWED_OUTCOMES: Final = ("proposed", "left", "refused")
DEFAULT_LIST: Final = 20
MAX_LIST: Final = 200
AUDIT_SCAN: Final = 10_000
REVISION_DELTA: Final = "revision_delta"  # a merge's journal entry: how far its writes moved the revision (hex)


@dataclass(frozen=True)
class RunRecord:
    """A run as its caller ends it (``RecordVaultReflectionRequest``); clusters and proposals as dicts of
    the proto's fields."""

    run_id: str
    mode: str
    trigger: str
    status: str
    reason: str = ""
    started_at: float = 0.0
    remaining: int = 0
    clusters: list[dict[str, object]] = field(default_factory=list)
    proposals: list[dict[str, object]] = field(default_factory=list)


def check(run: RunRecord) -> RunRecord:
    """InvalidArgument naming the field that is not one of its values."""
    for what, value, allowed in (("mode", run.mode, MODES), ("trigger", run.trigger, TRIGGERS),
                                 ("status", run.status, STATUSES)):
        if value not in allowed:
            raise InvalidArgument(f"{what}: {value[:40]!r} is not one of {', '.join(allowed)}")
    for i, c in enumerate(run.clusters):
        if c.get("outcome") not in OUTCOMES:
            raise InvalidArgument(f"clusters[{i}].outcome: {str(c.get('outcome'))[:40]!r} is not one of {', '.join(OUTCOMES)}")
    for i, p in enumerate(run.proposals):
        if p.get("state", "pending") not in PROPOSAL_STATES:
            raise InvalidArgument(f"proposals[{i}].state: {str(p.get('state'))[:40]!r} is not one of "
                                  f"{', '.join(PROPOSAL_STATES)}")
    if run.remaining < 0:
        raise InvalidArgument(f"remaining: {run.remaining} is negative")
    return run


def record(store: VaultStore, run: RunRecord, now: float) -> dict[str, object]:
    """End run ``run`` (module docstring); the run's record as kept."""
    earlier = [a for a in store.reflection_audit(AUDIT_SCAN, run.run_id) if a.kind == "run"]
    if earlier:
        return earlier[-1].record  # the first (the audit is newest first)
    state = store.reflection_state()
    plan = state.plan if state.claim_run == run.run_id else {}
    reviewed = list(state.reviewed)
    for c in run.clusters:
        planned = plan.get(str(c.get("cluster_id", "")))
        sig = str(planned.get("sig", "")) if planned else ""
        if sig and c.get("outcome") in REVIEWED_OUTCOMES and sig not in reviewed:
            reviewed.append(sig)
    now_revision = revision(store)
    # a cluster the reviewer could not answer for is neither reviewed nor behind the watermark: the next run asks again
    sets = (run.status != "failed" and run.remaining == 0 and all(c.get("outcome") != "unreviewed" for c in run.clusters)
            and only_own_writes(store, run.run_id, base_revision(plan), now_revision))
    kept_record: dict[str, object] = {
        "project": store.project, "run_id": run.run_id, "mode": run.mode, "trigger": run.trigger,
        "status": run.status, "reason": run.reason, "started_at": run.started_at, "finished_at": now,
        "clusters": run.clusters, "proposals": run.proposals, "remaining": run.remaining,
        "revision": now_revision if sets else state.watermark,
    }
    store.finish_reflection(ReflectionAudit("run", run.run_id, now, kept_record), now_revision if sets else None,
                            reviewed[-MAX_REVIEWED:])
    return kept_record


def only_own_writes(store: VaultStore, run_id: str, base: str, now_revision: str) -> bool:
    """Whether the vault at ``now_revision`` is the vault run ``run_id`` planned at (revision ``base``)
    with its journaled merges' writes and nothing else; False without a base (no plan of the run)."""
    if not base:
        return False
    own = 0
    for merge in store.merges(run_id):
        delta = merge.entry.get(REVISION_DELTA)
        if not isinstance(delta, str) or not REVISION.fullmatch(delta):
            return False  # journaled before merges kept their delta: not known to be the run's alone
        own += int(delta, 16)
    return shifted(base, own) == now_revision


def runs(store: VaultStore, limit: int = 0) -> list[dict[str, object]]:
    """The recorded runs, newest first, at most ``limit`` (20 when 0, at most 200), each with
    ``reverted_at`` (0 when never reverted)."""
    size = min(limit or DEFAULT_LIST, MAX_LIST)
    audit = store.reflection_audit(AUDIT_SCAN)
    reverted: dict[str, float] = {}
    for a in audit:
        if a.kind == "revert":
            reverted.setdefault(a.run_id, a.at)
    found = []
    for a in audit:
        if a.kind == "run":
            found.append({**a.record, "reverted_at": reverted.get(a.run_id, 0.0)})
            if len(found) >= size:
                break
    return found


@dataclass(frozen=True)
class Reverted:
    run_id: str
    restored: tuple[str, ...]
    left: tuple[str, ...]


def _target(store: VaultStore, run_id: str, last: bool) -> tuple[str, list[MergeJournal]]:
    if last:
        audit = store.reflection_audit(AUDIT_SCAN)
        done = {a.run_id for a in audit if a.kind == "revert"}
        for a in audit:
            if a.kind == "run" and a.run_id not in done:
                journal = store.merges(a.run_id)
                if journal:
                    return a.run_id, journal
        raise NotFound(f"no reflection run of vault {store.project!r} merged anything that is not reverted yet")
    journal = store.merges(run_id)
    if not journal and not store.reflection_audit(1, run_id):
        raise NotFound(f"no reflection run {run_id!r} in vault {store.project!r}")
    return run_id, journal


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _text(value: object) -> bytes | None:
    return None if value is None else str(value).encode("utf-8")


def _revert_one(store: VaultStore, merge: MergeJournal, restored: list[str], left: list[str]) -> None:
    notes = merge.entry.get("notes", {})
    assert isinstance(notes, dict)
    retired = [str(n) for n in _list(merge.entry.get("retired"))]
    for name in retired:
        stale, before = notes.get(retired_name(name), {}), _text(notes.get(name, {}).get("before"))
        after = _text(stale.get("after"))
        current, live = store.read(retired_name(name)), store.read(name)
        if current is None and live == before:
            continue  # as it was already
        if current is None or current != after or before is None:
            left.append(f"{name}: {retired_name(name)!r} changed since the run; left as it is")
        elif live is not None:
            left.append(f"{name}: a live note of that name exists again; {retired_name(name)!r} left as it is")
        else:
            try:
                store.move(retired_name(name), name, before, expected=after)
                restored.append(name)
            except WriteConflict:
                left.append(f"{name}: changed while it was being restored; left as it is")
    name = str(merge.entry.get("name", ""))
    shown = notes.get(name, {})
    before, after = _text(shown.get("before")), _text(shown.get("after"))
    current = store.read(name)
    if current == before:
        return
    if current != after:
        left.append(f"{name}: changed since the run; left as it is")
        return
    try:
        if before is None:
            store.delete(name, expected=after)
        else:
            store.write(name, before, expected=after)
        restored.append(name)
    except WriteConflict:
        left.append(f"{name}: changed while it was being restored; left as it is")


def revert(store: VaultStore, run_id: str, last: bool, now: float) -> Reverted:
    """Undo run ``run_id``'s merges, or the last run's that merged anything (module docstring)."""
    target, journal = _target(store, run_id, last)
    restored: list[str] = []
    left: list[str] = []
    for merge in reversed(journal):
        try:
            _revert_one(store, merge, restored, left)
        except (GatewayError, OSError) as exc:
            left.append(f"{merge.entry.get('name', merge.merge_id)}: {exc}")
    names = sorted(dict.fromkeys(live_name(n) for n in restored))
    store.add_reflection_audit(ReflectionAudit("revert", target, now, {
        "run_id": target, "restored": names, "left": left, "merges": [m.merge_id for m in journal]}))
    return Reverted(target, tuple(names), tuple(left))
