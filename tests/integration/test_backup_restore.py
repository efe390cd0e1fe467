"""``gateway backup`` of a running suite while a writer keeps going, then ``gateway restore`` into a
fresh home: the restored suite serves the same files and the same search answers."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from suite_support import ADMIN_KEY, Suite, make_home, poll_get, wait_claude, wait_until

from gateway.suite_lock import holders

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
    suite.start(*SERVICES)


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


class LedgerWriter(threading.Thread):
    """A user's own SQLite database in the workspace (not a kb.sqlite), in WAL mode, one row per
    transaction, numbered 0, 1, 2…, until stopped: a consistent copy holds rows 0..n-1, no gap."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.stopped, self.rows = path, threading.Event(), 0
        self.error: BaseException | None = None
        conn = apsw.Connection(os.fspath(path))
        conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute("CREATE TABLE ledger(n INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        conn.close()

    def run(self) -> None:
        try:
            conn = apsw.Connection(os.fspath(self.path))
            conn.setbusytimeout(10_000)
            while not self.stopped.is_set():
                with conn:
                    conn.execute("INSERT INTO ledger VALUES (?, ?)", (self.rows, "x" * 200))
                self.rows += 1
            conn.close()
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
    (workspace / "tools").mkdir()
    ledger = LedgerWriter(workspace / "tools" / "ledger")
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
        ledger.start()
        wait_until(lambda: writer.writes >= 3 or writer.error is not None, 60, "the writer's first writes")
        wait_until(lambda: ledger.rows >= 10 or ledger.error is not None, 60, "the ledger's first rows")
        ledger_rows_before = ledger.rows
        done = gateway("backup", str(tmp_path / "bk"), "--home", str(home))
        at_end, ledger_at_end = writer.writes, ledger.rows
        wait_until(lambda: writer.writes >= at_end + 3 or writer.error is not None, 60, "writes after the backup")
        wait_until(lambda: ledger.rows >= ledger_at_end + 10 or ledger.error is not None, 60, "rows after the backup")
        for thread in (writer, ledger):
            thread.stopped.set()
            thread.join(timeout=60)
            assert thread.error is None, thread.error
        assert done.returncode == 0, done.stderr
        # alfred's archive, the vault's, and the ledger: every database, whatever its name
        assert "3 databases (integrity_check ok)" in done.stdout, done.stdout
    finally:
        writer.stopped.set()
        ledger.stopped.set()
        first.stop_all()

    new_home = tmp_path / "b" / "home"
    restored = gateway("restore", str(tmp_path / "bk"), "--home", str(new_home))
    assert restored.returncode == 0, restored.stderr
    manifest = json.loads((tmp_path / "bk" / "backup.json").read_text())
    databases = [new_home / d["path"].removeprefix("home/") for d in manifest["databases"]]
    assert sorted(p.relative_to(new_home).as_posix() for p in databases) == [
        "agents/alfred/kb.sqlite", "agents/alfred/workspace/tools/ledger", "shared/kb/global/kb.sqlite"]
    for path in databases:
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
        assert list(conn.execute("PRAGMA integrity_check")) == [("ok",)], path
        if path.parent.name == "alfred":  # the copy holds what was committed (a byte copy would miss the WAL's part)
            indexed = {str(row[0]) for row in conn.execute("SELECT path FROM kb_sources")}
            assert set(NOTES) <= indexed, sorted(set(NOTES) - indexed)
        if path.name == "ledger":  # one snapshot: rows 0..n-1, every one committed before the backup began among them
            numbers = [int(row[0]) for row in conn.execute("SELECT n FROM ledger ORDER BY n")]
            assert numbers == list(range(len(numbers))) and len(numbers) >= ledger_rows_before, (len(numbers), ledger_rows_before)
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


# --- a restore never writes under a running suite ------------------------------------------------

ALL_SERVICES = ("file_api", "watcher", "kb", "dreaming", "http")


def home_files(home: Path) -> dict[str, tuple[str, int]]:
    """Every file of the home: relative path → (SHA-256, mode). The test suite's own process logs
    (``<name>.log``, written by the test's Suite, not by the gateway) are left out."""
    out = {}
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home).as_posix()
        if path.is_file() and not (path.parent == home and rel.endswith(".log")):
            out[rel] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode)
    return out


def settled(home: Path) -> dict[str, tuple[str, int]]:
    """``home_files`` once ten readings in a row agree (the services' start-up writes are done)."""
    readings = [home_files(home)]

    def steady() -> bool:
        readings.append(home_files(home))
        return len(readings) >= 10 and all(r == readings[-1] for r in readings[-10:])
    wait_until(steady, 60, "the home to stop changing")
    return readings[-1]


