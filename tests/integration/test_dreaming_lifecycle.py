"""A dream's life against real processes: propose then accept, revert (op, run, refused),
the recall check (every removal found; the KB down, or the run cancelled while it waits for
the KB, restores the pre-image), and a dream that writes memory restarting no session.

One suite for the module; each test has its own agent whose reviewer is ``reply.py``
reading a reply file the test writes first (``hold.py`` for the cancelled run).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from dreaming_support import (
    PRUNED,
    add,
    audit,
    backups,
    cli,
    client,
    dreaming,
    dreams_entry,
    journal,
    op_records,
    ops_by_status,
    put_file,
    read,
    remove,
    replace,
    rest_accept,
    rest_revert,
    rest_status,
    restart,
    reviewer,
    run_ok,
    run_record,
    search,
    snapshot,
    start_suite,
    write_reply,
)
from suite_support import Suite, wait_claude, wait_until, workspace

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.home import read_internal_token
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, watcher_pb2, watcher_pb2_grpc

pytestmark = pytest.mark.integration

MEMORY = (
    "# Memory\n\n"
    "## Projects\n"
    "- The gateway listens on port 10850.\n"
    "- The staging host is named hermes.\n"
    "- The billing service is written in Kotlin.\n"
    "- Ada owns the release checklist.\n"
    "- Nightly builds are kept for fourteen days.\n"
    "- The design review happens on Wednesdays.\n"
    "- Support tickets are triaged by the on-call.\n"
    "- The wiki lives at wiki.example.internal.\n"
)
AGENTS = ("alfred", "rita", "kim", "rec", "nora", "cut")


@pytest.fixture(scope="module")
def lsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dlife")
    answers = tmp / "replies"
    answers.mkdir()
    agents: list[dict[str, Any]] = [
        {"id": agent, "dreaming": dreaming(reviewer("reply.py", answers / f"{agent}.json"))} for agent in AGENTS
    ]
    agents[4]["memory"] = {"writeRouting": True}  # nora: episodic notes too
    # cut: a reviewer held open until the test releases it
    agents[5]["dreaming"]["reviewerCommand"] = reviewer("hold.py", "--signal", tmp / "cut.running", "--wait", tmp / "cut.release",
                                                        "--limit", "30", answers / "cut.json")
    running = start_suite(tmp, agents, files={agent: {"MEMORY.md": MEMORY} for agent in AGENTS})
    try:
        yield running
    finally:
        running.stop_all()


def reply(suite: Suite, agent: str, proposals: list[dict[str, Any]]) -> None:
    write_reply(suite.home.parent / "replies" / f"{agent}.json", proposals)


def pending_ids(suite: Suite, agent: str) -> list[str]:
    response = rest_status(suite, agent)
    assert response.status_code == 200, response.text
    return [p["proposalId"] for p in response.json()["pending"]]


# --- propose, then accept ---------------------------------------------------------------------------


def test_propose_writes_only_the_audit_then_accept_applies_through_the_guards(lsuite: Suite) -> None:
    ws = workspace(lsuite, "alfred")
    staging = replace("- The staging host is named hermes.", "- The staging host is named apollo.")
    checklist = add("- Nightly backups run at 02:00.")
    kotlin = remove("- The billing service is written in Kotlin.")
    reply(lsuite, "alfred", [staging, checklist, kotlin])
    before = snapshot(ws)
    report = run_ok(lsuite, "alfred", mode="propose")
    assert (report["status"], report["mode"]) == ("proposed", "propose"), report["text"]
    assert [op["status"] for op in report["ops"]] == ["proposed"] * 3
    # Nothing outside .dreaming/ changed; inside it only the audit was written.
    assert snapshot(ws) == before
    assert read(lsuite, "alfred", "MEMORY.md") == MEMORY
    assert sorted(p.name for p in (ws / ".dreaming").iterdir()) == ["DREAMS.md", "audit.jsonl"]
    ids = [op["proposalId"] for op in report["ops"]]
    assert pending_ids(lsuite, "alfred") == ids
    shown = cli(lsuite, "status", "alfred")
    assert shown.returncode == 0 and all(i in shown.stdout for i in ids), shown.stdout
    assert "pending proposals (3)" in shown.stdout
    assert all(f"**proposed** `{op['opId']}`" in dreams_entry(lsuite, "alfred", report["runId"]) for op in report["ops"])

    # Accept two through the CLI: applied by the applier, as an "accept" run.
    done = cli(lsuite, "accept", "alfred", ids[0], ids[1])
    assert done.returncode == 0, done.stderr
    assert "(auto, accept): applied" in done.stdout, done.stdout
    after_two = MEMORY.replace("hermes", "apollo") + "- Nightly backups run at 02:00.\n"
    assert read(lsuite, "alfred", "MEMORY.md") == after_two
    assert pending_ids(lsuite, "alfred") == [ids[2]]
    # The third goes through the guards too: its anchor is now there twice, so it is skipped, stays pending.
    kotlin_line = "- The billing service is written in Kotlin.\n"
    put_file(lsuite, "alfred", "MEMORY.md", after_two + kotlin_line)
    skipped = rest_accept(lsuite, "alfred", [ids[2]])
    assert skipped.status_code == 200, skipped.text
    body = skipped.json()
    assert body["status"] == "nothing" and body["ops"][0]["status"] == "skipped"
    assert "occurs 2 times" in body["ops"][0]["reason"]
    assert pending_ids(lsuite, "alfred") == [ids[2]]
    # Once its text is gone (the agent rewrote the line), nothing is left to remove: no longer pending.
    put_file(lsuite, "alfred", "MEMORY.md", after_two.replace("written in Kotlin", "written in Rust"))
    assert pending_ids(lsuite, "alfred") == []
    moot = rest_accept(lsuite, "alfred", [ids[2]])
    assert moot.status_code == 200 and moot.json()["status"] == "nothing", moot.text
    assert "nothing is left to remove" in moot.json()["reason"]
    accepted = [r["id"] for r in audit(lsuite, "alfred") if r["kind"] == "accepted"]
    assert accepted == ids[:2]

    # Accepting again changes nothing.
    current = read(lsuite, "alfred", "MEMORY.md")
    again = rest_accept(lsuite, "alfred", [ids[0]])
    assert again.status_code == 200 and again.json()["status"] == "nothing", again.text
    assert "already accepted" in again.json()["reason"]
    assert cli(lsuite, "accept", "alfred", ids[1]).returncode == 0
    assert read(lsuite, "alfred", "MEMORY.md") == current
    # An unknown id: 404 over REST, exit 2 in the CLI.
    unknown = rest_accept(lsuite, "alfred", ["p-000000000000"])
    assert unknown.status_code == 404 and "no pending proposal p-000000000000" in unknown.json()["message"]
    missing = cli(lsuite, "accept", "alfred", "p-000000000000")
    assert missing.returncode == 2 and "no pending proposal" in missing.stderr
    assert read(lsuite, "alfred", "MEMORY.md") == current


# --- revert -----------------------------------------------------------------------------------------


def test_revert_one_op_then_the_run_by_cli_and_rest_twice_is_nothing(lsuite: Suite) -> None:
    reply(lsuite, "rita", [
        replace("- The staging host is named hermes.", "- The staging host is named apollo."),
        add("- Nightly backups run at 02:00."),
        remove("- Ada owns the release checklist."),
    ])
    report = run_ok(lsuite, "rita")
    run_id = report["runId"]
    assert [op["status"] for op in report["ops"]] == ["applied"] * 3, report["text"]
    applied = read(lsuite, "rita", "MEMORY.md")
    assert applied != MEMORY
    # One op through the CLI (its number alone).
    done = cli(lsuite, "revert", "rita", f"{run_id}/2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"reverted {run_id}/2 of {run_id}"), done.stdout
    assert read(lsuite, "rita", "MEMORY.md") == applied.replace("- Nightly backups run at 02:00.\n", "")
    twice = cli(lsuite, "revert", "rita", f"{run_id}/2")
    assert twice.returncode == 0 and twice.stdout == f"nothing to revert in {run_id}: {run_id}/2 already undone\n"
    # The rest of the run over REST.
    whole = rest_revert(lsuite, "rita", run_id)
    assert whole.status_code == 200, whole.text
    assert (whole.json()["reverted"], whole.json()["already"]) == ([f"{run_id}/3", f"{run_id}/1"], [f"{run_id}/2"])
    assert read(lsuite, "rita", "MEMORY.md") == MEMORY
    again = rest_revert(lsuite, "rita", run_id)
    assert again.status_code == 200 and again.json()["reverted"] == [], again.text
    assert sorted(again.json()["already"]) == sorted(f"{run_id}/{n}" for n in (1, 2, 3))
    assert read(lsuite, "rita", "MEMORY.md") == MEMORY
    reverts = [r for r in journal(lsuite, "rita") if r["kind"] == "revert"]
    assert sorted(r["op"] for r in reverts) == sorted(f"{run_id}/{n}" for n in (1, 2, 3))
    assert [r["kind"] for r in audit(lsuite, "rita")].count("revert") == 2  # two reverts did something
    unknown = rest_revert(lsuite, "rita", "20000101T000000Z-000000")
    assert unknown.status_code == 404, unknown.text
    # An op the run does not have is unknown too: 404, exit 2 (bad usage), and nothing changes.
    no_op = rest_revert(lsuite, "rita", run_id, "9")
    assert no_op.status_code == 404 and f"{run_id}/9" in no_op.json()["message"], no_op.text
    by_cli = cli(lsuite, "revert", "rita", f"{run_id}/9")
    assert by_cli.returncode == 2 and f"{run_id}/9" in by_cli.stderr, by_cli.stderr
    assert read(lsuite, "rita", "MEMORY.md") == MEMORY


def test_a_revert_is_refused_when_the_text_around_the_op_changed(lsuite: Suite) -> None:
    reply(lsuite, "rita", [replace("- The billing service is written in Kotlin.", "- The billing service is written in Go.")])
    report = run_ok(lsuite, "rita")
    run_id = report["runId"]
    assert report["ops"][0]["status"] == "applied", report["text"]
    # The agent edits that very line afterwards.
    edited = read(lsuite, "rita", "MEMORY.md").replace("written in Go.", "written in Go (since 2025).")
    put_file(lsuite, "rita", "MEMORY.md", edited)
    refused = rest_revert(lsuite, "rita", run_id)
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert message.startswith(f"{run_id}/1: the text around this op in MEMORY.md changed since"), message
    by_cli = cli(lsuite, "revert", "rita", f"{run_id}/1")
    assert by_cli.returncode == 1 and f"{run_id}/1: the text around this op" in by_cli.stderr, by_cli.stderr
    assert read(lsuite, "rita", "MEMORY.md") == edited  # untouched
    assert not [r for r in journal(lsuite, "rita") if r["kind"] == "revert" and r["run"] == run_id]


# --- the recall check ---------------------------------------------------------------------------------


def test_every_removed_entry_is_archived_byte_for_byte_and_found_by_search(lsuite: Suite) -> None:
    block = "- The staging host is named hermes.\n- The billing service is written in Kotlin.\n"
    reply(lsuite, "rec", [remove(block)])
    report = run_ok(lsuite, "rec")
    assert report["ops"][0]["status"] == "applied", report["text"]
    assert read(lsuite, "rec", "MEMORY.md") == MEMORY.replace(block, "")
    assert any(n.startswith("Recall checked: every removed entry") for n in report["notes"]), report["notes"]
    pruned = read(lsuite, "rec", PRUNED)
    assert f"run {report['runId']} op 1 (remove)\n\n{block}" in pruned, pruned
    for words in ("staging host hermes", "billing service Kotlin"):
        hits = search(lsuite, "rec", words)
        assert [h["path"] for h in hits if h["path"] == PRUNED], (words, hits)
    assert "Recall checked" in dreams_entry(lsuite, "rec", report["runId"])


def test_a_run_cancelled_during_the_recall_check_restores_what_it_removed(lsuite: Suite) -> None:
    # The caller goes away (Ctrl-C in `gateway dream`, a client deadline) after the run wrote
    # MEMORY.md and while it waits for the KB: the removal was never checked for recall.
    reply(lsuite, "cut", [remove("- The staging host is named hermes.")])
    metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(lsuite.home)),)
    running, release = lsuite.home.parent / "cut.running", lsuite.home.parent / "cut.release"
    kb = lsuite.procs["kb"]
    with grpc.insecure_channel(lsuite.address("dreaming")) as channel:
        call = dreaming_pb2_grpc.DreamingStub(channel).RunNow.future(dreaming_pb2.RunNowRequest(agent_id="cut"), metadata=metadata, timeout=60)
        try:
            wait_until(running.exists, 20, "cut's reviewer to run")
            kb.send_signal(signal.SIGSTOP)  # the KB takes no more calls: the refresh waits
            release.write_text("go\n")
            wait_until(lambda: any(r["kind"] == "edit" for r in journal(lsuite, "cut")), 20, "the run to write MEMORY.md")
            assert "hermes" not in read(lsuite, "cut", "MEMORY.md")
            call.cancel()
        finally:
            kb.send_signal(signal.SIGCONT)
    [edit] = [r for r in journal(lsuite, "cut") if r["kind"] == "edit"]
    run_id = edit["run"]
    wait_until(lambda: any(r["kind"] == "run" for r in audit(lsuite, "cut")), 20, "the cancelled run's audit")
    assert read(lsuite, "cut", "MEMORY.md") == MEMORY  # restored: nothing removed goes unchecked
    record = run_record(lsuite, "cut", run_id)
    assert record["status"] == "interrupted" and "cancelled" in record["reason"], record
    assert [(r["kind"], r["op"]) for r in journal(lsuite, "cut") if r["kind"] == "restore"] == [("restore", f"{run_id}/1")]
    assert {r["status"] for r in op_records(lsuite, "cut", run_id)} == {"restored"}
    assert "**restored**" in dreams_entry(lsuite, "cut", run_id)
    assert f"(Run {run_id}: MEMORY.md was restored" in read(lsuite, "cut", PRUNED)
    # The lock went with the call: the next run goes.
    reply(lsuite, "cut", [])
    assert run_ok(lsuite, "cut")["status"] == "nothing"


# --- no session restart -------------------------------------------------------------------------------


def test_a_dream_restarts_no_session(lsuite: Suite) -> None:
    metadata = ((INTERNAL_TOKEN_HEADER, read_internal_token(lsuite.home)),)
    pb = watcher_pb2
    fact = "- The deploy freeze starts on Friday the 13th."
    reply(lsuite, "nora", [add(fact), {"op": "add", "tier": "episodic", "topic": "deploy-log",
                                       "content": "- Shipped release 2.3 after the freeze review.", "reason": "task log"}])
    with grpc.insecure_channel(lsuite.address("watcher")) as channel:
        sessions = watcher_pb2_grpc.SessionsStub(channel)
        sessions.RegisterSession(pb.RegisterSessionRequest(agent_id="nora", session_id="idle-nora", state=pb.SESSION_STATE_IDLE),
                                 metadata=metadata, timeout=5)
        stream = sessions.WatchDirectives(pb.WatchDirectivesRequest(agent_id="nora"), metadata=metadata, timeout=60)
        stream.initial_metadata()  # subscribed: a directive from now on would arrive
        got: queue.Queue[watcher_pb2.Directive] = queue.Queue()

        def pump() -> None:
            with contextlib.suppress(grpc.RpcError):  # cancelled at the end
                for item in stream:
                    got.put(item)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            report = run_ok(lsuite, "nora")
            assert [op["status"] for op in report["ops"]] == ["applied", "applied"], report["text"]
            assert read(lsuite, "nora", "memory/deploy-log.md") == "- Shipped release 2.3 after the freeze review.\n"
            wait_claude(lsuite, "nora", fact)  # the watcher saw the dream's write and recomposed
            put_file(lsuite, "nora", "HEARTBEAT.md", "beat after the dream\n")  # the control
            first = got.get(timeout=15)
            assert list(first.changed_files) == ["HEARTBEAT.md"], first
            assert (first.session_id, first.kind) == ("idle-nora", pb.DIRECTIVE_KIND_RESTART_NOW)
        finally:
            stream.cancel()
            reader.join(timeout=5)
            sessions.EndSession(pb.EndSessionRequest(agent_id="nora", session_id="idle-nora"), metadata=metadata, timeout=5)


def test_status_over_rest_and_cli_agree(lsuite: Suite) -> None:
    with client(lsuite) as http:
        status = http.get("/api/v1/agents/rita/dream:status").json()
    assert status["scheduled"] is True and status["lastRun"]["trigger"] == "manual"
    shown = cli(lsuite, "status", "rita")
    assert shown.returncode == 0 and shown.stdout == status["text"]
    assert isinstance(status["nextRunAt"], str) and status["nextRunAt"]
    assert httpx.get(f"{lsuite.base_url}/api/v1/agents/rita/dream:status", timeout=10).status_code == 401


# Last in the module: the dreaming process's channel to the restarted KB may still be backing
# off for a moment, and a recall check then cannot run (the safe outcome, but not the one the
# tests above look for).
def test_a_kb_that_cannot_answer_restores_the_pre_image(lsuite: Suite) -> None:
    reply(lsuite, "kim", [remove("- The staging host is named hermes."), add("- Nightly backups run at 02:00.")])
    lsuite.stop("kb")
    try:
        report = run_ok(lsuite, "kim")
    finally:
        restart(lsuite, "kb")
    run_id = report["runId"]
    by = ops_by_status(report)
    assert [op["opId"] for op in by["restored"]] == [f"{run_id}/1", f"{run_id}/2"], report["text"]
    assert all(op["reason"].startswith("the recall check could not run (kb: UNAVAILABLE") for op in by["restored"])
    assert report["status"] == "nothing"
    assert read(lsuite, "kim", "MEMORY.md") == MEMORY  # the pre-image is back
    assert any(n.startswith("MEMORY.md restored to its pre-image") for n in report["notes"])
    restores = [r for r in journal(lsuite, "kim") if r["kind"] == "restore"]
    assert [(r["run"], r["op"], r["by"]) for r in restores] == [(run_id, f"{run_id}/1", "recall check"), (run_id, f"{run_id}/2", "recall check")]
    assert {r["status"] for r in op_records(lsuite, "kim", run_id)} == {"restored"}
    assert "**restored**" in dreams_entry(lsuite, "kim", run_id)
    pruned = read(lsuite, "kim", PRUNED)
    assert "- The staging host is named hermes.\n" in pruned and f"(Run {run_id}: MEMORY.md was restored" in pruned
    assert backups(lsuite, "kim") == [f"MEMORY.md.{run_id}"]
    # A later revert finds nothing left to undo.
    undo = rest_revert(lsuite, "kim", run_id)
    assert undo.status_code == 200, undo.text
    assert (undo.json()["reverted"], sorted(undo.json()["already"])) == ([], [f"{run_id}/1", f"{run_id}/2"])
    assert "already undone" in undo.json()["message"]
    assert read(lsuite, "kim", "MEMORY.md") == MEMORY
