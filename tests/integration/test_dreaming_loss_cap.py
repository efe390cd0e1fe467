"""The bounded-loss cap against real processes: a share of MEMORY.md as the run began, before the
compactor and the route-out shrank it (docs/concepts/guards.md "The applier's guards"), so a reviewer's removal
after those passes is measured against the file the agent had, and the passes' moves are not
counted as deletions. At the boundary: a removal of exactly the cap applies, one char more is
skipped. Every removal is still archived and found by the recall check.

One suite; each agent's reviewer is ``reply.py`` reading a reply file written before its run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dreaming_support import PRUNED, dreaming, dreams_entry, read, remove, reviewer, run_ok, start_suite, write_reply
from suite_support import Suite

pytestmark = pytest.mark.integration

HEAD = "# Memory\n\n## Facts\n"
WORDS = ("harbour", "lantern", "granite", "seagull", "mooring", "tideway", "pilothouse", "breakwater")


def sentence(opening: str, length: int, words: tuple[str, ...] = WORDS) -> str:
    """A list item of exactly ``length`` chars (its newline not counted): ``opening``, then words."""
    text, n = f"- {opening}", 0
    while len(text) < length:
        text += f" {words[n % len(words)]}{n}"
        n += 1
    text = text[:length]
    return text if not text.endswith(" ") else text[:-1] + "z"


def tasks(chars: int) -> str:
    """``## Tasks`` with finished items (the compactor's), about ``chars`` long."""
    out, n = "\n## Tasks\n", 0
    while len(out) < chars:
        out += f"- [x] Swapped the buoy battery number {n} at the east pier\n"
        n += 1
    return out


def log(chars: int) -> str:
    """``## Harbour log`` with dated entries (the route-out's), about ``chars`` long."""
    out, n = "\n## Harbour log\n", 0
    while len(out) < chars:
        out += f"- 2026-10-{1 + n % 28:02d} pilot boat crew rota number {n} posted\n"
        n += 1
    return out


def padded(body: str, total: int, tail: str) -> str:
    """``body`` + a filler fact + ``tail``, the filler sized so that the whole is ``total`` chars."""
    filler = total - len(body) - len(tail) - 1
    return body + sentence("Filler fact about the quay", filler, ("quay", "crane", "bollard")) + "\n" + tail


# The case to guard: over 8,000 chars as the run began, the compactor leaves about 250, and the
# reviewer removes an 81-char stale line (25% of what is left would be about 60).
KESTREL_STALE = sentence("The old slipway crane is still waiting for its inspection", 81)
KESTREL = padded(HEAD + KESTREL_STALE + "\n", 8_240, tasks(8_000))
# Compactor and route-out: 3,300 chars over a 1,000 budget; the compactor takes the tasks, the
# route-out the oldest log entries until it fits; then a 300-char removal (25% of ~1,000 is ~250).
HARBOUR_STALE = sentence("Obsolete note on the winter berth assignments", 300)
HARBOUR = padded(HEAD + HARBOUR_STALE + "\n", 3_300, tasks(1_300) + log(1_000))
HARBOUR_BUDGET = 1_000
# The boundary, under budget: 2,000 chars as the run began, so the cap is 500 (25%); the compactor
# takes ~900 first (25% of what is left would be ~275). EDGE_AT is exactly the cap with its line
# end, EDGE_OVER one char more.
EDGE_CAP = 500
EDGE_AT = sentence("Retired note about the lighthouse keeper rota", EDGE_CAP - 1)
EDGE_OVER = sentence("Retired note on ferry timetables", EDGE_CAP, ("ferry", "timetable", "crossing", "sailing"))
EDGE = padded(HEAD + EDGE_AT + "\n" + EDGE_OVER + "\n", 4 * EDGE_CAP, tasks(900))
AGENTS = {"kestrel": KESTREL, "harbour": HARBOUR, "edge": EDGE, "over1": EDGE}


@pytest.fixture(scope="module")
def csuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    tmp = tmp_path_factory.mktemp("dcap")
    answers = tmp / "replies"
    answers.mkdir()
    agents: list[dict[str, Any]] = [
        {"id": agent, "dreaming": dreaming(reviewer("reply.py", answers / f"{agent}.json"))} for agent in AGENTS
    ]
    agents[1]["memory"] = {"memoryBudgetChars": HARBOUR_BUDGET}
    running = start_suite(tmp, agents, files={agent: {"MEMORY.md": text} for agent, text in AGENTS.items()})
    try:
        yield running
    finally:
        running.stop_all()


