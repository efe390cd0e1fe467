"""kill -9 of a whole forget through the real processes (docs/concepts/forget.md "If a forget is interrupted").

A text is planted in many places of agent alfred's home: MEMORY.md, thirty large files under
``memory/`` (each indexed by the archive), pruned.md, ``.dreaming/`` records (DREAMS.md, audit lines,
a backup) and forty notes of the shared vault. ``Forget`` (apply, shared) is sent to dreaming, and
one process is killed with SIGKILL at a point aimed by polling the files (``crash_support.until``):

- dreaming, once MEMORY.md (the first file it rewrites) holds the marker;
- dreaming, once half of the ``memory/`` files do;
- dreaming, once a vault note does (dreaming is waiting on the KB's part, which the KB goes on with
  or drops);
- the KB, once the last workspace file holds the marker (the KB's part has begun: the archive's
  reindex and purge);
- the KB, once a vault note holds the marker (mid-way through the vault's notes);
- dreaming, once every workspace file holds the marker, in a forget by pattern of the agent's files
  only: the run that finishes it finds no string to tombstone, so the tombstone written first must be
  there (docs/concepts/forget.md "If a forget is interrupted").

A forget that answered before the kill landed (a busy machine can stall the test between the moment
seen and the kill) is planted and aimed at again, up to ``ATTEMPTS`` times.

Then, before anything else runs: every planted file is its old bytes or fully scrubbed (its text with
each marker put back is the old bytes, and it holds no match): never torn or half-written; no
database the KB was writing is damaged (``integrity_check``). The process is started again, the same
forget is sent again and completes, with nothing ``left``; then no file under the home (databases,
WALs, logs and tombstones included) holds any 8-character run of the text, no search finds it, every
fact planted beside it is still there and found, and the tombstone written first keeps it out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from crash_support import Tally, integrity_problems, kill9, until
from dreaming_support import start_suite
from forget_support import runs
from suite_support import ADMIN_KEY, Suite, wait_until

from gateway.forgetting import Tombstones
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

AUTH = (("x-api-key", ADMIN_KEY),)
MARKER = re.compile(r"\[forgotten F-[0-9a-f]{12}\]")
MEMORY_FILES = 30
NOTES = 40
AIM_LIMIT_S = 120.0  # the moment aimed at comes well before this
ATTEMPTS = 3


def text_of(n: int) -> str:
    """Round ``n``'s text: its own last word, so a tombstone of another round never matches it."""
    return f"Quillon Varnesse hides the cellar cipher beneath the cedar plank, code WQZRTKMXPL{'ABCDEFGH'[n] * 4}"


def filler(label: str, lines: int) -> str:
    """Lines that share no 8-character run with any round's text (checked by ``plant``)."""
    return "".join(f"- Ledger {label} row {n:05d}: invoice paid by transfer to Ostrava.\n" for n in range(lines))


def fact(label: str, n: int) -> str:
    """A fact planted beside the text, found by its own word (``<label>x<n>``)."""
    return f"- Fact {label}x{n}: the tram depot opens at six."


def plant(home: Path, n: int, *, notes: bool) -> dict[Path, bytes]:
    """Round ``n``'s files (with ``notes``, the vault's too), written: path → bytes."""
    text = text_of(n)
    workspace = home / "agents" / "alfred" / "workspace"
    files: dict[Path, str] = {
        workspace / "MEMORY.md": f"# Memory\n\n{fact('memory', n)}\n- {text}.\n{filler('m', 20)}",
        workspace / "memory/archive/pruned.md": f"# Pruned\n\n## run r-1 op 1\n\n- {text}.\n",
        workspace / ".dreaming/DREAMS.md": f"# Dreams\n\n## r-1\n\nRemoved: {text}.\n",
        workspace / ".dreaming/backups/MEMORY.md.r-1": f"# Memory\n\n- {text}.\n",
        workspace / ".dreaming/audit.jsonl": "".join(
            f'{{"kind": "note", "run": "r-{r}", "text": "{text} (line {r})"}}\n' for r in range(40)),
    }
    for d in range(MEMORY_FILES):  # large, so the forget takes long enough to be killed mid-way
        label = f"d{d:02d}"
        body = "".join(f"{filler(f'{label}{k}', 60)}\n{text}\n\n" for k in range(25))
        files[workspace / f"memory/2026-10-{d + 1:02d}.md"] = f"# Day {d}\n\n{fact(label, n)}\n\n{body}"
    vault = home / "shared" / "kb" / "global" / "notes"
    for v in range(NOTES if notes else 0):
        label = f"v{v:02d}"
        files[vault / f"crypt-{v:02d}.md"] = f"# Crypt {v}\n\n{fact(label, n)}\n\n{filler(label, 500)}\n{text}\n"
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    planted = {path: content.encode() for path, content in files.items()}
    beside = "".join(content.replace(text, "\n") for content in files.values()).encode()
    assert [r for r in runs(text) if r in beside or r in beside.lower()] == []  # what stays shares no run with it
    return planted


