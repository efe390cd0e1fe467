"""Forget on purpose, end to end (docs/concepts/forget.md), through the real processes: a personal fact
told in a session transcript goes through MEMORY.md, the shared vault (a promotion), the journal,
backups, DREAMS.md, the audit, pruned.md, stale.md (the staleness GC moves a superseded note) and
both indexes; an AWS-style key and a private-key block
are PUT into MEMORY.md (accepted, with a warning) and a dream removes the key line again. Then
``POST …/memory:forget`` (apply, shared) for each, and every file under the home, read as bytes
(SQLite files, WALs, backups, the processes' logs), holds neither the text nor any 8-character run
of it, except the runtime's transcript, which is listed and left; no search finds it; every fact
planted beside it is still found.

A forget the KB could not finish (it was down) leaves the files scrubbed and the tombstone
recorded, and the same forget run again finishes it. And who may forget: a read key cannot; a key scoped to one agent cannot forget in another, nor in
the shared vault, nor see or lift the shared tombstones; ``gateway forget`` drives the same RPCs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from dreaming_support import (
    PRUNED, add, backups, client, dreaming, read, remove, restart, reviewer, run_ok, sessions_dir, start_suite, write_reply,
    write_transcript,
)
from forget_support import runs
from secret_samples import AWS_KEY, PRIVATE_KEY_BLOCK, SECRETS
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite, wait_until

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

FACT = "Marguerite Pellworth is allergic to cashew nuts"
FACT_LINE = f"- {FACT} (told on the phone)."
BESIDE = "- The recycling van collects glass on Thursdays."
STAYS = "- The greenhouse thermostat holds nineteen degrees."
AWS_LINE = SECRETS["AWS Access Key"]
KEY_BODY = PRIVATE_KEY_BLOCK.splitlines()[1]  # the key's own material (its header names only its kind)
TOPIC = "household-notes"
STALE = "memory/archive/stale.md"
NOTES = f"# Notes\n\n- #42: {FACT}, as the school list said.\n- The piano tuner visits in May.\n"
DECISIONS = "# Decisions\n\n- #43: replaces #42 — the school list moved to the binder\n"
ID = re.compile(r"^F-[0-9a-f]{12}$")


@pytest.fixture(scope="module")
def fsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("forget")
    reply = tmp / "reply.json"  # outside the home: the test's own file
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", reply))}, {"id": "bob"}]
    filler = "".join(f"- House rule number {n}: shoes stay by the door.\n" for n in range(12))  # under the loss cap
    notes = {"memory/notes.md": NOTES, "memory/decisions.md": DECISIONS}  # the staleness GC moves #42 to stale.md
    files = {"alfred": {"MEMORY.md": f"# Memory\n\n{STAYS}\n{filler}", **notes}, "bob": {"MEMORY.md": "# Memory\n\n- Bob waters the ferns.\n"}}
    running = start_suite(tmp, agents, services=("file_api", "kb", "dreaming", "http"), files=files)
    try:
        yield running
    finally:
        running.stop_all()


def reply_with(suite: Suite, *proposals: dict[str, Any]) -> None:
    write_reply(suite.home.parent / "reply.json", proposals)


def forget(suite: Suite, agent: str, key: str = ADMIN_KEY, **body: Any) -> httpx.Response:
    with client(suite, key) as http:
        return http.post(f"/api/v1/agents/{agent}/memory:forget", json=body, timeout=120)


def residue(root: Path, text: str, *, skip: Path) -> list[str]:
    """``grep -a -r`` for any 8-character run of ``text`` (as written, lowercased, JSON-escaped) in every
    file under ``root`` but those under ``skip``: ``"<file>: <run>"`` per hit."""
    forms = runs(text) | {json.dumps(r.decode())[1:-1].encode() for r in runs(text)}
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and not p.is_relative_to(skip)):
        data = path.read_bytes()
        lowered = data.lower()
        hits += [f"{path.relative_to(root)}: {form!r}" for form in sorted(forms) if form in data or form in lowered]
    return hits


def search(suite: Suite, query: str, corpus: str = "all") -> list[str]:
    """The paths a KB search finds (over gRPC: a query in a URL would sit in the shim's log)."""
    with grpc.insecure_channel(suite.address("kb")) as channel:
        found = kb_pb2_grpc.KnowledgeStub(channel).Search(
            kb_pb2.SearchRequest(agent_id="alfred", query=query, corpus=corpus, limit=20, refresh=True),
            metadata=(("x-api-key", ADMIN_KEY),), timeout=30)
    return sorted(h.path for h in found.hits)


def test_a_fact_and_two_secrets_leave_every_byte_of_the_home_but_the_transcript(fsuite: Suite) -> None:
    alfred = fsuite.home / "agents" / "alfred"
    write_transcript(sessions_dir(fsuite, "alfred"), "s1.jsonl", [("user", f"Please remember: {FACT}."), ("user", BESIDE)])
    reply_with(fsuite, add(FACT_LINE, reason="health", topic=TOPIC), add(BESIDE, reason="chores", topic=TOPIC))
    first = run_ok(fsuite, "alfred")
    assert first["status"] == "applied" and "promotion" in first["steps"], first
    assert [o["status"] for o in first["ops"] if o["op"] == "stale"] == ["applied"], first
    assert FACT in read(fsuite, "alfred", STALE) and FACT not in read(fsuite, "alfred", "memory/notes.md")
    note = fsuite.home / "shared" / "kb" / "global" / "notes" / f"{TOPIC}.md"
    assert FACT in note.read_text() and BESIDE in note.read_text()

    memory = read(fsuite, "alfred", "MEMORY.md")
    with client(fsuite) as http:
        put = http.put("/api/v1/agents/alfred/files/MEMORY.md", json={"content": f"{memory}{AWS_LINE}\n\n{PRIVATE_KEY_BLOCK}\n"})
    assert put.status_code == 200 and put.json().get("warnings"), put.text  # the user's own file: written, with a warning
    reply_with(fsuite, remove(FACT_LINE, reason="not needed"), remove(AWS_LINE, reason="a secret"))
    second = run_ok(fsuite, "alfred")
    assert [op["status"] for op in second["ops"]] == ["applied", "applied"], second
    assert FACT_LINE in read(fsuite, "alfred", PRUNED) and AWS_LINE in read(fsuite, "alfred", PRUNED)
    assert backups(fsuite, "alfred") and KEY_BODY in read(fsuite, "alfred", "MEMORY.md")
    transcripts = sessions_dir(fsuite, "alfred")
    for text in (FACT, AWS_KEY, KEY_BODY):  # the test can fail: each is in the home's bytes now
        assert residue(fsuite.home, text, skip=transcripts), text
    assert search(fsuite, "Pellworth cashew") and search(fsuite, AWS_KEY)

    dry = forget(fsuite, "alfred", text=FACT, shared=True)
    assert dry.status_code == 200, dry.text
    assert not dry.json().get("applied") and not dry.json().get("tombstoneId")
    assert not [r for r in runs(FACT) if r in dry.content or r in dry.content.lower()]  # the report never holds it
    where = {(p["store"], p["path"]) for p in dry.json()["places"]}
    assert {("workspace", PRUNED), ("workspace", STALE), ("workspace", ".dreaming/journal.jsonl"), ("transcripts", "s1.jsonl"),
            ("vault:global", f"notes/{TOPIC}.md")} <= where, where
    assert any(store == "workspace" and path.startswith(".dreaming/backups/") for store, path in where)
    assert any(store == "archive" for store, _ in where)

    ids = []
    for text in (FACT, AWS_KEY, PRIVATE_KEY_BLOCK):
        done = forget(fsuite, "alfred", text=text, shared=True, apply=True)
        assert done.status_code == 200, done.text
        reply = done.json()
        assert reply["applied"] and ID.match(reply["tombstoneId"]) and reply["tombstones"] == 1, reply
        assert not [r for r in runs(text) if r in done.content or r in done.content.lower()]
        ids.append(reply["tombstoneId"])
    assert {p["path"] for p in reply["places"] if p.get("left")} <= {"s1.jsonl"}

    for text in (FACT, AWS_KEY, KEY_BODY):
        assert residue(fsuite.home, text, skip=transcripts) == [], text
    assert PRIVATE_KEY_BLOCK.splitlines()[0] not in (alfred / "workspace" / "MEMORY.md").read_text()
    assert FACT in (transcripts / "s1.jsonl").read_text()  # the runtime's file: listed, never rewritten

    for query in ("Pellworth", "cashew allergic", AWS_KEY, KEY_BODY):
        assert search(fsuite, query) == [], query
    assert search(fsuite, "greenhouse thermostat nineteen", "memory") == ["MEMORY.md"]
    assert search(fsuite, "recycling van glass", "memory") == ["MEMORY.md"]
    assert search(fsuite, "piano tuner", "memory") == ["memory/notes.md"]
    assert "the school list said" in read(fsuite, "alfred", STALE)  # the rest of the stale entry stays
    assert search(fsuite, "recycling van glass", "shared") == [f"notes/{TOPIC}.md"]
    assert BESIDE in note.read_text() and f"[forgotten {ids[0]}]" in note.read_text()

    records = [r for r in map(json.loads, (alfred / "workspace" / ".dreaming/audit.jsonl").read_text().splitlines())
               if r.get("kind") == "forget" and r.get("id") in ids]
    assert [(r["id"], r["by"], r["shared"]) for r in records] == [(i, "admin", True) for i in ids]
    assert records[0]["stores"]["vault:global"] >= 1 and records[0]["places"] >= 5  # the note, its promotion record
    with client(fsuite) as http:
        listed = http.get("/api/v1/agents/alfred/tombstones").json()["tombstones"]
    assert [(t["tombstoneId"], t["scope"]) for t in listed if t["tombstoneId"] in ids] == [(i, "*") for i in ids]


def test_who_may_forget_list_and_lift_and_the_cli(fsuite: Suite) -> None:
    assert forget(fsuite, "alfred", READER_KEY, text="the ferns need water").status_code == 403  # read access only
    assert forget(fsuite, "alfred", BOB_WRITER_KEY, text="the ferns need water").status_code == 403  # another agent
    assert forget(fsuite, "bob", BOB_WRITER_KEY, text="the ferns need water", shared=True).status_code == 403  # the vault
    for bad in ({"text": "ab"}, {"text": "ferns water", "pattern": "fern"}, {"pattern": "x*"}, {"pattern": "("}, {}):
        answer = forget(fsuite, "bob", BOB_WRITER_KEY, **bad)
        assert answer.status_code == 400, (bad, answer.text)
    mine = forget(fsuite, "bob", BOB_WRITER_KEY, text="Bob waters the ferns", apply=True)
    assert mine.status_code == 200 and mine.json()["changed"] >= 1, mine.text
    assert "ferns" not in read(fsuite, "bob", "MEMORY.md")
    shared = forget(fsuite, "bob", ADMIN_KEY, text="the shared ferns rota", shared=True, apply=True).json()["tombstoneId"]

    with client(fsuite, BOB_WRITER_KEY) as http:
        seen = {t["tombstoneId"]: t["scope"] for t in http.get("/api/v1/agents/bob/tombstones").json()["tombstones"]}
        assert seen == {mine.json()["tombstoneId"]: "bob"}  # the shared ones need scope "*"
        assert http.post(f"/api/v1/agents/bob/tombstones/{shared}:lift", json={}).status_code == 403
        assert http.post("/api/v1/agents/bob/tombstones/F-000000000000:lift", json={}).status_code == 404
        assert http.post("/api/v1/agents/bob/tombstones/nonsense:lift", json={}).status_code == 400
    with client(fsuite, READER_KEY) as http:
        assert http.get("/api/v1/agents/alfred/tombstones").status_code == 403  # a key that may not forget

    def gateway(*words: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "forget", *words, "--home", str(fsuite.home)],
                              input=stdin, capture_output=True, text=True, timeout=120)

    dry = gateway("bob", "--text", "-", "--dry-run", stdin="Bob waters the ferns\n")
    assert dry.returncode == 0 and "would forget (dry run)" in dry.stdout and "ferns" not in dry.stdout, dry
    listed = gateway("bob", "--list")
    assert listed.returncode == 0 and shared in listed.stdout and mine.json()["tombstoneId"] in listed.stdout, listed
    lifted = gateway("bob", "--lift", shared)
    assert lifted.returncode == 0 and "lifted" in lifted.stdout, lifted
    assert shared not in gateway("bob", "--list").stdout
    assert gateway("bob", "--lift", shared).returncode == 2  # gone
    assert gateway("nobody", "--text", "some words").returncode == 2
    assert gateway("bob", "--text", "ab").returncode == 2


