"""The tombstones through the real processes (docs/concepts/forget.md "Where tombstones are checked"):
with a tombstone on disk, a reviewer that proposes the forgotten text again is refused by the dream
(``forgotten: F-…`` in the audit), a PUT of it is written and warned, an agent's direct write of it is
flagged by the KB and kept out of search, and a shared note with it is refused; the forget is named,
the text never is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dreaming_support import add, audit, client, dreaming, reviewer, run_ok, search, start_suite, write, write_reply
from suite_support import Suite, wait_until, workspace

from gateway.forgetting import Tombstones

pytestmark = pytest.mark.integration

MEMORY = "# Memory\n\n- The ferry leaves at noon.\n" + "".join(f"- Quay {n} has a crane.\n" for n in range(12))
FORGOTTEN = "Dana Whitlock's locker code is 4471"
FORGET_ID = "F-7e57c0ffee01"


@pytest.fixture(scope="module")
def tsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("tombs")
    agents = [{"id": "alfred", "dreaming": dreaming(reviewer("reply.py", tmp / "reply.json"))}]
    running = start_suite(tmp, agents, files={"alfred": {"MEMORY.md": MEMORY}})
    try:
        # On disk, as a forget leaves it, after the processes started: they read it when it changes.
        Tombstones(running.home).add(FORGET_ID, [FORGOTTEN], scope="alfred", at="2026-12-07T02:00:00Z", by="admin",
                                     places=3)
        yield running
    finally:
        running.stop_all()


def test_a_reviewer_that_proposes_the_forgotten_text_again_is_refused(tsuite: Suite) -> None:
    write_reply(tsuite.home.parent / "reply.json", [
        add("- Remember: dana whitlock's LOCKER code is 4471."), add("- Jan prefers email.")])
    report = run_ok(tsuite, "alfred")
    assert [(op["status"], op["reason"]) for op in report["ops"]] == [("skipped", f"forgotten: {FORGET_ID}"), ("applied", "")]
    ops = [r for r in audit(tsuite, "alfred") if r.get("kind") == "op" and r.get("run") == report["runId"]]
    assert [r["reason"] for r in ops if r["status"] == "skipped"] == [f"forgotten: {FORGET_ID}"]
    dreaming_dir = workspace(tsuite, "alfred") / ".dreaming"
    for path in [*dreaming_dir.rglob("*"), workspace(tsuite, "alfred") / "MEMORY.md"]:
        if path.is_file():
            assert "4471" not in path.read_text(), path


def test_a_put_of_the_forgotten_text_is_written_and_warned(tsuite: Suite) -> None:
    content = MEMORY + f"- {FORGOTTEN}\n"
    with client(tsuite) as http:
        response = http.put("/api/v1/agents/alfred/files/USER.md", json={"content": content})
    assert response.status_code == 200, response.text
    warnings = response.json()["warnings"]
    assert len(warnings) == 1 and f"({FORGET_ID})" in warnings[0] and "4471" not in warnings[0]
    assert (workspace(tsuite, "alfred") / "USER.md").read_text() == content
    logged = [e for e in tsuite.log_lines("file_api") if e.get("event") == "put_holds_forgotten_text"]
    assert [(e["file"], e["tombstone"]) for e in logged] == [("USER.md", FORGET_ID)]


def test_a_direct_write_is_flagged_and_search_does_not_return_it(tsuite: Suite) -> None:
    memory = workspace(tsuite, "alfred") / "memory"
    write(memory / "lockers.md", "# Lockers\n\n- The quokka lockers are on deck 2.\n")
    write(memory / "codes.md", f"# Codes\n\n- The quokka note: {FORGOTTEN}.\n")
    hits = search(tsuite, "alfred", "quokka")
    assert [h["path"] for h in hits] == ["memory/lockers.md"]

    def flagged() -> list[tuple[str, str]]:
        return [(e["path"], e["tombstone"]) for e in tsuite.log_lines("kb") if e.get("event") == "kb_forgotten_text_indexed"]

    wait_until(lambda: ("memory/codes.md", FORGET_ID) in flagged(), 30, "the KB to flag memory/codes.md")
    assert "4471" not in (tsuite.log_path("kb")).read_text()


def test_a_shared_note_with_the_forgotten_text_is_refused_naming_the_forget(tsuite: Suite) -> None:
    with client(tsuite) as http:
        refused = http.post("/api/v1/agents/alfred/shared/notes",
                            json={"name": "lockers", "content": f"# Lockers\n- {FORGOTTEN}\n", "confirm": True})
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert f"forgotten on purpose ({FORGET_ID})" in message and "4471" not in message
    assert not list((tsuite.home / "shared").rglob("lockers*"))
