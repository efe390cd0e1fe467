"""kill -9 of dreaming while its passes move entries out of MEMORY.md.

MEMORY.md holds 20 done tasks (the compactor moves them to memory/archive/completed.md) and 120 log
sections of dated entries (the route-out moves them, over budget, to 120 topic files under
memory/): two relocations of a run, the second writing 120 destinations before MEMORY.md. Each
round starts a run and kills dreaming with SIGKILL: as soon as a relocation's intent is in the
journal (before or among its destination writes), as soon as the route-out's first destination
appears, or at a random moment of the run. Once dreaming is SERVING again:
every moved entry stands in exactly one place (MEMORY.md or a file under memory/); MEMORY.md is as
before the run, after the compactor, or after both passes; no relocation is left open in the
journal, whose open edits of MEMORY.md end at its hash; and a revert of the run takes MEMORY.md back
to where it began, every entry again in one place.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import threading
import time
from pathlib import Path

import grpc
import pytest
from crash_support import Tally, kill9, until
from dreaming_support import dreaming, jsonl, reviewer, write_reply
from suite_support import ADMIN_KEY, Suite, make_home, workspace
from test_crash_dreaming import open_edits, sha

from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc
from services.dreaming.migration import Settings, make_plan
from services.dreaming.apply import intent as relocation_intent
from services.dreaming.passes.moves import take

pytestmark = pytest.mark.integration

ROUNDS = 9
AIM_LIMIT_S = 20.0  # a round aimed at a moment kills anyway after this long
BUDGET = 800
AUTH = (("x-api-key", ADMIN_KEY),)
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def pier(i: int) -> str:
    return LETTERS[i % 26] + LETTERS[i // 26 % 26] + LETTERS[i // 676 % 26]


PRE = "# Memory\n\n## Tasks\n" + "".join(f"- [x] calibrated gauge {i} on the north pier\n" for i in range(20)) + (
    "- [ ] order spare fuses\n\n") + "".join(
    f"## Pier {pier(i)} log\n" + "".join(f"- 2026-09-{1 + (i + j) % 28:02d} tide check {j} at pier {pier(i)} with Mara\n"
                                         for j in range(3)) + "\n" for i in range(120))
PLAN = make_plan(PRE, Settings(BUDGET, "memory", True))
COMPACTED = take(PRE, PLAN.compacted)
STATES = {PRE: "pre", COMPACTED: "compacted", PLAN.after: "post"}


def intents(ws: Path) -> int:
    """How many relocations have journaled their intent so far."""
    try:
        return (ws / ".dreaming" / "journal.jsonl").read_bytes().count(b'"kind":"intent"')
    except FileNotFoundError:
        return 0


def places(ws: Path) -> list[str]:
    """MEMORY.md and every file under memory/, as text."""
    return [(ws / "MEMORY.md").read_text(encoding="utf-8"), *(p.read_text(encoding="utf-8") for p in sorted((ws / "memory").rglob("*.md")))]


def misplaced(ws: Path) -> list[str]:
    """The moved entries that do not stand in exactly one place."""
    texts = places(ws)
    return [m.text for m in PLAN.moves if sum(t.count(m.text) for t in texts) != 1]


def reset(ws: Path) -> None:
    """The workspace as before a run (no run is in progress)."""
    shutil.rmtree(ws / "memory", ignore_errors=True)
    (ws / "MEMORY.md").write_text(PRE, encoding="utf-8")


def revert(suite: Suite, run_id: str) -> None:
    with grpc.insecure_channel(suite.address("dreaming")) as channel:
        dreaming_pb2_grpc.DreamingStub(channel).RevertDream(
            dreaming_pb2.RevertDreamRequest(agent_id="alfred", run_id=run_id), metadata=AUTH, timeout=120)


def test_kill_9_mid_relocation_leaves_every_moved_entry_in_one_place(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert len(PLAN.compacted) == 20 and len({m.target for m in PLAN.routed}) == 120
    tmp = tmp_path_factory.mktemp("crash-reloc")
    reply = tmp / "reply.json"
    write_reply(reply, [])
    agents = [{"id": "alfred", "memory": {"memoryBudgetChars": BUDGET}, "dreaming": dreaming(reviewer("reply.py", reply)),
               "knowledge": {"archive": {"enabled": False}, "shared": {"enabled": False}}}]
    home, ports, http_port = make_home(tmp, agents)
    suite = Suite(home, http_port, ports)
    ws = workspace(suite, "alfred")
    ws.mkdir(parents=True, exist_ok=True)
    rng = random.Random()
    tally = Tally("kill -9: dreaming relocation")
    seen: dict[str, int] = {}
    try:
        reset(ws)
        suite.start("kb", "dreaming")
        began = time.monotonic()  # one run that is not killed: the post-image, and how long a run takes
        with grpc.insecure_channel(suite.address("dreaming")) as channel:
            report = dreaming_pb2_grpc.DreamingStub(channel).RunNow(
                dreaming_pb2.RunNowRequest(agent_id="alfred"), metadata=AUTH, timeout=120)
        took = time.monotonic() - began
        assert (ws / "MEMORY.md").read_text(encoding="utf-8") == PLAN.after, report.text
        assert misplaced(ws) == []
        revert(suite, report.run_id)
        assert (ws / "MEMORY.md").read_text(encoding="utf-8") == PRE
        for round_ in range(ROUNDS):
            reset(ws)
            first = intents(ws)
            outcome: list[dreaming_pb2.DreamReport] = []
            with grpc.insecure_channel(suite.address("dreaming")) as channel:
                stub = dreaming_pb2_grpc.DreamingStub(channel)

                def ask(stub: dreaming_pb2_grpc.DreamingStub = stub) -> None:
                    with contextlib.suppress(grpc.RpcError):  # the kill cuts the call: expected
                        outcome.append(stub.RunNow(dreaming_pb2.RunNowRequest(agent_id="alfred"), metadata=AUTH, timeout=120))

                caller = threading.Thread(target=ask, daemon=True)
                began = time.monotonic()
                caller.start()
                if round_ % 3 == 0:  # the compactor's intent, or (every other time) the route-out's
                    until(lambda: intents(ws) >= first + 1 + round_ % 2, AIM_LIMIT_S)
                elif round_ % 3 == 1:  # the route-out's first destination
                    until(lambda: any((ws / "memory").glob("pier-*.md")), AIM_LIMIT_S)
                else:
                    caller.join(timeout=rng.uniform(0, 1.2) * took)  # a random moment of the run, not a timed assertion
                acked = bool(outcome)
                kill9(suite, "dreaming")
                caller.join(timeout=60)
                took = max(took, time.monotonic() - began)
            tally.kill(not acked, [])
            tally.acknowledged += acked
            suite.start("dreaming")  # returns once it is SERVING
            memory = (ws / "MEMORY.md").read_text(encoding="utf-8")
            state = STATES.get(memory, "torn")
            seen[state] = seen.get(state, 0) + 1
            records = jsonl(ws / ".dreaming" / "journal.jsonl")
            if (misplaced(ws) or state == "torn" or relocation_intent.open_intents(records) or (acked and state != "post")
                    or (state == "pre" and open_edits(ws))):  # the journal says moves stand that MEMORY.md does not show
                tally.torn += 1
                break
            if state == "pre":
                continue
            edits = open_edits(ws)  # the earlier rounds' runs are reverted: only this round's is open
            assert len(edits) == 1, f"runs open in the journal: {sorted(edits)}"
            run_id, mine = next(iter(edits.items()))
            assert mine[-1]["hashAfter"] == sha(memory), "the journal does not say what MEMORY.md holds"
            revert(suite, run_id)
            assert (ws / "MEMORY.md").read_text(encoding="utf-8") == PRE
            assert misplaced(ws) == []
    finally:
        suite.stop_all()
    recovered = [line for line in suite.log_lines("dreaming") if line.get("event") == "dream_relocation_recovered"]
    ways = {way: sum(len(line.get(way, [])) for line in recovered) for way in ("forward", "back")}
    tally.record(f"runs moving 20 done tasks and 360 log entries (120 destinations) out of MEMORY.md, killed "
                 f"mid-run; MEMORY.md after the restart: {', '.join(f'{n} {s}' for s, n in sorted(seen.items()))}; "
                 f"relocations the kill left open, finished at the restart: {ways['forward']} forward, {ways['back']} back; "
                 "every moved entry in exactly one place, no relocation left open, every run reverted")
    assert tally.torn == 0
