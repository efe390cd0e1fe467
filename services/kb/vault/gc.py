"""The shared vault's own GC: retire idle notes, restore retired ones retrieved again (docs/concepts/vault.md "Shared vault").

Pure domain code over the vault's store (``store.VaultStore``); the KB's
``Vaults`` runs it in a worker thread under the vault's write lock and
decides whether it may run (``gc.enabled``). One run (``collect``):

1. **Once per vault per day.** The day (a local date, ``YYYY-MM-DD``, chosen
   by the caller) is claimed in one transaction (``claim_day``), before
   anything moves, so two agents of one vault, two KB processes or a crash
   mid-run never run one day twice. A second call the same day does nothing
   and answers ``already-ran`` with the summary of the day's run.
2. **Fold** the vault's retrieval log (appended by the read path: Search hits
   from the shared corpus and GetSharedNote) into the lifecycle rows, in the
   claiming transaction, so nothing is counted twice. A hit on
   ``stale__<name>`` counts for ``<name>``: one row per live name.
3. **Restore** (never capped): a note the GC retired (its row's
   ``retired_at``, and the GC's own marker in ``stale__<name>``: the reason
   starts with ``vault GC:``) that was retrieved after its retirement comes
   back under its live name through ``retirement.restore``. Never over a
   live note of that name: that pair is the twin rule's business (search hides
   the twin; a create or update folds it), and the note is reported ``kept``.
   A note retired by hand (RetireSharedNote) is an explicit decision and is
   never restored by the GC.
4. **Retire** live notes idle for more than ``staleDays``: idle since the
   later of their last retrieval and their file's modification time (a create,
   an update or a restore is activity; a note never retrieved is aged from its
   mtime, so a vault that predates this GC has real ages from the first night).
   Oldest first (ties by name), at most ``maxRetirementsPerRun``; the rest wait
   for later nights (``waiting``). Each goes through ``retirement.retire``
   (``stale__<name>``, byte for byte plus the marker), so it stays indexed and
   searchable. A due note that cannot be retired (its ``stale__`` twin exists,
   a name the vault would not accept, the file changed meanwhile) is
   ``skipped`` with the reason and does not use up the cap. A note that is a
   symlink is never retired (the move would replace the link with a copy).

``retired_at`` is written before the move and cleared when the move fails,
so a crash between the two leaves a row whose twin is missing: the next run
clears it. Times are Unix epoch seconds from the caller's clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Literal

from gateway.config import VaultGcSettings
from gateway.errors import GatewayError
from services.kb.index.entries import entry_hash
from services.kb.vault import retirement
from services.kb.vault.names import is_reserved, note_path, retired_name, validate_name
from services.kb.vault.store import NoteState, VaultStore

DAY_S: Final = 86_400
REASON_PREFIX: Final = "vault GC:"
SHOWN_SKIPS: Final = 20  # skipped notes named in one report; the rest are counted

Outcome = Literal["ran", "already-ran", "disabled"]


@dataclass(frozen=True)
class NoteRef:
    """A retrieved note as the retrieval log records it (``retrieval_log.Retrieved``)."""

    path: str
    entry_hash: str | None


def note_ref(name: str, content: str) -> NoteRef:
    """GetSharedNote's log row: the note's path, and the entry hash of its whole text as one entry."""
    return NoteRef(note_path(name), entry_hash(content))


@dataclass(frozen=True)
class Due:
    """A live note idle past the threshold: ``idle_s`` seconds since its last activity."""

    name: str
    idle_s: float


@dataclass(frozen=True)
class Plan:
    """What a run will try, in order (``plan``)."""

    restore: tuple[str, ...] = ()
    clear: tuple[str, ...] = ()  # GC retirements whose twin is gone (folded, deleted, restored by hand)
    retire: tuple[Due, ...] = ()  # oldest first; the cap applies when they are carried out
    skipped: tuple[str, ...] = ()  # "name: reason" for due notes that cannot be retired


@dataclass(frozen=True)
class GcReport:
    """One CollectVault answer. ``message`` is transport-neutral (the run notes quote it)."""

    outcome: Outcome
    project: str
    day: str
    by: str  # the agent whose call ran the day's GC
    stale_days: int = 0
    max_retirements: int = 0
    folded: int = 0
    retired: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    waiting: int = 0
    skipped: tuple[str, ...] = ()
    skipped_count: int = 0
    message: str = field(default="", compare=False)


def _valid(name: str) -> bool:
    try:
        return validate_name(name) == name
    except GatewayError:
        return False


def plan(
    live: dict[str, float], twins: set[str], states: dict[str, NoteState], settings: VaultGcSettings, now_s: float
) -> Plan:
    """What one run does (module docstring, steps 3 and 4), from the notes on disk and their rows. Pure."""
    restore = sorted(
        name for name, st in states.items()
        if st.retired_at is not None and name in twins and st.last_retrieved is not None and st.last_retrieved > st.retired_at
    )
    clear = sorted(name for name, st in states.items() if st.retired_at is not None and name not in twins)
    limit = settings.stale_days * DAY_S
    due: list[Due] = []
    skipped: list[str] = []
    for name, mtime in live.items():
        if is_reserved(name):  # the pruned archive: the reflection's, never idle
            continue
        st = states.get(name, NoteState())
        idle = now_s - max(mtime, st.last_retrieved or mtime)
        if idle <= limit or name in restore:
            continue
        if name in twins:
            skipped.append(f"{name}: its retired twin {retired_name(name)!r} exists (search shows the live note only)")
        elif not _valid(name):
            skipped.append(f"{name}: not a name the vault accepts (a file dropped in by hand); rename it to retire it")
        else:
            due.append(Due(name, idle))
    due.sort(key=lambda d: (-d.idle_s, d.name))
    return Plan(tuple(restore), tuple(clear), tuple(due), tuple(sorted(skipped)))


def _retired_by_gc(store: VaultStore, name: str) -> bool:
    """Whether ``stale__<name>`` carries the GC's own marker (not a retirement made by hand)."""
    try:
        data = store.read(retired_name(name))
    except (OSError, GatewayError):
        return False
    marker = None if data is None else retirement.read_marker(data)
    return marker is not None and marker.reason.startswith(REASON_PREFIX)


