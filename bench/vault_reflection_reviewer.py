"""The vault reflection bench's instant reviewer: a ``reviewerCommand`` that answers at once, without a model.

It reads the prompt on stdin, takes the cluster's names and note bodies from it (the numbered list
and the data fences the prompt always has), and merges the notes that read alike: two notes are
alike when at least ``BAR`` of the smaller one's word pairs (bigrams of lower-cased words) are in the
other. The alike notes (joined transitively) become one note: the largest of them, kept word for word
under its name (with ``--pair``, only it and the note most alike to it: one pair per call); the
others' lines are dropped from the merged note (the reworded copies say the
same facts), which the vault's own guard writes to its pruned archive and probes with search. A
cluster with no two alike notes is left. Each call appends one line to the log file named by its
argument, else by ``$REFLECT_BENCH_LOG`` when set (calls are counted from it; the dreaming service
passes the reviewer only an allowlisted environment, so the bench gives the path as an argument). Any
prompt it cannot read is a leave.
"""

from __future__ import annotations

import json
import os
import re
import sys

BAR = 0.2
NAME_LINE = re.compile(r'^\d+\. (".*")$', re.M)
FENCE = re.compile(r"<<<BEGIN NOTE (\d+) (\S+)>>>\n(.*?)<<<END NOTE \1 \2>>>", re.S)


def _pairs(text: str) -> set[tuple[str, str]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return set(zip(words, words[1:], strict=False))


def _body(text: str) -> str:
    lines = text.split("\n")
    if lines and lines[0] == "---" and "---" in lines[1:]:
        lines = lines[lines.index("---", 1) + 1 :]
    return "\n".join(ln for ln in lines if not ln.startswith("# "))


def _containment(a: set[tuple[str, str]], b: set[tuple[str, str]]) -> float:
    return len(a & b) / (min(len(a), len(b)) or 1)


def decide(prompt: str, pair: bool = False) -> dict[str, object]:
    """The reply to ``prompt``. ``pair``: merge only the largest alike note and the note most alike to it
    (one pair per call; the rest of the group is a cluster of its own next week)."""
    names = [json.loads(m) for m in NAME_LINE.findall(prompt.split("The notes of this cluster, by name", 1)[-1].split("\n\n", 2)[0] or "")]
    bodies = {int(n): text for n, _, text in FENCE.findall(prompt)}
    if len(names) < 2 or len(bodies) != len(names):
        return {"decision": "leave", "reason": "could not read the cluster"}
    pairs = [_pairs(_body(bodies[i + 1])) for i in range(len(names))]
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            if _containment(pairs[i], pairs[j]) >= BAR:
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(names)):
        groups.setdefault(root(i), []).append(i)
    best = max(groups.values(), key=len)
    if len(best) < 2:
        return {"decision": "leave", "reason": "no two notes read alike"}
    keep = max(best, key=lambda i: len(bodies[i + 1]))
    if pair:
        best = [keep, max((i for i in best if i != keep), key=lambda i: _containment(pairs[keep], pairs[i]))]
    return {"decision": "merge", "name": names[keep], "content": bodies[keep + 1],
            "replaces": [names[i] for i in best], "reason": "reworded copies of one note"}


def main() -> int:
    answer = decide(sys.stdin.read(), pair="--pair" in sys.argv[1:])
    args = [a for a in sys.argv[1:] if a != "--pair"]
    log = args[0] if args else os.environ.get("REFLECT_BENCH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps({"decision": answer["decision"], "replaces": answer.get("replaces", [])}) + "\n")
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
