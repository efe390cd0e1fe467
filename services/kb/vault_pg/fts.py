"""Searching the PostgreSQL vault's notes: the statements, and the user's text made safe for them.

A user's query never reaches PostgreSQL's tsquery parser as syntax: it is a bound parameter of
``websearch_to_tsquery('simple', ...)``, which reads any text (quotes, ``-``, ``or``, ``:*``, ``!``,
backslashes) as words and phrases and never raises a syntax error; what is left without a word matches
nothing. The trigram path (CJK and Thai, which have no spaces between words, and vaults whose tokenizer
is ``trigram``) is a substring match (``ILIKE``, every term) over the notes' bodies that the
``notes_trigram`` index serves for a term of three characters or more; ``%``, ``_`` and the escape
character in the user's text are escaped. Prefix terms (``prefix_query``: the near-duplicate check's
recall and vocabulary) keep only their letters and digits and are quoted. PostgreSQL text cannot hold
NUL, so a query with one is InvalidArgument here rather than an error from the driver. The statements run
with ``search_path`` set to the vault's schema; each answers a note's name, whether it is the retired twin,
its rank, head and body, and leaves out a retired twin whose live note exists (the twin rule).
"""

from __future__ import annotations

import re
from typing import Final

from gateway.errors import InvalidArgument

MAX_QUERY_CHARS: Final = 1000  # as the SQLite vault's (services.kb.index.query)
_NOT_WORD = re.compile(r"[\W_]+")

_TWIN_RULE: Final = (
    "NOT (n.retired AND EXISTS (SELECT 1 FROM notes AS l "
    "WHERE l.project = n.project AND l.name = n.name AND NOT l.retired))"
)
# Parameters: project, query (``query_text``), limit. Ranked by ts_rank_cd (cover density: terms close
# together rank higher), then by name.
FULL_TEXT_SQL: Final = (
    "SELECT n.name, n.retired, ts_rank_cd(n.search, q.query) AS rank, n.head, n.body "
    "FROM notes AS n, websearch_to_tsquery('simple', %(query)s) AS q(query) "
    f"WHERE n.project = %(project)s AND n.search @@ q.query AND {_TWIN_RULE} "
    "ORDER BY rank DESC, n.name, n.retired LIMIT %(limit)s"
)

# Parameters: project, the prefix tsqueries (``prefix_term``) as a text array. One count per term, in the
# array's order, each a bitmap scan of the ``notes_search`` GIN index (a count over the project's rows with
# every term's match evaluated on every row read each note's tsvector: hundreds of ms at 2,000 notes).
TERM_COUNTS_SQL: Final = (
    "SELECT (SELECT count(*) FROM notes WHERE project = %s AND search @@ to_tsquery('simple', t.query)) "
    "FROM unnest(%s::text[]) WITH ORDINALITY AS t(query, i) ORDER BY t.i"
)


def trigram_sql(terms: int) -> str:
    """The statement matching every one of ``terms`` patterns (parameters: project, query, p0..p<n-1>,
    limit), ranked by trigram similarity of the query to the body's closest extent, then by name."""
    likes = " AND ".join(f"n.body ILIKE %(p{i})s" for i in range(terms)) or "false"
    return (
        "SELECT n.name, n.retired, word_similarity(%(query)s, n.body) AS rank, n.head, n.body "
        f"FROM notes AS n WHERE n.project = %(project)s AND {likes} AND {_TWIN_RULE} "
        "ORDER BY rank DESC, n.name, n.retired LIMIT %(limit)s"
    )


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
