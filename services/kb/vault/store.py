"""The vault store: the one interface the vault's domain code reads and writes through (docs/architecture.md
"The vault store").

A store holds one vault (one project): its notes by name, their full-text index, who wrote each note,
the retrieval log, the GC's lifecycle rows and the answers of promotion requests. The domain modules (``notes``, ``similar``,
``retirement``, ``promotion``, ``unpromote``, ``gc``, ``listing``) decide; the store keeps. The backend
is chosen once at start-up (``gateway.knowledge.shared.backend``): ``sqlite_store.SqliteVaultStore``
keeps notes as files under ``notes/`` with an SQLite index beside them, ``vault_pg.store.PostgresVaultStore``
keeps them in PostgreSQL, shared by every host.

Every call is one unit a backend can make transactional: a write lands the note and its index rows
together (``write``: create-if-absent or compare-and-swap, dropping the names it replaces), a ``move``
writes its target and removes its source only while the source still holds the bytes read. ``writing``
brackets the calls of one decision (the near-duplicate check and the create it guards): a backend
shared by many hosts serialises such brackets per vault. Names given to a store are the vault's
validated note names (``names``); user text never reaches a query parser unquoted (``recall`` takes
terms, ``search`` a user query the backend quotes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, Protocol

from gateway.errors import CommandError
from gateway.forgetting import Tombstone

from services.kb.archive.retrieval_log import Retrieved
from services.kb.index.search import SearchResult

BUILT_IN: Final = ("sqlite", "postgres")


@dataclass(frozen=True)
class Writer:
    """One write: for which agent, by which key (its name), in which dream run (or ""), when (epoch s)."""

    agent_id: str
    key: str
    run_id: str
    at: float


@dataclass(frozen=True)
class Authors:
    """A note's first write (None when it was created outside the API) and its latest."""

    created: Writer | None
    changed: Writer


@dataclass(frozen=True)
class NoteStat:
    """What a listing shows of a note: its first bytes (``head``), its size and its last change (epoch s)."""

    head: bytes
    size_bytes: int
    updated_at: float


@dataclass(frozen=True)
class Ages:
    """The GC's view of the notes: live name → last change (epoch s; notes the GC must never move left
    out), and the live names that have a retired twin."""

    live: dict[str, float]
    twins: set[str]


@dataclass(frozen=True)
class NoteState:
    """A note's lifecycle row (absent: never retrieved, never retired by the GC)."""

    last_retrieved: float | None = None
    retrieval_count: int = 0
    retired_at: float | None = None


@dataclass(frozen=True)
class Claim:
    """``claim_day``'s answer: the day's summary when the day was claimed already (nothing changed then),
    else None and the retrieval-log rows folded into the lifecycle rows."""

    summary: str | None
    folded: int


@dataclass(frozen=True)
class PromotionRecord:
    """The answer a promotion request got, kept under its id (``promotion_record``): the outcome, the note
    and the write as ``PromotionWrite``'s fields (None when nothing was written), when (epoch s); when it
    was undone (None: not) and how (undone or gone)."""

    request_id: str
    agent_id: str
    run_id: str
    outcome: str
    note: str
    write: dict[str, object] | None
    at: float = 0.0
    undone_at: float | None = None
    undo_outcome: str = ""


@dataclass(frozen=True)
class ReflectionState:
    """The weekly reflection's row of the vault (docs/concepts/vault.md "Weekly reflection"): the run
    holding the claim ("" when none) and until when (epoch s), the clusters it planned (id → the
    cluster's notes and its signature, ``{"notes": [...], "sig": "..."}``; and under ``"revision"``
    the vault's revision the plan was read at, ``{"base": "..."}``, ``reflection.plan.PLAN_BASE``),
    the watermark (the revision at the end of the last run that set it; "" before the first) and the
    signatures of the clusters reviewed and left since (not planned again while their notes are unchanged)."""

    claim_run: str = ""
    claim_expires: float = 0.0
    plan: dict[str, dict[str, object]] = field(default_factory=dict)
    watermark: str = ""
    reviewed: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReflectionAudit:
    """One record of the vault's reflection audit: a run (``kind`` "run") or a revert ("revert") of
    run ``run_id``, when (epoch s), and what it recorded (JSON-ready)."""

    kind: str
    run_id: str
    at: float
    record: dict[str, object]


