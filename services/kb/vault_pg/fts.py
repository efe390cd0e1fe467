"""Searching the PostgreSQL vault's notes: the statements, and the user's text made safe for them.

A user's query never reaches PostgreSQL's tsquery parser as syntax: it is a bound parameter of
``websearch_to_tsquery('simple', ...)``, which reads any text (quotes, ``-``, ``or``, ``:*``, ``!``,
backslashes) as words and phrases and never raises a syntax error; what is left without a word matches
nothing. The trigram path (CJK and Thai, which have no spaces between words, and vaults whose tokenizer
is ``trigram``) is a substring match (``LIKE``) over the notes' bodies that the ``notes_trigram`` index
serves for a term of three characters or more; ``%``, ``_`` and the escape character in the user's text
are escaped. PostgreSQL text cannot hold NUL, so a query with one is InvalidArgument here rather than
an error from the driver. The statements run with ``search_path`` set to the vault's schema.
"""

from __future__ import annotations

from typing import Final

from gateway.errors import InvalidArgument

MAX_QUERY_CHARS: Final = 1000  # as the SQLite vault's (services.kb.index.query)

# Parameters: project, query (``query_text``), limit. Ranked by ts_rank_cd (cover density: terms close
# together rank higher), then by name.
FULL_TEXT_SQL: Final = (
    "SELECT n.name, n.retired, ts_rank_cd(n.search, q.query) AS rank "
    "FROM notes AS n, websearch_to_tsquery('simple', %(query)s) AS q(query) "
    "WHERE n.project = %(project)s AND n.search @@ q.query "
    "ORDER BY rank DESC, n.name LIMIT %(limit)s"
)

# Parameters: project, term (``query_text``), pattern (``like_pattern`` of it), limit. Ranked by trigram similarity of the term to the
# body's closest extent (word_similarity), then by name.
TRIGRAM_SQL: Final = (
    "SELECT n.name, n.retired, word_similarity(%(term)s, n.body) AS rank "
    "FROM notes AS n WHERE n.project = %(project)s AND n.body LIKE %(pattern)s "
    "ORDER BY rank DESC, n.name LIMIT %(limit)s"
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