def dream(suite: Suite, agent: str, target: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run whose reviewer removes ``target``: the report and the remove's op."""
    write_reply(suite.home.parent / "replies" / f"{agent}.json", [remove(target, reason="stale")])
    report = run_ok(suite, agent)
    removes = [op for op in report["ops"] if op["op"] == "remove"]
    assert len(removes) == 1, report["text"]
    return report, removes[0]


def passes_moved(report: dict[str, Any], kind: str) -> int:
    # charsRemoved is an int64: a string in JSON
    return sum(int(op["charsRemoved"]) for op in report["ops"] if op["op"] == kind and op["status"] == "applied")


def test_a_file_the_compactor_shrank_from_over_8000_chars_takes_the_reviewers_removal(csuite: Suite) -> None:
    assert len(KESTREL) == 8_240
    report, op = dream(csuite, "kestrel", KESTREL_STALE)
    moved = passes_moved(report, "compact")
    assert len(KESTREL) - moved < 4 * (len(KESTREL_STALE) + 1), "the compactor leaves less than four times the removal"
    assert (op["status"], op["reason"], int(op["charsRemoved"])) == ("applied", "", len(KESTREL_STALE) + 1), report["text"]
    after = read(csuite, "kestrel", "MEMORY.md")
    assert KESTREL_STALE not in after and len(after) == len(KESTREL) - moved - len(KESTREL_STALE) - 1
    assert KESTREL_STALE + "\n" in read(csuite, "kestrel", PRUNED)
    assert any(n.startswith("Recall checked: every removed entry") for n in report["notes"]), report["notes"]
    assert report["files"] == [{"file": "MEMORY.md", "charsBefore": str(len(KESTREL)), "charsAfter": str(len(after))}]


def test_after_the_compactor_and_the_route_out_the_cap_is_still_the_file_as_it_began(csuite: Suite) -> None:
    assert len(HARBOUR) == 3_300
    report, op = dream(csuite, "harbour", HARBOUR_STALE)
    compacted, routed = passes_moved(report, "compact"), passes_moved(report, "route")
    assert compacted > 0 and routed > 0, report["text"]
    left = len(HARBOUR) - compacted - routed
    assert left <= HARBOUR_BUDGET and 4 * (len(HARBOUR_STALE) + 1) > left, report["text"]
    assert (op["status"], op["reason"]) == ("applied", ""), report["text"]
    assert HARBOUR_STALE not in read(csuite, "harbour", "MEMORY.md")
    assert any(n.startswith("Moves recall-checked") for n in report["notes"]), report["notes"]
    assert any(n.startswith("Recall checked: every removed entry") for n in report["notes"]), report["notes"]


def test_a_removal_of_exactly_the_cap_applies_and_one_char_more_is_skipped(csuite: Suite) -> None:
    assert len(EDGE) == 2_000 and len(EDGE_AT) + 1 == EDGE_CAP and len(EDGE_OVER) + 1 == EDGE_CAP + 1
    report, op = dream(csuite, "edge", EDGE_AT)
    moved = passes_moved(report, "compact")
    assert 0 < int((len(EDGE) - moved) * 0.25) < EDGE_CAP, report["text"]  # 25% of what the compactor left
    assert (op["status"], op["reason"], int(op["charsRemoved"])) == ("applied", "", EDGE_CAP), report["text"]
    assert EDGE_AT not in read(csuite, "edge", "MEMORY.md")

    report, op = dream(csuite, "over1", EDGE_OVER)
    assert passes_moved(report, "compact") == moved
    assert op["status"] == "skipped", report["text"]
    assert op["reason"] == (f"bounded loss: this op would delete {EDGE_CAP + 1} chars, {EDGE_CAP + 1} in this run; the cap "
                            f"is {EDGE_CAP} chars (25%) of the 2,000 chars MEMORY.md had when the run began")
    assert EDGE_OVER in read(csuite, "over1", "MEMORY.md")
    assert "the cap is 500 chars (25%) of the 2,000 chars MEMORY.md had when the run began" in dreams_entry(
        csuite, "over1", report["runId"])
