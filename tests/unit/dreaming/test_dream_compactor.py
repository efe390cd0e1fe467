"""The compactor: each marker and each exception at its boundary, every fixture run twice (pure)."""

from __future__ import annotations

import random
import time

import pytest
from dreaming_moves import big_memory, random_memory, settle

from services.dreaming.apply import sections
from services.dreaming.passes import blocks
from services.dreaming.passes.compactor import compact, terminal_reason
from services.dreaming.passes.moves import COMPACT, COMPLETED, archive_block, take


def left_and_moved(text: str) -> tuple[str, list[str]]:
    moves, left = settle(compact, text)
    assert all(m.kind == COMPACT and m.target == COMPLETED and m.date is None for m in moves)
    return left, [m.text for m in moves]


@pytest.mark.parametrize(("line", "reason"), [
    ("- [x] Ship it", "checked task box [x]"),
    ("* [X] Ship it", "checked task box [X]"),
    ("1. [x] Ship it", "checked task box [x]"),
    ("3) [x]", "checked task box [x]"),
    ("- ~~Use the old API~~", "struck through"),
    ("~~A paragraph struck through~~", "struck through"),
    ("- [ ] ~~Dropped~~", "struck through"),
    ("- ✅ Ship", "✅ at the start"),
    ("- ✅\ufe0f Ship", "✅ at the start"),
    ("- Ship ✅", "✅ at the end"),
    ("- Ship ✅ (2026-11-30)", "✅ at the end"),
    ("- (✅) Ship", "✅ at the start"),
    ("- [DONE] Ship", "DONE at the start"),
    ("- (MERGED) Ship", "MERGED at the start"),
    ("- DONE: Ship", "DONE at the start"),
    ("- DONE — Ship", "DONE at the start"),
    ("- DONE - Ship", "DONE at the start"),
    ("- DONE", "DONE at the start"),
    ("- **DONE** Ship", "DONE at the start"),
    ("- **DONE:** Ship", "DONE at the start"),
    ("- _MERGED_ Ship", "MERGED at the start"),
    ("DONE: a paragraph", "DONE at the start"),
    ("- Ship (MERGED)", "MERGED at the end"),
    ("- Ship [DONE].", "DONE at the end"),
    ("- Ship — DONE", "DONE at the end"),
    ("- Ship – DONE!", "DONE at the end"),
    ("- Ship - DONE", "DONE at the end"),
    ("- Status: MERGED", "MERGED at the end"),
    ("- **Status:** DONE", "DONE at the end"),
    ("- PR #12 | MERGED", "MERGED at the end"),
    ("- Ship — DONE [PR #12]", "DONE at the end"),
    ("- Ship: DONE 2026-11-30", "DONE at the end"),
    ("- Ship **DONE**", "DONE at the end"),
])
def test_a_marker_where_it_may_stand_makes_the_entry_terminal(line: str, reason: str) -> None:
    assert terminal_reason(line) == reason


@pytest.mark.parametrize("line", [
    "- The DONE column in Jira means shipped",
    "The DONE column in Jira means shipped",
    "- Move cards from REVIEW to DONE",
    "- MERGED PRs deploy nightly",
    "- DONE column means shipped",
    "- DONE -x",
    "- DONEish",
    "- HALF-DONE",
    "- Ship DONE",
    "- PR #12 MERGED",
    "- Done: ship",
    "- ship: done",
    "- Legend: ✅ passed, ❌ failed",
    "- Tests ✅ unit, ❌ integration",
    "- `DONE` is the final status",
    "- [ ] Ship",
    "- [x]Ship",
    "[x] not a list item",
    "- ~~old~~ new",
    "- ~~a~~ and ~~b~~",
    "- ~Ship~",
    "- ~~ ~~",
    "- Ship ✅ and more",
    "  - [x] an indented list is a paragraph: its bullet is text",
    "",
])
def test_no_marker_or_one_in_the_middle_is_not_terminal(line: str) -> None:
    assert terminal_reason(line) is None


def test_terminal_items_move_with_their_nested_items_and_the_rest_stays() -> None:
    text = (
        "## Tasks\n"
        "- [x] Ship v2\n"
        "  - [ ] the changelog (an open child goes with its done parent)\n"
        "    continuation of the child\n"
        "- [ ] Write docs\n"
        "  - [x] a done child of an open item stays\n"
        "- ✅ Rotate keys\n"
        "lazy continuation of the rotation\n"
        "- Durable: the key vault is in eu-west-1\n"
    )
    left, moved = left_and_moved(text)
    assert moved == [
        "- [x] Ship v2\n  - [ ] the changelog (an open child goes with its done parent)\n    continuation of the child\n",
        "- ✅ Rotate keys\nlazy continuation of the rotation\n",
    ]
    assert left == (
        "## Tasks\n- [ ] Write docs\n  - [x] a done child of an open item stays\n"
        "- Durable: the key vault is in eu-west-1\n"
    )


def test_a_loose_item_takes_its_later_indented_paragraphs_and_the_blank_lines_inside_it() -> None:
    text = "- [x] Migrate the DB\n\n  It took two nights.\n\n  - nested after a blank\n\nA durable paragraph.\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] Migrate the DB\n\n  It took two nights.\n\n  - nested after a blank\n\n"]
    assert left == "A durable paragraph.\n"


