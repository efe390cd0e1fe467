"""User query → safe FTS5 terms. No user text ever reaches MATCH unquoted.

Rules:

- **Words and the cut.** The query is split into *words* at ``chunking.BREAKS``
  (space and the ASCII control characters: a boundary under every tokenizer, and
  where the indexer cuts a long line). Words are taken in order while they fit
  in ``MAX_QUERY_CHARS`` (1,000) characters, one space counted between two; the
  first word that does not fit ends the query (a word is never cut to fit).
  A word longer than ``word_chars`` (1,000, or the index's chunk length in
  characters when that is shorter: ``word_chars``) is searched by its first
  ``word_chars`` characters, as a prefix: its last token may go on in the text.
  The indexer starts such a word's own segment (``chunking``), so those
  characters are whole in one chunk: a 1,200-character base64 blob is found by
  its own text, and a query of any length never fails. Under ``porter`` the
  kept part goes back to its last character that is not a letter, digit or
  combining mark, when there is one (the stemmer would change a cut token).
- Each word is split into *pieces* at whitespace (ASCII whitespace only under
  ``ascii``, whose tokens hold every non-ASCII character). Each piece that
  holds a letter or a digit is one FTS5 phrase: its own text in double quotes
  (``well-known`` → ``"well-known"``, ``foo:bar`` → ``"foo:bar"``, a ``"``
  doubled), which FTS5 splits into tokens
  with the very tokenizer that split the chunks. So quotes,
  ``AND``/``OR``/``NOT``/``NEAR``, hyphens, parentheses, colons and ``^`` are
  plain text (``AND`` searches the word "and"), and a piece's tokens are the
  tokens its text has in a chunk, whatever the tokenizer keeps in a token:
  combining marks (a decomposed ``Überprüfung``), private-use characters, the
  characters unicode61's Unicode 6.1 tables do not know (``hmm🤔`` is one
  token), every non-ASCII character under ``ascii``. (Splitting the piece
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
  the chunks containing those scripts (``kb_chunks_cjk``), together with the
  characters glued to them up to the nearest ASCII punctuation (``deploy東京``
  is one unicode61 token, so ``deploy`` alone would not match it; the trigram
  table matches the whole stretch as a substring): a stretch of 3+ chars is
  a trigram phrase; one of 1–2 chars (below trigram's reach) is a ``LIKE``
  substring scan over those chunks only. The text on either side of a stretch is
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

from services.kb.index.chunking import BREAKS, CHARS_PER_TOKEN

MAX_QUERY_CHARS: Final = 1000
MAX_TERMS: Final = 32
PORTER_MAX_BYTES: Final = 64  # FTS5's porter stemmer leaves longer tokens as they are

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
# A word (for the trigram tokenizer's terms and for placing snippets): letters and digits, with the
# combining marks inside it (a decomposed "é" stays in its word).
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_WORD = re.compile(rf"[^\W_](?:[^\W_]|[{_MARKS}])*")
_SPAN = re.compile(f"[^{BREAKS}]+")  # a word of the query (module docstring)
# A stretch that may hold a CJK/Thai run: what lies between ASCII punctuation (a separator under every tokenizer).
_UNPUNCTUATED = re.compile(r"[^\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+")
_NOT_WORD = re.compile(rf"[^\w{_MARKS}]|_")  # not a letter, digit or combining mark: where porter's cut goes back to


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


def word_chars(chunking: str | None) -> int:
    """The longest word a query searches whole, for an index whose ``kb_meta`` ``chunking`` is
    ``chunking`` (``"<chunkTokens>/<chunkOverlap>"``): ``MAX_QUERY_CHARS``, or a chunk's length in
    characters when that is shorter (the indexer keeps that many of a long word in one chunk)."""
    try:
        tokens = int((chunking or "").split("/", 1)[0])
    except ValueError:
        return MAX_QUERY_CHARS
    return min(MAX_QUERY_CHARS, max(1, tokens) * CHARS_PER_TOKEN)


def query_words(query: str, limit: int = MAX_QUERY_CHARS) -> list[tuple[str, bool]]:
    """The words of ``query`` that a search looks for, each with whether it was cut: to ``limit``
    characters, or to the room left of ``MAX_QUERY_CHARS`` (module docstring, "Words and the
    cut"). Reads no further than it keeps."""
    limit = max(1, min(limit, MAX_QUERY_CHARS))
    words: list[tuple[str, bool]] = []
    room = MAX_QUERY_CHARS + 1  # one space before each word but the first
    for match in _SPAN.finditer(query):
        room -= 1
        word = match.group()
        keep = min(limit, room)
        if len(word) > keep:
            words.append((word[:keep], True))
            if keep < limit:
                break  # the query's 1,000 characters end inside this word
            room -= keep
        else:
            words.append((word, False))
            room -= len(word)
        if room <= 1:
            break
    return words


def _stretches(piece: str) -> tuple[list[str], list[str]]:
    """The CJK/Thai stretches of ``piece`` (module docstring) and the text between them (one more than them)."""
    stretches: list[str] = []
    parts: list[str] = []
    at = 0
    for match in _UNPUNCTUATED.finditer(piece):
        if UNSEGMENTED.search(match.group()):
            stretches.append(match.group())
            parts.append(piece[at : match.start()])
            at = match.end()
    parts.append(piece[at:])
    return stretches, parts


def _porter_cut(word: str, whole_limit: bool) -> str:
    """A cut word as porter searches it ("" to leave it out): up to its last character that is not
    a letter, digit or mark, when that leaves a letter or digit. Else as it is when it was cut at
    ``word_chars`` (the indexer's segment holds it cut at the same place, stemmed alike) or is over
    ``PORTER_MAX_BYTES`` (porter leaves it as it is); a shorter token cut by the query's length would
    be stemmed as if it were a word (``relationa`` is not a prefix of ``relational``'s stem ``relat``)."""
    last = None
    for last in _NOT_WORD.finditer(word):
        pass
    if last is not None and _LETTER.search(word, 0, last.start()):
        return word[: last.end()]
    return word if whole_limit or len(word.encode()) > PORTER_MAX_BYTES else ""


def build_plan(query: str, tokenizer: str, word_limit: int = MAX_QUERY_CHARS) -> QueryPlan:
    """Turn any user string into a QueryPlan (rules in the module docstring). Never raises.

    ``word_limit``: ``word_chars`` of the index searched (words longer are searched by a prefix).
    """
    word_limit = max(1, min(word_limit, MAX_QUERY_CHARS))
    fts: list[str] = []
    trigram: list[str] = []
    substrings: list[SubstringTerm] = []
    words: list[str] = []

    def add(bucket: list[str], term: str) -> None:
        if term not in bucket:
            bucket.append(term)

    for word, cut in query_words(query, word_limit):
        if cut and tokenizer == "porter":
            word = _porter_cut(word, len(word) == word_limit)
        # The ascii tokenizer keeps non-ASCII spaces in a token too: only ASCII whitespace parts pieces there.
        pieces = [word] if tokenizer == "ascii" else word.split()
        for number, piece in enumerate(pieces):
            # A piece the cut ended goes on in the text: its last token is a prefix.
            prefix = piece.endswith("*") or (cut and number + 1 == len(pieces))
            if piece.isascii():  # no CJK/Thai run can be in it
                parts = [piece]
            else:
                stretches, parts = _stretches(piece)
                for stretch in stretches:
                    words.append(stretch.casefold())
                    if len(stretch) >= 3:
                        add(trigram, _quote(stretch))
                    elif SubstringTerm(stretch, True) not in substrings:
                        substrings.append(SubstringTerm(stretch, True))
            last = len(parts) - 1
            for index, part in enumerate(parts):
                if not _LETTER.search(part):
                    continue
                tokens = _WORD.findall(part)
                words.extend(token.casefold() for token in tokens)
                if tokenizer == "trigram":
                    for token in tokens:
                        if len(token) >= 3:
                            add(fts, _quote(token))
                        elif SubstringTerm(token, False) not in substrings:
                            substrings.append(SubstringTerm(token, False))
                elif index == last and prefix:
                    add(fts, _quote(part.rstrip("*")) + "*")
                else:
                    add(fts, _quote(part))
    budget = MAX_TERMS
    fts = fts[:budget]
    trigram = trigram[: max(0, budget - len(fts))]
    substrings = substrings[: max(0, budget - len(fts) - len(trigram))]
    return QueryPlan(tuple(fts), tuple(trigram), tuple(substrings), tuple(dict.fromkeys(words)))
