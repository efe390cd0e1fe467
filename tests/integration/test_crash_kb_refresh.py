"""kill -9 of the KB mid-refresh, on a refresh large enough for its parse workers.

An archive of ``FILES`` memory files, ``FILE_BYTES`` each (over indexer_bulk.PROCESS_BYTES
in all, and more than indexer.BULK_FILES of them), is rewritten whole every round, each line
naming the round; then a full Refresh is asked for and the KB is killed with SIGKILL: every
other round at a random moment within about the time a refresh takes (so some refreshes are
acknowledged first), the others at a random moment while its parse workers run. The workers,
whose parent is gone, exit on their own. Then, on a copy of kb.sqlite taken while no process has it open:
``PRAGMA integrity_check`` and both FTS5 integrity checks pass, and every source is indexed
from one round only (a refresh is one transaction: never half a source, never a mix), the
round just written when its refresh was acknowledged. Once the KB is SERVING again, a search
finds each sampled file by its own word of the round, when that refresh was acknowledged.
"""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
from pathlib import Path

import apsw
import grpc
import pytest
from crash_support import Tally, index_copy, integrity_problems, kill9, problems_of, swept, temp_files
from suite_support import ADMIN_KEY, Suite, make_home, wait_until, workspace

from gateway.v1 import kb_pb2, kb_pb2_grpc
from services.kb.index.indexer import BULK_FILES
from services.kb.index.indexer_bulk import PROCESS_BYTES

pytestmark = pytest.mark.integration

pb = kb_pb2
ROUNDS = 6
AIM_LIMIT_S = 10.0  # a round aimed at the parse workers kills anyway after this long
FILES = 72
FILE_BYTES = 60_000
SAMPLED = 3  # files searched by their own word after an acknowledged refresh
AUTH = (("x-api-key", ADMIN_KEY),)
_ROUND = re.compile(r"round(\d+)file(\d+)")


