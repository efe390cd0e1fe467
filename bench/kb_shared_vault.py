"""The shared-vault bench's data: the deterministic note generator, the vault pre-fill and the bench home.

bench/kb_shared.py's docstring (steps 0 and 1) says the method; bench/dream_promotion.py fills its
vault with the same generator.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.home import agent_entry, api_key, write_config
from kb_bench_support import AGENT
from kb_corpus import FUNCTION_WORDS, NoteWriter, Vocabulary, build_vocabulary

PROJECT = "global"
DATA_NOW = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)  # the pre-fill's dates are relative to this; graph "now"


# =========================================================================== vault corpus

STATUSES = ("supported", "supported", "supported", "disputed", "open", "refuted")


@dataclass
class VaultGen:
    """Deterministic generator of shared notes (pre-fill, new notes, near-duplicates)."""

    seed: int
    rng: random.Random = field(init=False)
    vocab: Vocabulary = field(init=False)
    writer: NoteWriter = field(init=False)
    topic_pool: list[str] = field(init=False)
    claim_pool: int = 3000
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 1009 + 5)
        self.vocab = build_vocabulary(self.seed)  # the archive corpus's and the queries' vocabulary
        self.writer = NoteWriter(self.rng, self.vocab)
        content = self.vocab.words[self.vocab.content_start :]
        self.topic_pool = content[100:]  # skip the 100 most frequent content words: topics are specific

    # --- pieces ---------------------------------------------------------------

    def topic(self) -> tuple[str, str, str]:
        a, b, c = self.rng.sample(self.topic_pool, 3)
        return a, b, c

    def name_for(self, topic: tuple[str, ...], tag: str) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return "-".join(topic) + f"-{tag}"
        if roll < 0.85:
            return " ".join(topic).capitalize() + f" {tag}"
        return f"{topic[0].capitalize()} {topic[1]} ({tag})"

    def topical(self, topic: tuple[str, ...], k: int = 2) -> str:
        parts = self.writer.sentence().split(" ")
        for _ in range(k):
            parts[self.rng.randrange(len(parts))] = self.rng.choice(topic)
        text = " ".join(parts)
        return text[0].upper() + text[1:] + ("" if text[-1] in ".?!:" else ".")

    def claim(self, claim_id: int) -> tuple[str, str]:
        """The canonical (text, status) of a claim id (derived from the id alone)."""
        r = random.Random(self.seed * 7 + claim_id)
        words = r.choices(self.topic_pool, k=r.randint(4, 9))
        return " ".join(words).capitalize(), r.choice(STATUSES)

    def frontmatter(self, title: str) -> list[str]:
        rng = self.rng
        lines = ["---", f"title: {title}", f"tags: [{', '.join(self.writer.content_word() for _ in range(rng.randint(1, 3)))}]"]
        if rng.random() < 0.75:
            lines.append(f"confidence: {min(1.0, max(0.05, rng.gauss(0.75, 0.18))):.2f}")
        if rng.random() < 0.85:
            age = timedelta(days=rng.expovariate(1 / 120), hours=rng.randint(0, 23))
            lines.append(f"updatedAt: {(DATA_NOW - age).date().isoformat()}")
        if rng.random() < 0.6:
            lines.append("claims:")
            for _ in range(rng.randint(1, 4)):
                cid = int(rng.paretovariate(0.9)) % self.claim_pool if rng.random() < 0.5 else rng.randrange(self.claim_pool)
                text, status = self.claim(cid)
                if rng.random() < 0.08:  # a diverging copy: a contradiction
                    if rng.random() < 0.5:
                        text = "Not " + text[0].lower() + text[1:]
                    else:
                        status = "refuted" if status != "refuted" else "supported"
                lines += [f"  - id: claim-{cid:04d}", f"    text: {text}", f"    status: {status}"]
                if rng.random() < 0.5:
                    lines.append(f"    confidence: {rng.uniform(0.2, 1.0):.2f}")
        lines.append("---")
        return lines

    def link(self, missing_tag: str) -> str:
        rng = self.rng
        if not self.names or rng.random() < 0.03:
            target = f"missing {rng.choice(self.topic_pool)} {missing_tag}"
        elif rng.random() < 0.2:
            target = self.names[rng.randrange(min(200, len(self.names)))]
        else:
            target = rng.choice(self.names)
        roll = rng.random()
        if roll < 0.10:
            return f"[[{target}|{rng.choice(self.topic_pool)}]]"
        if roll < 0.15:
            return f"[[{target}#Overview]]"
        return f"[[{target}]]"

    def note(self, name: str, topic: tuple[str, ...], *, frontmatter: bool, links: int, malformed: bool = False) -> str:
        rng = self.rng
        title = " ".join(topic).capitalize()
        size = int(min(40_000, max(200, rng.lognormvariate(7.0, 0.8))))  # median ~1.1 KB, mean ~1.5 KB
        body = self.writer.note(title, size, False, False).split("\n")  # "# title", "", blocks...
        lead = " ".join(self.topical(topic) for _ in range(rng.randint(1, 3)))
        body[2:2] = [lead, ""]
        fence = False
        eligible = []
        for i, line in enumerate(body):
            if line.startswith("```"):
                fence = not fence
                continue
            if not fence and i > 3 and line and not line.startswith("#"):
                eligible.append(i)
        # the topic recurs: a few more lines get a topic word
        for i in rng.sample(eligible, min(len(eligible), rng.randint(1, 4))):
            body[i] += f" {rng.choice(topic).capitalize()} again."
        tags = [self.link(name) for _ in range(links)]
        for target in tags:
            if eligible and rng.random() < 0.7:
                i = rng.choice(eligible)
                body[i] += f" See {target}."
            else:
                body.append(f"See also {target}.")
        head: list[str] = []
        if malformed:
            head = ["---", f"title: [{title}", "confidence: high", "claims: not a list", "---"]
        elif frontmatter:
            head = self.frontmatter(title)
        return "\n".join(head + body).rstrip("\n") + "\n"

    def link_count(self) -> int:
        return min(6, int(self.rng.expovariate(1 / 2.2)))

    def new_note(self, tag: str) -> tuple[str, str]:
        topic = self.topic()
        name = self.name_for(topic, tag)
        return name, self.note(name, topic, frontmatter=self.rng.random() < 0.4, links=self.link_count())

    # --- near-duplicates ------------------------------------------------------------

    def reword(self, original: str, tag: str) -> str:
        """A reworded near-duplicate of ``original`` (same facts, other wording and order)."""
        rng = self.rng
        lines = original.split("\n")
        if lines and lines[0] == "---":
            with contextlib.suppress(ValueError):
                lines = lines[lines.index("---", 1) + 1 :]
        heading = next((ln for ln in lines if ln.startswith("# ")), "# note")
        words = heading[2:].split()
        rng.shuffle(words)
        content = [ln for ln in lines if ln.strip() and not ln.startswith("# ") and not ln.startswith("```")]
        keep = content[: max(3, int(len(content) * rng.uniform(0.5, 0.7)))]
        function = set(FUNCTION_WORDS)
        out = []
        for line in keep:
            toks = line.split(" ")
            toks = [t for t in toks if not (t.lower() in function and rng.random() < 0.3)] or toks
            for i in range(len(toks) - 1):
                if rng.random() < 0.15:
                    toks[i], toks[i + 1] = toks[i + 1], toks[i]
            for i in range(len(toks)):
                if rng.random() < 0.10:
                    toks[i] = self.writer.content_word()
            out.append(" ".join(toks))
        for _ in range(max(1, len(out) // 4)):  # a few lines move
            i, j = rng.randrange(len(out)), rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        return "\n".join([f"# {' '.join(words).capitalize()} ({tag})", "", *out]) + "\n"


@dataclass
class VaultInfo:
    notes: int
    bytes: int
    frontmatter: int
    malformed: int
    links: int
    seconds: float


def write_aged_note(notes_dir: Path, name: str, text: str, rng: random.Random, i: int) -> int:
    """Write note ``name`` into ``notes_dir`` with a last-modified time some days before ``DATA_NOW``
    (exponential, 150 days on average; ``i`` seconds apart so no two are alike); its bytes."""
    data = text.encode("utf-8")
    path = notes_dir / f"{name}.md"
    path.write_bytes(data)
    stamp = int((DATA_NOW - timedelta(days=rng.expovariate(1 / 150), seconds=i)).timestamp() * 1e9)
    os.utime(path, ns=(stamp, stamp))
    return len(data)


def prefill(gen: VaultGen, notes_dir: Path, count: int) -> VaultInfo:
    """Write ``count`` notes straight into ``notes_dir`` (names decided first, so links can point forward)."""
    rng = gen.rng
    started = time.perf_counter()
    topics = []
    used: set[str] = set()
    for i in range(count):
        topic = gen.topic()
        name = gen.name_for(topic, f"{i:05d}")
        assert name not in used
        used.add(name)
        topics.append(topic)
        gen.names.append(name)
    notes_dir.mkdir(parents=True, exist_ok=True)
    total = fm = bad = links = 0
    for i, (name, topic) in enumerate(zip(list(gen.names), topics)):
        malformed = rng.random() < 0.005
        has_fm = rng.random() < 0.4
        n_links = gen.link_count()
        text = gen.note(name, topic, frontmatter=has_fm, links=n_links, malformed=malformed)
        total += write_aged_note(notes_dir, name, text, rng, i)
        fm += has_fm and not malformed
        bad += malformed
        links += n_links
    return VaultInfo(count, total, fm, bad, links, time.perf_counter() - started)


# =========================================================================== home


def write_home(home: Path) -> int:
    """The home of agent ``AGENT`` (a write key for it) with the shared vault on, its graph off; the KB's port."""
    shared = {"knowledge": {"shared": {"enabled": True, "project": PROJECT, "graph": False}}}
    return write_config(home, [agent_entry(AGENT)], keys=[api_key([AGENT], write=True)], gateway=shared)["kb"]
