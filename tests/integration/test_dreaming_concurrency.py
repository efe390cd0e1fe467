"""Dreaming next to other writers and callers, against real processes: a PUT through the file
API mid-run wins (compare-and-swap), a run holds no lock against the file API, one run per
agent at a time (409), two agents dreaming at once, and who may call what.

The reviewers hold the run open deterministically: ``put_then_reply.py`` PUTs MEMORY.md
before it answers, ``hold.py`` waits for a file the test creates (or the other agent's
reviewer creates, for the rendezvous).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from dreaming_support import (
    PRUNED,
    add,
    audit,
    backups,
    cli,
    dreaming,
    dreams_entry,
    journal,
    op_records,
    put_file,
    read,
    remove,
    replace,
    rest_accept,
    rest_revert,
    rest_run,
    rest_status,
    reviewer,
    run_ok,
    run_record,
    start_suite,
    write_reply,
)
from suite_support import ADMIN_KEY, BOB_WRITER_KEY, READER_KEY, Suite, wait_until, workspace

pytestmark = pytest.mark.integration

T = TypeVar("T")
MEMORY = (
    "# Memory\n\n"
    "## Projects\n"
    "- The gateway listens on port 10850.\n"
    "- The staging host is named hermes.\n"
    "- The billing service is written in Kotlin.\n"
    "- Ada owns the release checklist.\n"
    "- Nightly builds are kept for fourteen days.\n"
    "- The design review happens on Wednesdays.\n"
)
USER = "# About the user\n\n- Works from Lisbon.\n"
PUT_CONTENT = MEMORY.replace("hermes", "zeus") + "- Written by the agent while the dream ran.\n"
ABORTED = "aborted: MEMORY.md changed on disk during the run (compare-and-swap); nothing written to it"


@pytest.fixture(scope="module")
def csuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dconc")
    answers, gates = tmp / "replies", tmp / "gates"
    answers.mkdir()
    gates.mkdir()
    (tmp / "put-content.md").write_text(PUT_CONTENT, encoding="utf-8")

    def hold(agent: str, signal: str, wait: str) -> dict[str, Any]:
        command = reviewer("hold.py", "--signal", gates / signal, "--wait", gates / wait, "--limit", "20", answers / f"{agent}.json")
        return {"id": agent, "dreaming": dreaming(command)}

    agents = [
        hold("alfred", "alfred.running", "alfred.release"),
        {"id": "bob", "dreaming": dreaming(reviewer("reply.py", answers / "bob.json"))},
        {"id": "cas", "dreaming": dreaming(["placeholder"])},  # configure() sets it: it needs the shim's port
        hold("twin-a", "twin-a.ready", "twin-b.ready"),
        hold("twin-b", "twin-b.ready", "twin-a.ready"),
    ]

    def configure(config: dict[str, Any], suite: Suite) -> None:
        url = f"{suite.base_url}/api/v1/agents/cas/files/MEMORY.md"
        entry = next(a for a in config["agents"] if a["id"] == "cas")
        entry["dreaming"]["reviewerCommand"] = reviewer("put_then_reply.py", url, ADMIN_KEY, tmp / "put-content.md", answers / "cas.json")

    files = {a["id"]: {"MEMORY.md": MEMORY, "USER.md": USER} for a in agents}
    running = start_suite(tmp, agents, files=files, configure=configure)
    try:
        yield running
    finally:
        running.stop_all()


def reply(suite: Suite, agent: str, proposals: list[dict[str, Any]]) -> None:
    write_reply(suite.home.parent / "replies" / f"{agent}.json", proposals)


def gate(suite: Suite, name: str) -> Path:
    return suite.home.parent / "gates" / name


class Background:
    """``fn()`` on a thread; ``result()`` waits for it and re-raises what it raised."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._out: list[Any] = []
        self._err: list[BaseException] = []

        def target() -> None:
            try:
                self._out.append(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                self._err.append(exc)

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def result(self, timeout: float = 60) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the background call did not finish"
        if self._err:
            raise self._err[0]
        return self._out[0]


# --- compare-and-swap -----------------------------------------------------------------------------


def test_a_put_through_the_file_api_mid_run_wins(csuite: Suite) -> None:
    reply(csuite, "cas", [
        replace("named hermes", "named apollo"),
        remove("- Ada owns the release checklist."),
        add("- Prefers answers in English.", file="USER.md"),
    ])
    report = run_ok(csuite, "cas")
    run_id = report["runId"]
    assert report["reviewer"]["ok"], report["text"]  # the PUT answered 200 while the run was in progress
    # MEMORY.md is what the PUT wrote; the run left it alone and said so.
    assert read(csuite, "cas", "MEMORY.md") == PUT_CONTENT
    memory_ops = [op for op in report["ops"] if op["file"] == "MEMORY.md"]
    assert [(op["status"], op["reason"]) for op in memory_ops] == [("skipped", ABORTED)] * 2
    assert f"MEMORY.md left alone: {ABORTED.removeprefix('aborted: ')}" in report["notes"]
    record = run_record(csuite, "cas", run_id)
    assert f"MEMORY.md left alone: {ABORTED.removeprefix('aborted: ')}" in record["notes"]
    assert [r["reason"] for r in op_records(csuite, "cas", run_id) if r["file"] == "MEMORY.md"] == [ABORTED] * 2
    assert "MEMORY.md left alone" in dreams_entry(csuite, "cas", run_id)
    # USER.md was not touched by anyone else: its op went through.
    assert [op["status"] for op in report["ops"] if op["file"] == "USER.md"] == ["applied"]
    assert read(csuite, "cas", "USER.md") == USER + "- Prefers answers in English.\n"
    # No backup, no journal edit and no pruned block for the aborted file.
    assert backups(csuite, "cas") == [f"USER.md.{run_id}"]
    assert {r["file"] for r in journal(csuite, "cas") if r["kind"] == "edit"} == {"USER.md"}
    assert "Ada owns the release checklist" not in read(csuite, "cas", PRUNED)


# --- one run per agent; the file API is never blocked ------------------------------------------


def test_a_second_run_is_409_and_a_put_is_not_blocked_by_a_run(csuite: Suite) -> None:
    reply(csuite, "alfred", [replace("- The staging host is named hermes.", "- The staging host is named apollo.")])
    running, release = gate(csuite, "alfred.running"), gate(csuite, "alfred.release")
    first = Background(lambda: rest_run(csuite, "alfred"))
    try:
        wait_until(running.exists, 20, "alfred's reviewer to be running")
        second = rest_run(csuite, "alfred")
        assert second.status_code == 409, second.text
        assert second.json()["code"] == 10  # ABORTED
        assert "a dreaming run of agent 'alfred' is in progress" in second.json()["message"]
        by_cli = cli(csuite, "alfred")
        assert by_cli.returncode == 1 and "is in progress" in by_cli.stderr, by_cli.stderr
        assert rest_revert(csuite, "alfred", "20000101T000000Z-000000").status_code == 409
        assert rest_status(csuite, "alfred").json()["lastRun"]["runId"] == ""  # status answers meanwhile
        # The file API takes no notice of the run: the PUT answers at once...
        put_file(csuite, "alfred", "MEMORY.md", PUT_CONTENT)
    finally:
        release.write_text("go\n")
        response = first.result()
    # ...and makes the run leave MEMORY.md alone.
    assert response.status_code == 200, response.text
    report = response.json()
    assert [(op["status"], op["reason"]) for op in report["ops"]] == [("skipped", ABORTED)]
    assert read(csuite, "alfred", "MEMORY.md") == PUT_CONTENT
    assert [r["status"] for r in audit(csuite, "alfred") if r["kind"] == "run"] == ["nothing"]  # the 409s ran nothing
    for name in ("alfred.running", "alfred.release"):
        gate(csuite, name).unlink()


def test_two_agents_dream_at_once_without_interfering(csuite: Suite) -> None:
    reply(csuite, "twin-a", [add("- Twin A keeps the garden keys.")])
    reply(csuite, "twin-b", [add("- Twin B feeds the cat on Sundays.")])
    runs = [Background(functools.partial(rest_run, csuite, agent)) for agent in ("twin-a", "twin-b")]
    a, b = (r.result() for r in runs)
    # Each reviewer waited for the other's: both succeeded, so both runs were in progress at once.
    for response, agent, fact, other in ((a, "twin-a", "garden keys", "cat on Sundays"), (b, "twin-b", "cat on Sundays", "garden keys")):
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["reviewer"]["ok"] and report["status"] == "applied", report["text"]
        text = read(csuite, agent, "MEMORY.md")
        assert fact in text and other not in text
        assert [r["run"] for r in audit(csuite, agent) if r["kind"] == "run"] == [report["runId"]]
        assert {r["run"] for r in journal(csuite, agent)} == {report["runId"]}


# --- who may call what ----------------------------------------------------------------------------


def test_keys(csuite: Suite) -> None:
    reply(csuite, "bob", [])
    before = audit(csuite, "alfred")
    ws = workspace(csuite, "alfred")
    memory = (ws / "MEMORY.md").read_bytes()
    # The read-only key of alfred: status yes, nothing that writes.
    assert rest_status(csuite, "alfred", READER_KEY).status_code == 200
    for response in (rest_run(csuite, "alfred", key=READER_KEY), rest_accept(csuite, "alfred", ["p-000000000000"], key=READER_KEY),
                     rest_revert(csuite, "alfred", "20000101T000000Z-000000", key=READER_KEY)):
        assert response.status_code == 403, response.text
        assert response.json()["message"] == "this key has no write access to agent 'alfred'"
    # A key that does not cover the agent, and an unknown key.
    assert rest_run(csuite, "alfred", key=BOB_WRITER_KEY).status_code == 403
    assert rest_status(csuite, "alfred", BOB_WRITER_KEY).status_code == 403
    assert rest_run(csuite, "alfred", key="no-such-key-000").status_code == 401
    assert rest_status(csuite, "alfred", "no-such-key-000").status_code == 401
    assert rest_run(csuite, "alfred", key=None).status_code == 401
    assert audit(csuite, "alfred") == before and (ws / "MEMORY.md").read_bytes() == memory
    # bob's own writer key may dream bob; an unknown agent its key covers is not there.
    assert rest_run(csuite, "bob", key=BOB_WRITER_KEY).status_code == 200
    with httpx.Client(base_url=csuite.base_url, headers={"X-Api-Key": ADMIN_KEY}, timeout=10) as http:
        assert http.post("/api/v1/agents/ghost/dream:run", json={}).status_code == 404
        bad = http.post("/api/v1/agents/bob/dream:run", json={"mode": "dry-run"})
        assert bad.status_code == 400 and "is not a mode" in bad.json()["message"]
