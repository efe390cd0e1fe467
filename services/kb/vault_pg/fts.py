"""Searching the PostgreSQL vault's notes: the statements, and the user's text made safe for them.

A user's query never reaches PostgreSQL's tsquery parser as syntax: it is a bound parameter of
``websearch_to_tsquery('simple', ...)`` (the OR fallback: ``phraseto_tsquery`` of each word), which
reads any text (quotes, ``-``, ``or``, ``:*``, ``!``, backslashes) as words and phrases and never raises a syntax error; what is left without a word matches
nothing. The trigram path (CJK and Thai, which have no spaces between words, and vaults whose tokenizer
is ``trigram``) is a substring match (``LIKE``/``ILIKE``, every term: ``trigram``) over the notes' bodies
that the ``notes_trigram`` index serves for a term of three characters or more; ``%``, ``_`` and the escape
character in the user's text are escaped. Prefix terms (``prefix_query``: the near-duplicate check's
recall and vocabulary) keep only their letters and digits and are quoted. PostgreSQL text cannot hold
NUL, so a query with one is InvalidArgument here rather than an error from the driver. The statements run
with ``search_path`` set to the vault's schema; each answers a note's name, whether it is the retired twin,
its rank, head and body, and leaves out a retired twin whose live note exists (the twin rule). Words
combine as in the SQLite vault: every word, then (``full_text_any``, ``trigram`` with ``skip``) the OR
fallback for the rest of the limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from gateway.errors import InvalidArgument
from services.kb.index.query import OPERATOR_WORDS, has_unsegmented

MAX_QUERY_CHARS: Final = 1000  # as the SQLite vault's (services.kb.index.query)
_NOT_WORD = re.compile(r"[\W_]+")

_TWIN_RULE: Final = (
    "NOT (n.retired AND EXISTS (SELECT 1 FROM notes AS l "
    "WHERE l.project = n.project AND l.name = n.name AND NOT l.retired))"
)
_NOT_SKIPPED: Final = "n.name <> ALL(%(skip)s::text[])"
_ORDER: Final = "ORDER BY rank DESC, n.name, n.retired LIMIT %(limit)s"
# Parameters: project, query (``query_text``), limit. Ranked by ts_rank_cd (cover density: terms close
# together rank higher), then by name.
FULL_TEXT_SQL: Final = (
    "SELECT n.name, n.retired, ts_rank_cd(n.search, q.query) AS rank, n.head, n.body "
    "FROM notes AS n, websearch_to_tsquery('simple', %(query)s) AS q(query) "
    f"WHERE n.project = %(project)s AND n.search @@ q.query AND {_TWIN_RULE} {_ORDER}"
)
# Parameters: project, the prefix tsqueries (``prefix_term``) as a text array. One count per term, in the
# array's order, each a bitmap scan of the ``notes_search`` GIN index (a count over the project's rows with
# every term's match evaluated on every row read each note's tsvector: hundreds of ms at 2,000 notes).
TERM_COUNTS_SQL: Final = (
    "SELECT (SELECT count(*) FROM notes WHERE project = %s AND search @@ to_tsquery('simple', t.query)) "
    "FROM unnest(%s::text[]) WITH ORDINALITY AS t(query, i) ORDER BY t.i"
)

Statement = tuple[str, dict[str, object]]


def search_words(query: str) -> tuple[str, ...]:
    """The query's words (split at whitespace), casefolded: the trigram path's terms and the snippets' words."""
    return tuple(word.casefold() for word in query.split())


def fallback_words(words: Sequence[str]) -> tuple[str, ...]:
    """The words that drive the OR fallback: all but bare operator words (``and``, ``or``, ``not``,
    ``near``), as the SQLite vault's rule (``services.kb.index.query``); all of them when only those."""
    return tuple(word for word in words if word.casefold() not in OPERATOR_WORDS) or tuple(words)


