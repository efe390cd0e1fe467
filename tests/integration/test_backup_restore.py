"""``gateway backup`` of a running suite while a writer keeps going, then ``gateway restore`` into a
fresh home: the restored suite serves the same files and the same search answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, make_home, wait_until

pytestmark = pytest.mark.integration

CLI_TIMEOUT_S = 120
SERVICES = ("file_api", "kb", "http")  # the ones that serve files and search
IDENTITY = {"IDENTITY.md": "# Identity\n\nAlfred, the butler of the archive.\n", "USER.md": "# User\n\nPrefers tea at four.\n"}
NOTES = {f"memory/2026-11-{day:02d}.md": f"# Day {day}\n\n- The lighthouse keeper logged storm number {day}.\n"
         for day in range(1, 11)}  # under the limit of 20 hits: every match answers
SHARED = {"lighthouse rota": "# Lighthouse rota\n- The lighthouse keeper swaps shifts at dawn.\n"}
QUERIES = (("lighthouse keeper", "memory"), ("storm", "memory"), ("lighthouse keeper", "all"), ("dawn shifts", "shared"))


def client(suite: Suite) -> httpx.Client:
    return httpx.Client(base_url=suite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY})


def start(suite: Suite) -> None:
    for name in SERVICES:
        suite.start(name)


def answers(suite: Suite) -> dict[str, list[tuple[Any, ...]]]:
    """Each query's hits as (path, corpus, lines, snippet), in a stable order (scores left out: the
    writer's later notes change the corpus statistics, never which chunks match)."""
    out = {}
    with client(suite) as http:
        for query, corpus in QUERIES:
            response = http.get("/api/v1/agents/alfred/memory:search",
                                params={"query": query, "corpus": corpus, "refresh": "true", "limit": 20})
            assert response.status_code == 200, response.text
            hits = response.json()["hits"]
            out[f"{query}/{corpus}"] = sorted((h["path"], h.get("corpus"), h.get("startLine"), h.get("endLine"), h.get("snippet"))
                                              for h in hits)
    assert all(out.values()), out
    return out


class Writer(threading.Thread):
    """Keeps putting SOUL.md through REST and new memory notes (with a KB refresh each) until stopped."""

    def __init__(self, suite: Suite) -> None:
        super().__init__(daemon=True)
        self.suite, self.stopped, self.writes, self.souls = suite, threading.Event(), 0, [""]
        self.error: BaseException | None = None

    def run(self) -> None:
        memory = self.suite.home / "agents" / "alfred" / "workspace" / "memory"
        try:
            with client(self.suite) as http:
                while not self.stopped.is_set():
                    soul = f"# Soul\n\nrevision {self.writes} of a zebra soul.\n"
                    self.souls.append(soul)
                    assert http.put("/api/v1/agents/alfred/files/SOUL.md", json={"content": soul}).status_code == 200
                    (memory / f"zebra-{self.writes}.md").write_text(f"# Zebra {self.writes}\n\n- a zebra crossed.\n")
                    assert http.post("/api/v1/agents/alfred/memory:refresh", json={}).status_code == 200
                    self.writes += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


def gateway(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", *words], capture_output=True, text=True, timeout=CLI_TIMEOUT_S)


def test_backup_while_writing_then_restore_serves_the_same(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    home, ports, http_port = make_home(tmp_path / "a", [{"id": "alfred"}])
    workspace = home / "agents" / "alfred" / "workspace"
    for rel, text in NOTES.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    first = Suite(home, http_port, ports)
    writer = Writer(first)
    try:
        start(first)
        with client(first) as http:
            for name, text in IDENTITY.items():
                assert http.put(f"/api/v1/agents/alfred/files/{name}", json={"content": text}).status_code == 200
            for name, text in SHARED.items():
                body = {"name": name, "content": text, "confirm": True}
                assert http.post("/api/v1/agents/alfred/shared/notes", json=body).status_code == 200, "shared note"
        before = answers(first)

        writer.start()
        wait_until(lambda: writer.writes >= 3 or writer.error is not None, 60, "the writer's first writes")
        done = gateway("backup", str(tmp_path / "bk"), "--home", str(home))
        at_end = writer.writes
        wait_until(lambda: writer.writes >= at_end + 3 or writer.error is not None, 60, "writes after the backup")
        writer.stopped.set()
        writer.join(timeout=60)
        assert writer.error is None, writer.error
        assert done.returncode == 0, done.stderr
        assert "2 databases (integrity_check ok)" in done.stdout, done.stdout  # alfred's archive and the vault's
    finally:
        writer.stopped.set()
        first.stop_all()

    new_home = tmp_path / "b" / "home"
    restored = gateway("restore", str(tmp_path / "bk"), "--home", str(new_home))
    assert restored.returncode == 0, restored.stderr
    manifest = json.loads((tmp_path / "bk" / "backup.json").read_text())
    databases = [new_home / d["path"].removeprefix("home/") for d in manifest["databases"]]
    assert sorted(p.relative_to(new_home).as_posix() for p in databases) == ["agents/alfred/kb.sqlite", "shared/kb/global/kb.sqlite"]
    for path in databases:
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
        assert list(conn.execute("PRAGMA integrity_check")) == [("ok",)], path
        if path.parent.name == "alfred":  # the copy holds what was committed (a byte copy would miss the WAL's part)
            indexed = {str(row[0]) for row in conn.execute("SELECT path FROM kb_sources")}
            assert set(NOTES) <= indexed, sorted(set(NOTES) - indexed)
        conn.close()

    second = Suite(new_home, http_port, ports)
    try:
        start(second)
        with client(second) as http:
            for name, text in IDENTITY.items():
                assert http.get(f"/api/v1/agents/alfred/files/{name}").json()["content"] == text
            soul = http.get("/api/v1/agents/alfred/files/SOUL.md").json()["content"]
        assert soul in writer.souls  # one whole revision, whichever the backup caught
        after = answers(second)
        for query, hits in before.items():
            assert after[query] == hits, (query, set(hits) ^ set(after[query]))
    finally:
        second.stop_all()
