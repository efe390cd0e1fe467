"""Pending proposals against real processes: what a run applied, or what is already in effect, is
not pending; `gateway dream status`, GET …/dream:status and DREAMS.md agree; an accept of such an
id is reported, never applied twice; a reverted op is pending again only once it is proposed again;
the compactor's moves listed by propose mode are never pending.

One suite for the module; each test has its own agent whose reviewer is ``reply.py`` reading a
reply file the test writes first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dreaming_support import (
    add,
    cli,
    dreaming,
    dreams_entry,
    put_file,
    read,
    rest_accept,
    rest_revert,
    rest_status,
    reviewer,
    run_ok,
    start_suite,
    write_reply,
)
from dreaming_support import replace as replace_op
from suite_support import Suite

pytestmark = pytest.mark.integration

MEMORY = (
    "# Memory\n\n"
    "## Contacts\n"
    "- Jan works at the harbour office.\n"
    "- The harbour office opens at 7.\n"
    "- The ferry leaves at noon.\n"
    + "".join(f"- Quay {n} has a crane rated for {10 + n} tonnes.\n" for n in range(12))
)
EMAIL = "- Jan prefers email over phone."
AGENTS = ("jan", "kit", "moss")


@pytest.fixture(scope="module")
def psuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dpending")
    answers = tmp / "replies"
    answers.mkdir()
    agents: list[dict[str, Any]] = [
        {"id": agent, "dreaming": dreaming(reviewer("reply.py", answers / f"{agent}.json"))} for agent in AGENTS
    ]
    files = {agent: {"MEMORY.md": MEMORY} for agent in AGENTS}
    files["moss"] = {"MEMORY.md": MEMORY + "\n## Tasks\n- [x] Repainted the north bollards\n- [ ] Order new fenders\n"}
    running = start_suite(tmp, agents, files=files)
    try:
        yield running
    finally:
        running.stop_all()


def reply(suite: Suite, agent: str, proposals: list[dict[str, Any]]) -> None:
    write_reply(suite.home.parent / "replies" / f"{agent}.json", proposals)


def status(suite: Suite, agent: str) -> dict[str, Any]:
    response = rest_status(suite, agent)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def pending_ids(suite: Suite, agent: str) -> list[str]:
    return [p["proposalId"] for p in status(suite, agent).get("pending", [])]


def op_of(report: dict[str, Any], proposal_id: str) -> dict[str, Any]:
    found = [op for op in report["ops"] if op["proposalId"] == proposal_id]
    assert len(found) == 1, report["text"]
    return found[0]


def test_an_applied_proposal_proposed_again_is_not_pending_and_accepting_it_changes_nothing(psuite: Suite) -> None:
    reply(psuite, "jan", [add(EMAIL, reason="Jan said so twice")])
    applied = run_ok(psuite, "jan", mode="auto")
    pid = applied["ops"][0]["proposalId"]
    assert applied["ops"][0]["status"] == "applied", applied["text"]
    after = read(psuite, "jan", "MEMORY.md")
    assert after == MEMORY + EMAIL + "\n"

    # A run in propose mode proposes the same fact again (the same id): not pending, and it says why.
    proposed = run_ok(psuite, "jan", mode="propose")
    again = op_of(proposed, pid)
    assert again["status"] == "skipped", proposed["text"]
    assert again["reason"] == (f"already in MEMORY.md (already applied by run {applied['runId']} as "
                               f"{applied['runId']}/1); not a pending proposal")
    # The status over REST, the CLI and DREAMS.md agree.
    body = status(psuite, "jan")
    assert body.get("pending", []) == [], body["text"]
    shown = cli(psuite, "status", "jan")
    assert shown.returncode == 0 and pid not in shown.stdout and "pending proposals" not in shown.stdout, shown.stdout
    assert shown.stdout == body["text"]
    entry = dreams_entry(psuite, "jan", proposed["runId"])
    assert f"**skipped** `{again['opId']}`" in entry and "not a pending proposal" in entry, entry
    assert "**proposed**" not in entry

    # Accepting it is reported and applies nothing (REST and CLI).
    accepted = rest_accept(psuite, "jan", [pid])
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["status"] == "nothing"
    assert f"{pid}: already applied by run {applied['runId']}" in accepted.json()["reason"]
    by_cli = cli(psuite, "accept", "jan", pid)
    assert by_cli.returncode == 0 and "already applied by run" in by_cli.stdout, by_cli.stdout + by_cli.stderr
    assert read(psuite, "jan", "MEMORY.md") == after

    # Reverted, the id can be applied again; the proposal made before the revert does not come back,
    # the next one does, and an accept applies it once.
    undone = rest_revert(psuite, "jan", applied["runId"])
    assert undone.status_code == 200, undone.text
    assert read(psuite, "jan", "MEMORY.md") == MEMORY
    assert pending_ids(psuite, "jan") == []
    reverted = rest_accept(psuite, "jan", [pid])
    assert reverted.status_code == 200 and "reverted" in reverted.json()["reason"], reverted.text
    fresh = run_ok(psuite, "jan", mode="propose")
    assert op_of(fresh, pid)["status"] == "proposed", fresh["text"]
    assert pending_ids(psuite, "jan") == [pid]
    assert pid in cli(psuite, "status", "jan").stdout
    done = cli(psuite, "accept", "jan", pid)
    assert done.returncode == 0 and "(auto, accept): applied" in done.stdout, done.stdout + done.stderr
    assert read(psuite, "jan", "MEMORY.md") == MEMORY + EMAIL + "\n"
    assert pending_ids(psuite, "jan") == []
    assert cli(psuite, "accept", "jan", pid).returncode == 0
    assert read(psuite, "jan", "MEMORY.md").count(EMAIL) == 1


def test_what_is_already_in_effect_stops_being_pending(psuite: Suite) -> None:
    ferry = replace_op("- The ferry leaves at noon.", "- The ferry leaves at one.")
    reply(psuite, "kit", [add(EMAIL), ferry])
    proposed = run_ok(psuite, "kit", mode="propose")
    assert [op["status"] for op in proposed["ops"]] == ["proposed", "proposed"], proposed["text"]
    ids = [op["proposalId"] for op in proposed["ops"]]
    assert pending_ids(psuite, "kit") == ids
    # The agent writes both itself: nothing is left for an accept to do.
    put_file(psuite, "kit", "MEMORY.md", MEMORY.replace("noon", "one") + EMAIL + "\n")
    body = status(psuite, "kit")
    assert body.get("pending", []) == [], body["text"]
    assert cli(psuite, "status", "kit").stdout == body["text"]
    answer = rest_accept(psuite, "kit", ids)
    assert answer.status_code == 200 and answer.json()["status"] == "nothing", answer.text
    assert f"{ids[0]}: already in MEMORY.md" in answer.json()["reason"]
    assert f"{ids[1]}: already in MEMORY.md: its anchor is gone and its new text is there" in answer.json()["reason"]
    assert read(psuite, "kit", "MEMORY.md") == MEMORY.replace("noon", "one") + EMAIL + "\n"
    # A propose run now finds both in effect: skipped, with the reason, and DREAMS.md says the same.
    again = run_ok(psuite, "kit", mode="propose")
    assert [op["status"] for op in again["ops"]] == ["skipped", "skipped"], again["text"]
    entry = dreams_entry(psuite, "kit", again["runId"])
    assert entry.count("not a pending proposal") == 2, entry


def test_the_compactors_moves_listed_by_propose_mode_are_never_pending(psuite: Suite) -> None:
    reply(psuite, "moss", [])
    before = read(psuite, "moss", "MEMORY.md")
    proposed = run_ok(psuite, "moss", mode="propose")
    moves = [op for op in proposed["ops"] if op["op"] == "compact"]
    assert len(moves) == 1 and moves[0]["status"] == "proposed", proposed["text"]
    assert pending_ids(psuite, "moss") == []
    answer = rest_accept(psuite, "moss", [moves[0]["proposalId"]])
    assert answer.status_code == 200 and answer.json()["status"] == "nothing", answer.text
    assert "not a proposal to accept" in answer.json()["reason"]
    assert read(psuite, "moss", "MEMORY.md") == before
