"""The applier's guards, each triggered and not triggered at its boundary (pure, no I/O)."""

from __future__ import annotations

import pytest

from services.dreaming.apply.applier import LOSS_OVER_BUDGET, LOSS_UNDER_BUDGET, plan
from services.dreaming.model.budgets import Budgets
from services.dreaming.model.values import EPISODIC, Proposal

NO_BUDGET = Budgets(memory_chars=0, user_chars=0, write_routing=True)
# Room under the 25% bounded-loss cap for tests about other guards.
FILLER = "".join(f"+ filler line {i:02d}\n" for i in range(60))


def run(text: str, *proposals: Proposal, budgets: Budgets = NO_BUDGET, user: str = "") -> tuple[str, list[tuple[str, str]]]:
    result = plan({"MEMORY.md": text, "USER.md": user}, [(f"r/{i + 1}", p) for i, p in enumerate(proposals)], budgets)
    return result.texts["MEMORY.md"], [(r.status, r.reason) for r in result.results]


def remove(target: str) -> Proposal:
    return Proposal(op="remove", file="MEMORY.md", target=target, reason="obsolete")


def replace(target: str, content: str) -> Proposal:
    return Proposal(op="replace", file="MEMORY.md", target=target, content=content, reason="newer")


def add(content: str, target: str = "") -> Proposal:
    return Proposal(op="add", file="MEMORY.md", content=content, target=target, reason="new fact")


def test_ops_apply_in_order_against_the_current_text() -> None:
    text, results = run("- a\n- b\n" + FILLER, replace("- a", "- A"), replace("- A", "- AA"), remove("- b"))
    assert text == "- AA\n" + FILLER
    assert [s for s, _ in results] == ["applied", "applied", "applied"]


@pytest.mark.parametrize("literal", ["$1", "\\1", "$&", "\\g<0>", "${1}"])
def test_replacement_text_is_literal(literal: str) -> None:
    text, _ = run("- cost was (12)\n", replace("(12)", literal))
    assert text == f"- cost was {literal}\n"


def test_a_missing_anchor_is_skipped_and_an_ambiguous_one_too() -> None:
    text, results = run("- tea\n- tea\n- coffee\n" + FILLER, remove("- milk"), remove("- tea"), remove("- coffee"))
    assert text == "- tea\n- tea\n" + FILLER
    assert results[0][0] == "skipped" and "not found" in results[0][1]
    assert results[1][0] == "skipped" and "occurs 2 times" in results[1][1]
    assert results[2][0] == "applied"


def test_a_crlf_file_matches_an_lf_anchor() -> None:
    crlf = "- a\r\n- b\r\n- c\r\n- d\r\n" + FILLER.replace("\n", "\r\n")
    text, results = run(crlf, remove("- b\n- c"))
    assert results[0][0] == "applied"
    assert text.startswith("- a\r\n- d\r\n+ filler")
    text, _ = run(crlf, remove("- b"))
    assert text.startswith("- a\r\n- c\r\n- d\r\n+ filler")


def test_removing_whole_lines_takes_their_line_end_and_a_part_of_a_line_does_not() -> None:
    assert run("- a\n- b\n- c\n" + FILLER, remove("- b"))[0] == "- a\n- c\n" + FILLER
    assert run("- a b c\n" + FILLER, remove(" b"))[0] == "- a c\n" + FILLER


def test_bounded_loss_under_budget_is_25_percent_of_the_original() -> None:
    lines = [f"- line {i:02d} xxxxxxx\n" for i in range(20)]  # 20 lines of 18 chars: 360 chars
    text = "".join(lines)
    cap = int(len(text) * LOSS_UNDER_BUDGET)  # 90 chars: exactly 5 whole lines
    assert cap == 5 * len(lines[0])
    ops = [remove(line.rstrip("\n")) for line in lines[:6]]
    new, results = run(text, *ops)
    assert [s for s, _ in results] == ["applied"] * 5 + ["skipped"]
    assert "bounded loss" in results[5][1] and "25%" in results[5][1]
    assert new == "".join(lines[5:])