def test_a_paragraph_moves_whole_and_one_separating_blank_line_goes_with_it() -> None:
    text = "First fact.\n\nDONE: the migration\nran for two nights\n\nLast fact.\n"
    left, moved = left_and_moved(text)
    assert moved == ["DONE: the migration\nran for two nights\n\n"]
    assert left == "First fact.\n\nLast fact.\n"


def test_blank_lines_stay_when_taking_them_would_join_two_blocks() -> None:
    # the item follows a paragraph line directly: its blank line is the paragraph's separator
    text = "A paragraph\n- [x] an item right under it\n\nAnother paragraph.\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] an item right under it\n"]
    assert left == "A paragraph\n\nAnother paragraph.\n"


def test_items_inside_a_list_take_no_blank_line() -> None:
    text = "## H\n\n- a\n- [x] b\n- c\n\n## Next\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] b\n"]
    assert left == "## H\n\n- a\n- c\n\n## Next\n"


def test_a_whole_list_that_goes_leaves_one_separation() -> None:
    left, moved = left_and_moved("Intro.\n\n- [x] a\n- ✅ b\n  - child\n\nOutro.\n")
    assert (left, moved) == ("Intro.\n\nOutro.\n", ["- [x] a\n", "- ✅ b\n  - child\n\n"])
    left, moved = left_and_moved("Intro.\n\n- [x] a\n- b\n- ✅ c\n\nOutro.\n")  # not a run: nothing to tidy
    assert (left, moved) == ("Intro.\n\n- b\n\nOutro.\n", ["- [x] a\n", "- ✅ c\n"])
    left, moved = left_and_moved("## H\n- [x] a\n- [x] b\n\n## I\n")
    assert (left, moved) == ("## H\n## I\n", ["- [x] a\n", "- [x] b\n\n"])


def test_the_last_entry_of_the_file_takes_the_blank_lines_above_it_and_those_to_the_end() -> None:
    left, moved = left_and_moved("- a\n\n- [x] b\n\n\n")
    assert (left, moved) == ("- a\n", ["\n- [x] b\n\n\n"])
    left, moved = left_and_moved("Fact.\n\n  \n~~old~~")  # a whitespace-only line is blank; no final newline
    assert (left, moved) == ("Fact.\n", ["\n  \n~~old~~"])
    left, moved = left_and_moved("- [x] a\n\n- [x] b\n")
    assert (left, moved) == ("", ["- [x] a\n\n", "- [x] b\n"])
    left, moved = left_and_moved("Fact.\n\n- [x] a\n- [x] b\n\n")  # a run that ends the file
    assert (left, moved) == ("Fact.\n", ["\n- [x] a\n", "- [x] b\n\n"])


def test_markers_inside_code_fences_never_count_and_fenced_code_never_moves() -> None:
    text = (
        "## Tasks\n"
        "```\n- [x] inside a fence\nDONE: inside a fence\n\n- ✅ still inside\n```\n"
        "~~~markdown\n## not a heading\n- [x] inside tildes\n~~~\n"
        "- [x] outside\n"
        "````\n```\n- [x] a longer fence is closed only by as long a run\n```\n````\n"
    )
    left, moved = left_and_moved(text)
    assert moved == ["- [x] outside\n"]
    assert left == text.replace("- [x] outside\n", "")


def test_an_unclosed_fence_hides_everything_after_it() -> None:
    text = "- [x] before\n```\n- [x] after an unclosed fence\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] before\n"]
    assert left == "```\n- [x] after an unclosed fence\n"


def test_an_item_with_fenced_code_under_it_stays() -> None:
    text = "- [x] Deployed with\n  ```\n  make deploy\n  ```\n- [x] Deployed again, after a blank line\n\n   ```\n   x\n   ```\n- [x] A col-0 fence is its own block\n```\ny\n```\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] A col-0 fence is its own block\n"]


def test_markers_inside_pinned_sections_never_move() -> None:
    text = (
        "## User\n- [x] pinned task\n- ✅ pinned\n\n"
        "### Notes under User are pinned too\n- DONE: pinned\n\n"
        "## Tasks\n- [x] moves\n\n"
        "### Preferences:\n- [x] a pinned sub-section pins only itself\n\n"
        "#### deeper, still pinned\n- [x] pinned\n\n"
        "### Later\n- [x] moves again\n\n"
        "# FEEDBACK\n- ~~pinned~~\n"
    )
    left, moved = left_and_moved(text)
    assert moved == ["- [x] moves\n\n", "- [x] moves again\n\n"]
    assert "- [x] pinned task" in left and "- ~~pinned~~" in left


def test_a_file_that_is_all_pinned_moves_nothing() -> None:
    text = "## Profile\n- [x] a\n- ✅ b\n\nDONE: c\n\n### Sub\n- [x] d\n"
    assert left_and_moved(text) == (text, [])