def full_text_any(words: Sequence[str], skip: Sequence[str]) -> Statement | None:
    """The OR fallback of the full-text path (parameters: project, limit): the notes holding any of
    ``fallback_words`` (each one ``phraseto_tsquery``), none of the negated ones (``-word``, which
    ``websearch_to_tsquery`` reads as NOT), none named in ``skip``. None when no word is left to want."""
    kept = fallback_words(words)
    wanted = [word for word in kept if not word.startswith("-")]
    if not wanted:
        return None
    negated = [word[1:] for word in kept if word.startswith("-") and len(word) > 1]
    params: dict[str, object] = {f"w{i}": word for i, word in enumerate(wanted)}
    params.update({f"n{i}": word for i, word in enumerate(negated)})
    query = " || ".join(f"phraseto_tsquery('simple', %(w{i})s)" for i in range(len(wanted)))
    query += "".join(f" && !!phraseto_tsquery('simple', %(n{i})s)" for i in range(len(negated)))
    sql = (
        "SELECT n.name, n.retired, ts_rank_cd(n.search, q.query) AS rank, n.head, n.body "
        f"FROM notes AS n, (SELECT {query}) AS q(query) "
        f"WHERE n.project = %(project)s AND n.search @@ q.query AND {_NOT_SKIPPED} AND {_TWIN_RULE} {_ORDER}"
    )
    return sql, {**params, "skip": list(skip)}


def trigram(words: Sequence[str], *, skip: Sequence[str] | None = None) -> Statement:
    """The trigram path's statement (parameters: project, limit): the notes holding every word as a
    substring, or (``skip`` given: the OR fallback) any of ``fallback_words``, none named in ``skip``.

    A word with no upper or lower case (CJK, Thai, digits) is matched with ``LIKE``, others with ``ILIKE``;
    the ``notes_trigram`` index serves a word of three characters or more. A note can hold a CJK or Thai
    word only if it holds such text at all: the statement then keeps to the notes whose ``unsegmented``
    column is true (the ``notes_unsegmented`` partial index), which a word of one or two characters
    (no trigram) would otherwise have to scan every note's body for. Ranked by how often the words occur
    per 2,000 characters of body (a term-frequency rank read in one pass over each body; similarity to
    the whole body cost ~0.5 ms a candidate), then by name."""
    terms = tuple(words) if skip is None else fallback_words(words)
    params: dict[str, object] = {}
    matches, counts = [], []
    for i, word in enumerate(terms):
        caseless = word.lower() == word.upper()
        params[f"p{i}"], params[f"t{i}"] = like_pattern(word), word
        matches.append(f"n.body {'LIKE' if caseless else 'ILIKE'} %(p{i})s")
        body, term = ("n.body", f"%(t{i})s") if caseless else ("lower(n.body)", f"lower(%(t{i})s)")
        counts.append(f"(length({body}) - length(replace({body}, {term}, ''))) / length({term})")
    scripts = [has_unsegmented(word) for word in terms]
    narrowed = any(scripts) if skip is None else all(scripts)
    where = (" AND " if skip is None else " OR ").join(matches) or "false"
    rank = f"(({' + '.join(counts) or '0'}) / (1 + length(n.body) / 2000.0))::float8"
    sql = (
        f"SELECT n.name, n.retired, {rank} AS rank, n.head, n.body FROM notes AS n "
        f"WHERE n.project = %(project)s{' AND n.unsegmented' if narrowed else ''} AND ({where})"
        f"{'' if skip is None else ' AND ' + _NOT_SKIPPED} AND {_TWIN_RULE} {_ORDER}"
    )
    return sql, params if skip is None else {**params, "skip": list(skip)}


def query_text(text: str) -> str:
    """The user's query as it may be bound: InvalidArgument for a NUL or more than ``MAX_QUERY_CHARS``."""
    if "\x00" in text:
        raise InvalidArgument("a search query cannot contain a NUL character")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"a search query is at most {MAX_QUERY_CHARS} characters; this one is {len(text)}")
    return text


def like_pattern(term: str) -> str:
    """``LIKE`` pattern matching ``term`` anywhere: its ``\\``, ``%`` and ``_`` escaped (the default escape ``\\``)."""
    escaped = query_text(term).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def prefix_term(term: str) -> str | None:
    """``term`` as one quoted prefix tsquery (``'word':*``), its letters and digits only; None when none is left."""
    word = _NOT_WORD.sub("", term)
    return f"'{word}':*" if word else None


def prefix_query(terms: list[str]) -> str | None:
    """The OR of ``prefix_term`` of each term (for ``to_tsquery('simple', ...)``); None when no term has a word."""
    found = [p for p in map(prefix_term, terms) if p is not None]
    return " | ".join(found) or None
