"""kill -9 of the KB under shared-vault creates and updates.

Writers create notes and then update them (``CreateSharedNote`` / ``UpdateSharedNote`` over
gRPC), each note's contents numbered and self-checking (crash_support.stamp, 30-100 KB, words
no other note has, so the near-duplicate check never declines a create). Every write also
re-indexes the vault. At a random moment (every other round: as soon as a note's temp file is seen, to land inside a
write) the KB is killed with SIGKILL. Before it starts
again, a copy of the vault's kb.sqlite passes the integrity checks; once it is SERVING again:
no temp file is left in notes/ or reports/, every note is whole, one of the contents written
to it and never older than the last acknowledged one, GetSharedNote reads what is on disk,
and a search finds each note by a word of its current content.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from crash_support import Tally, has_temp_file, integrity_problems, kill9, parse, stamp, swept, temp_files, until, word_of
from suite_support import ADMIN_KEY, Suite, make_home

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

pb = kb_pb2
ROUNDS = 8
WRITERS = 3
NOTES_PER_ROUND = 2  # each writer creates this many notes per round, updating each a few times
SIZES = (30_000, 100_000)  # bytes; the vault's limit is 102,400
KILL_AFTER_S = (0.02, 0.5)
AIM_LIMIT_S = 2.0  # a round aimed at a temp file kills anyway after this long
AUTH = (("x-api-key", ADMIN_KEY),)


@dataclass
class Note:
    name: str
    sent: set[int] = field(default_factory=set)
    acked: int | None = None
    created: bool = False  # a create was acknowledged (or found done after a kill)


class Writer(threading.Thread):
    """Creates new notes and updates them until the KB goes away."""

    def __init__(self, stub: kb_pb2_grpc.KnowledgeStub, notes: list[Note], seqs: Iterator[int], rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.stub, self.notes, self.seqs, self.rng = stub, notes, seqs, rng
        self.first_ack = threading.Event()
        self.in_flight = False
        self.acks = 0

    def run(self) -> None:
        try:
            for note in itertools.cycle(self.notes):
                self.write(note)
        except grpc.RpcError:
            return  # killed: the write in flight may or may not have landed
        finally:
            self.first_ack.set()

    def write(self, note: Note) -> None:
        seq = next(self.seqs)
        content = stamp(note.name, seq, self.rng.randint(*SIZES), unique_words=True)
        note.sent.add(seq)
        self.in_flight = True
        if note.created:
            reply = self.stub.UpdateSharedNote(pb.UpdateSharedNoteRequest(agent_id="alfred", name=note.name, content=content,
                                                                         confirm=True), metadata=AUTH, timeout=60)
            assert reply.updated, reply.message
        else:
            made = self.stub.CreateSharedNote(pb.CreateSharedNoteRequest(agent_id="alfred", name=note.name, content=content),
                                              metadata=AUTH, timeout=60)
            assert made.created, made.message
            note.created = True
        self.in_flight = False
        note.acked = seq
        self.acks += 1
        self.first_ack.set()


def test_kill_9_mid_vault_write_leaves_whole_notes_and_a_sound_index(tmp_path_factory: pytest.TempPathFactory) -> None:
    home, ports, http_port = make_home(tmp_path_factory.mktemp("crash-vault"), [{"id": "alfred"}])
    (home / "agents" / "alfred" / "workspace").mkdir(parents=True)
    suite = Suite(home, http_port, ports)
    vault = home / "shared" / "kb" / "global"
    rng = random.Random()
    seqs = itertools.count(1)
    notes: list[Note] = []
    tally = Tally("kill -9: shared vault")
    try:
        suite.start("kb")
        for round_ in range(ROUNDS):
            fresh = [[Note(f"crash-{round_}-{w}-{n}") for n in range(NOTES_PER_ROUND)] for w in range(WRITERS)]
            notes += [note for mine in fresh for note in mine]
            with grpc.insecure_channel(suite.address("kb")) as channel:
                stub = kb_pb2_grpc.KnowledgeStub(channel)
                writers = [Writer(stub, mine, seqs, random.Random(rng.random())) for mine in fresh]
                for w in writers:
                    w.start()
                for w in writers:
                    assert w.first_ack.wait(60), "a writer got no answer"
                if round_ % 2:
                    until(lambda: has_temp_file(vault / "notes"), AIM_LIMIT_S)
                else:
                    time.sleep(rng.uniform(*KILL_AFTER_S))  # a random moment, not a timed assertion
                temps = temp_files(vault / "notes") + temp_files(vault / "reports")
                in_flight = any(w.in_flight for w in writers)
                kill9(suite, "kb")
                tally.kill(in_flight, temps)
                for w in writers:
                    w.join(timeout=60)
                    tally.acknowledged += w.acks
            assert integrity_problems(vault / "kb.sqlite") == [], f"round {round_}"
            suite.start("kb")  # returns once it is SERVING
            assert temp_files(vault / "notes") + temp_files(vault / "reports") == [], "a temp file survived the restart"
            with grpc.insecure_channel(suite.address("kb")) as channel:
                stub = kb_pb2_grpc.KnowledgeStub(channel)
                this_round = {note.name for mine in fresh for note in mine}
                for note in notes:
                    check_note(vault, stub, note, tally, search=note.name in this_round)
        suite.stop("kb")
        assert integrity_problems(vault / "kb.sqlite") == []
    finally:
        suite.stop_all()
    tally.temps_swept = len(swept(suite, "kb"))
    tally.record(f"{WRITERS} writers, creates then updates of 30-100 KB notes over gRPC, each re-indexed; "
                 f"{tally.temps_at_kill} temp files seen just before the kills, {tally.temps_swept} removed by the start-up sweep, "
                 "none left; kb.sqlite sound after every kill")
    assert (tally.lost, tally.torn) == (0, 0)
    assert tally.kills_mid_write > 0


def check_note(vault: Path, stub: kb_pb2_grpc.KnowledgeStub, note: Note, tally: Tally, *, search: bool) -> None:
    """A note is whole, one of its contents, not older than acknowledged, read by the KB and (with
    ``search``: a note of this round) found by a word of its content."""
    path = vault / "notes" / f"{note.name}.md"
    if not path.exists():
        if note.acked is not None:
            tally.lost += 1  # an acknowledged create is gone
        return  # a create that never landed
    on_disk = path.read_text(encoding="utf-8")
    parsed = parse(on_disk)
    if parsed is None or parsed[0] != note.name or parsed[1] not in note.sent:
        tally.torn += 1
        return
    if note.acked is not None and parsed[1] < note.acked:
        tally.lost += 1
    got = stub.GetSharedNote(pb.GetSharedNoteRequest(agent_id="alfred", name=note.name), metadata=AUTH, timeout=30)
    assert got.content == on_disk
    if not search:
        return
    found = stub.Search(pb.SearchRequest(agent_id="alfred", query=word_of(note.name, parsed[1]), corpus="shared",
                                         refresh=True), metadata=AUTH, timeout=60)
    assert [hit.path for hit in found.hits] == [f"notes/{note.name}.md"], note.name
