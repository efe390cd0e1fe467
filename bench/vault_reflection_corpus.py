"""The vault reflection bench's data: a vault with reworded duplicates planted under other names, and
the answer key that says which notes are copies of which.

bench/vault_reflection.py's docstring says the method. The notes' text comes from the shared-vault
bench's generator (``kb_shared_vault.VaultGen``), so the words, sizes and frontmatter are those the
other vault benches measure; what differs is the links and the planted copies:

- **Families.** Notes come in families of 1 to 4 that link to each other (a topic and its
  neighbours: related notes, not the same note), and 2% of links go to a note of another family
  (so a link component can hold unrelated notes, as in a real vault). A family is never a
  duplicate group: a reviewer that merges a whole link component is wrong.
- **Planted duplicates.** ``dup_share`` of the notes are originals with one or two reworded copies
  (``VaultGen.reword``: the same facts in other words and order, under a name of their own, with no
  link to the original). The copies are the only true merges; the key lists each group.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from kb_shared_vault import VaultGen, write_aged_note


@dataclass
class PlantedVault:
    """What was written: every note's name, the duplicate groups (original first) and the sizes."""

    names: list[str]
    groups: list[list[str]]
    bytes: int
    seconds: float
    families: int
    links: int
    copies: int = field(default=0)

    def group_of(self) -> dict[str, int]:
        """Note name -> the index of its duplicate group (notes in no group are absent)."""
        return {name: i for i, group in enumerate(self.groups) for name in group}


def _family_sizes(gen: VaultGen, count: int) -> list[int]:
    sizes: list[int] = []
    while sum(sizes) < count:
        sizes.append(min(count - sum(sizes), gen.rng.choice((1, 1, 2, 2, 3, 4))))
    return sizes


def plant(notes_dir: Path, *, count: int, seed: int, dup_share: float) -> PlantedVault:
    """Write ``count`` notes, then reworded copies of ``dup_share`` of them, into ``notes_dir``."""
    started = time.perf_counter()
    gen = VaultGen(seed)
    rng = gen.rng
    topics = [gen.topic() for _ in range(count)]
    names = [gen.name_for(topic, f"{i:05d}") for i, topic in enumerate(topics)]
    assert len(set(names)) == count
    notes_dir.mkdir(parents=True, exist_ok=True)
    total = links = 0
    texts: dict[str, str] = {}
    start = 0
    families = _family_sizes(gen, count)
    for size in families:
        members = names[start : start + size]
        for offset, name in enumerate(members):
            # links resolve against gen.names: the family's other members, and rarely any note at all
            gen.names = [m for m in members if m != name] or []
            n_links = len(gen.names) if gen.names else 0
            if rng.random() < 0.02:
                gen.names = [names[rng.randrange(count)]]
                n_links += 1
            text = gen.note(name, topics[start + offset], frontmatter=rng.random() < 0.4, links=n_links)
            texts[name] = text
            links += n_links
        start += size
    originals = rng.sample(names, int(count * dup_share))
    groups: list[list[str]] = []
    copies = 0
    for n, original in enumerate(originals):
        group = [original]
        for k in range(1 if rng.random() < 0.7 else 2):
            copy = f"{original.split('-')[0].split(' ')[0]} notes {n:04d}-{k}"
            texts[copy] = gen.reword(texts[original], f"copy {n:04d}-{k}")
            group.append(copy)
            copies += 1
        groups.append(group)
    for i, (name, text) in enumerate(texts.items()):
        total += write_aged_note(notes_dir, name, text, rng, i)
    return PlantedVault(list(texts), groups, total, time.perf_counter() - started, len(families), links, copies)
