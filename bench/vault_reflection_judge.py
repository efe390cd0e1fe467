"""The vault reflection bench's judging and its baseline: what the runs did against the answer key,
facts lost, and the same near-duplicate work done bare in-process.

bench/vault_reflection.py's docstring says the method. Everything here reads the notes folder on disk
(the retired ``stale__`` notes carry the marker naming the note they were merged into) and the
planted answer key; nothing here talks to a service but ``probe_search``.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vault_reflection_corpus import PlantedVault
from vault_reflection_reviewer import BAR, _body, _pairs

RETIRED = re.compile(r"<!-- retired: .*? reason: vault reflection: merged into (.+?) \(run (R-\S+), (M-[0-9a-f]+)\) -->")
RESERVED = ("stale__", "pruned__")
BUCKET_WORDS = 4  # the rarest words of a note that name its buckets
BUCKET_MAX = 60  # a bucket larger than this is a common word: skipped


def read_notes(notes_dir: Path) -> dict[str, bytes]:
    """Every note file of the folder by name (``.md`` left off), reserved ones included."""
    return {p.name[:-3]: p.read_bytes() for p in sorted(notes_dir.glob("*.md"))}


# =========================================================================== baseline


@dataclass
class Baseline:
    seconds: float
    read_seconds: float
    candidates: int
    pairs: int
    true_pairs: int
    copies_found: int


def baseline(notes_dir: Path, vault: PlantedVault) -> Baseline:
    """Read every note, then find the pairs whose word-bigram containment clears the instant reviewer's
    bar, comparing only notes that share one of their ``BUCKET_WORDS`` rarest words (O(n) buckets)."""
    t0 = time.perf_counter()
    texts = {p.name[:-3]: p.read_text(encoding="utf-8") for p in notes_dir.glob("*.md")}
    read_s = time.perf_counter() - t0
    names = sorted(texts)
    bodies = [_body(texts[n]) for n in names]
    words = [set(re.findall(r"[a-z0-9]+", b.lower())) for b in bodies]
    df: Counter[str] = Counter()
    for ws in words:
        df.update(ws)
    buckets: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        for w in sorted((w for w in ws if df[w] > 1 and not w.isdigit()), key=lambda w: (df[w], w))[:BUCKET_WORDS]:
            buckets.setdefault(w, []).append(i)
    candidates: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) <= BUCKET_MAX:
            candidates.update((a, b) for k, a in enumerate(members) for b in members[k + 1 :])
    pairs = [_pairs(b) for b in bodies]
    found = []
    for a, b in candidates:
        small = min(len(pairs[a]), len(pairs[b])) or 1
        if len(pairs[a] & pairs[b]) / small >= BAR:
            found.append((names[a], names[b]))
    seconds = time.perf_counter() - t0
    group = vault.group_of()
    true = [(a, b) for a, b in found if a in group and group.get(a) == group.get(b)]
    copies = {n for pair in true for n in pair if n in group and vault.groups[group[n]][0] != n}
    return Baseline(seconds, read_s, len(candidates), len(found), len(true), len(copies))


# =========================================================================== judging


@dataclass
class Retired:
    name: str
    into: str
    run: str
    merge: str
    content: str


@dataclass
class Judged:
    merged_away: int
    true_copies: int  # merged away into a note of its own duplicate group
    wrong: list[str]
    left: int  # reworded duplicates still live: per group, live members - 1
    lines: int  # lines of fact of the notes merged away
    in_merged: int  # found in the note they were merged into
    in_archive: int  # found in the pruned archive (and not in the merged note)
    lost: list[str] = field(default_factory=list)  # found in no live note
    archive_only: list[tuple[str, str]] = field(default_factory=list)  # (line, merged into) for the search probe


def retired_notes(notes: dict[str, bytes]) -> list[Retired]:
    out = []
    for name, data in notes.items():
        if name.startswith("stale__"):
            text = data.decode("utf-8")
            found = RETIRED.search(text)
            if found:
                out.append(Retired(name.removeprefix("stale__"), found.group(1), found.group(2), found.group(3), text))
    return out


def judge(notes: dict[str, bytes], vault: PlantedVault) -> Judged:
    """The notes on disk after the runs against the key (module docstring of bench/vault_reflection.py)."""
    from services.kb.vault.reflection import lines

    group = vault.group_of()
    retired = retired_notes(notes)
    live = {n: d.decode("utf-8") for n, d in notes.items() if not n.startswith(RESERVED)}
    archive = "\n".join(d.decode("utf-8") for n, d in notes.items() if n.startswith("pruned__"))
    archive_body = lines._body(archive)
    true = [r for r in retired if r.name in group and group.get(r.into) == group[r.name]]
    wrong = [f"{r.name!r} -> {r.into!r}" for r in retired if r not in true]
    left = sum(max(0, sum(1 for n in g if n in live) - 1) for g in vault.groups)
    judged = Judged(len(retired), len(true), wrong, left, 0, 0, 0)
    for r in retired:
        merged_body = lines._body(live.get(r.into, ""))
        for form, raw in lines.fact_lines(r.name, r.content).items():
            judged.lines += 1
            if lines._kept(form, merged_body):
                judged.in_merged += 1
            elif lines._kept(form, archive_body):
                judged.in_archive += 1
                judged.archive_only.append((raw, r.into))
            else:
                judged.lost.append(f"{r.name!r}: {raw[:80]!r}")
    return judged


def probe_search(client: Any, agent: str, judged: Judged, sample: int, seed: int) -> tuple[int, int, list[str]]:
    """Search the shared vault (REST ``memory:search``, corpus shared, 20 hits) for the first 16 words of
    ``sample`` lines that only the pruned archive holds; found when a hit is the archive or the merged
    note. (probed, found, the misses)."""
    rng = random.Random(seed)
    chosen = rng.sample(judged.archive_only, min(sample, len(judged.archive_only)))
    found, misses = 0, []
    for raw, into in chosen:
        query = " ".join(re.findall(r"[^\W_]+", raw)[:16])
        response = client.get(f"/api/v1/agents/{agent}/memory:search", params={"query": query, "corpus": "shared", "limit": 20})
        response.raise_for_status()
        paths = [h.get("path", "") for h in response.json().get("hits", [])]
        if any("pruned__" in p or Path(p).stem == into for p in paths):
            found += 1
        else:
            misses.append(raw[:80])
    return len(chosen), found, misses
