"""``gateway vault export`` and ``import`` as real commands beside running KBs: a round trip into a fresh
home, a SQLite vault moved to a PostgreSQL one (``pg_support``'s cluster) and searched there over REST, a
tampered export and a conflict refused with nothing written, an import killed by SIGKILL then run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import psycopg
import pytest
from dreaming_support import add, dreaming, replies, reviewer, run_ok, write_reply
from dreaming_support import start_suite as start_agents
from pg_support import Cluster, postgres  # noqa: F401  (fixture)
from suite_support import ADMIN_KEY, Suite, make_home, wait_until

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
AUTH = (("x-api-key", ADMIN_KEY),)
CLI_TIMEOUT_S = 120
MB = 1_048_576
QUERIES = ("blue-green", "東京", "sailing", "fax", "rollback window", "harbour office")
MEMORY = "# Memory\n\n- The office plants need water on Mondays.\n"
HARBOUR = "- The harbour office opens at 07:00 and closes at 16:00 on weekdays."


def gateway(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *words], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def notes_dir(home: Path) -> Path:
    return home / "shared" / "kb" / "global" / "notes"


def note_names(home: Path) -> list[str]:
    return sorted(p.name for p in notes_dir(home).glob("*.md")) if notes_dir(home).is_dir() else []


@pytest.fixture
def start_suite(tmp_path: Path) -> Iterator[Callable[[str], Suite]]:
    """Starts the KB (and, in home ``a``, dreaming and the REST shim) of a new home under ``tmp_path/<name>``
    with agents alfred (who dreams, with a scripted reviewer) and bob; stopped after the test."""
    running: list[Suite] = []

    def start(name: str) -> Suite:
        (tmp_path / name).mkdir()
        answers = tmp_path / name / "home" / "replies"  # dreaming_support.replies of that home
        agents: list[dict[str, Any]] = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", answers / "alfred.json"))},
                                        {"id": "bob"}]
        services = ("kb", "dreaming", "http") if name == "a" else ("kb",)
        running.append(start_agents(tmp_path / name, agents, services=services, files={"alfred": {"MEMORY.md": MEMORY}}))
        return running[-1]

    yield start
    for suite in running:
        suite.stop_all()


def call(suite: Suite) -> kb_pb2_grpc.KnowledgeStub:
    return kb_pb2_grpc.KnowledgeStub(grpc.insecure_channel(suite.address("kb")))


def hits(kb: kb_pb2_grpc.KnowledgeStub, query: str) -> list[str]:
    found = kb.Search(pb.SearchRequest(agent_id="bob", query=query, corpus="shared", limit=10), metadata=AUTH, timeout=30)
    return [h.path for h in found.hits]


def fill(suite: Suite) -> None:
    """Two agents' notes, a wikilink, CJK, a retired note, a promotion by alfred's dreaming and a 1 MB note
    written by hand."""
    kb = call(suite)
    for agent, name, content in (
        ("alfred", "staging deploys", "# Staging deploys\n- Use the blue-green switch. See [[rollback]].\n"),
        ("bob", "rollback", "# Rollback\n- The rollback window is fifteen minutes.\n"),
        ("bob", "東京メモ", "# 東京\n- 会議は東京で行います。渋谷の事務所。\n"),
        ("alfred", "fax machine", "# Fax\n- The fax machine is in room 4.\n"),
    ):
        made = kb.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id=agent, name=name, content=content, confirm=True),
                                   metadata=AUTH, timeout=30)
        assert made.created, name
    kb.RetireSharedNote(pb.RetireSharedNoteRequest(agent_id="alfred", name="fax machine", reason="unused"),
                        metadata=AUTH, timeout=30)
    write_reply(replies(suite.home) / "alfred.json", [add(HARBOUR, reason="harbour office hours", topic="harbour-office-hours")])
    assert "promotion" in run_ok(suite, "alfred")["steps"]
    line = "sailing notes for the long passage, line after line of it\n"
    (notes_dir(suite.home) / "big.md").write_text("# Big\n" + line * ((MB - 6) // len(line)))
    wait_until(lambda: "notes/big.md" in hits(kb, "sailing"), 60, "the file watch to index the 1 MB note")


def test_round_trip_into_a_fresh_home_while_both_run(tmp_path: Path, start_suite: Callable[[str], Suite]) -> None:
    source = start_suite("a")
    fill(source)
    out = gateway("vault", "export", "--project", "global", str(tmp_path / "one"), "--home", str(source.home))
    assert out.returncode == 0, out.stderr
    assert "5 live and 1 retired notes, authors of 5" in out.stdout
    promoted = json.loads((tmp_path / "one" / "vault.json").read_text())["authors"]["harbour-office-hours"]["created"]
    assert promoted["agent_id"] == "alfred" and promoted["run_id"]  # written by a dream run
    target = start_suite("b")
    back = gateway("vault", "import", "--project", "global", str(tmp_path / "one"), "--home", str(target.home))
    assert back.returncode == 0, back.stderr
    assert "6 notes written, 0 already there, 0 skipped" in back.stdout
    again = gateway("vault", "export", "--project", "global", str(tmp_path / "two"), "--home", str(target.home))
    assert again.returncode == 0, again.stderr
    assert files(tmp_path / "one") == files(tmp_path / "two")
    for query in QUERIES:
        assert hits(call(source), query) == hits(call(target), query), query
    refused = gateway("vault", "export", "--project", "global", str(tmp_path / "two"), "--home", str(target.home))
    assert refused.returncode == 2 and "not an empty folder" in refused.stderr



def postgres_suite(tmp: Path) -> Suite:
    """The KB and the REST shim of a new home whose vault is PostgreSQL's (the DSN in ``MOVED_VAULT_DSN``)."""
    tmp.mkdir()
    home, ports, http_port = make_home(tmp, [{"id": "alfred"}, {"id": "bob"}], knowledge={
        "shared": {"backend": "postgres", "postgres": {"dsnEnv": "MOVED_VAULT_DSN", "connectTimeoutS": 5}}})
    suite = Suite(home, http_port, ports)
    suite.start("kb", "http")
    return suite


