"""Scheduled dreaming against real processes: a night run once at its slot (the catch-up at
start), the quiet window (a busy session; a fresh transcript after the watcher forgot its
sessions; a watcher that cannot answer), restarts (after a run, and in the middle of one)
that never run a night twice, and agents that are not scheduled at all.

Every scheduled agent's slot is the current UTC minute less one, with no stagger, so the
dreaming process finds tonight's night due (inside the 6 h catch-up window) when it starts.
The watcher is prepared before the dreaming process starts: a session registered for cleo
and then forgotten by a watcher restart, a busy session for busy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest
from dreaming_support import (
    add,
    audit,
    client,
    dreaming,
    dreams_entry,
    process_gone,
    read,
    rest_run,
    rest_status,
    restart,
    reviewer,
    run_ok,
    sessions_dir,
    slot_at,
    snapshot,
    start_suite,
    write_reply,
    write_transcript,
)
from suite_support import Suite, wait_until, workspace

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The gateway listens on port 10850.\n"
FACT = "- The nightly run learned this."
UNSCHEDULED = {"ed": "dreaming is off for this agent (dreaming.enabled is false)",
               "max0": "dreaming makes no changes for this agent (dreaming.maxChangesPerRun is 0)"}


@dataclass
class Night:
    suite: Suite
    slot: datetime
    untouched: dict[str, dict[str, bytes]]

    @property
    def night(self) -> date:
        return self.slot.date()

    @property
    def tomorrow(self) -> str:
        return (self.slot + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def records(suite: Suite, agent: str, kind: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, agent) if r.get("kind") == kind]


def status(suite: Suite, agent: str) -> dict[str, Any]:
    response = rest_status(suite, agent)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def skipped_again(suite: Suite, agent: str, before: int) -> bool:
    return len(records(suite, agent, "skip")) > before


def register(suite: Suite, agent: str, state: str) -> str:
    with client(suite) as http:
        response = http.post(f"/api/v1/agents/{agent}/sessions", json={"state": state})
    assert response.status_code == 200, response.text
    session_id: str = response.json()["sessionId"]
    return session_id


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Night]:
    tmp = tmp_path_factory.mktemp("dsched")
    answers = tmp / "replies"
    answers.mkdir()
    slot = (datetime.now(UTC) - timedelta(minutes=1)).replace(second=0, microsecond=0)
    due = slot_at(slot)

    def scheduled(agent: str, **extra: Any) -> dict[str, Any]:
        return {"id": agent, "dreaming": dreaming(reviewer("reply.py", answers / f"{agent}.json"), **due, **extra)}

    agents = [scheduled("sam"), scheduled("busy"), scheduled("cleo"), scheduled("ed", enabled=False),
              scheduled("max0", maxChangesPerRun=0), scheduled("mid")]
    # mid's reviewer holds its run open (nobody releases it): a restart finds it in progress.
    agents[-1]["dreaming"]["reviewerCommand"] = reviewer("hold.py", "--signal", tmp / "mid.running", "--wait", tmp / "mid.release",
                                                         "--limit", "90", answers / "mid.json")
    for agent in ("sam", "busy", "cleo", "mid"):
        write_reply(answers / f"{agent}.json", [add(FACT)])
    running = start_suite(tmp, agents, services=("file_api", "watcher", "kb", "http"),
                          files={a["id"]: {"MEMORY.md": MEMORY} for a in agents})
    try:
        # sam and mid talked two hours ago: inside the lookback window, outside the quiet window.
        for agent in ("sam", "mid"):
            write_transcript(sessions_dir(running, agent), f"s-{agent}.jsonl", [("user", "Remember the port."), ("assistant", "Noted.")],
                             age=timedelta(hours=2))
        # cleo was active, then the watcher restarted and forgot it; her transcript is fresh.
        register(running, "cleo", "SESSION_STATE_IDLE")
        restart(running, "watcher")
        with client(running) as http:
            forgotten = http.get("/api/v1/agents/cleo/activity").json()
        assert forgotten.get("sessions", []) == [] and int(forgotten.get("lastActivityMs", "0")) == 0, forgotten
        write_transcript(sessions_dir(running, "cleo"), "s-cleo.jsonl", [("user", "Still working on it.")])
        # busy has a session working right now.
        register(running, "busy", "SESSION_STATE_BUSY")
        untouched = {agent: snapshot(workspace(running, agent), skip=()) for agent in UNSCHEDULED}
        restart(running, "dreaming")
        wait_until(lambda: bool(records(running, "sam", "run")), 30, "sam's scheduled run")
        wait_until(lambda: bool(records(running, "busy", "skip")) and bool(records(running, "cleo", "skip")), 30,
                   "the skips of busy and cleo")
        yield Night(running, slot, untouched)
    finally:
        running.stop_all()


def test_a_scheduled_night_runs_once_at_its_slot(night: Night) -> None:
    suite = night.suite
    [run] = records(suite, "sam", "run")
    assert (run["trigger"], run["mode"], run["status"]) == ("schedule", "auto", "applied"), run
    assert read(suite, "sam", "MEMORY.md") == MEMORY + FACT + "\n"
    assert "(auto, schedule)" in dreams_entry(suite, "sam", run["run"])
    shown = status(suite, "sam")
    assert shown["lastNight"] == night.night.isoformat()
    assert shown["nextRunAt"] == night.tomorrow
    assert (shown["lastRun"]["runId"], shown["lastRun"]["trigger"], shown["lastRun"]["status"]) == (run["run"], "schedule", "applied")
    assert shown["scheduled"] is True
    assert records(suite, "sam", "skip") == []


def test_a_busy_session_is_a_skip_and_the_night_stays_unclaimed(night: Night) -> None:
    suite = night.suite
    skip = records(suite, "busy", "skip")[0]
    assert (skip["reason"], skip["night"], skip["trigger"]) == ("1 session(s) busy now", night.night.isoformat(), "schedule")
    assert records(suite, "busy", "run") == []
    assert read(suite, "busy", "MEMORY.md") == MEMORY
    shown = status(suite, "busy")
    assert shown["lastNight"] == "" and shown["lastRun"]["runId"] == ""
    # Tried again later tonight, inside the catch-up window.
    retry = datetime.fromisoformat(shown["nextRunAt"].replace("Z", "+00:00"))
    assert datetime.now(UTC) < retry < night.slot + timedelta(hours=6), shown


def test_a_fresh_transcript_counts_as_activity_after_the_watcher_forgot(night: Night) -> None:
    suite = night.suite
    skip = records(suite, "cleo", "skip")[0]
    assert re.fullmatch(r"active \d+ min ago \(quietMinutes is 30\)", skip["reason"]), skip
    assert records(suite, "cleo", "run") == [] and status(suite, "cleo")["lastNight"] == ""
    assert read(suite, "cleo", "MEMORY.md") == MEMORY


@pytest.mark.parametrize("agent", sorted(UNSCHEDULED))
def test_an_agent_that_is_off_never_runs_and_run_now_writes_nothing(night: Night, agent: str) -> None:
    suite = night.suite
    folder = workspace(suite, agent)
    assert not (folder / ".dreaming").exists()  # the scheduler passed it by (sam ran in the same pass)
    shown = status(suite, agent)
    assert (shown["scheduled"], shown["nextRunAt"], shown["lastNight"]) == (False, "", "")
    assert UNSCHEDULED[agent] in shown["text"]
    report = run_ok(suite, agent)
    assert (report["status"], report["reason"], report["runId"]) == ("nothing", UNSCHEDULED[agent] + "; nothing was done", "")
    assert snapshot(folder, skip=()) == night.untouched[agent]
    assert not (suite.home / "agents" / agent / "dreaming.json").exists()


def test_a_restart_mid_run_interrupts_it_and_the_night_stays_claimed(night: Night) -> None:
    suite = night.suite
    signal = suite.home.parent / "mid.running"
    wait_until(signal.exists, 30, "mid's scheduled run to reach its reviewer")
    reviewer_pid = int(signal.read_text())
    held = rest_run(suite, "mid")
    assert held.status_code == 409, held.text  # the scheduled run holds the agent's run lock
    restart(suite, "dreaming")
    wait_until(lambda: process_gone(reviewer_pid), 10, "the interrupted run's reviewer to be killed")
    shown = status(suite, "mid")
    assert (shown["lastRun"]["status"], shown["lastRun"]["trigger"]) == ("interrupted", "schedule"), shown
    assert shown["lastRun"]["reason"] == "the dreaming service stopped mid-run"
    assert shown["lastNight"] == night.night.isoformat()  # claimed before it ran: never run twice
    wait_until(lambda: status(suite, "mid")["nextRunAt"] == night.tomorrow, 30, "mid's next run to be tomorrow")
    assert read(suite, "mid", "MEMORY.md") == MEMORY
    assert not [r for r in records(suite, "mid", "run") if r["status"] != "interrupted"]


def test_a_restart_during_the_night_runs_it_no_second_time(night: Night) -> None:
    suite = night.suite
    [first] = records(suite, "sam", "run")
    skips = len(records(suite, "busy", "skip"))
    restart(suite, "dreaming")
    # The new process planned every agent: busy (whose retry only the old one knew) was checked again.
    wait_until(lambda: len(records(suite, "busy", "skip")) > skips, 30, "busy to be checked again after the restart")
    wait_until(lambda: status(suite, "sam")["nextRunAt"] == night.tomorrow, 30, "sam's next run to be tomorrow")
    runs = records(suite, "sam", "run")
    assert [(r["run"], r["trigger"]) for r in runs] == [(first["run"], "schedule")]
    assert status(suite, "sam")["lastRun"]["runId"] == first["run"]
    assert read(suite, "sam", "MEMORY.md") == MEMORY + FACT + "\n"


def test_a_watcher_that_cannot_answer_is_a_skip_saying_why(night: Night) -> None:
    suite = night.suite
    counts = {agent: len(records(suite, agent, "skip")) for agent in ("busy", "cleo")}
    suite.stop("watcher")
    try:
        restart(suite, "dreaming")
        for agent in ("busy", "cleo"):
            wait_until(functools.partial(skipped_again, suite, agent, counts[agent]), 30, f"{agent}'s skip")
            skip = records(suite, agent, "skip")[-1]
            assert skip["reason"].startswith("the watcher could not say whether the agent is active (watcher: UNAVAILABLE"), skip
            assert skip["reason"].endswith("; not run now, tried again later")
            assert records(suite, agent, "run") == [] and status(suite, agent)["lastNight"] == ""
        assert len(records(suite, "sam", "run")) == 1
    finally:
        restart(suite, "watcher")


def test_the_unscheduled_status_needs_a_key(night: Night) -> None:
    assert httpx.get(f"{night.suite.base_url}/api/v1/agents/ed/dream:status", timeout=10).status_code == 401