def reason(idle_s: float, stale_days: int) -> str:
    """The retirement marker's reason: the rule and the note's idle days."""
    return f"{REASON_PREFIX} not retrieved or written in {int(idle_s // DAY_S)} days (staleDays {stale_days})"


def _summary(raw: str | None, day: str) -> GcReport:
    """The day's run as ``kb_meta.vault_gc_last`` holds it, as an ``already-ran`` report."""
    try:
        data = json.loads(raw or "{}")
    except ValueError:
        data = {}
    counts = {k: int(data.get(k, 0)) for k in ("retired", "restored", "kept", "waiting", "skipped")}
    return GcReport(
        "already-ran", str(data.get("project", "")), day, str(data.get("by", "")),
        stale_days=int(data.get("staleDays", 0)), max_retirements=int(data.get("maxRetirementsPerRun", 0)),
        waiting=counts["waiting"], skipped_count=counts["skipped"],
        message=(f"already ran today ({day}, for agent {data.get('by', '?')})"
                 + ("" if not data.get("finished") else
                    f": retired {counts['retired']}, restored {counts['restored']}, kept {counts['kept']}, "
                    f"{counts['waiting']} waiting")
                 + "; nothing was done"),
    )


def collect(store: VaultStore, settings: VaultGcSettings, now: datetime, day: str, *, by: str) -> GcReport:
    """One GC run of the vault for ``day`` (module docstring). ``by``: the calling agent (recorded).
    Never raises for one note's trouble: it is ``skipped`` with the reason."""
    project = store.project
    claimed = store.claim_day(day, json.dumps({"day": day, "by": by, "finished": False}))
    if claimed.summary is not None:
        already = _summary(claimed.summary, day)
        return replace(already, project=project, message=_prefixed(project, already.message))
    folded = claimed.folded
    now_s = now.timestamp()
    ages = store.ages()
    todo = plan(ages.live, ages.twins, store.lifecycle(), settings, now_s)
    restored, kept = _restore(store, todo.restore)
    for name in todo.clear:
        store.set_retired(name, None)
    retired, skipped, tried = _retire(store, todo.retire, settings, now)
    skipped = [*todo.skipped, *skipped]
    report = GcReport(
        "ran", project, day, by, settings.stale_days, settings.max_retirements_per_run, folded,
        tuple(retired), tuple(restored), tuple(kept), len(todo.retire) - tried,
        tuple(skipped[:SHOWN_SKIPS]), len(skipped),
    )
    report = replace(report, message=_prefixed(project, describe(report)))
    store.finish_day(json.dumps({
        "day": day, "by": by, "finished": True, "project": project, "staleDays": settings.stale_days,
        "maxRetirementsPerRun": settings.max_retirements_per_run, "retired": len(retired),
        "restored": len(restored), "kept": len(kept), "waiting": report.waiting, "skipped": len(skipped),
    }))
    return report