def rest_hits(suite: Suite, query: str) -> list[str]:
    with httpx.Client(base_url=suite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=30) as http:
        found = http.get("/api/v1/agents/bob/memory:search", params={"query": query, "corpus": "shared", "limit": 10})
    assert found.status_code == 200, found.text
    return [hit["path"] for hit in found.json().get("hits", [])]


def test_a_sqlite_vault_moves_to_postgresql(tmp_path: Path, start_suite: Callable[[str], Suite], postgres: Cluster,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    source = start_suite("a")
    fill(source)
    assert gateway("vault", "export", "--project", "global", str(tmp_path / "one"), "--home", str(source.home)).returncode == 0
    dsn = postgres.create_database("moved_vault")
    monkeypatch.setenv("MOVED_VAULT_DSN", dsn)  # the suite's processes and the commands inherit it
    target = postgres_suite(tmp_path / "pg")
    try:
        back = gateway("vault", "import", "--project", "global", str(tmp_path / "one"), "--home", str(target.home))
        assert back.returncode == 0, back.stderr
        assert "6 notes written, 0 already there, 0 skipped" in back.stdout
        again = gateway("vault", "export", "--project", "global", str(tmp_path / "two"), "--home", str(target.home))
        assert again.returncode == 0, again.stderr
        for query in QUERIES:  # the best hit is the same; past it, SQLite also ranks notes holding only some words
            found = rest_hits(target, query)
            assert found and found[0] == hits(call(source), query)[0] and set(found) <= set(hits(call(source), query)), query
    finally:
        target.stop_all()
    one, two = files(tmp_path / "one"), files(tmp_path / "two")
    assert {k: v for k, v in one.items() if k.startswith("notes/")} == {k: v for k, v in two.items() if k.startswith("notes/")}
    assert_same_but_author_times(json.loads(one["vault.json"]), json.loads(two["vault.json"]))
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT retired FROM gateway_vault.notes WHERE name = 'fax machine'").fetchall() == [(True,)]
        assert conn.execute("SELECT octet_length(body) > %s FROM gateway_vault.notes WHERE name = 'big'", (MB - 100,)).fetchone() == (True,)
    assert not list((target.home / "shared").rglob("*.md"))


def assert_same_but_author_times(sqlite: dict[str, Any], pg: dict[str, Any]) -> None:
    """PostgreSQL keeps a note's last change to the microsecond, and its last author's time is the note's
    last change (the SQLite vault keeps the two apart): all else is equal."""
    assert sqlite["lifecycle"] == pg["lifecycle"]
    assert sqlite["notes"].keys() == pg["notes"].keys()
    for name, kept in sqlite["notes"].items():
        assert pg["notes"][name]["updated_at"] == pytest.approx(kept["updated_at"], abs=1e-6), name
    assert sqlite["authors"].keys() == pg["authors"].keys()
    for name, authors in sqlite["authors"].items():
        moved = pg["authors"][name]
        assert moved["created"] == authors["created"], name
        note = name if name in pg["notes"] else f"stale__{name}"
        assert moved["changed"]["at"] == pytest.approx(pg["notes"][note]["updated_at"], abs=1e-6), name
        assert {**moved["changed"], "at": 0} == {**authors["changed"], "at": 0}, name

def test_a_tampered_export_and_a_conflict_write_nothing(tmp_path: Path, start_suite: Callable[[str], Suite]) -> None:
    source = start_suite("a")
    fill(source)
    assert gateway("vault", "export", "--project", "global", str(tmp_path / "out"), "--home", str(source.home)).returncode == 0
    target = start_suite("b")
    call(target).CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="bob", name="rollback", content="# Ours\n- other.\n"),
                                  metadata=AUTH, timeout=30)
    conflict = gateway("vault", "import", "--project", "global", str(tmp_path / "out"), "--home", str(target.home))
    assert conflict.returncode == 2 and "'rollback'" in conflict.stderr and "nothing was written" in conflict.stderr
    assert note_names(target.home) == ["rollback.md"]
    note = tmp_path / "out" / "notes" / "東京メモ.md"
    note.write_bytes(note.read_bytes().replace("東京".encode(), "大阪".encode()))
    tampered = gateway("vault", "import", "--project", "global", str(tmp_path / "out"), "--home", str(target.home),
                       "--skip-existing")
    assert tampered.returncode == 2
    assert tampered.stderr.strip().splitlines() == [
        "gateway: vault import: notes/東京メモ.md changed since the export (its sha256 is not the manifest's); nothing was written"]
    assert note_names(target.home) == ["rollback.md"]