def serving(http_port: int) -> bool:
    """Whether the shim answers /healthz with every backend SERVING."""
    try:
        body = poll_get(f"http://127.0.0.1:{http_port}/healthz", 2).json()
    except (httpx.HTTPError, ValueError):
        return False
    backends = body.get("backends", {})
    return bool(backends) and all(state == "SERVING" for state in backends.values())


def soul(suite: Suite) -> str:
    with client(suite) as http:
        response = http.get("/api/v1/agents/alfred/files/SOUL.md")
    assert response.status_code == 200, response.text
    return str(response.json()["content"])


def put_soul(suite: Suite, text: str) -> None:
    with client(suite) as http:
        assert http.put("/api/v1/agents/alfred/files/SOUL.md", json={"content": text}).status_code == 200


def assert_refused(result: subprocess.CompletedProcess[str], home: Path, pids: dict[str, int]) -> None:
    """One line on stderr naming every process (role and pid), nothing on stdout, exit 2."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    line = result.stderr
    assert line.startswith(f"gateway: refused: {home} is in use by "), line
    for role, pid in pids.items():
        assert f"{role} (pid {pid})" in line, (role, pid, line)
    assert "--force does not override this" in line and line.rstrip().endswith("nothing was changed"), line


def test_restore_into_a_home_that_serve_processes_hold_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """Processes started one by one (as compose starts them, no launcher): restore, with or
    without --force, names them and changes no file; once they stop, the same restore works."""
    home, ports, http_port = make_home(tmp_path, [{"id": "alfred"}])
    suite = Suite(home, http_port, ports)
    try:
        suite.start(*ALL_SERVICES)
        put_soul(suite, "# Soul\n\nthe version in the backup\n")
        with client(suite) as http:  # the KB opens (and holds open) alfred's kb.sqlite
            assert http.post("/api/v1/agents/alfred/memory:refresh", json={}).status_code == 200
        done = gateway("backup", str(tmp_path / "bk"), "--home", str(home))
        assert done.returncode == 0, done.stderr
        put_soul(suite, "# Soul\n\nthe version after the backup\n")
        wait_claude(suite, "alfred", "the version after the backup")  # the watcher's write is done
        before = settled(home)
        pids = {name: proc.pid for name, proc in suite.procs.items()}
        for flags in (["--force"], []):
            refused = gateway("restore", str(tmp_path / "bk"), "--home", str(home), *flags)
            assert_refused(refused, home, pids)
            assert home_files(home) == before  # file by file: bytes and modes
            assert soul(suite) == "# Soul\n\nthe version after the backup\n"
    finally:
        suite.stop_all()

    restored = gateway("restore", str(tmp_path / "bk"), "--home", str(home), "--force")
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.startswith(f"restored {(tmp_path / 'bk').absolute()} into {home}: ")
    again = Suite(home, http_port, ports)
    try:
        again.start("file_api", "kb", "http")
        assert soul(again) == "# Soul\n\nthe version in the backup\n"
    finally:
        again.stop_all()
    manifest = json.loads((tmp_path / "bk" / "backup.json").read_text())
    assert manifest["databases"], manifest
    for path in (home / d["path"].removeprefix("home/") for d in manifest["databases"]):
        conn = apsw.Connection(os.fspath(path), flags=apsw.SQLITE_OPEN_READONLY)
        assert list(conn.execute("PRAGMA integrity_check")) == [("ok",)], path
        conn.close()


def test_restore_under_gateway_up_names_the_launcher_and_its_children(tmp_path: Path) -> None:
    home, _ports, http_port = make_home(tmp_path, [{"id": "alfred"}])
    done = gateway("backup", str(tmp_path / "bk"), "--home", str(home))
    assert done.returncode == 0, done.stderr
    up = subprocess.Popen([sys.executable, "-m", "gateway_cli.cli", "up", "--home", str(home)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        claude_md = home / "agents" / "alfred" / "workspace" / "CLAUDE.md"
        wait_until(lambda: up.poll() is not None or (serving(http_port) and claude_md.exists()), 60, "the suite to serve")
        assert up.poll() is None, "gateway up exited"
        pids = {h.role: h.pid for h in holders(home)}
        assert set(pids) == {"gateway up", *ALL_SERVICES} and pids["gateway up"] == up.pid, pids
        before = settled(home)
        refused = gateway("restore", str(tmp_path / "bk"), "--home", str(home), "--force")
        assert_refused(refused, home, pids)
        assert home_files(home) == before
        assert serving(http_port)  # the suite never noticed
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=60)
    assert holders(home) == []
    restored = gateway("restore", str(tmp_path / "bk"), "--home", str(home), "--force")
    assert restored.returncode == 0, restored.stderr