def test_a_forget_the_kb_could_not_finish_is_finished_by_running_it_again(fsuite: Suite) -> None:
    fact = "Ottilie Brackenridge hoards vintage barographs"
    memory = read(fsuite, "alfred", "MEMORY.md")
    with client(fsuite) as http:
        assert http.put("/api/v1/agents/alfred/files/MEMORY.md", json={"content": f"{memory}- {fact}.\n"}).status_code == 200
    assert search(fsuite, "Brackenridge barographs", "memory") == ["MEMORY.md"]  # in the archive's bytes now
    archive = fsuite.home / "agents" / "alfred" / "kb.sqlite"
    fsuite.stop("kb")
    try:
        down = forget(fsuite, "alfred", text=fact, apply=True)
        assert down.status_code == 503 and "run the same forget again" in down.json()["message"], down.text
        assert fact not in read(fsuite, "alfred", "MEMORY.md") and "[forgotten F-" in read(fsuite, "alfred", "MEMORY.md")
        assert residue(archive.parent, fact, skip=archive.parent / "workspace")  # the KB's part was not done
    finally:
        restart(fsuite, "kb")
    answers: list[httpx.Response] = []

    def finished() -> bool:  # dreaming's channel to the KB may still be backing off at first
        answers.append(forget(fsuite, "alfred", text=fact, apply=True))
        return answers[-1].status_code == 200

    wait_until(finished, 30, "the same forget to finish once the KB is back")
    again = answers[-1].json()
    assert again["tombstones"] == 0 and any(p["store"] == "archive" for p in again["places"]), again
    assert residue(fsuite.home, fact, skip=sessions_dir(fsuite, "alfred")) == []
    assert search(fsuite, "Brackenridge barographs") == []
    with client(fsuite) as http:
        scopes = [t["scope"] for t in http.get("/api/v1/agents/alfred/tombstones").json()["tombstones"]]
    assert scopes.count("alfred") == 1  # the first run's, kept when the KB was down