@dataclass(frozen=True)
class MergeJournal:
    """One applied merge of a reflection run, with what undoes it (``entry``: the merged note's name,
    whether it was created, every touched note's bytes before and after as text; JSON-ready)."""

    merge_id: str
    run_id: str
    at: float
    entry: dict[str, object]


class VaultStore(Protocol):
    """One vault's notes, index, authors, retrieval log and lifecycle (module docstring)."""

    @property
    def project(self) -> str:
        """The vault's project (one safe path segment)."""
        ...

    def writing(self) -> AbstractContextManager[None]:
        """The calls of one write decision, serialised with every other writer of the vault."""
        ...

    # --- notes ----------------------------------------------------------------------------
    def read(self, name: str) -> bytes | None:
        """The note's bytes; None when there is none. FailedPrecondition for a note the vault will not read."""
        ...

    def exists(self, name: str) -> bool:
        """Whether the name is taken (a note, or anything else the store keeps under it)."""
        ...

    def write(self, name: str, data: bytes, *, expected: bytes | None, drop: Sequence[str] = ()) -> None:
        """Land ``data`` as note ``name`` and index it: created when ``expected`` is None (WriteConflict
        when the name is taken), else only while the note still holds ``expected`` (WriteConflict);
        then the notes named in ``drop`` are removed with their index rows."""
        ...

    def delete(self, name: str, *, expected: bytes | None = None) -> bool:
        """Remove note ``name`` and its index rows; False when there was none. With ``expected``: only
        while the note holds those bytes (WriteConflict)."""
        ...

    def move(self, source: str, target: str, data: bytes, *, expected: bytes) -> None:
        """Write ``data`` as the new note ``target`` and remove ``source``, which must still hold
        ``expected``; both indexed. WriteConflict (nothing moved) when ``target`` is taken or ``source``
        changed."""
        ...

    def names(self, *, include_retired: bool) -> list[str]:
        """The names of the notes kept, sorted (not yet checked against the name rules)."""
        ...

    def stat(self, name: str, head_bytes: int) -> NoteStat | None:
        """The note's first ``head_bytes`` bytes, size and time; None when it is gone or unreadable."""
        ...

    def ages(self) -> Ages:
        """Every live note's last change, and which live names have a retired twin."""
        ...

    def keep_time(self, name: str, at: float) -> None:
        """Set note ``name``'s last change to ``at`` (epoch s), its bytes untouched (an import keeps the
        time a note had in the vault it came from); nothing when there is no such note."""
        ...

    # --- the full-text index ----------------------------------------------------------------
    def search(self, query: str, limit: int | None) -> SearchResult:
        """A user query over the vault, ranked, the twin rule applied. Never raises for user input."""
        ...

    def term_counts(self, terms: Sequence[str]) -> dict[str, int] | None:
        """Chunks holding a word that starts with each term; None when the index cannot say."""
        ...

    def chunk_count(self) -> int | None:
        """Chunks indexed; None when the index cannot say."""
        ...

    def recall(self, terms: Sequence[str], rows: int) -> list[tuple[str, str]]:
        """``(note name, chunk text)`` of the chunks holding any word starting with one of ``terms``
        (letters and digits), best ranked first, at most ``rows``."""
        ...

    # --- authors ----------------------------------------------------------------------------
    def record_author(self, name: str, writer: Writer, *, created: bool) -> None:
        """Record a write of live note ``name``: as its creation too when ``created``."""
        ...

    def forget_author(self, name: str) -> None:
        """Drop live note ``name``'s record."""
        ...

    def authors(self, names: Iterable[str]) -> dict[str, Authors]:
        """The records of live ``names`` that have one."""
        ...

    def forget_names(self, rename: Callable[[str], str | None], apply: bool) -> tuple[list[tuple[str, str]], list[str], int]:
        """A forget of text in note names (``vault.forget_names``): every note, live or retired, that
        ``rename`` gives a new name, moved to it on ``apply`` with its index rows and authors (never over
        a note there); and every row keyed by a note name (lifecycle, retrieval log, the promotion records'
        note and their write's) that ``rename`` renames, rewritten on ``apply``. ``(moved (old, new), left
        (a note that kept changing or will not be read), rows renamed)``."""
        ...

    # --- promotion requests -----------------------------------------------------------------
    def promotion(self, request_id: str) -> PromotionRecord | None:
        """The answer recorded under ``request_id``; None when the request never got one."""
        ...

    def record_promotion(self, record: PromotionRecord) -> bool:
        """Keep ``record`` under its request id, in the transaction of the write it answers when one is
        open (``writing``); False (nothing changed) when the id has an answer already."""
        ...

    def promotion_undone(self, request_id: str, outcome: str, at: float) -> None:
        """Mark ``request_id``'s record undone at ``at`` (epoch s) with ``outcome``; nothing when it has none."""
        ...

    # --- recall and the GC ------------------------------------------------------------------
    def log_retrievals(self, hits: Iterable[Retrieved], kind: str, at: float) -> int:
        """Append one retrieval-log row per hit that names an entry; the rows written."""
        ...

    def claim_day(self, day: str, started: str) -> Claim:
        """Claim the GC's ``day`` (its summary so far: ``started``) and fold the retrieval log into the
        lifecycle rows (a hit on a retired twin counts for its live name), in one transaction (``Claim``)."""
        ...

    def lifecycle(self) -> dict[str, NoteState]:
        """Every lifecycle row by live name."""
        ...

    def set_retired(self, name: str, at: float | None) -> None:
        """Set (or clear, None) when the GC retired live note ``name``."""
        ...

    def finish_day(self, summary: str) -> None:
        """Keep the summary of the day's GC run (``claim_day`` answers it for the rest of the day)."""
        ...

    # --- the weekly reflection (docs/concepts/vault.md "Weekly reflection") ----------------------
    def claim_reflection(self, run_id: str, now: float, expires_at: float) -> str:
        """In one transaction: the run holding an unexpired claim (at ``now``) other than ``run_id``, and
        nothing changed; else "" and the claim is ``run_id``'s until ``expires_at`` (its plan cleared
        unless ``run_id`` held it already)."""
        ...

    def reflection_state(self) -> ReflectionState:
        """The vault's reflection row (a default one before the first claim)."""
        ...

    def set_reflection_plan(self, run_id: str, plan: dict[str, dict[str, object]]) -> None:
        """Keep ``plan`` as the clusters of ``run_id``'s claim; nothing when another run holds it."""
        ...

    def finish_reflection(self, run: ReflectionAudit, watermark: str | None, reviewed: Sequence[str]) -> None:
        """In one transaction: ``run`` appended to the audit, the watermark set (None: kept), the reviewed
        signatures replaced by ``reviewed``, and the claim released when ``run.run_id`` holds it."""
        ...

    def add_reflection_audit(self, record: ReflectionAudit) -> None:
        """Append ``record`` to the vault's reflection audit."""
        ...

    def reflection_audit(self, limit: int, run_id: str = "") -> list[ReflectionAudit]:
        """The audit's records, newest first, at most ``limit`` (only ``run_id``'s when given)."""
        ...

    def journal_merge(self, merge: MergeJournal) -> None:
        """Keep ``merge`` in the run's journal (replacing one of the same id)."""
        ...

    def drop_merge(self, merge_id: str) -> None:
        """Take merge ``merge_id`` out of the journal (it was undone before it finished)."""
        ...

    def merges(self, run_id: str) -> list[MergeJournal]:
        """The journal of ``run_id``, in the order the merges were applied."""
        ...

    # --- the vault's tombstones (docs/concepts/forget.md "Shared tombstones across hosts") ---------
    def share_tombstones(self, rows: Sequence[Tombstone]) -> int:
        """Keep the shared tombstones ``rows`` (each with its own salt): a new id is inserted, a known one
        gets its ``places``; how many were new."""
        ...

    def lift_tombstone(self, tombstone_id: str, at: str) -> int:
        """Mark ``tombstone_id`` and its ``.N`` siblings lifted at ``at`` (ISO 8601); how many were held."""
        ...

    def tombstones(self, *, lifted: bool = False) -> list[Tombstone]:
        """The tombstones held (not lifted), oldest first; with ``lifted``, the lifted ones instead."""
        ...

    def tombstones_mark(self) -> tuple[int, int]:
        """How many tombstones were ever kept and how many were lifted: changes with every add and lift,
        one cheap query (what a host polls before reading them all)."""
        ...


def require_built_in(backend: str) -> None:
    """At the KB's start: CommandError (one line) when ``gateway.knowledge.shared.backend`` names a
    backend this version does not have."""
    if backend not in BUILT_IN:
        raise CommandError(
            f"kb: gateway.knowledge.shared.backend is {backend!r}, but the {backend} vault backend is not built "
            f"in this version (built in: {', '.join(BUILT_IN)}); the KB does not start"
        )
