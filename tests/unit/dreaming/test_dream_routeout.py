"""The route-out: what is episodic, the order, the topics, each exception at its boundary; every
fixture run twice (pure)."""

from __future__ import annotations

import random
import re
import time

import pytest
from dreaming_moves import big_memory, random_memory, settle

from services.dreaming.apply import sections
from services.dreaming.passes import blocks
from services.dreaming.passes.compactor import compact
from services.dreaming.passes.moves import ROUTE, Move, archive_block, take
from services.dreaming.passes.routeout import (
    TOPIC,
    first_date,
    is_log_heading,
    leading_date,
    opens_with_time_word,
    route_out,
    slugify,
)

EVERYTHING = 1  # a budget nothing fits: every episodic block moves


def routed(text: str, budget: int = EVERYTHING, episodic_dir: str = "memory") -> tuple[list[Move], str]:
    moves, left = settle(lambda t: route_out(t, budget, episodic_dir), text)
    prefix = episodic_dir.strip("/")
    for move in moves:
        assert move.kind == ROUTE
        assert move.target.startswith(prefix + "/") and move.target.endswith(".md")
        assert TOPIC.match(move.target[len(prefix) + 1 : -3]), move.target
        assert move.date is None or re.fullmatch(r"\d{4}-\d{2}-\d{2}", move.date)
    return moves, left


def moved(text: str, budget: int = EVERYTHING) -> list[tuple[str, str]]:
    """(text, target) of each move."""
    return [(m.text, m.target) for m in routed(text, budget)[0]]


@pytest.mark.parametrize(("text", "date"), [
    ("2026-11-30", "2026-11-30"),
    ("2026/11/30: deploy", "2026-11-30"),
    ("2026-1-5 deploy", "2026-01-05"),
    ("[2026-11-30] deploy", "2026-11-30"),
    ("**2026-11-30** deploy", "2026-11-30"),
    ("(30 Nov 2026) deploy", "2026-11-30"),
    ("30th November, 2026", "2026-11-30"),
    ("Nov 30, 2026 — deploy", "2026-11-30"),
    ("November 30th 2026", "2026-11-30"),
    ("Nov. 30, 2026", "2026-11-30"),
    ("sept 3 2026", "2026-09-03"),
    ("Mon 2026-11-30", "2026-11-30"),
    ("Monday, 30 Nov 2026", "2026-11-30"),
    ("2026-11-30T14:00Z deploy", "2026-11-30"),
])
def test_dates_that_open_a_text(text: str, date: str) -> None:
    assert leading_date(text) == date


@pytest.mark.parametrize("text", [
    "2026-02-30 is no day", "2026-13-01", "30/11/2026", "11/30/2026", "30.11.2026", "2026-11-301",
    "12026-11-30", "2026-11", "November 2026", "Deploy on 2026-11-30", "~~2026-11-30~~", "`2026-11-30`", "",
])
def test_texts_no_date_opens(text: str) -> None:
    assert leading_date(text) is None


def test_the_first_date_anywhere() -> None:
    assert first_date("Standup, Monday Nov 30, 2026 and 2026-12-01") == "2026-11-30"
    assert first_date("2026-02-30 then 2026-03-01") == "2026-03-01"
    assert first_date("no date 2026") is None


@pytest.mark.parametrize(("text", "expected"), [
    ("Today we shipped", True), ("today's standup", True), ("**Yesterday**: paged", True),
    ("This  morning the build broke", True), ("this afternoon", True), ("This evening", True),
    ("This week: on call", True), ("Last night", True), ("last week", True), ("Earlier today", True),
    ("Tonight", True), ("This session: refactor", True), ("Last session", True), ("Session: refactor", True),
    ("Session 12: refactor", True), ("Session #4 — refactor", True), ("Session (pairing): x", True),
    ("Session 2026-11-30: x", True), ("Session - x", True),
    ("Todays", False), ("Session tokens expire hourly", False), ("Sessions restart on edits", False),
    ("Session-scoped caches", False), ("The build broke today", False), ("Lasting", False),
])
def test_time_words(text: str, expected: bool) -> None:
    assert opens_with_time_word(text) is expected