@pytest.mark.parametrize("text", ["", "\n\n", "# Memory\n", "## Sprint 3 ✅ DONE", "## [x] DONE\n\n"])
def test_empty_files_and_headings_alone_move_nothing(text: str) -> None:
    assert left_and_moved(text) == (text, [])


def test_a_marked_heading_stays_and_so_do_its_unmarked_entries() -> None:
    text = "## Sprint 3 ✅\n- shipped the importer\n- [x] the exporter\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] the exporter\n"]
    assert left == "## Sprint 3 ✅\n- shipped the importer\n"


def test_a_file_with_no_headings() -> None:
    text = "- [x] one\n- two\n\nDONE: three\n\nfour\n"
    moves, left = settle(compact, text)
    assert left == "- two\n\nfour\n"
    assert [m.heading_path for m in moves] == [(), ()]


def test_crlf_line_endings_are_kept_and_moved_with_their_lines() -> None:
    text = "## Tasks\r\n\r\n- [x] one\r\n  - child\r\n- two\r\n\r\nDONE: three\r\n\r\nfour\r\n"
    left, moved = left_and_moved(text)
    assert moved == ["- [x] one\r\n  - child\r\n", "DONE: three\r\n\r\n"]
    assert left == "## Tasks\r\n\r\n- two\r\n\r\nfour\r\n"
    assert "\n" not in left.replace("\r\n", "")


def test_lone_cr_line_endings() -> None:
    left, moved = left_and_moved("- a\r- [x] b\r- c\r")
    assert (left, moved) == ("- a\r- c\r", ["- [x] b\r"])


def test_unicode() -> None:
    text = (
        "## Café ☕\n"
        "- ✅ 完了した作業\n"
        "- 未完了 ✅ の途中\n"
        "- ~~Ünïcödé struck~~\n"
        "- ✅ ends with a line separator\u2028and goes on\n"
        "- 🚀 DONE\n"
    )
    left, moved = left_and_moved(text)
    assert moved == ["- ✅ 完了した作業\n", "- ~~Ünïcödé struck~~\n", "- ✅ ends with a line separator\u2028and goes on\n"]
    assert left == "## Café ☕\n- 未完了 ✅ の途中\n- 🚀 DONE\n"


def test_each_move_keeps_its_heading_path_and_the_archive_holds_it_verbatim() -> None:
    text = "# Memory\n\n## Work\n\n### Kafka\n- [x] upgrade brokers\n- keep 3 replicas\n\n## Home\n- ✅ fix the tap\n"
    moves, left = settle(compact, text)
    assert [m.heading_path for m in moves] == [("Memory", "Work", "Kafka"), ("Memory", "Home")]
    assert all(m.heading_path == sections.heading_path(text, m.start) for m in moves)
    archive = archive_block(moves, "r1", "2026-12-01")
    assert "## Completed in MEMORY.md › Memory › Work › Kafka · 2026-12-01 · run r1\n\n- [x] upgrade brokers\n" in archive
    assert archive.endswith("## Completed in MEMORY.md › Memory › Home · 2026-12-01 · run r1\n\n- ✅ fix the tap\n")
    assert left == "# Memory\n\n## Work\n\n### Kafka\n- keep 3 replicas\n\n## Home\n"


def test_take_refuses_moves_planned_on_another_text() -> None:
    text = "- [x] a\n- b\n"
    with pytest.raises(ValueError):
        take("- b\n" + text, compact(text))


def test_a_164_kb_file_compacts_in_one_linear_pass() -> None:
    text = big_memory()
    assert len(text) >= 164 * 1024
    started = time.perf_counter()
    moves, left = settle(compact, text)
    elapsed = time.perf_counter() - started
    print(f"\n164 KB compact + checks: {elapsed * 1000:.0f} ms, {len(moves)} moves, {len(text)} -> {len(left)} chars")
    assert len(moves) == 2 * text.count("\n## Project ")
    assert "[x] Set up CI" not in left and "✅ Rotated" not in left
    assert left.count("The DONE column of board") == text.count("The DONE column of board")
    assert left.count("# [x] DONE\n```") == text.count("# [x] DONE\n```")


def test_random_files_settle_and_never_move_a_heading_fenced_or_pinned_line() -> None:
    rng = random.Random(12)
    for _ in range(400):
        text = random_memory(rng)
        moves, _ = settle(compact, text)
        lay = blocks.layout(text)
        for move in moves:
            lines = range(lay.line_at(move.start), lay.line_at(move.end - 1) + 1)
            assert all(lay.kinds[n] not in (blocks.Kind.HEADING, blocks.Kind.FENCED) and not lay.pinned[n] for n in lines), text


def test_long_lines_cost_their_length() -> None:
    """Lines a regex would backtrack over (each took seconds at 20 KB before): read in one pass."""
    spaces = " " * 200_000
    assert sections.headings(f"## Tasks{spaces}x ##  \n")[0].text == f"Tasks{spaces}x"
    assert terminal_reason("- ~~" + "a " * 100_000) is None
    assert terminal_reason("- ~~" + "a " * 100_000 + "~~") == "struck through"
    text = f"## Tasks{spaces}x\n- [x] a\n"
    assert compact(text)[0].heading_path == (f"Tasks{spaces}x",)
