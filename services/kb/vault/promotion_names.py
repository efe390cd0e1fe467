"""The name a promoted fact gets in the shared vault (docs/concepts/promotion.md "Shared promotion").

Promotion shares the vault's freeform namespace, and a name is how the same
recurring fact finds its note again on a later night: the same name lands as an
update, not a new file. So names are drawn deterministically, in this order:

1. **The topic** (the proposal's optional kebab slug, ``^[a-z0-9-]{1,64}$``),
   when given and it has a letter or digit: ``slugify(topic)``, which is the
   topic itself with stray dashes removed.
2. **The reason**, slugified, unless it reads as an *editing instruction*
   (``is_edit_instruction``): no later occurrence of the fact could ever match
   a name like "insert after the cron section", so such a reason is passed over.
3. **The fact itself** (``fact_name``): its first ``FACT_NAME_WORDS`` (6)
   distinct significant words.

When none of them yields a name (no topic, a reason that is an instruction or
has no letter or digit, a fact with no significant word) nothing is nameable
and the promotion is abandoned.

**Slugs** (``slugify``): NFC, casefolded, the runs of letters and digits
(any script; ``_`` is not one) joined by ``-``; at most ``NAME_MAX_CHARS``
(64) characters and names' ``MAX_NAME_BYTES`` (200) bytes of UTF-8 (64
letters of four bytes each, CJK extension B say, would be 256), cut after the
last whole word that fits (a first word longer than that is cut, at a
character, to fit). A slug is always a valid note name (names):
no separator, no wikilink character, no leading dot, and never the reserved
``stale__`` prefix (it has no ``_``).

**Significant words** (the fact's name): the letter/digit runs of the fact's
body (frontmatter and ``<!-- key: value -->`` markers removed) that are at
least 3 characters long (2 when they hold a CJK or other wide character, from
U+2E80 on, where two characters make a word) and not in the near-duplicate
search's ``STOPWORDS``, casefolded, first occurrence only.

**Editing instructions** (``is_edit_instruction``): the text's first word,
after any leading filler words (``LEAD_FILLERS``: "please", "we should",
"need to"…), is an edit verb (``EDIT_VERBS``), *and* after that verb the text
holds an anchor:

- a position: ``after``, ``before``, ``under``, ``underneath``, ``below``,
  ``above``, ``beneath``, ``beside``, ``between``, ``into``, ``next to``,
  ``ahead of``, or ``at``/``to``/``in``/``on the top|bottom|end|start|beginning|head|tail``;
- a file: a word ending in ``.md``, ``.markdown``, ``.txt``, ``.json``,
  ``.yaml``, ``.yml`` or ``.toml``, or a path under ``memory/``;
- a part of a document (``STRUCTURE_WORDS``): section, heading, header,
  bullet, line, paragraph, entry, list, item, block, table, row, file (and
  their plurals).

So "insert after the cron section", "add to MEMORY.md under Tools" and "update
the line about X" are instructions; "Add the staging host name" (no anchor) and
"Deploys after 5pm are banned" (no edit verb first) are names.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

from services.kb.vault.names import MAX_NAME_BYTES
from services.kb.vault.similar import STOPWORDS, body_text

NAME_MAX_CHARS: Final = 64
FACT_NAME_WORDS: Final = 6
MIN_WORD_CHARS: Final = 3
MIN_WIDE_WORD_CHARS: Final = 2
PASSED_OVER_CHARS: Final = 200  # of a passed-over reason kept in the outcome

EDIT_VERBS: Final = frozenset(
    """
    add append prepend insert put place move update replace change edit modify amend revise rewrite
    remove delete drop merge rename fix correct adjust extend expand include record note log write
    save store document mention capture keep set list track attach link
    """.split()
)
LEAD_FILLERS: Final = frozenset("please pls kindly then also and so now just we i you should must need needs to let lets s us".split())
STRUCTURE_WORDS: Final = frozenset(
    """
    section sections heading headings header headers subheading subheadings bullet bullets line lines
    paragraph paragraphs entry entries list lists item items block blocks table tables row rows file files
    """.split()
)

_WORD: Final = re.compile(r"[^\W_]+")
_POSITION: Final = re.compile(
    r"\b(?:after|before|under|underneath|below|above|beneath|beside|between|into|next\s+to|ahead\s+of"
    r"|(?:at|to|in|on)\s+the\s+(?:top|bottom|end|start|beginning|head|tail))\b",
    re.IGNORECASE,
)
_FILE: Final = re.compile(r"[\w.-]+\.(?:md|markdown|txt|json|ya?ml|toml)\b|\bmemory/", re.IGNORECASE)

TOPIC: Final = "topic"
REASON: Final = "reason"
FACT: Final = "fact"


@dataclass(frozen=True)
class Naming:
    """The chosen ``name`` ("" when nothing is nameable), where it came from (``topic``,
    ``reason``, ``fact`` or ""), and the reason passed over as an editing instruction ("" if none)."""

    name: str
    source: str
    passed_over: str = ""


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFC", text).casefold())


def _fits(name: str) -> bool:
    return len(name) <= NAME_MAX_CHARS and len(name.encode("utf-8")) <= MAX_NAME_BYTES


def _join(words: list[str]) -> str:
    """``words`` joined by ``-``, cut after the last whole word within NAME_MAX_CHARS and MAX_NAME_BYTES."""
    out = ""
    for word in words:
        longer = f"{out}-{word}" if out else word
        if not _fits(longer):
            # A first word too long alone: cut at a character (a partial UTF-8 sequence is dropped).
            return out or word[:NAME_MAX_CHARS].encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore")
        out = longer
    return out


def slugify(text: str) -> str:
    """``text`` as a note-name slug (module docstring); "" when it has no letter or digit."""
    return _join(_words(text))


def is_edit_instruction(text: str) -> bool:
    """Whether ``text`` reads as an editing instruction rather than a fact's name (module docstring)."""
    folded = unicodedata.normalize("NFC", text).casefold()
    for match in _WORD.finditer(folded):
        word = match.group()
        if word in LEAD_FILLERS:
            continue
        if word not in EDIT_VERBS:
            return False
        rest = folded[match.end() :]
        return bool(_POSITION.search(rest) or _FILE.search(rest) or any(w in STRUCTURE_WORDS for w in _WORD.findall(rest)))
    return False


def _significant(word: str) -> bool:
    wide = any(ord(ch) >= 0x2E80 for ch in word)
    return len(word) >= (MIN_WIDE_WORD_CHARS if wide else MIN_WORD_CHARS) and word not in STOPWORDS


def fact_name(content: str) -> str:
    """The name drawn from the fact: its first FACT_NAME_WORDS distinct significant words, slugified."""
    chosen: dict[str, None] = {}
    for word in _words(body_text(content)):
        if _significant(word):
            chosen.setdefault(word, None)
            if len(chosen) >= FACT_NAME_WORDS:
                break
    return _join(list(chosen))


def choose_name(topic: str, reason: str, content: str) -> Naming:
    """The note name of a promoted fact: topic, else reason, else the fact (module docstring)."""
    if topic and (slug := slugify(topic)):
        return Naming(slug, TOPIC)
    passed_over = ""
    if reason.strip():
        if is_edit_instruction(reason):
            passed_over = " ".join(reason.split())[:PASSED_OVER_CHARS]
        elif slug := slugify(reason):
            return Naming(slug, REASON)
    name = fact_name(content)
    return Naming(name, FACT if name else "", passed_over)
