"""Near-duplicate check before a shared note is created (docs/concepts/vault.md "Shared vault";
docs/architecture.md "Limits and defaults": a near-duplicate check on the leading terms before create).

1. **Seed.** The content's body (frontmatter and ``<!-- key: value -->`` markers
   removed) is split into letter/digit tokens, casefolded and lightly stemmed
   (a final ``s``, ``ed`` or ``ing`` is cut when at least 4 chars remain, so
   ``backups``/``backup`` and ``deployed``/``deploy`` meet). Stopwords
   (``STOPWORDS``) and tokens under 3 chars (so numbers under 3 digits) are skipped.
   The first ``LEADING_TERMS`` (40) distinct stems, in order of appearance, are
   the note's leading words; of those, the seed is the ``SEED_TERM_BUDGET`` (12)
   that are *rarest in the vault* (fewest chunks containing a word with that
   prefix, from FTS5's own vocabulary), in order of appearance. Words found in
   many notes ("build", "still", "question") say little about a topic: a seed
   of rare words keeps an unrelated note from clearing the bar on common words
   alone, and keeps the recall query cheap. An empty vault keeps the first 12.
2. **Recall.** One OR-match FTS5 query of the seed stems as quoted prefix terms
   (``"backup"* OR "nightly"* …``) over the vault index, ranked by bm25; the
   first ``CANDIDATE_POOL`` (10) distinct notes it finds are candidates. Retired
   ``stale__*`` notes, the vault's pruned archive and the names in ``exclude`` are never candidates.
3. **Bar.** A candidate's score is the share of seed stems found among the
   stems of its *full* note file (not only the chunk that matched). It is
   related when it holds at least ``SIMILARITY_THRESHOLD`` (40%) of the seed,
   and at least ``MIN_SHARED_TERMS`` (2) seed stems (all of them when the seed
   is shorter than that). Reworded notes (same facts, other wording or order)
   share their topic words and clear the bar; an unrelated note shares a stray
   word or two and does not.
4. At most ``MAX_RELATED`` (5) related notes are returned, best score first
   (then name), each with a snippet of the chunk that matched.

Steps 1 and 2, and the containment of step 3 without its bar, are
``score_candidates``: nightly promotion (``promotion``) puts its own, higher
merge bar and lower link bar on the same measure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from services.kb.index.chunking import split_lines
from services.kb.index.entries import normalise, parse_frontmatter
from services.kb.index.hits import make_snippet
from gateway.errors import GatewayError
from services.kb.vault.names import RETIRED_PREFIX, is_reserved
from services.kb.vault.store import VaultStore

SEED_TERM_BUDGET: Final = 12
LEADING_TERMS: Final = 40
SIMILARITY_THRESHOLD: Final = 0.4
MIN_SHARED_TERMS: Final = 2
CANDIDATE_POOL: Final = 10
MAX_RELATED: Final = 5
_RECALL_ROWS: Final = 200

_TOKEN = re.compile(r"[^\W_]+")
STOPWORDS: Final = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been before being
    below between both but by can cannot could did do does doing don down during each either else etc
    ever every few for from further get gets got had has have having he her here hers herself him himself
    his how however i if in into is isn it its itself just let like may me might more most must my myself
    no nor not now of off often on once one only or other ought our ours ourselves out over own per
    please same shall she should since so some such than that the their theirs them themselves then there
    these they this those though through thus to too under until up upon us use used uses using very via
    was we were what when where whether which while who whom whose why will with within without would
    yes yet you your yours yourself yourselves
    http https www com org html md note notes see
    """.split()
)


@dataclass(frozen=True)
class RelatedNote:
    """A content-similar note: its name, a snippet, and the share of the seed it holds (0–1)."""

    name: str
    snippet: str
    score: float


def stem(token: str) -> str:
    """A casefolded token with a final ``ing``/``ed``/``s`` cut (when 4+ chars remain; not ``ss``)."""
    word = token.casefold()
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _significant(token: str) -> bool:
    """Not a stopword and at least 3 chars (so also no number under 3 digits)."""
    return len(token) >= 3 and token.casefold() not in STOPWORDS


def body_text(content: str) -> str:
    """``content`` without its frontmatter and metadata markers (what the seed is drawn from)."""
    lines = split_lines(content)
    fm = parse_frontmatter(lines)
    return normalise("\n".join(lines[fm.end_line :]))


