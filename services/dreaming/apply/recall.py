"""The recall check: every entry a run removed must still be found by Search.

After a run that changed anything, the KB reindexes the files the run wrote (it
names them, so the KB need not wait for its file watch); then
each removed block is split into entries (``sections.entries``) and each entry
is searched for with its own distinctive words (``query_for``): words as Search
reads a query, split at spaces and ASCII control characters only, so each is
text the index holds as it stands (``hmm🤔``, ``deploy東京``, a 1,200-character
key); up to ``QUERY_WORDS`` of the longest, in at most Search's 1,000 characters,
stop words and one- or two-letter words left out. The entry is
*found* when a hit's file holds the entry's text (whitespace aside) in the
hit's lines or, for an entry that straddles two chunks, anywhere in that file.
An entry with no searchable word (a rule, a lone symbol) has nothing to find
and passes. The searches run concurrently, at most SEARCHES_AT_ONCE in flight. The caller restores the pre-image of a file whose removals are not
all found.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from services.dreaming.apply import sections
from services.dreaming.apply.commit import PRUNED, Pruned
from services.dreaming.apply.files import Unsafe, read_text
from services.dreaming.model.archive import Hit, Index

QUERY_WORDS = 6
# Search reads a query's words up to 1,000 characters (docs/concepts/archive.md "Knowledge archive (KB)" › Long words).
QUERY_CHARS = 1000
SEARCH_LIMIT = 20
SEARCHES_AT_ONCE = 8  # in flight to the KB at once (a pass may move thousands of entries)
_WORD = re.compile(r"[^\x00-\x20\x7f]+")  # a word as Search splits a query: between spaces and ASCII controls
# ``sections.entries`` splits lines as ``str.splitlines``, also after NEL, LS and PS (which stay in the line), and
# joins them with "\n": the file holds no "\n" there, and under ``ascii`` those characters are inside a token.
_JOINED = re.compile(r"([\x85\u2028\u2029])\n")
STOP_WORDS = frozenset(
    "the and for are but not you all any can had her was one our out has him his how its may new now old see two who "
    "did get let put say she too use that with have this will your from they know want been good much some time very "
    "when come here just like long make many more only over such take than them well were what into also back after "
    "most other which their there these then would about could should where while every each being those".split()
)


@dataclass(frozen=True)
class Missing:
    op_id: str
    file: str
    entry: str
    query: str


def query_for(entry: str) -> str:
    """The entry's distinctive words, longest first (ties in text order), given in text order; ""
    when it has none.

    A word is a run of text between spaces and ASCII control characters, kept as it stands (no
    case folding: the ``ascii`` tokenizer folds ASCII only), which is how Search splits a query
    and how the indexer cuts a long line: so each word is found by its own text, under every
    tokenizer and in every script. Its letters and digits decide: a word with fewer than three
    (unless CJK-wide) or that is a stop word is left out. Words that would take the query past
    ``QUERY_CHARS`` are left out, but the longest one is always taken (Search cuts a word longer
    than that to a prefix of itself)."""
    found: dict[str, tuple[int, int]] = {}  # word: (letters and digits, position)
    for position, match in enumerate(_WORD.finditer(_JOINED.sub(r"\1", entry))):
        word = match.group(0)
        key = "".join(ch for ch in word if ch.isalnum()).casefold()
        wide = any(ord(ch) >= 0x2E80 for ch in key)  # CJK and other scripts where two chars are a word
        if key and (len(key) >= 3 or wide) and key not in STOP_WORDS and word not in found:
            found[word] = (len(key), position)
    picked: list[str] = []
    used = -1
    for word in sorted(found, key=lambda w: (-found[w][0], found[w][1])):
        if len(picked) == QUERY_WORDS:
            break
        if picked and used + 1 + len(word) > QUERY_CHARS:
            continue
        picked.append(word)
        used += 1 + len(word)
    return " ".join(sorted(picked, key=lambda w: found[w][1]))


def _normalized(text: str) -> str:
    return " ".join(text.split())


def _holds(workspace: Path, hit: Hit, wanted: str) -> bool:
    try:
        text = read_text(workspace, hit.path)
    except (Unsafe, OSError):
        return False
    lines = text.splitlines()
    if wanted in _normalized("\n".join(lines[max(0, hit.start_line - 1) : hit.end_line])):
        return True
    return wanted in _normalized(text)


async def check(
    index: Index, agent_id: str, workspace: Path, pruned: Sequence[Pruned], written: Sequence[str] | None = None
) -> list[Missing]:
    """The removed entries Search cannot find (empty: recall holds). Refreshes the archive first,
    naming ``written`` (the files the caller wrote; by default the memory files and pruned.md).
    Raises whatever ``index`` raises when the KB cannot answer (the caller treats that as not found)."""
    if not pruned:
        return []
    if written is None:  # the applier's case: the memory files and the pruned archive
        written = sorted({PRUNED, *(block.file for block in pruned)})
    await index.refresh(agent_id, written)
    wanted = [(block, entry, query) for block in pruned for entry in sections.entries(block.text) if (query := query_for(entry))]
    slots = asyncio.Semaphore(SEARCHES_AT_ONCE)

    async def one(query: str) -> Sequence[Hit]:
        async with slots:
            return await index.search(agent_id, query, SEARCH_LIMIT)

    answers = await asyncio.gather(*(one(query) for _, _, query in wanted))
    missing = []
    for (block, entry, query), hits in zip(wanted, answers, strict=True):
        text = _normalized(entry)
        if not any(_holds(workspace, hit, text) for hit in hits):
            missing.append(Missing(block.op_id, block.file, entry, query))
    return missing


async def check_moves(index: Index, agent_id: str, moved: Sequence[tuple[str, str, str]], written: Sequence[str]) -> list[Missing]:
    """The recall check of the deterministic passes: ``moved`` is ``(op id, destination, text)``. The
    KB reindexes ``written``, then one probe per entry asks whether it is found in its destination
    (``ProbeRecall``: Search's query rules, many entries in one call; thousands can move at once)."""
    if not moved:
        return []
    await index.refresh(agent_id, written)
    wanted = [(op_id, path, entry, query) for op_id, path, text in moved for entry in sections.entries(text) if (query := query_for(entry))]
    found = await index.probe(agent_id, [(path, query, entry) for _, path, entry, query in wanted])
    return [Missing(op_id, path, entry, query) for (op_id, path, entry, query), ok in zip(wanted, found, strict=True) if not ok]
