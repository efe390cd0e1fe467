"""Per-agent run state: the run lock (threads and processes), claims, corrupt files."""

from __future__ import annotations

import json
import stat
import threading
from datetime import date
from pathlib import Path

import pytest
from dreaming_procs import WAIT, reap, spawn

from services.dreaming.model.values import INTERRUPTED, RunReport
from services.dreaming.schedule.state import RUNNING, Busy, RunSummary, State, StateStore

N1, N2, N3 = date(2024, 6, 1), date(2024, 6, 2), date(2024, 6, 3)


def summary(run_id: str, status: str = "applied") -> RunSummary:
    return RunSummary(run_id=run_id, trigger="schedule", mode="auto", status=status, night="2024-06-01")


def state_file(home: Path, agent: str = "alfred") -> Path:
    return home / "agents" / agent / "dreaming.json"


def test_a_night_is_claimed_once_and_earlier_nights_never(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred") as run:
        assert run.claim_night(N2) is True
        assert run.claim_night(N2) is False
        assert run.claim_night(N1) is False  # a clock stepped backwards
        assert run.claim_night(N3) is True
    assert store.read("alfred").last_night == N3


def test_the_claim_is_on_disk_before_claim_night_returns(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred") as run:
        assert run.claim_night(N1, summary("r1", RUNNING))
        on_disk = json.loads(state_file(tmp_path).read_text())
        assert on_disk["lastNight"] == "2024-06-01" and on_disk["lastRun"]["status"] == RUNNING
    # A new process (a new store) sees the claim and refuses the same night.
    with StateStore(tmp_path).lock("alfred") as again:
        assert again.claim_night(N1) is False


def test_state_lives_outside_the_workspace_with_mode_0600(tmp_path: Path) -> None:
    with StateStore(tmp_path).lock("alfred") as run:
        run.claim_night(N1)
    path = state_file(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (path.parent / "dreaming.lock").exists()
    assert not (path.parent / "workspace").exists()
    path.chmod(0o644)
    with StateStore(tmp_path).lock("alfred") as run:
        run.record_run(summary("r1"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_record_run_counts_each_run_once(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred") as run:
        run.claim_night(N1, summary("r1", RUNNING))
        run.record_run(summary("r1", "applied"))
        run.record_run(summary("r2", "nothing"))
    state = store.read("alfred")
    assert state.runs_total == 2 and state.last_run == summary("r2", "nothing") and state.last_night == N1


def test_summary_from_a_run_report() -> None:
    report = RunReport(run_id="r9", agent_id="alfred", mode="propose", trigger="manual", status="proposed",
                       reason="", started_at="2024-06-01T03:00:00+00:00", finished_at="2024-06-01T03:01:00+00:00")
    assert RunSummary.from_report(report).to_json() == {
        "runId": "r9", "trigger": "manual", "mode": "propose", "status": "proposed", "reason": "",
        "startedAt": "2024-06-01T03:00:00+00:00", "finishedAt": "2024-06-01T03:01:00+00:00", "night": "",
    }


def test_a_second_lock_on_one_agent_is_busy_even_in_one_process(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred"):
        with pytest.raises(Busy, match="alfred") as caught:
            store.lock("alfred").acquire()
        assert caught.value.agent_id == "alfred" and caught.value.code == "ABORTED"
        with store.lock("bertha") as other:  # other agents are independent
            assert other.held
    with store.lock("alfred") as again:  # released at the end of the block
        assert again.held


def test_claims_need_the_lock(tmp_path: Path) -> None:
    run = StateStore(tmp_path).lock("alfred")
    with pytest.raises(RuntimeError, match="not held"):
        run.claim_night(N1)
    with pytest.raises(RuntimeError, match="not held"):
        run.record_run(summary("r1"))


def test_the_lock_excludes_other_threads(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    held, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def holder() -> None:
        with store.lock("alfred"):
            held.set()
            release.wait(WAIT)

    def contender() -> None:
        try:
            store.lock("alfred").acquire()
        except Busy:
            outcome.append("busy")

    first = threading.Thread(target=holder)
    first.start()
    assert held.wait(WAIT)
    second = threading.Thread(target=contender)
    second.start()
    second.join(WAIT)
    release.set()
    first.join(WAIT)
    assert outcome == ["busy"]


def test_the_lock_excludes_another_process_and_dies_with_it(tmp_path: Path) -> None:
    child = spawn("hold", str(tmp_path), "alfred")
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n", "the child never took the lock"
        store = StateStore(tmp_path)
        with pytest.raises(Busy):
            store.lock("alfred").acquire()
        child.kill()  # SIGKILL: no cleanup runs in the child; the kernel drops the flock
        child.wait(WAIT)
        with store.lock("alfred") as run:
            # The dead holder's "running" record is repaired, and its claim stands.
            assert run.state.last_run is not None and run.state.last_run.status == INTERRUPTED
            assert run.claim_night(N1) is False
    finally:
        reap(child)


def test_a_stale_running_record_is_only_repaired_by_a_new_holder(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred") as run:
        run.claim_night(N1, summary("r1", RUNNING))
        run.record_run(summary("r1", RUNNING))  # our own record: not "interrupted"
        assert run.state.last_run is not None and run.state.last_run.status == RUNNING
    with store.lock("alfred") as run:
        assert run.state.last_run is not None and run.state.last_run.status == INTERRUPTED
    assert store.read("alfred").runs_total == 1


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"format": 2, "lastNight": "2024-06-01"}',
        b'{"format": 1, "lastNight": "yesterday"}',
        b'{"format": 1, "lastNight": null, "runsTotal": -1}',
        b'{"format": 1, "lastNight": null, "lastRun": {"status": "applied"}}',
    ],
)
def test_a_corrupt_state_is_kept_aside_and_refuses_the_next_night(tmp_path: Path, content: bytes) -> None:
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    store = StateStore(tmp_path)
    assert store.read("alfred") == State(corrupt=True)  # a plain read changes nothing
    assert path.read_bytes() == content
    with store.lock("alfred") as run:
        kept = path.with_name("dreaming.json.corrupt-1")
        assert kept.read_bytes() == content
        assert run.state.fence == kept.name
        # Whether tonight already ran is unknown: it is not run.
        assert run.claim_night(N2) is False
        assert run.claim_night(N1) is False
        assert run.claim_night(N3) is True
    assert store.read("alfred").last_night == N3 and store.read("alfred").fence == ""


def test_a_second_corruption_keeps_both_copies(tmp_path: Path) -> None:
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    store = StateStore(tmp_path)
    for content in (b"one", b"two"):
        path.write_bytes(content)
        with store.lock("alfred") as held:
            assert held.held
    assert path.with_name("dreaming.json.corrupt-1").read_bytes() == b"one"
    assert path.with_name("dreaming.json.corrupt-2").read_bytes() == b"two"


def test_a_fence_survives_a_restart(tmp_path: Path) -> None:
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    with StateStore(tmp_path).lock("alfred") as held:  # fenced, then the process "ends" before any claim
        assert held.held
    with StateStore(tmp_path).lock("alfred") as run:
        assert run.claim_night(N1) is False


def test_an_unknown_key_of_this_format_is_tolerated(tmp_path: Path) -> None:
    path = state_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "lastNight": "2024-06-01", "runsTotal": 4, "later": True}))
    assert StateStore(tmp_path).read("alfred") == State(last_night=N1, runs_total=4)


@pytest.mark.parametrize("agent", ["../escape", "a/b", ".hidden", "", "x" * 65])
def test_an_agent_id_that_is_not_one_segment_is_refused(tmp_path: Path, agent: str) -> None:
    with pytest.raises(ValueError, match="segment"):
        StateStore(tmp_path).lock(agent)


def test_a_plain_read_reports_a_dead_run_as_interrupted_and_a_live_one_as_running(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.lock("alfred") as run:
        run.claim_night(N1, summary("r1", RUNNING))
        live = store.read("alfred").last_run
    dead = store.read("alfred").last_run
    assert live is not None and live.status == RUNNING
    assert dead is not None and dead.status == INTERRUPTED
    assert json.loads(state_file(tmp_path).read_text())["lastRun"]["status"] == RUNNING  # the read wrote nothing
