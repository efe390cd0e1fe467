"""``gateway reviewer stand-in``: a reviewer without a model, for trying dreaming (docs/how-to/dreams.md "Try dreaming without a model").

It speaks the reviewer protocol (docs/concepts/reviewer.md "The reviewer"): the prompt on stdin, one
JSON reply on stdout. For each line of the prompt that starts with
``REMEMBER: `` (a line of a session transcript, say), it proposes adding the
rest of that line to MEMORY.md (``--file USER.md`` for USER.md) as a bullet,
with a topic made from its first words, at most ``MAX_FACTS``. Nothing else
is judged: it is a stand-in that makes a dream happen end to end, never a
consolidation.

Set it as the reviewer with
``gateway config set gateway.dreaming.reviewerCommand '["gateway","reviewer","stand-in"]'``:
the dreaming process runs a first element ``gateway`` with its own
interpreter, so it needs no PATH (services/dreaming/review/reviewer.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any, Final

MARKER: Final = "REMEMBER: "
MAX_FACTS: Final = 10
FILES: Final = ("MEMORY.md", "USER.md")
TOPIC_WORDS: Final = 6
TOPIC_CHARS: Final = 64
_WORD: Final = re.compile(r"[a-z0-9]+")


def add_parser(sub: Any) -> None:
    """Add ``reviewer stand-in`` to the ``gateway`` parser's subcommands."""
    reviewer = sub.add_parser("reviewer", help="reviewers that ship with the suite (the reviewer protocol: prompt on stdin, reply on stdout)")
    kinds = reviewer.add_subparsers(dest="kind", required=True)
    stand_in = kinds.add_parser(
        "stand-in",
        help="no model: propose adding each prompt line starting 'REMEMBER: ' to MEMORY.md (for trying dreaming)",
    )
    stand_in.add_argument("--file", choices=FILES, default="MEMORY.md", help="the memory file the facts go to (default MEMORY.md)")


def remembered(text: str) -> list[str]:
    """The facts of ``text``: what follows ``REMEMBER: `` at the start of a line, stripped, non-empty."""
    facts = (line[len(MARKER):].strip() for line in text.splitlines() if line.startswith(MARKER))
    return [fact for fact in facts if fact]


def topic(fact: str) -> str:
    """A kebab-case topic from the fact's first words (``The harbour office opens at 7.`` →
    ``the-harbour-office-opens-at-7``); empty when it has no ASCII letter or digit."""
    slug = "-".join(_WORD.findall(fact.lower())[:TOPIC_WORDS])
    return slug[:TOPIC_CHARS].strip("-")


def reply(prompt: bytes, file: str = "MEMORY.md") -> dict[str, Any]:
    """The reviewer's reply to ``prompt``: one ``add`` to ``file`` per fact (at most MAX_FACTS)."""
    text = prompt.decode("utf-8", errors="replace")
    facts = remembered(text)[:MAX_FACTS]
    proposals = []
    for fact in facts:
        proposal = {"op": "add", "file": file, "content": f"- {fact}", "reason": "a session said to remember it"}
        if topic(fact):
            proposal["topic"] = topic(fact)
        proposals.append(proposal)
    noun = "line" if len(facts) == 1 else "lines"
    summary = (f"stand-in reviewer (no model): {len(facts)} {MARKER.strip()} {noun} proposed; "
               f"prompt {len(text)} chars, sha256 {hashlib.sha256(prompt).hexdigest()[:12]}")
    return {"summary": summary, "proposals": proposals}


def run(file: str = "MEMORY.md") -> int:
    """Read the prompt from stdin, write the reply to stdout; exit 0."""
    sys.stdout.write(json.dumps(reply(sys.stdin.buffer.read(), file)) + "\n")
    sys.stdout.flush()
    return 0