def stems(text: str) -> set[str]:
    """Every stem of ``text`` (no stopword filtering: a note either holds a seed stem or not)."""
    return {stem(token) for token in _TOKEN.findall(text)}


def seed_terms(content: str, budget: int = SEED_TERM_BUDGET) -> list[str]:
    """The leading significant stems of ``content``, at most ``budget`` (rules in the module docstring)."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(body_text(content)):
        if not _significant(token):
            continue
        seen.setdefault(stem(token), None)
        if len(seen) >= budget:
            break
    return list(seen)


def choose_seed(store: VaultStore, content: str,
                counts: Callable[[list[str]], Mapping[str, int] | None] | None = None) -> list[str]:
    """The rarest of the leading stems, in order of appearance (module docstring, step 1). ``counts``
    gives the stems' counts in the vault (default: ``store.term_counts``; the reflection's plan passes
    a memo of them); when it cannot, the first stems."""
    leading = seed_terms(content, LEADING_TERMS)
    if len(leading) <= SEED_TERM_BUDGET:
        return leading
    found = (counts or store.term_counts)(leading)
    if found is None:
        return leading[:SEED_TERM_BUDGET]
    rank = {term: i for i, term in enumerate(leading)}
    rarest = sorted(leading, key=lambda t: (found[t], rank[t]))[:SEED_TERM_BUDGET]
    return sorted(rarest, key=rank.__getitem__)


def required_shared(seed_size: int) -> int:
    """How many seed stems a candidate must hold to be related."""
    if seed_size <= MIN_SHARED_TERMS:
        return seed_size
    return max(MIN_SHARED_TERMS, math.ceil(SIMILARITY_THRESHOLD * seed_size - 1e-9))


def _candidates(store: VaultStore, seed: list[str], exclude: set[str]) -> list[tuple[str, str]]:
    """(name, matching chunk text) of the first CANDIDATE_POOL notes the OR-match recalls."""
    found: dict[str, str] = {}
    for name, text in store.recall(seed, _RECALL_ROWS):
        if name.startswith(RETIRED_PREFIX) or is_reserved(name) or name in exclude or name in found:
            continue
        found[name] = text
        if len(found) >= CANDIDATE_POOL:
            break
    return list(found.items())


@dataclass(frozen=True)
class Scored:
    """A recalled candidate: its name, the chunk that matched, and the seed stems its full body holds."""

    name: str
    chunk: str
    held: frozenset[str]

    @property
    def shared(self) -> int:
        """How many seed stems the candidate holds."""
        return len(self.held)


def score_candidates(
    store: VaultStore,
    content: str,
    *,
    exclude: set[str] | None = None,
    seed: list[str] | None = None,
) -> tuple[list[str], list[Scored]]:
    """``(seed, candidates)``: the capped seed of ``content`` (step 1; or ``seed`` when given) and
    every note the recall query finds (step 2, at most CANDIDATE_POOL, retired notes and
    ``exclude`` left out), each with the number of seed stems found among the stems of its
    *full* note file (step 3's measure, no bar). An unreadable candidate file is judged on the
    chunk that matched. Never raises for user content."""
    seed = choose_seed(store, content) if seed is None else seed
    if not seed:
        return [], []
    scored: list[Scored] = []
    for name, chunk in _candidates(store, seed, exclude or set()):
        try:
            data = store.read(name)
        except (OSError, GatewayError):
            data = None
        full = chunk if data is None else data.decode("utf-8", errors="replace")
        held = stems(body_text(full))
        scored.append(Scored(name, chunk, frozenset(term for term in seed if term in held)))
    return seed, scored


def find_similar(
    store: VaultStore,
    content: str,
    *,
    exclude: set[str] | None = None,
) -> list[RelatedNote]:
    """The notes of the vault that look like near-duplicates of ``content`` (module docstring).

    ``exclude`` holds names never to return. An unreadable candidate file is judged on the
    chunk that matched. Never raises for user content.
    """
    seed, scored = score_candidates(store, content, exclude=exclude)
    if not seed:
        return []
    need = required_shared(len(seed))
    related = [
        RelatedNote(c.name, make_snippet(c.chunk, tuple(seed)), round(c.shared / len(seed), 3))
        for c in scored
        if c.shared >= need
    ]
    related.sort(key=lambda r: (-r.score, r.name))
    return related[:MAX_RELATED]
