"""Parse worker processes: their failures roll the refresh back and never leave a process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import kb_worker_helpers
import pytest
from kb_helpers import OLD, write
from test_kb_indexer_bulk import corpus, dump, run

from services.kb.index import indexer_bulk
from services.kb.index.indexer_worker import ParseWorker, ParseWorkerError


def children() -> list[int]:
    """Live (non-zombie) child processes of this one."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    ("helper", "message"),
    [("crashing_batches", "simulated crash in the parse worker"), ("dying_batches", "exited early")],
)
def test_a_failing_worker_rolls_the_refresh_back(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch, helper: str, message: str
) -> None:
    corpus(workspace)
    run(conn, workspace, "process", monkeypatch)
    before = dump(conn)
    for path in (workspace / "memory").rglob("note*.md"):
        write(workspace, path.relative_to(workspace).as_posix(), path.read_text() + "edited\n", mtime=OLD + 9)
    monkeypatch.setattr(indexer_bulk, "parse_batches", getattr(kb_worker_helpers, helper))
    with pytest.raises(ParseWorkerError, match=message):
        run(conn, workspace, "process", monkeypatch)
    assert children() == []
    assert dump(conn) == before
    monkeypatch.undo()
    assert run(conn, workspace, "process", monkeypatch).indexed == 40


def test_a_worker_the_caller_stops_reading_is_killed(workspace: Path) -> None:
    corpus(workspace)
    files = [(path.relative_to(workspace).as_posix(), None, 0) for path in sorted(workspace.rglob("*.md"))]
    worker = ParseWorker(workspace, files, 400, 80, 1, kb_worker_helpers.endless_batches)
    try:
        assert next(iter(worker.batches()))
    finally:
        worker.close()
    assert children() == []


def test_a_worker_exits_when_its_caller_dies(workspace: Path, tmp_path: Path) -> None:
    corpus(workspace)
    script = (
        "import sys, time\n"
        f"sys.path[:0] = {sys.path!r}\n"
        "from pathlib import Path\n"
        "import kb_worker_helpers\n"
        "from services.kb.index.indexer_worker import ParseWorker\n"
        f"root = Path({str(workspace)!r})\n"
        "files = [(p.relative_to(root).as_posix(), None, 0) for p in sorted(root.rglob('*.md'))]\n"
        "worker = ParseWorker(root, files, 400, 80, 1, kb_worker_helpers.endless_batches)\n"
        "next(iter(worker.batches()))\n"
        "print(worker._process.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout is not None
        worker_pid = int(caller.stdout.readline())
        assert alive(worker_pid)
    finally:
        caller.send_signal(signal.SIGKILL)  # no cleanup of any kind in the caller
        caller.wait()
        assert caller.stdout is not None
        caller.stdout.close()
    deadline = time.monotonic() + 10
    while alive(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker_pid)


def test_a_worker_that_cannot_start_leaves_the_thread_path(
    conn: apsw.Connection, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus(workspace)
    monkeypatch.setattr(sys, "executable", "")
    report = run(conn, workspace, "process", monkeypatch)
    assert report.indexed == 50 and report.errors == []
    assert conn.execute("SELECT count(*) FROM kb_entry_lifecycle").fetchall()[0][0] > 0


def test_a_worker_sends_its_parts_one_by_one_then_the_lifecycle_of_all(workspace: Path) -> None:
    corpus(workspace)
    files = [(path.relative_to(workspace).as_posix(), None, 0) for path in sorted(workspace.rglob("*.md"))][:5]
    worker = ParseWorker(workspace, files, 400, 80, 1, parts=[2, 3])
    try:
        first = [outcome.position for batch in worker.batches() for outcome in batch]
        second = [outcome.position for batch in worker.batches() for outcome in batch]
        lifecycle = worker.finish()
    finally:
        worker.close()
    assert (first, second) == ([0, 1], [0, 1, 2])  # positions count from each part's first file
    paths = {row[1] for row in json.loads(lifecycle)}
    assert paths == {rel for rel, _, _ in files if (workspace / rel).read_text().strip()}
    assert children() == []
