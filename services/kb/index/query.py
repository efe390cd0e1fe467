"""User query → safe FTS5 terms. No user text ever reaches MATCH unquoted.

Rules:

- The query (first 1,000 chars, NUL and control chars removed) is split on
  whitespace into *pieces*. Each piece that holds a letter or a digit is one
  FTS5 phrase: its own text in double quotes (``well-known`` → ``"well-known"``,
  ``foo:bar`` → ``"foo:bar"``, a ``"`` doubled), which FTS5 splits into tokens
  with the very tokenizer that split the chunks. So quotes,
  ``AND``/``OR``/``NOT``/``NEAR``, hyphens, parentheses, colons and ``^`` are
  plain text (``AND`` searches the word "and"), and a piece's tokens are the
  tokens its text has in a chunk, whatever the tokenizer keeps in a token:
  combining marks (a decomposed ``Überprüfung``), private-use characters, the
  characters unicode61's Unicode 6.1 tables do not know (``hmm🤔`` is one
  token), every non-ASCII character under ``ascii`` (whose pieces are split
  on ASCII whitespace only, as its tokens are). (Splitting the piece
  into words here instead breaks on each of those: the phrase no longer
  matches the text it was typed from.) A piece ending in ``*`` is a prefix
  query (``deploy*`` → ``"deploy"*``). A piece with no letter or digit
  (``*``, ``()``, an emoji) is dropped; a query with no term left returns no
  hit. At most 32 terms.
- Terms combine as AND with OR fallback: ``search`` ranks the chunks that match
  every term first, then those that match some, each group by bm25. The OR
  fallback only runs when fewer chunks than asked for match every term, and two
  kinds of term do not drive it (they still have to match for a chunk to count
  as matching every term):

  - a bare operator word, ``and``/``or``/``not``/``near`` in any case (a piece
    that is only that word, not a prefix ``and*`` nor part of a phrase): users
    type them as operators, and as words they match nearly every chunk, so
    ``zebra AND yak`` falls back to chunks with zebra or yak, never to chunks
    that merely contain "and" (``fallback_terms``). A query made only of
    operator words keeps them all;
  - a common term: one that matches more than ``search.COMMON_CHUNKS`` (2,000)
    chunks is left out when the rarer terms alone match at least as many chunks
    as asked for (so the fallback still fills the limit whenever the full OR
    would have). Its chunks would rank low anyway (bm25's idf is small) and
    scoring them is what made the OR fallback slow.

  So a query never breaks and never loses its all-terms matches; only the
  order and choice of partial matches after them can differ from a plain OR.
- CJK, Thai (and Lao, Khmer, Myanmar, Hangul) have no spaces between words, and
  unicode61 makes a whole run of such characters one token, so a two-character
  word inside a longer run never matches. Such runs are cut out of the pieces
  and routed to a second FTS5 table with the trigram tokenizer that holds only
  the chunks containing those scripts (``kb_chunks_cjk``): a run of 3+ chars is
  a trigram phrase; a run of 1–2 chars (below trigram's reach) is a ``LIKE``
  substring scan over those chunks only. The text on either side of a run is
  a phrase of its own (``foo-東京-bar`` → ``"foo-"``, ``"-bar"``: the chunk holds
  ``東京`` between them). This works under every configured
  tokenizer, so a mixed query (``東京 deploy``) needs no special setting.
- Under the ``trigram`` tokenizer every letter/digit token is its own term
  (trigram matches substrings, so ``"well known"`` would not find ``well-known``);
  a token shorter than 3 chars becomes a ``LIKE`` substring scan over all chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_QUERY_CHARS: Final = 1000
MAX_TERMS: Final = 32

UNSEGMENTED: Final = re.compile(
    "["
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3005\u3040-\u30ff\u31f0-\u31ff"  # 々, Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0003134f"  # CJK extensions B–G
    "]+"
)
OPERATOR_WORDS: Final = frozenset({"and", "or", "not", "near"})
_LETTER = re.compile(r"[^\W_]")
_ASCII_SPACE = re.compile(r"[\t\n\v\f\r ]+")
# A word (for the trigram tokenizer's terms and for placing snippets): letters and digits, with the
# combining marks inside it (a decomposed "é" stays in its word).
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_WORD = re.compile(rf"[^\W_](?:[^\W_]|[{_MARKS}])*")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def has_unsegmented(text: str) -> bool:
    """Whether ``text`` holds CJK/Thai-like characters (it then goes to ``kb_chunks_cjk``)."""
    return UNSEGMENTED.search(text) is not None


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@dataclass(frozen=True)
class SubstringTerm:
    """A term too short for trigram: ``text`` is LIKE-scanned; ``cjk_only`` limits the scan."""

    text: str
    cjk_only: bool


@dataclass(frozen=True)
class QueryPlan:
    """What one user query becomes.

    ``fts_terms`` are MATCH-ready for ``kb_chunks_fts``, ``trigram_terms`` for
    ``kb_chunks_cjk``; ``words`` are the casefolded bits used to place snippets.
    """

    fts_terms: tuple[str, ...] = ()
    trigram_terms: tuple[str, ...] = ()
    substrings: tuple[SubstringTerm, ...] = ()
    words: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.fts_terms or self.trigram_terms or self.substrings)

    @property
    def term_count(self) -> int:
        return len(self.fts_terms) + len(self.trigram_terms) + len(self.substrings)


def like_pattern(text: str) -> str:
    """A LIKE pattern (ESCAPE '\\') matching ``text`` anywhere."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fallback_terms(terms: tuple[str, ...]) -> tuple[str, ...]:
    """The terms that drive the OR fallback (rule in the module docstring): all but bare operator words."""
    kept = tuple(term for term in terms if term[1:-1].casefold() not in OPERATOR_WORDS)
    return kept or terms