def test_an_add_cannot_mask_a_delete() -> None:
    text = "".join(f"- fact number {i:02d}\n" for i in range(10))  # 170 chars, cap 42
    big = "- fact number 00\n- fact number 01\n- fact number 02"  # 50 chars
    new, results = run(text, add("- a long new line " * 5), replace(big, big + " plus more"))
    assert results[0][0] == "applied"
    assert results[1][0] == "skipped" and "bounded loss" in results[1][1]
    assert "fact number 00" in new


def test_over_budget_deletions_may_reach_90_percent_but_never_empty_the_file() -> None:
    lines = [f"- task {i} done\n" for i in range(10)]  # 10 × 14 = 140 chars
    text = "".join(lines)
    budget = Budgets(memory_chars=50, user_chars=0, write_routing=False)
    cap = int(len(text) * LOSS_OVER_BUDGET)  # 126 = 9 lines
    assert cap == 9 * len(lines[0])
    new, results = run(text, *[remove(l.rstrip("\n")) for l in lines], budgets=budget)
    assert [s for s, _ in results] == ["applied"] * 9 + ["skipped"]
    assert new == lines[9]
    # a file whose one line is all of it: the cap (90%) refuses before the empty-file rule
    new, results = run("- only\n", remove("- only"), budgets=budget)
    assert results[0][0] == "skipped" and new == "- only\n"


def test_a_non_empty_file_is_never_left_empty() -> None:
    budget = Budgets(memory_chars=1, user_chars=0, write_routing=False)
    text = "- x\n" + "\n" * 200  # mostly blank: removing the line is within 90%
    new, results = run(text, remove("- x"), budgets=budget)
    assert results[0] == ("skipped", "this op would leave the file empty; a non-empty file is never emptied")
    assert new == text


def test_over_budget_adds_and_growing_replaces_are_skipped_shrinking_ones_apply() -> None:
    text = "- alpha beta gamma\n- delta\n" + FILLER
    over = Budgets(memory_chars=len(text) - 1, user_chars=0, write_routing=False)
    at = Budgets(memory_chars=len(text), user_chars=0, write_routing=False)  # exactly at budget: not over
    _, results = run(text, add("- new"), replace("- delta", "- delta and more"), replace("alpha beta", "ab"), budgets=over)
    assert [s for s, _ in results] == ["skipped", "skipped", "applied"]
    assert "net-shrink" in results[0][1] and "grow" in results[1][1]
    _, results = run(text, add("- new"), replace("- delta", "- delta and more"), budgets=at)
    assert [s for s, _ in results] == ["skipped", "skipped"]  # not over budget, but no room to grow
    assert all("over its soft budget" in r for _, r in results)
    room = Budgets(memory_chars=len(text) + 100, user_chars=0, write_routing=False)
    _, results = run(text, add("- new"), replace("- delta", "- delta and more"), budgets=room)
    assert [s for s, _ in results] == ["applied", "applied"]


PINNED = """# Memory

## User
- Prefers short answers
- Lives in Lisbon

## Work
- Project Kestrel ships in March
- Old ticket 41 is closed

## Preferences
- Tea, not coffee
"""


@pytest.mark.parametrize("target", ["- Prefers short answers", "## User", "- Tea, not coffee", "## Preferences\n- Tea", "- Old ticket 41 is closed\n\n## Preferences"])
def test_pinned_sections_are_never_removed_or_shrunk(target: str) -> None:
    new, results = run(PINNED, remove(target), replace(target, "x"))
    assert new == PINNED
    assert all(s == "skipped" and "pinned section" in r for s, r in results)


def test_outside_pinned_sections_and_adds_into_them_apply() -> None:
    new, results = run(PINNED, remove("- Old ticket 41 is closed"), add("- Writes in British English", target="- Lives in Lisbon"))
    assert [s for s, _ in results] == ["applied", "applied"]
    assert "- Lives in Lisbon\n- Writes in British English\n" in new
    assert "Old ticket" not in new


