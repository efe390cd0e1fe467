"""The plan of a weekly reflection run: the claim, the revision against the watermark, and the clusters
(docs/concepts/vault.md "Weekly reflection", Clusters and The watermark and the claim).

Pure domain code over the vault's store (``store.VaultStore``). The KB runs it in three parts, so that the
vault's creates and updates never wait for the slow middle (on 10,000 notes, a minute of reading and
similarity search): the claim as one write decision (``claim``), steps 2 to 5 as a read with no lock
(``snapshot``: a note changed under it is caught by the merge's compare-and-swap), and the plan kept as
a second write decision (``commit``), only while the run still holds the claim. A plan that fails gives
the claim up at once (``release``). ``plan`` runs the three on one store.

1. **Claim** (``claim_reflection``): the run lock across hosts and processes. While another run's claim
   has not expired the answer is ``busy`` and nothing else happens.
2. **Revision**: the sum, modulo 2^256, of the SHA-256 of each note kept (retired ones and the pruned
   archive included), of its name, a NUL and its bytes (``note_digest``), as 64 hex digits: it does not
   depend on the order the notes are read in, and a run's own writes move it by a delta it can add up
   (``shifted``). Equal to the watermark: ``unchanged``, no cluster is built. The revision is kept
   with the plan (``PLAN_BASE``), so that the run's record can tell its own writes from another
   writer's (``runs.record``).
3. **Notes**: the live notes whose name is a valid note name, that are UTF-8, and that the GC could move
   (``ages``: on SQLite a symbolic link is not one); never a retired note or the pruned archive.
4. **Edges**: a ``[[wikilink]]`` between two such notes (``graph.parse.extract_links``; an exact name,
   else a unique case-insensitive match), and a near-duplicate pair: a note's seed (``similar``: its
   rarest leading topic words) recalled over the vault, a candidate joining it when it clears
   promotion's **merge bar** (``promotion``: half the seed words, at least 3, carrying 60% of their
   weight).
5. **Clusters**: the connected components of two notes or more. One whose notes hold more than
   ``max_cluster_bytes`` is cut, oldest notes first, into consecutive windows that each fit (a note over
   it alone is in none; a window of one note is not a cluster), each window a cluster of its own, so a
   large component is reviewed a window at a time over the weeks. Each cluster gets its id (``C-`` and 12 hex digits of the hash of its sorted names), its signature (the hash of its
   notes' names and SHA-256s) and its contradiction (``graph.build.contradictions`` over the notes'
   frontmatter claims). A cluster whose signature a run reviewed and left is not planned again while its
   notes are unchanged. Ordered by size (largest first), then age (the oldest last change first), then
   id; the first ``max_clusters`` are planned and kept with the claim (``set_reflection_plan``), so a merge
   names only notes of its cluster; ``remaining`` counts the rest.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from gateway.errors import GatewayError
from services.kb.graph.build import contradictions
from services.kb.graph.parse import extract_links, parse_note
from services.kb.vault.names import is_reserved, is_retired, validate_name
from services.kb.vault.promotion import MERGE_CONTAINMENT, MERGE_MIN_TERMS, MERGE_WEIGHT, required_terms
from services.kb.vault.similar import CANDIDATE_POOL, body_text, choose_seed, stems
from services.kb.vault.store import VaultStore

DEFAULT_CLUSTERS: Final = 20
DEFAULT_CLUSTER_BYTES: Final = 60_000
DEFAULT_CLAIM_S: Final = 3_600
MAX_REVIEWED: Final = 5_000  # signatures of reviewed clusters kept (the newest)
PLAN_BASE: Final = "revision"  # the plan's key of {"base": the revision it was planned at}; never a cluster id
_RECALL_ROWS: Final = 200
_MODULUS: Final = 1 << 256
REVISION: Final = re.compile(r"[0-9a-f]{64}")  # a revision, and a merge's delta of one


@dataclass(frozen=True)
class PlanNote:
    name: str
    content: str
    sha256: str
    updated_at: float


@dataclass(frozen=True)
class Cluster:
    id: str
    notes: tuple[PlanNote, ...]
    joined_by: str
    contradiction: str
    cut: bool
    signature: str
    size: int  # notes in the whole component (before the cut)


@dataclass(frozen=True)
class Plan:
    project: str
    revision: str = ""
    watermark: str = ""
    unchanged: bool = False
    busy_with: str = ""
    clusters: tuple[Cluster, ...] = ()
    remaining: int = 0
    notes: int = 0
    reviewed_skipped: int = field(default=0, compare=False)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note_digest(name: str, data: bytes | None) -> int:
    """Note ``name`` of ``data``'s term of the revision (0 when there is no such note)."""
    if data is None:
        return 0
    return int.from_bytes(hashlib.sha256(name.encode("utf-8") + b"\0" + data).digest(), "big")


def shifted(base: str, delta: int) -> str:
    """Revision ``base`` moved by ``delta`` (a sum of ``note_digest`` terms added and taken away)."""
    return format((int(base, 16) + delta) % _MODULUS, "064x")


