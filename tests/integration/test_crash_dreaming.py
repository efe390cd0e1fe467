"""kill -9 of dreaming while its applier writes.

The agent's reviewer (tests/reviewers/hold.py) proposes five changes to MEMORY.md (a replace,
two removes, two adds) and holds the run open until the test releases it; then the applier
writes pruned.md, the backup, MEMORY.md and the journal, and the recall check searches the KB.
The test kills dreaming with SIGKILL at a random moment after the release (every other round:
as soon as the run's backup of MEMORY.md appears, which is just before MEMORY.md is replaced).
Once dreaming is SERVING again: no temp file is left in the folders it writes to; MEMORY.md is
the pre-image or the post-image of the run (the post-image when the run was acknowledged);
the journal matches the file (the post-image has exactly the run's edits, not undone, the
last one ending at the file's hash; the pre-image has none left: a commit a kill cut short is
rolled back or forward at the start); pruned.md holds the removed blocks of exactly the runs whose
post-image MEMORY.md held, never those of a run it does not (a block in both files); and
``gateway dream revert`` takes a post-image back to the pre-image.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from crash_support import Tally, kill9, swept, temp_files, until
from dreaming_support import add, dreaming, jsonl, remove, replace, reviewer, write_reply
from suite_support import ADMIN_KEY, Suite, make_home, workspace

from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc

pytestmark = pytest.mark.integration

ROUNDS = 8
AIM_LIMIT_S = 10.0  # a round aimed at the backup kills anyway after this long
AUTH = (("x-api-key", ADMIN_KEY),)
PRE = "# Memory\n\n## Projects\n" + "".join(
    f"- Project {n} ships from the {name} branch every {n + 2} days.\n"
    for n, name in enumerate(("main", "release", "hotfix", "staging", "beta", "nightly", "canary", "legacy",
                              "docs", "perf", "mobile", "desktop", "infra", "billing", "search", "audit"))
)
PROPOSALS = [
    replace("- Project 1 ships from the release branch every 3 days.", "- Project 1 ships from the release branch every week."),
    remove("- Project 3 ships from the staging branch every 5 days."),
    remove("- Project 6 ships from the canary branch every 8 days."),
    add("- The canary branch was retired in June."),
    add("- Releases are tagged by the on-call engineer."),
]


PRUNED_RUN = re.compile(r" · run (\S+) op \d+ \(")  # a block's heading in pruned.md names its run
PUT_BACK = re.compile(r"\(Run (\S+): MEMORY\.md was restored after the recall check")


def archived_runs(ws: Path) -> set[str]:
    """The runs whose removed blocks stand in pruned.md (not those the recall check put back)."""
    path = ws / "memory" / "archive" / "pruned.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return set(PRUNED_RUN.findall(text)) - set(PUT_BACK.findall(text))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def open_edits(ws: Path) -> dict[str, list[dict[str, Any]]]:
    """Run id → its MEMORY.md edit records that no revert or restore undid (journal order)."""
    records = jsonl(ws / ".dreaming" / "journal.jsonl")
    undone = {(r["run"], r["op"]) for r in records if r.get("kind") in ("revert", "restore")}
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "edit" and r.get("file") == "MEMORY.md" and (r["run"], r["op"]) not in undone:
            out.setdefault(r["run"], []).append(r)
    return out


def revert_by_cli(suite: Suite, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "dream", "revert", "alfred", run_id, "--home", str(suite.home)],
                          capture_output=True, text=True, timeout=90)


def dream_folders(suite: Suite) -> list[str]:
    """Temp files in every folder dreaming writes to."""
    ws = workspace(suite, "alfred")
    return (temp_files(ws) + temp_files(ws / "memory", recursive=True) + temp_files(ws / ".dreaming", recursive=True)
            + temp_files(suite.home / "agents" / "alfred"))


def test_kill_9_mid_apply_leaves_the_pre_or_post_image_and_a_journal_that_matches(tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("crash-dream")
    gate = tmp / "gate"
    gate.mkdir()
    reply = tmp / "reply.json"
    write_reply(reply, PROPOSALS)
    command = reviewer("hold.py", "--signal", gate / "running", "--wait", gate / "release", "--limit", "60", reply)
    agents = [{"id": "alfred", "dreaming": dreaming(command), "knowledge": {"shared": {"enabled": False}}}]
    home, ports, http_port = make_home(tmp, agents)
    suite = Suite(home, http_port, ports)
    ws = workspace(suite, "alfred")
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "MEMORY.md").write_text(PRE, encoding="utf-8")
    backups = ws / ".dreaming" / "backups"
    rng = random.Random()
    tally = Tally("kill -9: dreaming applier")
    reverted_by_cli = 0
    try:
        suite.start("kb", "dreaming")
        # One run that is not killed: the post-image, and how long a run takes once released.
        report, took = run(suite, gate)
        post = (ws / "MEMORY.md").read_text(encoding="utf-8")
        assert [op.status for op in report.ops] == ["applied"] * len(PROPOSALS), report.text
        assert post != PRE
        done = revert_by_cli(suite, report.run_id)
        assert done.returncode == 0, done.stderr
        assert (ws / "MEMORY.md").read_text(encoding="utf-8") == PRE
        committed = {report.run_id}  # the runs whose post-image MEMORY.md held (a revert leaves pruned.md as it is)
        assert archived_runs(ws) == committed
        for round_ in range(ROUNDS):
            for name in ("running", "release"):
                (gate / name).unlink(missing_ok=True)
            outcome: list[dreaming_pb2.DreamReport] = []
            in_flight = threading.Event()
            with grpc.insecure_channel(suite.address("dreaming")) as channel:
                stub = dreaming_pb2_grpc.DreamingStub(channel)

                def ask(stub: dreaming_pb2_grpc.DreamingStub = stub) -> None:
                    in_flight.set()
                    with contextlib.suppress(grpc.RpcError):  # the kill cuts the call: expected
                        outcome.append(stub.RunNow(dreaming_pb2.RunNowRequest(agent_id="alfred"), metadata=AUTH, timeout=120))

                caller = threading.Thread(target=ask, daemon=True)
                caller.start()
                assert until(lambda: (gate / "running").exists(), 60), "the reviewer did not start"
                seen = set(backups.glob("MEMORY.md.*")) if backups.is_dir() else set()
                (gate / "release").touch()
                if round_ % 2:
                    until(lambda: bool(set(backups.glob("MEMORY.md.*")) - seen), AIM_LIMIT_S)
                else:
                    time.sleep(rng.uniform(0, 1.2) * took)  # a random moment of the run, not a timed assertion
                temps = dream_folders(suite)
                acked = bool(outcome)
                kill9(suite, "dreaming")
                caller.join(timeout=60)
            tally.kill(not acked, temps)
            tally.acknowledged += acked
            suite.start("dreaming")  # returns once it is SERVING
            assert dream_folders(suite) == [], "a temp file survived the restart"
            memory = (ws / "MEMORY.md").read_text(encoding="utf-8")
            edits = open_edits(ws)
            if memory == post:
                committed |= set(edits)
                matches = len(edits) == 1 and sha(post) == next(iter(edits.values()))[-1]["hashAfter"]
                if not matches:
                    tally.torn += 1  # the journal does not say what the file holds: revert cannot undo it
                    break
                run_id = next(iter(edits))
                if reverted_by_cli < 2:  # the CLI twice, then the same RPC it calls (a CLI start is a second)
                    done = revert_by_cli(suite, run_id)
                    assert done.returncode == 0, done.stderr
                    reverted_by_cli += 1
                else:
                    with grpc.insecure_channel(suite.address("dreaming")) as channel:
                        dreaming_pb2_grpc.DreamingStub(channel).RevertDream(
                            dreaming_pb2.RevertDreamRequest(agent_id="alfred", run_id=run_id), metadata=AUTH, timeout=60)
                assert (ws / "MEMORY.md").read_text(encoding="utf-8") == PRE
            elif memory == PRE:
                if acked:
                    tally.lost += 1
                if edits:
                    tally.torn += 1  # the journal says a run's edits stand in a file that does not have them
                    break
            else:
                tally.torn += 1
                break
            if archived_runs(ws) != committed:
                tally.torn += 1  # a removed block in pruned.md and MEMORY.md both, or in neither
                break
    finally:
        suite.stop_all()
    tally.temps_swept = len(swept(suite, "dreaming"))
    tally.record(f"runs of 5 proposals on MEMORY.md, killed after the reviewer answered; {tally.temps_at_kill} temp files seen "
                 f"just before the kills, {tally.temps_swept} removed by the start-up sweep, none left; every post-image reverted "
                 f"({reverted_by_cli + 1} by gateway dream revert)")
    assert (tally.lost, tally.torn) == (0, 0)


def run(suite: Suite, gate: Path) -> tuple[dreaming_pb2.DreamReport, float]:
    """A run released at once; its report and the seconds from the release to the answer."""
    result: list[dreaming_pb2.DreamReport] = []
    with grpc.insecure_channel(suite.address("dreaming")) as channel:
        stub = dreaming_pb2_grpc.DreamingStub(channel)
        caller = threading.Thread(target=lambda: result.append(
            stub.RunNow(dreaming_pb2.RunNowRequest(agent_id="alfred"), metadata=AUTH, timeout=120)), daemon=True)
        caller.start()
        assert until(lambda: (gate / "running").exists(), 60), "the reviewer did not start"
        released = time.monotonic()
        (gate / "release").touch()
        caller.join(timeout=120)
        took = time.monotonic() - released
    assert result, "the run did not answer"
    return result[0], took