@pytest.mark.parametrize(("heading", "expected"), [
    ("Log", True), ("Session log", True), ("Work-log (Kafka)", True), ("Standup 2026-11-30", True),
    ("**Journal**", True), ("Daily notes:", True), ("Change log", True), ("Changelog", True),
    ("Diary", True), ("Project history", True), ("Timeline", True), ("Stand-ups", True),
    ("Session 2026-11-30", True), ("Session notes [Kafka]", True), ("Meeting notes", True),
    ("Session summaries", True), ("Progress", True), ("Recent work", True), ("Recent activity", True),
    ("Worklog", True), ("Devlog", True), ("Logs", True),
    ("Log format", False), ("Backlog", False), ("Catalog", False), ("History of decisions", False),
    ("Session management", False), ("Notes", False), ("Sessions", False), ("Logging", False),
])
def test_log_headings(heading: str, expected: bool) -> None:
    assert is_log_heading(heading) is expected


@pytest.mark.parametrize(("text", "slug"), [
    ("Kafka", "kafka"), ("Café — Notes / Kafka!!", "cafe-notes-kafka"), ("  --Ops--  ", "ops"),
    ("日報", ""), ("x" * 70, "x" * 64), ("a" * 63 + " b", "a" * 63),
])
def test_slugs(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_nothing_moves_under_budget_or_without_one() -> None:
    text = "## Log\n- 2026-11-30: a\n"
    assert route_out(text, len(text), "memory") == []
    assert route_out(text, 0, "memory") == []
    assert route_out(text, -5, "memory") == []
    assert route_out(text, len(text) - 1, "memory") != []


def test_the_oldest_blocks_go_first_then_the_undated_in_file_order_until_it_fits() -> None:
    lines = ["- 2026-03-01: c\n", "- undated one\n", "- 2026-01-01: a\n", "- 2026-02-01: b\n", "- undated two\n"]
    text = "## Facts\n- durable\n\n## Log\n" + "".join(lines)
    order = [lines[2], lines[3], lines[0], lines[1], lines[4]]
    for count in range(1, len(order) + 1):
        size = sum(len(line) for line in order[:count])
        for budget in (len(text) - size, len(text) - size + len(order[count - 1]) - 1):
            moves, left = routed(text, budget)
            assert sorted(m.text for m in moves) == sorted(order[:count])
            assert len(left) <= budget
    assert [m.date for m in routed(text)[0]] == ["2026-03-01", None, "2026-01-01", "2026-02-01", None]


def test_a_dated_section_moves_whole_with_its_heading() -> None:
    text = (
        "# Memory\n\n## Facts\n- durable\n\n"
        "## 2026-11-01\n- deployed\n```\nmake deploy\n```\n### evening\n- paged\n\n"
        "## 2026-11-02 — quiet day\n\n"
        "## Standup Nov 3, 2026\n- nothing new\n\n"
        "## Decisions\n- Postgres over MySQL\n"
    )
    assert moved(text) == [
        ("## 2026-11-01\n- deployed\n```\nmake deploy\n```\n### evening\n- paged\n\n", "memory/log-2026-11.md"),
        ("## 2026-11-02 — quiet day\n\n", "memory/log-2026-11.md"),
        ("## Standup Nov 3, 2026\n- nothing new\n\n", "memory/standup.md"),
    ]
    moves, left = routed(text)
    assert [m.heading_path for m in moves] == [("Memory",)] * 3
    assert [m.date for m in moves] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    assert left == "# Memory\n\n## Facts\n- durable\n\n## Decisions\n- Postgres over MySQL\n"


def test_an_outer_dated_section_holds_the_inner_ones() -> None:
    text = "## Journal 2026-11-30\n### 2026-11-30 morning\n- a\n### 2026-11-30 evening\n- b\n## Facts\n- c\n"
    assert moved(text) == [("## Journal 2026-11-30\n### 2026-11-30 morning\n- a\n### 2026-11-30 evening\n- b\n", "memory/journal.md")]


def test_a_dated_section_with_a_pinned_part_keeps_its_heading_and_moves_its_other_entries() -> None:
    text = "## 2026-11-30\n- deployed\n\nToday the tests flaked.\n\n### Preferences\n- 2026-11-30: likes tea\n"
    moves, left = routed(text)
    assert [(m.text, m.reason, m.date) for m in moves] == [
        ("- deployed\n\n", "under '2026-11-30'", "2026-11-30"),
        ("Today the tests flaked.\n\n", "session note", "2026-11-30"),
    ]
    assert left == "## 2026-11-30\n### Preferences\n- 2026-11-30: likes tea\n"


def test_entries_under_a_log_heading_and_its_sub_sections_are_episodic() -> None:
    text = (
        "## Session log\n- started the migration\n\nThe API was slow.\n\n"
        "### Kafka\n- restarted the broker\n  - twice\n\n"
        "## Facts\n- Kafka runs 3 brokers\n- Deployed on 2026-11-30 (not at the start: durable)\n"
    )
    moves, left = routed(text)
    assert [(m.text, m.target, m.heading_path, m.reason) for m in moves] == [
        ("- started the migration\n\n", "memory/session-log.md", ("Session log",), "under 'Session log'"),
        ("The API was slow.\n\n", "memory/session-log.md", ("Session log",), "under 'Session log'"),
        ("- restarted the broker\n  - twice\n\n", "memory/kafka.md", ("Session log", "Kafka"), "under 'Session log'"),
    ]
    assert left == "## Session log\n### Kafka\n## Facts\n- Kafka runs 3 brokers\n- Deployed on 2026-11-30 (not at the start: durable)\n"


def test_dated_and_session_entries_anywhere_are_episodic_and_durable_ones_stay() -> None:
    text = (
        "## Kafka\n"
        "- 2026-11-02: restarted the broker\n"
        "- [2026-11-03] raised the retention\n"
        "- Yesterday: the consumer lagged\n"
        "- Session 4: tuned the batch size\n"
        "- [ ] 2026-12-01 call the vendor (an open task is no note)\n"
        "- Session tokens expire hourly\n"
        "- The brokers run 3.7\n"
    )
    moves, left = routed(text)
    assert [(m.reason, m.date) for m in moves] == [
        ("dated entry (2026-11-02)", "2026-11-02"), ("dated entry (2026-11-03)", "2026-11-03"),
        ("session note", None), ("session note", None),
    ]
    assert all(m.target == "memory/kafka.md" for m in moves)
    assert left == "## Kafka\n- [ ] 2026-12-01 call the vendor (an open task is no note)\n- Session tokens expire hourly\n- The brokers run 3.7\n"


def test_an_open_task_under_a_log_heading_moves_with_the_log() -> None:
    assert moved("## Worklog\n- [ ] follow up with Ana\n") == [("- [ ] follow up with Ana\n", "memory/worklog.md")]


def test_pinned_sections_never_move_even_when_the_file_cannot_fit() -> None:
    text = (
        "## User\n- 2026-11-30: said hello\n- Today: prefers tea\n### 2026-11-29\n- pinned dated sub-section\n\n"
        "## Log\n- 2026-11-28: moves\n\n"
        "# Feedback\n## 2026-11-27\n- pinned by the level-1 heading above\n"
    )
    moves, left = routed(text)
    assert [m.text for m in moves] == ["- 2026-11-28: moves\n\n"]
    assert len(left) > EVERYTHING and route_out(left, EVERYTHING, "memory") == []


def test_a_file_that_is_all_pinned_moves_nothing() -> None:
    text = "## Profile\n- 2026-11-30: a\n\n### Log\n- Today b\n\n### 2026-11-29\n- c\n"
    assert routed(text) == ([], text)


@pytest.mark.parametrize("text", ["", "\n", "# Memory\n", "## Log\n", "## Log\n\n\n"])
def test_empty_files_and_headings_without_entries_move_nothing(text: str) -> None:
    assert routed(text) == ([], text)


def test_a_date_heading_alone_moves() -> None:
    assert routed("## 2026-11-30\n") == ([Move(ROUTE, 0, 14, "## 2026-11-30\n", "memory/log-2026-11.md", (), "dated section '2026-11-30'", "2026-11-30")], "")


def test_code_fences_hide_dates_and_headings_and_never_move_alone() -> None:
    text = (
        "## Kafka\n"
        "```\n## 2026-11-30\n- 2026-11-30: inside a fence\nToday: inside\n```\n"
        "- 2026-11-29: outside\n"
        "- 2026-11-28: with code under it stays\n  ```\n  kafka-topics --list\n  ```\n"
        "## Log\n```\nfenced code in a log section\n```\n"
    )
    moves, left = routed(text)
    assert [m.text for m in moves] == ["- 2026-11-29: outside\n"]


def test_topics_from_the_nearest_heading_that_names_something() -> None:
    text = (
        "# Memory\n- 2026-01-01: no heading but the file's title\n\n"
        "## Ops\n### 2026-01-02\n- under a date heading under Ops\n"
        "### Today\n- under a time heading under Ops\n"
        "## 日誌 log\n- 2026-01-03: ascii of the heading only\n"
        "## 日誌\n- 2026-02-04: no ascii at all\n"
        "## Session notes 2026-01-05 (pairing)\n- x\n"
    )
    assert [target for _, target in moved(text)] == [
        "memory/log-2026-01.md", "memory/ops.md", "memory/ops.md", "memory/log.md",
        "memory/log-2026-02.md", "memory/session-notes-pairing.md",
    ]


def test_targets_join_the_episodic_dir_and_slugs_are_capped() -> None:
    heading = "A very long project name " * 5
    moves, _ = routed(f"## {heading}\n- 2026-11-30: x\n", episodic_dir="notes/episodic/")
    assert moves[0].target == f"notes/episodic/{slugify(heading)}.md"
    assert len(slugify(heading)) == 64
    assert slugify("a" * 63 + " b") == "a" * 63  # cut at 64, then the trailing '-' trimmed


def test_a_file_with_no_headings() -> None:
    text = "- 2026-11-30: a\n- Today: b\n- durable\n\nLast night the disk filled.\n"
    assert moved(text) == [
        ("- 2026-11-30: a\n", "memory/log-2026-11.md"), ("- Today: b\n", "memory/log.md"),
        ("\nLast night the disk filled.\n", "memory/log.md"),
    ]


def test_crlf_line_endings() -> None:
    text = "## Log\r\n\r\n- 2026-11-30: a\r\n- b\r\n\r\n## Facts\r\n- c\r\n"
    moves, left = routed(text)
    assert [m.text for m in moves] == ["- 2026-11-30: a\r\n", "- b\r\n\r\n"]
    assert left == "## Log\r\n\r\n## Facts\r\n- c\r\n"


def test_unicode() -> None:
    text = "## Café log ☕\n- 2026-11-30: 再起動した 🚀\n- Ünïcödé\u2028second line\n## Fakten\n- Die API ist langsam\n"
    moves, left = routed(text)
    assert [(m.text, m.target) for m in moves] == [
        ("- 2026-11-30: 再起動した 🚀\n", "memory/cafe-log.md"), ("- Ünïcödé\u2028second line\n", "memory/cafe-log.md"),
    ]
    assert left == "## Café log ☕\n## Fakten\n- Die API ist langsam\n"


def test_the_archive_block_of_routed_moves() -> None:
    moves, _ = routed("## Session log\n- a\n### Kafka\n- 2026-11-30: b\n")
    by_target: dict[str, list[Move]] = {}
    for move in moves:
        by_target.setdefault(move.target, []).append(move)
    assert archive_block(by_target["memory/kafka.md"], "r2", "2026-12-01") == (
        "\n## Moved from MEMORY.md › Session log › Kafka · 2026-12-01 · run r2\n\n- 2026-11-30: b\n"
    )
    assert all(m.heading_path == sections.heading_path("## Session log\n- a\n### Kafka\n- 2026-11-30: b\n", m.start) for m in moves)


def test_after_the_compactor_on_a_164_kb_file() -> None:
    text = big_memory()
    compacted = take(text, compact(text))
    started = time.perf_counter()
    moves = route_out(compacted, 8000, "memory")
    elapsed = time.perf_counter() - started
    print(f"\n164 KB route_out after compact: {elapsed * 1000:.0f} ms, {len(moves)} moves, {len(compacted)} chars")
    _, left = routed(compacted, 8000)
    assert "Restarted the broker" not in left and ": deploy" not in left
    assert left.count("The DONE column of board") == text.count("The DONE column of board")
    assert "## User\n\n- Prefers short answers\n- Lives in Lisbon\n\n" in left
    # a budget it can meet: the oldest go first, and it stops as soon as it fits
    budget = len(compacted) - 20_000
    moves, left = routed(compacted, budget)
    assert len(left) <= budget
    chosen = sorted(moves, key=lambda m: (m.date or "9999", m.start))
    assert len(left) + len(chosen[-1].text) > budget
    assert max(m.date or "" for m in moves) <= min(m.date or "9999" for m in route_out(left, EVERYTHING, "memory"))


def test_random_files_settle_after_the_compactor_and_never_move_a_pinned_line() -> None:
    rng = random.Random(67)
    for _ in range(400):
        text = take(original := random_memory(rng), compact(original))
        for budget in (EVERYTHING, len(text) // 2):
            moves, _ = routed(text, budget)
            lay = blocks.layout(text)
            for move in moves:
                assert not any(lay.pinned[lay.line_at(move.start) : lay.line_at(move.end - 1) + 1]), text


def test_long_headings_cost_their_length() -> None:
    """Headings a regex would backtrack over (seconds at 20 KB before): read in one pass."""
    assert is_log_heading("Session log" + " (a)" * 50_000)
    assert not is_log_heading("Log " + ")" * 100_000 + "x")
    assert is_log_heading("Daily" + " " * 100_000 + "notes")
    text = "## Log" + " " * 200_000 + "\n- a\n"
    assert [m.text for m in route_out(text, 1, "memory")] == ["- a\n"]