def planted_part(path: Path) -> bytes:
    """The file's bytes but the forgets' own lines of ``audit.jsonl`` (a forget appends its record there)."""
    data = path.read_bytes()
    if path.name != "audit.jsonl":
        return data
    return b"".join(line for line in data.splitlines(keepends=True) if json.loads(line).get("kind") != "forget")


def whole(old: bytes, now: bytes, text: str) -> str:
    """``"old"``, ``"scrubbed"`` (each match replaced, nothing else changed), or what is wrong."""
    if now == old:
        return "old"
    decoded = now.decode("utf-8")
    if text.lower() in decoded.lower():
        return "torn: still holds the text beside a change"
    if MARKER.sub(text, decoded).encode() == old:
        return "scrubbed"
    return "torn: neither the old bytes nor the scrubbed ones"


def home_residue(home: Path, text: str) -> list[str]:
    """``grep -a -r`` over every file of the home for any 8-character run of ``text``."""
    forms = runs(text)
    hits = []
    for path in sorted(p for p in home.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        lowered = data.lower()
        hits += [f"{path.relative_to(home)}: {form!r}" for form in sorted(forms) if form in data or form in lowered]
    return hits


@pytest.fixture(scope="module")
def fsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    running = start_suite(tmp_path_factory.mktemp("crashforget"), [{"id": "alfred"}], services=("kb", "dreaming"))
    try:
        yield running
    finally:
        running.stop_all()


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    """The rounds' figures, for the hardening table once the module is done (files old or scrubbed at the kill)."""
    figures = Tally("kill -9: a whole forget")
    yield figures
    figures.record(f"dreaming or the KB killed at {figures.rounds} points of an applied forget over 35 workspace "
                   "files and 40 vault notes (4 MB); each planted file old or scrubbed at the kill, never torn; the same "
                   "forget again left no 8-character run of the text in the home")


def search(suite: Suite, query: str, corpus: str) -> list[str]:
    with grpc.insecure_channel(suite.address("kb")) as channel:
        found = kb_pb2_grpc.KnowledgeStub(channel).Search(
            kb_pb2.SearchRequest(agent_id="alfred", query=query, corpus=corpus, limit=100, refresh=True),
            metadata=AUTH, timeout=60)
    return sorted(h.path for h in found.hits)


def forget_request(text: str, by_pattern: bool) -> dreaming_pb2.ForgetRequest:
    """The forget of ``text`` (apply): the text, with the shared vault; or a pattern that matches it (and its
    round's code only: the string it matched is what its tombstone holds), in the agent's files only."""
    if by_pattern:
        return dreaming_pb2.ForgetRequest(agent_id="alfred", pattern=re.escape(text[:-4]) + "[A-H]{4}", apply=True)
    return dreaming_pb2.ForgetRequest(agent_id="alfred", text=text, shared=True, apply=True)


def marked(path: Path) -> bool:
    try:
        return b"[forgotten F-" in path.read_bytes()
    except FileNotFoundError:
        return False


Aim = Callable[[dict[Path, bytes]], bool]


def first_workspace_file(planted: dict[Path, bytes]) -> bool:
    return marked(next(p for p in planted if p.name == "MEMORY.md"))


def half_the_memory_files(planted: dict[Path, bytes]) -> bool:
    days = [p for p in planted if p.parent.name == "memory"]
    return sum(map(marked, days)) >= len(days) // 2


def every_workspace_file(planted: dict[Path, bytes]) -> bool:
    return all(marked(p) for p in planted if "workspace" in p.parts)


def a_vault_note(planted: dict[Path, bytes]) -> bool:
    return any(marked(p) for p in planted if p.parent.name == "notes")


ROUNDS: dict[str, tuple[str, Aim, bool]] = {  # who is killed, when, and whether the forget is by pattern
    "dreaming-first-file": ("dreaming", first_workspace_file, False),
    "dreaming-half": ("dreaming", half_the_memory_files, False),
    "dreaming-in-kb-part": ("dreaming", a_vault_note, False),
    "kb-archive": ("kb", every_workspace_file, False),
    "kb-vault-notes": ("kb", a_vault_note, False),
    # not shared: once the files are scrubbed, only the tombstone written first knows the strings it matched
    "dreaming-pattern-in-kb-part": ("dreaming", every_workspace_file, True),
}


def cut_short(suite: Suite, planted: dict[Path, bytes], n: int, victim: str, aim: Aim,
              request: dreaming_pb2.ForgetRequest) -> grpc.RpcError | None:
    """Once the planted files are indexed, send the forget and kill ``victim`` at the moment ``aim`` says;
    the forget's error (it was cut short), or None when it answered first."""
    last_day, last_note = f"d{MEMORY_FILES - 1:02d}x{n}", f"v{NOTES - 1:02d}x{n}"
    wait_until(lambda: search(suite, last_day, "memory") == [f"memory/2026-10-{MEMORY_FILES:02d}.md"], 240,
               "the archive to index the planted files")
    if any(p.parent.name == "notes" for p in planted):
        wait_until(lambda: search(suite, last_note, "shared") == [f"notes/crypt-{NOTES - 1:02d}.md"], 240,
                   "the vault to index the planted notes")
    with grpc.insecure_channel(suite.address("dreaming")) as channel:
        call = dreaming_pb2_grpc.DreamingStub(channel).Forget.future(request, metadata=AUTH, timeout=600)
        assert until(lambda: aim(planted), AIM_LIMIT_S), "the moment aimed at never came"
        kill9(suite, victim)
        try:
            call.result()
        except grpc.RpcError as exc:
            return exc
    return None


@pytest.mark.timeout(900)  # a home of 4 MB indexed, forgotten twice, and searched, on a busy machine
@pytest.mark.parametrize("round_", list(ROUNDS))
def test_a_forget_killed_mid_way_leaves_each_file_whole_and_the_same_forget_finishes_it(fsuite: Suite, tally: Tally,
                                                                                         round_: str) -> None:
    victim, aim, by_pattern = ROUNDS[round_]
    home = fsuite.home
    n = list(ROUNDS).index(round_)
    text = text_of(n)
    cut: grpc.RpcError | None = None
    for _ in range(ATTEMPTS):  # a forget that ended before the kill landed (a busy machine) is aimed at again
        planted = plant(home, n, notes=not by_pattern)
        cut = cut_short(fsuite, planted, n, victim, aim, forget_request(text, by_pattern))
        if cut is not None:
            break
        fsuite.start(victim)
    assert cut is not None, f"{round_}: in {ATTEMPTS} attempts, the forget always ended before the kill"
    assert cut.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), cut
    states = {p: whole(old, planted_part(p), text) for p, old in planted.items()}
    torn = {str(p.relative_to(home)): s for p, s in states.items() if s not in ("old", "scrubbed")}
    tally.kill(True, [])
    tally.torn += len(torn)
    assert torn == {}, torn
    tally = {s: list(states.values()).count(s) for s in ("old", "scrubbed")}
    assert tally["scrubbed"] >= 1, tally  # the kill came after the first rewrite: a forget really was cut short
    if victim == "kb":
        for db in (home / "agents/alfred/kb.sqlite", home / "shared/kb/global/kb.sqlite"):
            assert integrity_problems(db) == [], db

    fsuite.start(victim)
    with grpc.insecure_channel(fsuite.address("dreaming")) as channel:
        again = dreaming_pb2_grpc.DreamingStub(channel).Forget(forget_request(text, by_pattern), metadata=AUTH, timeout=600)
    assert not [p for p in again.places if p.left], again.text
    assert text.lower() not in again.text.lower()

    for path, old in planted.items():
        assert whole(old, planted_part(path), text) == "scrubbed", path
    assert home_residue(home, text) == []
    assert search(fsuite, text.split()[-1], "all") == [] and search(fsuite, "Quillon Varnesse", "all") == []
    assert search(fsuite, f"memoryx{n}", "memory") == ["MEMORY.md"]  # the facts beside it: still found
    assert search(fsuite, f"d06x{n}", "memory") == ["memory/2026-10-07.md"]
    assert search(fsuite, f"v03x{n}", "shared") == ([] if by_pattern else ["notes/crypt-03.md"])
    assert Tombstones(home).matches(f"again: {text}", "alfred")  # whichever run wrote it, it keeps the text out
