"""kill -9 of the file API under a stream of PUTs.

Three writers PUT numbered, self-checking contents of 150-700 KB (crash_support.stamp) to
MEMORY.md, USER.md and SOUL.md over gRPC, one file each, as fast as the file API answers. At
a random moment (every other round: as soon as a temp file is seen, to land inside a write)
the process is killed with SIGKILL; it is started again, and once it is
SERVING: no temp file is left in the workspace, every file is whole and is one of the
contents sent to it, never older than the last one acknowledged, and the API reads back what
is on disk.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import pytest
from crash_support import Tally, has_temp_file, kill9, parse, stamp, swept, temp_files, until
from suite_support import ADMIN_KEY, Suite, make_home, workspace

from gateway.v1 import files_pb2, files_pb2_grpc

pytestmark = pytest.mark.integration

ROUNDS = 10
FILES = ("MEMORY.md", "USER.md", "SOUL.md")
SIZES = (150_000, 700_000)  # bytes of one content; under the file API's 1 MB limit
KILL_AFTER_S = (0.02, 0.4)  # after each writer's first acknowledged PUT of the round
AIM_LIMIT_S = 5.0  # a round aimed at a temp file kills anyway after this long
AUTH = (("x-api-key", ADMIN_KEY),)


@dataclass
class History:
    """What was sent to one file, and the newest write the file API acknowledged."""

    name: str
    sent: set[int] = field(default_factory=set)
    acked: int | None = None
    acked_this_round: int = 0
    in_flight: bool = False


class Writer(threading.Thread):
    """PUTs to one file until the file API goes away."""

    def __init__(self, stub: files_pb2_grpc.WorkspaceFilesStub, history: History, seqs: Iterator[int], rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.stub, self.history, self.seqs, self.rng = stub, history, seqs, rng
        self.first_ack = threading.Event()

    def run(self) -> None:
        h = self.history
        while True:
            seq = next(self.seqs)
            content = stamp(h.name, seq, self.rng.randint(*SIZES))
            h.sent.add(seq)
            h.in_flight = True
            try:
                self.stub.PutFile(files_pb2.PutFileRequest(agent_id="alfred", filename=h.name, content=content),
                                  metadata=AUTH, timeout=30)
            except grpc.RpcError:
                return  # killed: this write may or may not have landed
            finally:
                self.first_ack.set()
            h.in_flight = False
            h.acked, h.acked_this_round = seq, h.acked_this_round + 1


def test_kill_9_mid_put_leaves_whole_files_and_no_temp_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("crash-files"), [{"id": "alfred"}])
    suite = Suite(home, http_port, ports)
    ws = workspace(suite, "alfred")
    ws.mkdir(parents=True, exist_ok=True)
    rng = random.Random()
    histories = {name: History(name) for name in FILES}
    seqs = itertools.count(1)
    tally = Tally("kill -9: file API")
    try:
        suite.start("file_api")
        for round_ in range(ROUNDS):
            with grpc.insecure_channel(suite.address("file_api")) as channel:
                stub = files_pb2_grpc.WorkspaceFilesStub(channel)
                writers = [Writer(stub, histories[name], seqs, random.Random(rng.random())) for name in FILES]
                for w in writers:
                    w.start()
                for w in writers:
                    assert w.first_ack.wait(30), "a writer got no answer"
                if round_ % 2:
                    until(lambda: has_temp_file(ws), AIM_LIMIT_S)
                else:
                    time.sleep(rng.uniform(*KILL_AFTER_S))  # a random moment, not a timed assertion
                temps = temp_files(ws)
                in_flight = any(h.in_flight for h in histories.values())
                kill9(suite, "file_api")
                tally.kill(in_flight, temps)
                for w in writers:
                    w.join(timeout=30)
            suite.start("file_api")  # returns once it is SERVING
            assert temp_files(ws) == [], "a temp file survived the restart"
            with grpc.insecure_channel(suite.address("file_api")) as channel:
                stub = files_pb2_grpc.WorkspaceFilesStub(channel)
                for h in histories.values():
                    tally.acknowledged += h.acked_this_round
                    h.acked_this_round = 0
                    check_file(suite, stub, h, tally)
    finally:
        suite.stop_all()
    tally.temps_swept = len(swept(suite, "file_api"))
    tally.record(f"{len(FILES)} files, PUTs of 150-700 KB over gRPC; {tally.temps_at_kill} temp files seen just before the kills, "
                 f"{tally.temps_swept} removed by the start-up sweep, none left")
    assert (tally.lost, tally.torn) == (0, 0)
    assert tally.kills_mid_write > 0
    assert tally.temps_swept > 0  # the kills did leave temp files, and the sweeps removed them


def check_file(suite: Suite, stub: files_pb2_grpc.WorkspaceFilesStub, h: History, tally: Tally) -> None:
    """The file is whole, one of the contents sent to it, never older than the last acknowledged."""
    on_disk = (workspace(suite, "alfred") / h.name).read_text(encoding="utf-8")
    parsed = parse(on_disk)
    if parsed is None or parsed[0] != h.name or parsed[1] not in h.sent:
        tally.torn += 1
        return
    if h.acked is not None and parsed[1] < h.acked:
        tally.lost += 1
    got = stub.GetFile(files_pb2.GetFileRequest(agent_id="alfred", filename=h.name), metadata=AUTH, timeout=30)
    assert got.content == on_disk