def revision(store: VaultStore, contents: dict[str, bytes] | None = None) -> str:
    """The vault's revision (step 2); of exactly ``contents`` (notes by name) when given, so that the
    revision a plan keeps is that of the notes it clustered, not of a note created since it listed them."""
    if contents is None:
        contents = {name: data for name in store.names(include_retired=True) if (data := store.read(name)) is not None}
    return shifted("0", sum(note_digest(name, data) for name, data in contents.items()))


def base_revision(plan: dict[str, dict[str, object]]) -> str:
    """The revision a run's kept plan was planned at ("" when it holds none: no plan, or one kept
    before the revision was)."""
    kept = plan.get(PLAN_BASE)
    base = kept.get("base") if isinstance(kept, dict) else None
    return base if isinstance(base, str) and REVISION.fullmatch(base) else ""


def cluster_id(names: Iterable[str]) -> str:
    return "C-" + sha256("\n".join(sorted(names)).encode("utf-8"))[:12]


def signature(notes: Iterable[PlanNote]) -> str:
    return sha256("\n".join(f"{n.name}\t{n.sha256}" for n in sorted(notes, key=lambda n: n.name)).encode("utf-8"))


def _valid(name: str) -> bool:
    try:
        return validate_name(name) == name
    except GatewayError:
        return False


class _Union:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        root = self.parent.setdefault(x, x)
        while root != self.parent[root]:
            root = self.parent[root]
        while x != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


class _Weights:
    """Seed words' counts in the vault, asked once each (``similar.choose_seed``, ``promotion.seed_weights``)."""

    def __init__(self, store: VaultStore) -> None:
        self._store = store
        self._counts: dict[str, int] = {}
        self._known = True
        self.chunks = store.chunk_count()

    def counts(self, terms: list[str]) -> dict[str, int] | None:
        missing = [t for t in terms if t not in self._counts]
        if missing and self._known:
            found = self._store.term_counts(missing)
            if found is None:
                self._known = False
            else:
                self._counts.update(found)
        return {t: self._counts.get(t, 0) for t in terms} if self._known else None

    def seed(self, content: str) -> list[str]:
        return choose_seed(self._store, content, self.counts)

    def weights(self, seed: list[str]) -> dict[str, float]:
        counts = self.counts(seed)
        if counts is None or self.chunks is None:
            return dict.fromkeys(seed, 1.0)
        return {t: math.log1p(self.chunks / (1 + counts[t])) for t in seed}


def _similar_pairs(store: VaultStore, notes: dict[str, PlanNote]) -> list[tuple[str, str]]:
    """The near-duplicate pairs over the merge bar (step 4)."""
    weights = _Weights(store)
    held_by = {name: stems(body_text(n.content)) for name, n in notes.items()}
    pairs: list[tuple[str, str]] = []
    for name, note in notes.items():
        seed = weights.seed(note.content)
        need = required_terms(len(seed), MERGE_CONTAINMENT, MERGE_MIN_TERMS)
        if need is None:
            continue
        weight = weights.weights(seed)
        total = sum(weight.values())
        seen: set[str] = set()
        for other, _ in store.recall(seed, _RECALL_ROWS):
            if other == name or other in seen or other not in notes:
                continue
            seen.add(other)
            held = [t for t in seed if t in held_by[other]]
            share = sum(weight[t] for t in held) / total if total > 0 else 0.0
            if len(held) >= need and share >= MERGE_WEIGHT - 1e-9:
                pairs.append((name, other))
            if len(seen) >= CANDIDATE_POOL:
                break
    return pairs


def _link_pairs(notes: dict[str, PlanNote]) -> list[tuple[str, str]]:
    folded: dict[str, list[str]] = {}
    for name in notes:
        folded.setdefault(name.casefold(), []).append(name)
    pairs = []
    for name, note in notes.items():
        for target in extract_links(note.content):
            same = folded.get(target.casefold(), [])
            resolved = target if target in notes else same[0] if len(same) == 1 else None
            if resolved is not None and resolved != name:
                pairs.append((name, resolved))
    return pairs


def _contradiction(notes: Iterable[PlanNote]) -> str:
    found = contradictions([parse_note(n.name, n.content) for n in notes])
    return "; ".join(
        f"claim {c.claim_id!r}: {' and '.join(c.diverges)} differ between "
        + ", ".join(sorted({repr(claim.note) for claim in c.claims})) for c in found)


def _windows(members: list[PlanNote], max_bytes: int) -> list[list[PlanNote]]:
    """``members`` oldest first (ties by name) in consecutive windows that each fit ``max_bytes``; a note
    over it alone is in none, and a window of one note is dropped (step 5)."""
    windows: list[list[PlanNote]] = [[]]
    size = 0
    for note in sorted(members, key=lambda n: (n.updated_at, n.name)):
        length = len(note.content.encode("utf-8"))
        if length > max_bytes:
            continue
        if size + length > max_bytes:
            windows.append([])
            size = 0
        windows[-1].append(note)
        size += length
    return [w for w in windows if len(w) >= 2]