@pytest.mark.parametrize("unpin", [
    add("## Older notes", target="- Prefers short answers"),  # a heading inside ## User ends it early
    add("```", target="# Memory"),  # a fence opened above it: ## User is no heading any more
    replace("- Old ticket 41 is closed", "- Old ticket 41 is closed\n```"),  # a fence opened above ## Preferences
    replace("- Project", "```\n- Project"),  # the same from a replace of part of a line
])
def test_an_op_that_would_take_the_pin_off_a_section_is_skipped_so_its_lines_stay(unpin: Proposal) -> None:
    new, results = run(PINNED + FILLER, unpin, remove("- Lives in Lisbon"), remove("- Tea, not coffee"))
    assert results[0][0] == "skipped" and "outside it" in results[0][1]
    assert [s for s, _ in results[1:]] == ["skipped", "skipped"]
    assert new == PINNED + FILLER


def test_ops_that_change_no_heading_or_fence_line_keep_every_section_where_it_was() -> None:
    from services.dreaming.apply.applier import _moves_sections

    for old, start, end, inserted in ((PINNED, PINNED.index("March"), PINNED.index("March") + 5, "April # not a heading"),
                                      (PINNED, PINNED.index("- Old"), PINNED.index("- Old") + 2, "")):
        new = old[:start] + inserted + old[end:]
        assert not _moves_sections(old, new, start, end, len(inserted))
    at = PINNED.index("- Lives in Lisbon")
    assert _moves_sections(PINNED, PINNED[:at] + "## Split\n" + PINNED[at:], at, at, len("## Split\n"))


def test_adds_into_a_pinned_section_that_keep_it_whole_still_apply() -> None:
    new, results = run(PINNED + FILLER, add("### Habits", target="- Prefers short answers"), add("- Walks to work", target="### Habits"),
                       remove("- Old ticket 41 is closed"), add("## Later\n- a new section at the end"))
    assert [s for s, _ in results] == ["applied"] * 4
    assert "- Prefers short answers\n### Habits\n- Walks to work\n- Lives in Lisbon\n" in new


@pytest.mark.parametrize("heading", ["## feedback", "### Profile", "## Preference:", "# USER"])
def test_pinned_headings_any_case_and_level(heading: str) -> None:
    other = heading.split()[0] + " Other"  # the next heading of the same level ends the section
    text = f"{heading}\n- keep me\n\n{other}\n- free\n" + FILLER
    new, results = run(text, remove("- keep me"), remove("- free"))
    assert [s for s, _ in results] == ["skipped", "applied"]


def test_a_pinned_top_level_section_holds_its_subsections() -> None:
    text = "# User\n- keep\n## Habits\n- also kept\n# Work\n- free\n" + FILLER
    _, results = run(text, remove("- also kept"), remove("- free"))
    assert [s for s, _ in results] == ["skipped", "applied"]


@pytest.mark.parametrize("unpin", [
    add("## Scratch", target="## User"),  # a heading of its level ends the section early
    add("# Aside", target="- Prefers short answers"),  # so does a higher one
    add("```", target="- Old ticket 41 is closed"),  # an open fence above it hides its heading
    replace("Project Kestrel ships in March", "Project Kestrel ships in March\n```"),
])
def test_no_op_may_leave_pinned_lines_outside_their_section(unpin: Proposal) -> None:
    # Otherwise the next op of the run could remove them: the pinned section would shrink.
    new, results = run(PINNED + FILLER, unpin, remove("- Lives in Lisbon"), remove("- Tea, not coffee"))
    assert new == PINNED + FILLER
    assert [s for s, _ in results] == ["skipped"] * 3
    assert "would leave lines of a pinned section outside it" in results[0][1]


def test_closing_a_fence_that_hides_a_pinned_heading_is_refused_too() -> None:
    text = "## Notes\n```\nsome code\n```\n## Feedback\n- Keep diffs small\n" + FILLER
    new, results = run(text, remove("```\n## Feedback"), remove("some code"))
    assert results[0][0] == "skipped" and "pinned section" in results[0][1]
    text = "## Notes\n- a\n```\n## Feedback\n- inside a fence, so not pinned\n```\n" + FILLER
    _, results = run(text, remove("```\n## Feedback"))  # opening the fence earlier was never pinned: free
    assert results[0][0] == "applied"