def _restore(store: VaultStore, names: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(restored, kept)``: GC retirements retrieved since; kept when a live note of that name exists."""
    restored: list[str] = []
    kept: list[str] = []
    for name in names:
        if not _retired_by_gc(store, name):
            store.set_retired(name, None)  # retired again by hand since: not the GC's to undo
            continue
        try:
            retirement.restore(store, name)
            restored.append(name)
        except GatewayError:
            if store.exists(name):
                # Never over a live note: the twin rule hides the retired one, and a create or update
                # folds it. The GC lets go of it (a later delete of the live note brings nothing back).
                kept.append(name)
        store.set_retired(name, None)
    return restored, kept


def _retire(
    store: VaultStore, due: Iterable[Due], settings: VaultGcSettings, now: datetime
) -> tuple[list[str], list[str], int]:
    """``(retired, skipped, how many of due were tried)``, oldest first, up to the cap."""
    retired: list[str] = []
    skipped: list[str] = []
    tried = 0
    for note in due:
        if len(retired) >= settings.max_retirements_per_run:
            break
        tried += 1
        store.set_retired(note.name, now.timestamp())
        try:
            retirement.retire(store, note.name, reason(note.idle_s, settings.stale_days), now)
        except (GatewayError, OSError) as exc:
            store.set_retired(note.name, None)
            skipped.append(f"{note.name}: {exc}")
            continue
        retired.append(note.name)
    return retired, skipped, tried


def _names(names: tuple[str, ...], most: int = 10) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def describe(r: GcReport) -> str:
    """One line saying what a run did, for the dream run's notes."""
    parts = [f"retired {len(r.retired)} note(s) idle over {r.stale_days} days ({_names(r.retired)})" if r.retired
             else f"no note to retire (none idle over {r.stale_days} days)" if not r.waiting and not r.skipped_count
             else "retired none"]
    if r.restored:
        parts.append(f"restored {len(r.restored)} retrieved again ({_names(r.restored)})")
    if r.kept:
        parts.append(f"kept {len(r.kept)} retired beside a live note of the same name ({_names(r.kept)})")
    if r.waiting:
        parts.append(f"{r.waiting} more wait for later nights (at most {r.max_retirements} a night)")
    if r.skipped_count:
        parts.append(f"skipped {r.skipped_count}: " + "; ".join(r.skipped[:3]) + (" …" if r.skipped_count > 3 else ""))
    return ", ".join(parts)


def _prefixed(project: str, text: str) -> str:
    return f"Shared vault GC ({project!r}): {text}."


def disabled(project: str, day: str, by: str, off_for: Iterable[str]) -> GcReport:
    """The answer when the GC is off for the vault: nothing is claimed, folded or moved."""
    agents = ", ".join(sorted(off_for))
    return GcReport("disabled", project, day, by,
                    message=_prefixed(project, f"off (gc.enabled is false for agent {agents}); nothing was done"))


def empty(project: str, day: str, by: str) -> GcReport:
    """The answer for a vault that has no notes folder yet: nothing to collect, nothing created."""
    return GcReport("ran", project, day, by, message=_prefixed(project, "the vault has no notes yet; nothing to collect"))