def _notes(store: VaultStore, contents: dict[str, bytes]) -> dict[str, PlanNote]:
    live = store.ages().live
    found: dict[str, PlanNote] = {}
    for name, data in contents.items():
        if is_retired(name) or is_reserved(name) or name not in live or not _valid(name):
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        found[name] = PlanNote(name, text, sha256(data), live[name])
    return found


def clusters(store: VaultStore, notes: dict[str, PlanNote], max_bytes: int) -> list[Cluster]:
    """Every cluster of ``notes`` (steps 4 and 5, before the reviewed ones and the cap), in plan order."""
    union = _Union()
    links, similar = _link_pairs(notes), _similar_pairs(store, notes)
    for a, b in (*links, *similar):
        union.join(a, b)
    kinds: dict[str, set[str]] = {}
    for kind, pairs in (("links", links), ("similar", similar)):
        for a, _ in pairs:
            kinds.setdefault(union.find(a), set()).add(kind)
    members: dict[str, list[PlanNote]] = {}
    for name in notes:
        members.setdefault(union.find(name), []).append(notes[name])
    found: list[Cluster] = []
    for root, group in members.items():
        if len(group) < 2:
            continue
        joined = "+".join(k for k in ("links", "similar") if k in kinds.get(root, set()))
        for kept in _windows(group, max_bytes):
            found.append(Cluster(cluster_id(n.name for n in kept), tuple(kept), joined, _contradiction(kept),
                                 len(kept) < len(group), signature(kept), len(group)))
    found.sort(key=lambda c: (-c.size, min(n.updated_at for n in c.notes), c.id))
    return found


@dataclass(frozen=True)
class Snapshot:
    """What a plan reads, without the vault's write lock (``snapshot``): the revision, the reflection row's
    watermark and reviewed signatures, the live notes counted, and every cluster (none when unchanged)."""

    revision: str
    watermark: str
    notes: int
    every: tuple[Cluster, ...]
    reviewed: frozenset[str]

    @property
    def unchanged(self) -> bool:
        return self.revision == self.watermark


def claim(store: VaultStore, run_id: str, now: float, claim_seconds: int = 0) -> str:
    """Step 1, a write: the run holding the claim, or "" when ``run_id`` holds it now."""
    return store.claim_reflection(run_id, now, now + (claim_seconds or DEFAULT_CLAIM_S))


def release(store: VaultStore, run_id: str, now: float) -> None:
    """Give up ``run_id``'s claim at once (its plan failed): claimed again with an expiry of ``now``, so
    the next run takes the vault over without waiting for the claim's hour. Nothing when another holds it."""
    if store.reflection_state().claim_run == run_id:
        store.claim_reflection(run_id, now, now)


def snapshot(store: VaultStore, max_cluster_bytes: int = 0) -> Snapshot:
    """Steps 2 to 5, a read: the slow part of a plan (every note read, the similarity search of each),
    which needs no lock: what it reads may change under it, and each merge is compare-and-swap."""
    contents = {name: data for name in store.names(include_retired=True) if (data := store.read(name)) is not None}
    rev = revision(store, contents)
    state = store.reflection_state()
    notes = _notes(store, contents)
    every = () if rev == state.watermark else tuple(clusters(store, notes, max_cluster_bytes or DEFAULT_CLUSTER_BYTES))
    return Snapshot(rev, state.watermark, len(notes), every, frozenset(state.reviewed))


def commit(store: VaultStore, run_id: str, snap: Snapshot, max_clusters: int = 0) -> Plan:
    """Step 6, a write: the first ``max_clusters`` not reviewed kept as ``run_id``'s plan; busy when its
    claim was taken over while the snapshot was read (it expired)."""
    project = store.project
    holder = store.reflection_state().claim_run
    if holder != run_id:
        return Plan(project, busy_with=holder or "(the claim expired)")
    base: dict[str, dict[str, object]] = {PLAN_BASE: {"base": snap.revision}}
    if snap.unchanged:
        store.set_reflection_plan(run_id, base)
        return Plan(project, snap.revision, snap.watermark, unchanged=True, notes=snap.notes)
    todo = [c for c in snap.every if c.signature not in snap.reviewed]
    planned = todo[: max_clusters or DEFAULT_CLUSTERS]
    store.set_reflection_plan(run_id, {
        **base, **{c.id: {"notes": [n.name for n in c.notes], "sig": c.signature} for c in planned}})
    return Plan(project, snap.revision, snap.watermark, clusters=tuple(planned), remaining=len(todo) - len(planned),
                notes=snap.notes, reviewed_skipped=len(snap.every) - len(todo))


def plan(store: VaultStore, run_id: str, now: float, max_clusters: int = 0, max_cluster_bytes: int = 0,
         claim_seconds: int = 0) -> Plan:
    """Claim the vault's reflection for ``run_id`` and plan it (module docstring) in one go, on one store.
    The KB's servicer runs the three steps apart (``claim``, ``snapshot`` off the write lock, ``commit``)
    so that the vault's writes do not wait for the snapshot. ``now``: epoch s."""
    busy = claim(store, run_id, now, claim_seconds)
    if busy:
        return Plan(store.project, busy_with=busy)
    return commit(store, run_id, snapshot(store, max_cluster_bytes), max_clusters)