def build_plan(query: str, tokenizer: str) -> QueryPlan:
    """Turn any user string into a QueryPlan (rules in the module docstring). Never raises."""
    cleaned = _CONTROL.sub(" ", query[:MAX_QUERY_CHARS])
    fts: list[str] = []
    trigram: list[str] = []
    substrings: list[SubstringTerm] = []
    words: list[str] = []

    def add(bucket: list[str], term: str) -> None:
        if term not in bucket:
            bucket.append(term)

    # The ascii tokenizer keeps non-ASCII spaces in a token too: only ASCII whitespace parts pieces there.
    pieces = [p for p in _ASCII_SPACE.split(cleaned) if p] if tokenizer == "ascii" else cleaned.split()
    for piece in pieces:
        prefix = piece.endswith("*")
        if piece.isascii():  # no CJK/Thai run can be in it
            parts = [piece]
        else:
            for run in UNSEGMENTED.findall(piece):
                words.append(run.casefold())
                if len(run) >= 3:
                    add(trigram, _quote(run))
                elif SubstringTerm(run, True) not in substrings:
                    substrings.append(SubstringTerm(run, True))
            parts = UNSEGMENTED.split(piece)  # the text on each side of a run is a phrase of its own
        parts = [part for part in parts if _LETTER.search(part)]
        for index, part in enumerate(parts):
            tokens = _WORD.findall(part)
            words.extend(token.casefold() for token in tokens)
            if tokenizer == "trigram":
                for token in tokens:
                    if len(token) >= 3:
                        add(fts, _quote(token))
                    elif SubstringTerm(token, False) not in substrings:
                        substrings.append(SubstringTerm(token, False))
            elif index + 1 == len(parts) and prefix:
                add(fts, _quote(part.rstrip("*")) + "*")
            else:
                add(fts, _quote(part))
    budget = MAX_TERMS
    fts = fts[:budget]
    trigram = trigram[: max(0, budget - len(fts))]
    substrings = substrings[: max(0, budget - len(fts) - len(trigram))]
    return QueryPlan(tuple(fts), tuple(trigram), tuple(substrings), tuple(dict.fromkeys(words)))