def test_an_import_killed_midway_completes_when_run_again(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    source, _, _ = make_home(tmp_path / "a", [{"id": "alfred"}])
    notes_dir(source).mkdir(parents=True)
    for i in range(600):
        (notes_dir(source) / f"note {i:03}.md").write_text(f"# Note {i}\n- fact number {i} about the harbour.\n" * 40)
    assert gateway("vault", "export", "--project", "global", str(tmp_path / "out"), "--home", str(source)).returncode == 0
    target, _, _ = make_home(tmp_path / "b", [{"id": "alfred"}])
    proc = subprocess.Popen([sys.executable, "-m", "gateway_cli.cli", "vault", "import", "--project", "global",
                             str(tmp_path / "out"), "--home", str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: len(note_names(target)) >= 50 or proc.poll() is not None, 60, "the import to write notes")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the import ended before it was killed: make the export larger"
    assert 50 <= len(note_names(target)) < 600
    time.sleep(0.1)
    rerun = gateway("vault", "import", "--project", "global", str(tmp_path / "out"), "--home", str(target))
    assert rerun.returncode == 0, rerun.stderr
    assert "0 skipped" in rerun.stdout and "already there" in rerun.stdout
    assert gateway("vault", "export", "--project", "global", str(tmp_path / "again"), "--home", str(target)).returncode == 0
    assert files(tmp_path / "out") == files(tmp_path / "again")
