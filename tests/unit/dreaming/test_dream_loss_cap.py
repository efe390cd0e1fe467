"""The bounded-loss cap is a share of each file as the run began, before the deterministic passes
(docs/concepts/guards.md "The applier's guards"): the passes' moves shrink the file first, are not counted as the
reviewer's deletions, and leave the cap where it was. Each case at its boundary: exactly at the cap
applies, one char over is skipped."""

from __future__ import annotations

from services.dreaming.apply.applier import LOSS_OVER_BUDGET, LOSS_UNDER_BUDGET, plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import Proposal

HEAD = "# Memory\n\n"


def remove(target: str) -> Proposal:
    return Proposal(op="remove", file="MEMORY.md", target=target, reason="stale")


def add(content: str) -> Proposal:
    return Proposal(op="add", file="MEMORY.md", content=content, reason="learned")


def line(n: int, tag: str = "stale") -> str:
    """A list item of exactly ``n`` chars, its newline not counted."""
    body = f"- {tag} line "
    return body + "x" * (n - len(body))


def applied(began: str, now: str, *proposals: Proposal, budget: int) -> tuple[list[tuple[str, str]], str]:
    """Plan ``proposals`` on MEMORY.md ``now`` (after the passes) of a run that began with ``began``."""
    budgets = Budgets(memory_chars=budget, user_chars=0, write_routing=False)
    result = plan({"MEMORY.md": now, "USER.md": ""}, [(f"r/{i + 1}", p) for i, p in enumerate(proposals)], budgets,
                  began={"MEMORY.md": began, "USER.md": ""})
    return [(r.status, r.reason) for r in result.results], result.texts["MEMORY.md"]


def moved_out(kept: str, moved_chars: int) -> str:
    """The file as the run began: ``kept`` plus finished tasks the compactor moves out (``moved_chars``)."""
    tasks = ""
    n = 0
    while len(tasks) < moved_chars:
        tasks += f"- [x] finished task number {n}\n"
        n += 1
    return kept + tasks[: moved_chars - 1] + "\n" if moved_chars else kept


def test_over_budget_as_the_run_began_the_cap_is_90_percent_of_that_file_whatever_the_passes_moved() -> None:
    # The case to guard: over 8,000 chars as the run began, 242 after the passes, an 81-char stale line.
    stale = line(81)
    kept = HEAD + stale + "\n" + line(242 - len(HEAD) - 82 - 1, "fact") + "\n"
    assert len(kept) == 242
    began = moved_out(kept, 8_200 - len(kept))
    assert len(began) == 8_200
    results, text = applied(began, kept, remove(stale), budget=8_000)
    assert results == [("applied", "")]
    assert text == kept.replace(stale + "\n", "")


def test_exactly_at_the_cap_applies_and_one_char_over_is_skipped_over_budget() -> None:
    began_len, moved = 1_000, 60
    cap = int(began_len * LOSS_OVER_BUDGET)  # 900
    at_cap = line(cap - 1)  # its newline goes with it: cap chars removed
    one_over = line(cap, "other")
    rest = HEAD + "- keep\n"
    for target in (at_cap, one_over):
        now = rest + target + "\n"
        now += line(began_len - moved - len(now) - 1, "fill") + "\n"
        began = moved_out(now, moved)
        assert (len(began), len(now)) == (began_len, began_len - moved)
        results, text = applied(began, now, remove(target), budget=500)
        if target is at_cap:
            assert results == [("applied", "")] and len(now) - len(text) == cap
        else:
            assert results[0][0] == "skipped" and text == now
            assert results[0][1] == (
                f"bounded loss: this op would delete {cap + 1} chars, {cap + 1} in this run; the cap is {cap} chars "
                f"(90%) of the {began_len:,} chars MEMORY.md had when the run began, over its budget")


def test_exactly_at_the_cap_applies_and_one_char_over_is_skipped_under_budget() -> None:
    # Under budget: 25% of the file as the run began, though the compactor took 400 of its 1,000 chars.
    began_len, moved = 1_000, 400
    cap = int(began_len * LOSS_UNDER_BUDGET)  # 250; 25% of the 600 left would be 150
    first, second = line(cap - 1, "a"), line(cap, "b")
    now = HEAD + first + "\n" + second + "\n"
    now += line(began_len - moved - len(now) - 1, "fill") + "\n"
    began = moved_out(now, moved)
    assert (len(began), len(now)) == (began_len, began_len - moved)
    results, text = applied(began, now, remove(first), budget=8_000)
    assert results == [("applied", "")] and len(now) - len(text) == cap
    results, text = applied(began, now, remove(second), budget=8_000)
    assert results[0][0] == "skipped" and "bounded loss" in results[0][1] and "(25%)" in results[0][1]
    assert f"the cap is {cap} chars (25%) of the 1,000 chars MEMORY.md had when the run began" in results[0][1]
    # The deletions of one run add up against the same cap: the first fits, the second goes past it.
    results, _ = applied(began, now, remove(first), remove("- fill"), budget=8_000)
    assert [s for s, _ in results] == ["applied", "skipped"]


def test_the_passes_moves_are_not_counted_as_deletions() -> None:
    # 90% of the file as it began is 900 chars; the compactor already moved 800 of them. Counted
    # as deletions they would leave 100; they are moves, so a 150-char removal still fits.
    stale = line(149)
    now = HEAD + stale + "\n" + "- keep this one\n"
    began = moved_out(now, 1_000 - len(now))
    assert len(began) == 1_000
    results, _ = applied(began, now, remove(stale), budget=500)
    assert results == [("applied", "")]


def test_a_non_empty_file_is_never_emptied_however_large_the_cap() -> None:
    now = HEAD + "- the last line\n"
    began = moved_out(now, 5_000)
    results, text = applied(began, now, remove(now), budget=1_000)
    assert results == [("skipped", "this op would leave the file empty; a non-empty file is never emptied")]
    assert text == now


def test_over_budget_as_the_run_began_but_under_it_after_the_passes_an_add_that_fits_applies() -> None:
    # The net-shrink guard looks at the file the reviewer was shown (after the passes): once the
    # passes made it fit, an add that keeps it within budget applies, one that overflows does not.
    now = HEAD + "- a fact\n"
    began = moved_out(now, 2_000)
    results, _ = applied(began, now, add("- a new fact"), budget=100)
    assert results == [("applied", "")]
    results, _ = applied(began, now, add("- " + "long " * 30), budget=100)
    assert results[0][0] == "skipped" and "over its soft budget" in results[0][1]


def test_without_began_the_base_is_the_text_given() -> None:
    text = "".join(f"- line {i:02d} xxxxxxx\n" for i in range(20))  # 360 chars, cap 90 = 5 lines
    budgets = Budgets(memory_chars=0, user_chars=0, write_routing=False)
    ops = [(f"r/{i}", remove(f"- line {i:02d} xxxxxxx")) for i in range(6)]
    result = plan({"MEMORY.md": text}, ops, budgets)
    assert [r.status for r in result.results] == ["applied"] * 5 + ["skipped"]
