"""A reverted dream takes its shared promotion out of the vault, through real processes (KB, dreaming,
REST shim, the CLI) with scripted reviewers: a created note is removed and Search over the shared
corpus no longer finds it; a block appended to an existing note is taken out byte for byte, a later
promotion of another agent in that note staying; a note edited since is left, and named in the answer
and the audit; a KB that is down leaves the local revert standing, and the next revert finishes.

Each test's agents have a shared project of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from dreaming_support import (
    add,
    audit,
    cli,
    client,
    dreaming,
    dreams_entry,
    read,
    replies,
    restart,
    rest_revert,
    reviewer,
    run_ok,
    start_suite,
    write_reply,
)
from suite_support import Suite, wait_until

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The office plants need water on Mondays.\n"
JAN = "- Jan prefers email over phone."
HARBOUR = "# Harbour\n\nThe harbour office is on pier 2.\nAsk for Marta at the desk.\n"
HARBOUR_FACT = "- The harbour office closes at 16:00 on Fridays."
LATER_FACT = "- The harbour office has a new phone number: 0471 22 33 44."


def shared(project: str) -> dict[str, Any]:
    return {"knowledge": {"shared": {"project": project}}}


AGENTS = {  # agent → its shared project
    "alfred": "rest", "bob": "cli", "dana": "cli", "carol": "edited", "eve": "down",
}


@pytest.fixture(scope="module")
def vsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("revert-vault")
    folder = tmp / "home" / "replies"  # replies() of the home start_suite makes
    agents = [{"id": agent, "dreaming": dreaming(reviewer("reply.py", folder / f"{agent}.json")), **shared(project)}
              for agent, project in AGENTS.items()]
    files = {agent: {"MEMORY.md": MEMORY} for agent in AGENTS}
    running = start_suite(tmp, agents, services=("kb", "dreaming", "http"), files=files)
    replies(running.home)
    try:
        yield running
    finally:
        running.stop_all()


def notes_dir(suite: Suite, agent: str) -> Path:
    return suite.home / "shared" / "kb" / AGENTS[agent] / "notes"


def vault_notes(suite: Suite, agent: str) -> dict[str, bytes]:
    folder = notes_dir(suite, agent)
    return {p.name.removesuffix(".md"): p.read_bytes() for p in sorted(folder.glob("*.md"))} if folder.is_dir() else {}


def dream(suite: Suite, agent: str, *proposals: dict[str, Any]) -> dict[str, Any]:
    write_reply(replies(suite.home) / f"{agent}.json", proposals)
    report = run_ok(suite, agent)
    assert report["status"] == "applied", report
    return report


def promotion(suite: Suite, agent: str, run_id: str) -> dict[str, Any]:
    [record] = [r for r in audit(suite, agent) if r.get("kind") == "promotion" and r.get("run") == run_id]
    return record


def shared_hits(suite: Suite, agent: str, query: str) -> list[str]:
    with client(suite) as http:
        response = http.get(f"/api/v1/agents/{agent}/memory:search", params={"query": query, "corpus": "shared", "limit": 20})
    assert response.status_code == 200, response.text
    return [h["path"] for h in response.json().get("hits", [])]


def revert_records(suite: Suite, agent: str, run_id: str) -> list[dict[str, Any]]:
    return [r for r in audit(suite, agent) if r.get("kind") == "revert" and r.get("run") == run_id]


def test_rest_revert_removes_the_note_the_run_created_and_search_no_longer_finds_it(vsuite: Suite) -> None:
    report = dream(vsuite, "alfred", add(JAN, reason="contact preference", topic="jan-contact"))
    run_id = report["runId"]
    assert promotion(vsuite, "alfred", run_id)["outcome"] == "created"
    assert list(vault_notes(vsuite, "alfred")) == ["jan-contact"]
    assert shared_hits(vsuite, "alfred", "email phone") == ["notes/jan-contact.md"]

    response = rest_revert(vsuite, "alfred", run_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reverted"] == [f"{run_id}/1"] and read(vsuite, "alfred", "MEMORY.md") == MEMORY
    assert vault_notes(vsuite, "alfred") == {} and shared_hits(vsuite, "alfred", "email phone") == []
    [undo] = body["vault"]
    assert (undo["opId"], undo["note"], undo["project"], undo["outcome"], undo["deleted"]) == (
        f"{run_id}/1", "jan-contact", "rest", "undone", True)
    assert "shared note 'jan-contact' (rest, promoted by" in body["message"]
    [record] = revert_records(vsuite, "alfred", run_id)
    assert record["vault"][0]["outcome"] == "undone" and record["notesLeft"] == []

    again = rest_revert(vsuite, "alfred", run_id)
    assert again.status_code == 200, again.text
    assert again.json().get("vault", []) == [] and again.json()["already"] == [f"{run_id}/1"]
    assert vault_notes(vsuite, "alfred") == {} and len(revert_records(vsuite, "alfred", run_id)) == 1


def test_cli_revert_takes_an_appended_block_out_exactly_and_a_later_promotion_stays(vsuite: Suite) -> None:
    with client(vsuite) as http:
        response = http.post("/api/v1/agents/bob/shared/notes", json={"name": "harbour", "content": HARBOUR, "confirm": True})
    assert response.status_code == 200 and response.json()["created"], response.text
    report = dream(vsuite, "bob", add(HARBOUR_FACT, reason="harbour", topic="harbour"))
    assert promotion(vsuite, "bob", report["runId"])["outcome"] == "updated"
    later = dream(vsuite, "dana", add(LATER_FACT, reason="harbour", topic="harbour"))  # another agent, same vault
    assert promotion(vsuite, "dana", later["runId"])["outcome"] == "updated"
    text = vault_notes(vsuite, "bob")["harbour"].decode()
    assert text.startswith(HARBOUR) and HARBOUR_FACT in text and text.endswith(f"{LATER_FACT}\n")

    done = cli(vsuite, "revert", "bob", report["runId"])
    assert done.returncode == 0, done.stderr
    assert f"reverted {report['runId']}/1 of {report['runId']}" in done.stdout
    expected = HARBOUR + f"\n<!-- promoted: agent dana run {later['runId']} -->\n{LATER_FACT}\n"
    assert vault_notes(vsuite, "bob") == {"harbour": expected.encode()}  # the other text byte for byte
    assert "shared note 'harbour' (cli, promoted by" in done.stdout and "undone: took the promoted block out" in done.stdout
    assert shared_hits(vsuite, "bob", "Fridays") == [] and shared_hits(vsuite, "bob", "0471") == ["notes/harbour.md"]

    undone = cli(vsuite, "revert", "dana", later["runId"])
    assert undone.returncode == 0, undone.stderr
    assert "undone: took the promoted block out" in undone.stdout  # the note changed since: bob's block went
    assert vault_notes(vsuite, "bob") == {"harbour": HARBOUR.encode()}
    twice = cli(vsuite, "revert", "dana", later["runId"])
    assert twice.returncode == 0 and twice.stdout == f"nothing to revert in {later['runId']}: {later['runId']}/1 already undone\n"
    assert vault_notes(vsuite, "bob") == {"harbour": HARBOUR.encode()}


def test_a_note_edited_since_is_left_and_named_in_the_answer_and_the_audit(vsuite: Suite) -> None:
    report = dream(vsuite, "carol", add(JAN, reason="contact preference", topic="jan-contact"))
    run_id = report["runId"]
    edited = vault_notes(vsuite, "carol")["jan-contact"].decode().replace("email over phone", "Signal over email")
    with client(vsuite) as http:
        put = http.put(f"/api/v1/agents/carol/shared/notes/{quote('jan-contact')}", json={"content": edited, "confirm": True})
    assert put.status_code == 200 and put.json()["updated"], put.text

    response = rest_revert(vsuite, "carol", run_id)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reverted"] == [f"{run_id}/1"] and read(vsuite, "carol", "MEMORY.md") == MEMORY  # the local revert stands
    [undo] = body["vault"]
    assert (undo["note"], undo["outcome"]) == ("jan-contact", "left")
    assert "edited since the promotion (the promoted block is no longer there verbatim)" in undo["reason"]
    assert "PUT /api/v1/agents/carol/shared/notes/jan-contact" in undo["reason"]
    assert "left in the shared vault: 'jan-contact'" in body["message"]
    assert vault_notes(vsuite, "carol") == {"jan-contact": edited.encode()}
    [record] = revert_records(vsuite, "carol", run_id)
    assert record["notesLeft"] == ["jan-contact"] and record["vault"][0]["outcome"] == "left"
    dreams = read(vsuite, "carol", ".dreaming/DREAMS.md")
    assert f"revert {record['by']} of run {run_id}" in dreams and "- **Left in the shared vault:** 'jan-contact'" in dreams
    assert dreams_entry(vsuite, "carol", run_id)  # the run's own entry is still there

    again = cli(vsuite, "revert", "carol", run_id)  # tried again, left again, still named
    assert again.returncode == 0, again.stderr
    assert "LEFT as it is: it was edited since the promotion" in again.stdout and "'jan-contact'" in again.stdout
    assert vault_notes(vsuite, "carol") == {"jan-contact": edited.encode()}


def test_a_kb_that_is_down_leaves_the_local_revert_standing_and_the_next_revert_finishes(vsuite: Suite) -> None:
    report = dream(vsuite, "eve", add(JAN, reason="contact preference", topic="jan-contact"))
    run_id = report["runId"]
    assert list(vault_notes(vsuite, "eve")) == ["jan-contact"]
    vsuite.stop("kb")
    try:
        response = rest_revert(vsuite, "eve", run_id)
    finally:
        restart(vsuite, "kb")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["reverted"] == [f"{run_id}/1"] and read(vsuite, "eve", "MEMORY.md") == MEMORY
    [undo] = body["vault"]
    assert undo["outcome"] == "left" and "the KB could not undo it (kb: UNAVAILABLE" in undo["reason"]
    assert list(vault_notes(vsuite, "eve")) == ["jan-contact"]

    # The next revert finishes. Dreaming's channel to the restarted KB may still be in its reconnect
    # backoff (at most 1 s): until it is back, a revert says so and leaves the note, as above.
    def finished() -> bool:
        done = cli(vsuite, "revert", "eve", run_id)
        assert done.returncode == 0, done.stderr
        if "undone:" not in done.stdout:
            assert "LEFT as it is: the KB could not undo it (kb: " in done.stdout, done.stdout
        return "undone: deleted the note this promotion created" in done.stdout

    wait_until(finished, 30, "a revert that reaches the restarted KB")
    assert vault_notes(vsuite, "eve") == {} and shared_hits(vsuite, "eve", "email phone") == []
    assert cli(vsuite, "revert", "eve", run_id).stdout == f"nothing to revert in {run_id}: {run_id}/1 already undone\n"
