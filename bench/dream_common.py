"""Shared pieces of the dreaming benchmarks (``bench/dream_overhead.py``, ``bench/dream_fidelity.py``).

- **Facts**: distinctive one-line facts ("The Kestrel deploy key rotates every
  90 days." style), each built around a code name unique within its agent, from
  a seeded ``random.Random``; rewordings that keep every searchable word.
- **MEMORY.md**: realistic markdown from facts: a title, a pinned ``## User``
  section, several durable sections (some with a sub-heading or a short
  paragraph), list items.
- **Home**: a config.json for many agents (every port free, the gateway's
  defaults unless a bench overrides them) and the internal token.

Nothing here is a test: the benches print PASS/FAIL and never fail the build.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.home import api_key, write_config

START_TIMEOUT_S = 120.0


# =========================================================================== facts

_ONSETS = ("b", "br", "c", "cr", "d", "dr", "f", "fl", "g", "gl", "h", "j", "k", "kr", "l", "m", "n", "p", "pl",
           "qu", "r", "s", "sk", "sl", "st", "t", "tr", "v", "w", "z")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "oo", "ou", "y")
_CODAS = ("", "n", "r", "s", "t", "l", "m", "nd", "nt", "rk", "sk", "st", "x", "ck", "ll", "th")
_NOUNS = ("billing", "ingest", "search", "payments", "catalog", "gateway", "reports", "mailer", "scheduler", "ledger",
          "uploads", "telemetry", "checkout", "identity", "webhooks", "exports", "pricing", "inventory")  # fmt: skip
_PEOPLE = ("Amara", "Bastien", "Chiara", "Dmitri", "Esther", "Farouk", "Greta", "Hiroshi", "Ingrid", "Joaquin",
           "Keziah", "Lorcan", "Marisol", "Nikolai", "Oksana", "Priyanka", "Quentin", "Rosalind", "Soren", "Thandiwe")  # fmt: skip
_DAYS = ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays")
_STORES = ("Postgres", "MySQL", "SQLite", "DynamoDB", "Cassandra", "Redis", "Elasticsearch", "ClickHouse")
_CITIES = ("Lisbon", "Nairobi", "Osaka", "Tallinn", "Montreal", "Valparaiso", "Tbilisi", "Hobart", "Bergen", "Cusco")
_TOOLS = ("terraform", "helm", "poetry", "pnpm", "bazel", "gradle", "ansible", "kustomize")
_STYLES = ("terse", "bulleted", "step-by-step", "formal", "casual", "example-first")

# Durable sections of MEMORY.md (the pinned ## User section comes first).
SECTIONS = ("Projects", "Infrastructure", "Decisions", "Conventions", "People", "Operations")


def code_name(rng: random.Random, taken: set[str]) -> str:
    """A pronounceable made-up name (6+ letters) not in ``taken``; added to it."""
    while True:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.choice((2, 2, 2, 3))))
        if 6 <= len(word) <= 11 and word not in taken:
            taken.add(word)
            return word.capitalize()


def _durable_fact(rng: random.Random, a: str, b: str) -> str:
    n = rng.randint(2, 180)
    kind = rng.randrange(14)
    if kind == 0:
        return f"The {a} deploy key rotates every {n} days."
    if kind == 1:
        return f"{a} backups run nightly at {rng.randint(0, 23):02d}:{rng.choice((0, 15, 30, 45)):02d} UTC into the {b} bucket."
    if kind == 2:
        return f"The {a} {rng.choice(_NOUNS)} service listens on port {rng.randint(1025, 65000)} behind the {b} proxy."
    if kind == 3:
        return f"{rng.choice(_PEOPLE)} owns the {a} dashboard and reviews its changes on {rng.choice(_DAYS)}."
    if kind == 4:
        v = f"{rng.randint(1, 9)}.{rng.randint(0, 30)}"
        return f"Pin {a} to {rng.choice(_TOOLS)} {v}; later releases broke the {b} build."
    if kind == 5:
        x, y = rng.sample(_STORES, 2)
        return f"Decision ({2024 + rng.randint(0, 2)}-{rng.randint(1, 12):02d}): {a} {rng.choice(_NOUNS)} moves from {x} to {y}."
    if kind == 6:
        return f"The {a} API allows {n * 10} requests per minute per token."
    if kind == 7:
        return f"Staging for {a} lives at {a.lower()}-staging.{b.lower()}.internal."
    if kind == 8:
        return f"{a} invoices go out on day {rng.randint(1, 28)} of each month through {b}."
    if kind == 9:
        return f"The {a} cron job clears the {b} cache every {n} minutes."
    if kind == 10:
        return f"Alerts for {a} page {rng.choice(_PEOPLE)} first, then the {b} rota."
    if kind == 11:
        return f"{a} logs are kept {n} days in the {b} cluster."
    if kind == 12:
        return f"Always run the {a} migrations with {rng.choice(_TOOLS)} before touching {b}."
    return f"The {a} feature flag ships to {rng.randint(1, 99)} percent of {b} tenants first."


def _user_fact(rng: random.Random, a: str) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return f"The user's {a} account alias is {a.lower()}{rng.randint(10, 99)}."
    if kind == 1:
        return f"The user works from {rng.choice(_CITIES)} on {rng.choice(_DAYS)} and calls the laptop {a}."
    if kind == 2:
        return f"The user prefers {rng.choice(_STYLES)} answers when asking about {a}."
    if kind == 3:
        return f"The user's cat is called {a} and appears in demo screenshots."
    if kind == 4:
        return f"The user signs reviews as {a} on the internal forum."
    return f"The user keeps {a} notes in a private notebook, never in the repository."


@dataclass(frozen=True)
class Fact:
    """One probe fact: its text (without the list marker) and where it stands."""

    text: str
    section: str  # "User" (pinned) or one of SECTIONS
    subsection: str = ""  # a ### heading under the section, or ""


def make_facts(rng: random.Random, count: int, user_share: float = 0.08) -> list[Fact]:
    """``count`` facts with a code name each unique among them; about ``user_share`` in ## User."""
    taken: set[str] = set()
    facts: list[Fact] = []
    users = max(1, round(count * user_share))
    for i in range(count):
        a = code_name(rng, taken)
        if i < users:
            facts.append(Fact(_user_fact(rng, a), "User"))
            continue
        b = code_name(rng, taken)
        section = SECTIONS[rng.randrange(len(SECTIONS))]
        sub = ""
        if section == "Projects" and rng.random() < 0.6:
            sub = ("Active", "Paused", "Archived")[rng.randrange(3)]
        facts.append(Fact(_durable_fact(rng, a, b), section, sub))
    return facts