def content(round_: int, index: int) -> str:
    """File ``index`` as written in ``round_``: every line names both (as one word)."""
    line = f"- round{round_}file{index} the archive keeps this line about gardening and tomatoes\n"
    return f"# Notes {index}\n\n" + line * (FILE_BYTES // len(line))


def write_round(memory: Path, round_: int) -> None:
    for index in range(FILES):
        (memory / f"note{index:03}.md").write_text(content(round_, index), encoding="utf-8")


def children(pid: int) -> set[int]:
    """The processes ``pid`` started that still run (its parse workers)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out |= {int(p) for p in (task / "children").read_text().split()}
        except OSError:
            continue
    return out


def gone(pids: set[int]) -> bool:
    return not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def rounds_per_source(conn: apsw.Connection) -> dict[str, set[int]]:
    """Source path → the rounds its indexed chunks name."""
    out: dict[str, set[int]] = {}
    for path, text in conn.execute("SELECT s.path, c.text FROM kb_chunks c JOIN kb_sources s ON s.id = c.source_id"):
        out.setdefault(path, set()).update(int(m[1]) for m in _ROUND.finditer(text))
    return out


def until_workers(pid: int, limit_s: float) -> set[int]:
    """Poll until process ``pid`` has children (its parse workers); them ([] after ``limit_s``)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = children(pid)
        if found:
            return found
        time.sleep(0.002)
    return set()


def test_kill_9_mid_refresh_leaves_a_sound_index_of_one_round_per_source(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert FILES >= BULK_FILES and FILES * FILE_BYTES >= PROCESS_BYTES  # the bulk path, with its workers
    home, ports, http_port = make_home(tmp_path_factory.mktemp("crash-kb"), [{"id": "alfred"}])
    suite = Suite(home, http_port, ports)
    memory = workspace(suite, "alfred") / "memory"
    memory.mkdir(parents=True)
    db = home / "agents" / "alfred" / "kb.sqlite"
    rng = random.Random()
    tally = Tally("kill -9: KB mid-refresh")
    worker_rounds = 0
    try:
        write_round(memory, 0)
        suite.start("kb")
        with grpc.insecure_channel(suite.address("kb")) as channel:
            started = time.monotonic()
            kb_pb2_grpc.KnowledgeStub(channel).Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=120)
            took = time.monotonic() - started  # to aim the kills at a refresh's lifetime, not an assertion
        # A fresh process: its first refresh walks the tree (the bulk path with workers); a targeted
        # refresh, as a second one in the same process would be, parses on a thread.
        suite.stop("kb")
        suite.start("kb")
        acked_round = 0
        for round_ in range(1, ROUNDS + 1):
            write_round(memory, round_)
            done = threading.Event()
            with grpc.insecure_channel(suite.address("kb")) as channel:
                stub = kb_pb2_grpc.KnowledgeStub(channel)

                def ask(stub: kb_pb2_grpc.KnowledgeStub = stub) -> None:
                    with contextlib.suppress(grpc.RpcError):  # the kill cuts the call: expected
                        stub.Refresh(pb.RefreshRequest(agent_id="alfred", wait=True), metadata=AUTH, timeout=120)
                        done.set()

                caller = threading.Thread(target=ask, daemon=True)
                pid = suite.procs["kb"].pid
                caller.start()
                if round_ % 2:
                    until_workers(pid, AIM_LIMIT_S)
                    time.sleep(rng.uniform(0, 0.5) * took)  # a random moment while they run
                else:
                    time.sleep(rng.uniform(0.1, 1.6) * took)  # a random moment of the refresh, not a timed assertion
                workers = children(pid)
                in_flight = not done.is_set()
                kill9(suite, "kb")
                caller.join(timeout=60)
            tally.kill(in_flight, temp_files(memory))
            worker_rounds += bool(workers)
            wait_until(lambda w=workers: gone(w), 30, "the parse workers of the killed KB to exit")  # type: ignore[misc]
            if done.is_set():
                tally.acknowledged += 1
                acked_round = round_
            with index_copy(db) as conn:
                assert problems_of(conn) == [], f"round {round_}"
                check_rounds(conn, tally, acked_round, round_)
            suite.start("kb")  # returns once it is SERVING
            assert temp_files(home / "shared" / "kb" / "global" / "notes") == []
            if done.is_set():
                check_found(suite, rng.sample(range(FILES), SAMPLED), round_)
        suite.stop("kb")
        assert integrity_problems(db) == []
    finally:
        suite.stop_all()
    tally.temps_swept = len(swept(suite, "kb"))
    tally.record(f"{FILES} files of {FILE_BYTES // 1000} KB rewritten per round, full refreshes ({took:.1f} s unkilled) "
                 f"with parse workers alive at {worker_rounds} of the kills; kb.sqlite and its FTS5 tables sound "
                 "after every kill, each source indexed from one round")
    assert (tally.lost, tally.torn) == (0, 0)
    assert tally.kills_mid_write > 0


def check_rounds(conn: apsw.Connection, tally: Tally, acked_round: int, round_: int) -> None:
    """Every source is indexed from one round, not older than the last acknowledged refresh."""
    per_source = rounds_per_source(conn)
    assert len(per_source) == FILES, sorted(per_source)[:5]
    for path, rounds in per_source.items():
        if len(rounds) != 1:
            tally.torn += 1
        elif min(rounds) < acked_round or max(rounds) > round_:
            tally.lost += 1


def check_found(suite: Suite, sample: list[int], round_: int) -> None:
    with grpc.insecure_channel(suite.address("kb")) as channel:
        stub = kb_pb2_grpc.KnowledgeStub(channel)
        for index in sample:
            reply = stub.Search(pb.SearchRequest(agent_id="alfred", query=f"round{round_}file{index}", limit=20),
                                metadata=AUTH, timeout=60)
            assert {hit.path for hit in reply.hits} == {f"memory/note{index:03}.md"}, index