def test_adds_that_keep_pinned_lines_pinned_apply() -> None:
    new, results = run(PINNED + FILLER, add("### Detail", target="## User"), remove("## Work"), add("## Later"))
    assert [s for s, _ in results] == ["applied"] * 3, results  # a deeper heading; a section joining; an add at the end
    assert "## User\n### Detail\n- Prefers short answers\n" in new


def test_a_heading_inside_a_code_fence_pins_nothing() -> None:
    text = "## Notes\n```\n## User\n- code line\n```\n- free line\n- other\n- more\n- and more\n"
    _, results = run(text, remove("- code line"))
    assert results[0][0] == "applied"


def test_adds_append_once_and_skip_what_is_already_there() -> None:
    new, results = run("- a", add("- b"), add("-   b"), add("- c", target="- a"))
    assert new == "- a\n- c\n- b\n"
    assert [s for s, _ in results] == ["applied", "skipped", "applied"]
    assert results[1][1] == "already in MEMORY.md"


def test_episodic_adds_need_routing_and_go_to_their_topic_file() -> None:
    note = Proposal(op="add", tier=EPISODIC, topic="kestrel-release", content="- 2026-11-30 shipped beta", reason="task log")
    off = Budgets(memory_chars=10, user_chars=0, write_routing=False)
    result = plan({"MEMORY.md": "x" * 50}, [("r/1", note)], off)
    assert result.results[0].status == "skipped" and "writeRouting" in result.results[0].reason
    on = Budgets(memory_chars=10, user_chars=0, write_routing=True, episodic_dir="memory")
    result = plan({"MEMORY.md": "x" * 50}, [("r/1", note)], on)  # over budget does not matter
    assert result.results[0].status == "applied"
    assert result.appends[0][:2] == ("memory/kestrel-release.md", "- 2026-11-30 shipped beta\n")
    assert result.changed() == []


def test_user_md_has_its_own_budget_and_cap() -> None:
    user = "- name: Ana\n- city: Porto\n- pets: none\n- tz: WET\n" + FILLER
    p = Proposal(op="remove", file="USER.md", target="- pets: none", reason="x")
    result = plan({"MEMORY.md": "", "USER.md": user}, [("r/1", p)], NO_BUDGET)
    assert result.results[0].status == "applied" and result.changed() == ["USER.md"]
    assert result.texts["USER.md"] == "- name: Ana\n- city: Porto\n- tz: WET\n" + FILLER


def test_edits_record_exact_text_offsets_context_and_hashes() -> None:
    result = plan({"MEMORY.md": "- a\n- b\n- c\n" + FILLER}, [("r/1", remove("- b")), ("r/2", replace("- c", "- C!"))], NO_BUDGET)
    first, second = result.edits
    assert (first.kind, first.offset, first.removed, first.inserted) == ("remove", 4, "- b\n", "")
    assert (first.before, first.after) == ("- a\n", ("- c\n" + FILLER)[:48])
    assert first.hash_after == second.hash_before
    assert (second.offset, second.removed, second.inserted) == (4, "- c", "- C!")


def test_an_unknown_file_is_skipped() -> None:
    p = Proposal(op="remove", file="SOUL.md", target="x", reason="y")
    result = plan({"MEMORY.md": "x\n"}, [("r/1", p)], NO_BUDGET)
    assert result.results[0].status == "skipped" and "not a memory file" in result.results[0].reason


def test_under_budget_an_op_that_would_overflow_the_budget_is_skipped() -> None:
    text = "- one\n" + FILLER
    exact = Budgets(memory_chars=len(text) + len("- two\n"), user_chars=0, write_routing=False)
    new, results = run(text, add("- two"), add("- three"), budgets=exact)
    assert [s for s, _ in results] == ["applied", "skipped"]  # to exactly the budget, then no further
    assert "over its soft budget" in results[1][1] and len(new) == exact.memory_chars
    _, results = run(text, replace("- one", "- one, and much longer now"), budgets=exact)
    assert results[0][0] == "skipped"