_INTROS = {
    "Projects": "What each project is and where it stands; details live in memory/projects/.",
    "Infrastructure": "Hosts, ports and keys. Never paste secrets here, only where they live.",
    "Operations": "Schedules and routines that recur.",
}


def memory_of_size(rng: random.Random, chars: int, title: str = "Memory") -> tuple[list[Fact], str]:
    """Facts and their MEMORY.md, as many facts as fit in ``chars`` (the text is at most that long)."""
    facts = make_facts(rng, chars // 40)
    lo, hi = 1, len(facts)
    while lo < hi:  # the largest prefix whose markdown fits
        mid = (lo + hi + 1) // 2
        if len(memory_markdown(facts[:mid], title)) <= chars:
            lo = mid
        else:
            hi = mid - 1
    return facts[:lo], memory_markdown(facts[:lo], title)


def memory_markdown(facts: Sequence[Fact], title: str = "Memory") -> str:
    """MEMORY.md for ``facts``: ``# title``, ``## User`` (pinned) first, then SECTIONS in order."""
    out = [f"# {title}", "", "## User", ""]
    out += [f"- {f.text}" for f in facts if f.section == "User"]
    for section in SECTIONS:
        mine = [f for f in facts if f.section == section]
        if not mine:
            continue
        out += ["", f"## {section}", ""]
        if section in _INTROS:
            out += [_INTROS[section], ""]
        out += [f"- {f.text}" for f in mine if not f.subsection]
        for sub in ("Active", "Paused", "Archived"):
            group = [f for f in mine if f.subsection == sub]
            if group:
                out += ["", f"### {sub}", ""] + [f"- {f.text}" for f in group]
    return "\n".join(out) + "\n"


_PREFIXES = ("Note: ", "Reminder: ", "Confirmed: ", "Still true: ")
_SUFFIXES = (" (confirmed)", " (still true)", " (per the last session)", " (as of this week)")


def reword(text: str, rng: random.Random, *, shorter: bool = False) -> str:
    """``text`` reworded, keeping every word of 3+ letters that is not a stop word (so the same
    search finds it). ``shorter``: the result is shorter than ``text`` (drops a leading article
    and the final stop) when it can be; else it may be longer."""
    body = text.rstrip(".")
    if shorter:
        for article in ("The ", "Always "):
            if body.startswith(article):
                body = body[len(article) :]
                body = body[0].upper() + body[1:]
                break
        return body if len(body) < len(text) else text
    roll = rng.randrange(3)
    if roll == 0:
        return rng.choice(_PREFIXES) + body[0].lower() + body[1:] + "."
    if roll == 1:
        return body + rng.choice(_SUFFIXES) + "."
    words = body.split(" ")
    cut = max(1, len(words) // 2)
    return " ".join(words[cut:]).capitalize() + ": " + " ".join(words[:cut]) + "."


# =========================================================================== home


def write_home(home: Path, agents: list[dict[str, Any]], *, memory: dict[str, Any] | None = None,
               dreaming: dict[str, Any] | None = None) -> dict[str, int]:  # fmt: skip
    """config.json with ``agents`` (``harness.home.agent_entry`` dicts), every port free, one write key
    for every agent; the internal token. Returns the ports by name (fileApi, watcher, kb, dreaming, api)."""
    blocks = {name: block for name, block in (("memory", memory), ("dreaming", dreaming)) if block}
    return write_config(home, agents, keys=[api_key(write=True)], gateway=blocks, indent=1)


# =========================================================================== finding a fact

_SPACE = re.compile(r"\s+")


def normalized(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def file_holds(workspace: Path, path: str, start_line: int, end_line: int, wanted: str) -> bool:
    """The recall check's rule (services/dreaming/recall.py): the hit's file holds ``wanted``
    (whitespace aside) in the hit's lines or, for text that straddles chunks, anywhere in it."""
    try:
        text = (workspace / path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return False
    lines = text.splitlines()
    if wanted in normalized("\n".join(lines[max(0, start_line - 1) : end_line])):
        return True
    return wanted in normalized(text)
