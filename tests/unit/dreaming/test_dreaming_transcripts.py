"""Gathering transcripts: block types, broken lines, confinement, the lookback window, the caps."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dreaming_helpers import NOW, record, set_age, write_session

from services.dreaming.review.transcripts import (
    CUT_MARKER,
    MAX_LINE_BYTES,
    MESSAGE_CAP,
    TOOL_INPUT_CAP,
    TOOL_RESULT_CAP,
    Gathered,
    gather,
    read_bounded,
)


def texts(gathered: Gathered) -> list[str]:
    return [m.text for s in gathered.sessions for m in s.messages]


def one_session(tmp_path: Path, lines: list[object]) -> Gathered:
    write_session(tmp_path, "s.jsonl", lines)
    return gather(tmp_path, NOW, 3)


# --- content blocks ----------------------------------------------------------------------


def test_string_content_and_text_blocks_are_kept_with_role_and_timestamp(tmp_path: Path) -> None:
    at = NOW - timedelta(hours=2)
    got = one_session(tmp_path, [
        record("user", "Call me Bruce.", at=at),
        record("assistant", [{"type": "text", "text": "Noted, Bruce."}, {"type": "text", "text": "Anything else?"}]),
    ])
    (session,) = got.sessions
    assert [(m.role, m.text) for m in session.messages] == [
        ("user", "Call me Bruce."), ("assistant", "Noted, Bruce.\nAnything else?"),
    ]
    assert session.messages[0].timestamp == at.replace(microsecond=0)
    assert session.messages[1].timestamp is None
    assert session.path == "s.jsonl" and not session.truncated
    assert got.total_chars == sum(len(t) for t in texts(got))


def test_thinking_is_private_and_left_out(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        record("assistant", [{"type": "thinking", "thinking": "SECRET REASONING", "signature": "x"},
                             {"type": "text", "text": "Done."}]),
        record("assistant", [{"type": "thinking", "thinking": "only thoughts"}]),
    ])
    assert texts(got) == ["Done."]
    assert got.skipped_lines == 0


def test_tool_use_is_a_one_line_marker_with_a_truncated_input(tmp_path: Path) -> None:
    long_path = "/srv/" + "deep/" * 100
    got = one_session(tmp_path, [
        record("assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls -la\n/tmp"}}]),
        record("assistant", [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": long_path}}]),
        record("assistant", [{"type": "tool_use", "id": "t3", "name": "TodoWrite"}]),
    ])
    bash, read, todo = texts(got)
    assert bash == "[tool_use Bash: ls -la /tmp]"
    assert read.startswith('[tool_use Read: {"file_path":"/srv/deep/') and "more chars]" in read
    assert "\n" not in read and len(read) < TOOL_INPUT_CAP + 60
    assert todo == "[tool_use TodoWrite]"


def test_tool_results_are_kept_truncated_string_or_blocks(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        record("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "total 0\nfile.txt"}]),
        record("user", [{"type": "tool_result", "tool_use_id": "t2",
                         "content": [{"type": "text", "text": "y" * 2000}, {"type": "image", "source": {}}]}]),
        record("user", [{"type": "tool_result", "tool_use_id": "t3", "content": "boom", "is_error": True}]),
    ])
    short, long_, error = texts(got)
    assert short == "[tool_result: total 0\nfile.txt]"
    assert long_.startswith("[tool_result: " + "y" * TOOL_RESULT_CAP + "… [")
    assert "y" * (TOOL_RESULT_CAP + 1) not in long_
    assert error == "[tool_result error: boom]"


def test_images_are_markers(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        record("user", [{"type": "image", "source": {"type": "base64", "data": "AAAA" * 1000}},
                        {"type": "text", "text": "what is this?"}]),
    ])
    assert texts(got) == ["[image]\nwhat is this?"]


def test_a_long_message_is_cut_with_a_marker(tmp_path: Path) -> None:
    got = one_session(tmp_path, [record("user", "z" * (MESSAGE_CAP + 10))])
    (text,) = texts(got)
    assert text == "z" * MESSAGE_CAP + "… [10 more chars]"


def test_other_record_types_are_skipped_quietly(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        {"type": "summary", "summary": "Session about X", "leafUuid": "u"},
        {"type": "system", "content": "compacted"},
        {"type": "file-history-snapshot", "snapshot": {}},
        {"type": "some-future-kind", "message": {"content": "hidden"}},
        record("user", "kept"),
    ])
    assert texts(got) == ["kept"]
    assert got.skipped_lines == 0


# --- broken input ------------------------------------------------------------------------


def test_broken_lines_are_counted_and_never_fatal(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        record("user", "before"),
        "{not json",
        "[1, 2, 3]",
        '"a string"',
        {"type": "user", "message": "not an object"},
        {"type": "assistant", "message": {"content": 42}},
        b'{"type": "user", "message": {"content": "caf\xe9"}}',  # Latin-1, not UTF-8
        "{" * 100_000,  # deep nesting
        "",
        "   ",
        record("assistant", "after"),
    ])
    assert texts(got) == ["before", "after"]
    assert got.skipped_lines == 7


def test_a_huge_line_is_skipped_and_counted(tmp_path: Path) -> None:
    huge = record("user", "h" * (MAX_LINE_BYTES + 10))
    got = one_session(tmp_path, [record("user", "small"), huge])
    assert texts(got) == ["small"]
    assert got.skipped_lines == 1


def test_unknown_blocks_and_non_object_blocks_are_ignored(tmp_path: Path) -> None:
    got = one_session(tmp_path, [record("assistant", ["stray", 7, {"type": "server_tool_use"}, {"type": "text", "text": "ok"}])])
    assert texts(got) == ["ok"]


# --- files and confinement ---------------------------------------------------------------


def test_missing_or_empty_folder_gives_an_empty_result(tmp_path: Path) -> None:
    assert gather(tmp_path / "absent", NOW, 3) == Gathered()
    (tmp_path / "empty").mkdir()
    got = gather(tmp_path / "empty", NOW, 3)
    assert got == Gathered() and got.newest_mtime is None and got.files_seen == 0


def test_jsonl_files_are_found_recursively_and_others_ignored(tmp_path: Path) -> None:
    write_session(tmp_path, "projects/-srv-app/a.jsonl", [record("user", "nested")])
    write_session(tmp_path, "notes.txt", [record("user", "not a transcript")])
    write_session(tmp_path, "top.jsonl", [record("user", "top")], age=timedelta(hours=2))
    got = gather(tmp_path, NOW, 3)
    assert [s.path for s in got.sessions] == ["top.jsonl", "projects/-srv-app/a.jsonl"]
    assert got.files_seen == 2


def test_symlinks_never_lead_out_of_the_folder(tmp_path: Path) -> None:
    inside = tmp_path / "sessions"
    outside = tmp_path / "elsewhere"
    write_session(outside, "secret.jsonl", [record("user", "SECRET from outside")])
    write_session(inside, "real.jsonl", [record("user", "mine")])
    (inside / "link-out.jsonl").symlink_to(outside / "secret.jsonl")
    (inside / "dir-out").symlink_to(outside, target_is_directory=True)
    (inside / "twin.jsonl").symlink_to(inside / "real.jsonl")
    got = gather(inside, NOW, 3)
    assert texts(got) == ["mine"]
    assert got.files_seen == 1


def test_the_folder_itself_may_be_a_symlink(tmp_path: Path) -> None:
    write_session(tmp_path / "real", "a.jsonl", [record("user", "through the link")])
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert texts(gather(tmp_path / "link", NOW, 3)) == ["through the link"]


# --- lookback window ---------------------------------------------------------------------


def test_files_older_than_the_window_are_skipped_but_seen(tmp_path: Path) -> None:
    write_session(tmp_path, "old.jsonl", [record("user", "last week")], age=timedelta(days=7))
    write_session(tmp_path, "new.jsonl", [record("user", "yesterday")], age=timedelta(days=1))
    got = gather(tmp_path, NOW, 3)
    assert texts(got) == ["yesterday"]
    assert got.files_seen == 2
    assert got.newest_mtime == NOW - timedelta(days=1)
    assert got.newest_mtime.tzinfo is not None


def test_newest_mtime_counts_files_outside_the_window(tmp_path: Path) -> None:
    write_session(tmp_path, "old.jsonl", [record("user", "x")], age=timedelta(days=9))
    got = gather(tmp_path, NOW, 3)
    assert got.sessions == () and got.newest_mtime == NOW - timedelta(days=9)


def test_records_older_than_the_window_are_skipped_by_timestamp(tmp_path: Path) -> None:
    got = one_session(tmp_path, [
        record("user", "ancient", at=NOW - timedelta(days=5)),
        record("user", "no timestamp"),
        {**record("user", "odd timestamp"), "timestamp": "yesterday-ish"},
        record("assistant", "recent", at=NOW - timedelta(hours=5)),
        {**record("user", "naive recent"), "timestamp": "2026-11-30T22:14:05"},
    ])
    assert texts(got) == ["no timestamp", "odd timestamp", "recent", "naive recent"]
    assert got.sessions[0].messages[1].timestamp is None
    assert got.sessions[0].messages[3].timestamp == datetime(2026, 11, 30, 22, 14, 5, tzinfo=UTC)
    assert got.skipped_lines == 0


def test_a_naive_now_or_a_negative_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        gather(tmp_path, NOW.replace(tzinfo=None), 3)
    with pytest.raises(ValueError):
        gather(tmp_path, NOW, -1)


# --- caps, from the newest end -----------------------------------------------------------


def test_messages_per_session_keep_the_newest(tmp_path: Path) -> None:
    write_session(tmp_path, "s.jsonl", [record("user", f"m{n}") for n in range(10)])
    got = gather(tmp_path, NOW, 3, max_messages_per_session=3)
    (session,) = got.sessions
    assert [m.text for m in session.messages] == ["m7", "m8", "m9"]
    assert session.truncated
    assert not got.truncated  # the total cap cut nothing


def test_total_chars_keep_the_newest_sessions_and_messages(tmp_path: Path) -> None:
    # Each message is 10 chars. Oldest session c, then b, then a (newest).
    for name, hours in (("c", 30), ("b", 20), ("a", 10)):
        write_session(tmp_path, f"{name}.jsonl", [record("user", f"{name}-msg-{n:04d}") for n in range(3)],
                      age=timedelta(hours=hours))
    got = gather(tmp_path, NOW, 3, max_chars=45)
    assert [s.path for s in got.sessions] == ["b.jsonl", "a.jsonl"]  # oldest first for the prompt
    assert texts(got) == ["b-msg-0002", "a-msg-0000", "a-msg-0001", "a-msg-0002"]
    assert got.total_chars == 40
    assert got.truncated
    assert got.sessions[0].truncated and not got.sessions[1].truncated


def test_zero_chars_gathers_nothing(tmp_path: Path) -> None:
    write_session(tmp_path, "s.jsonl", [record("user", "x")])
    got = gather(tmp_path, NOW, 3, max_chars=0)
    assert got.sessions == () and got.truncated and got.files_seen == 1


def test_a_big_file_is_read_from_its_tail(tmp_path: Path) -> None:
    lines = [record("user", f"line {n:05d} " + "p" * 80) for n in range(2000)]
    write_session(tmp_path, "big.jsonl", lines)
    size = (tmp_path / "big.jsonl").stat().st_size
    got = gather(tmp_path, NOW, 3, max_bytes_per_file=size // 4, max_messages_per_session=10_000)
    kept = texts(got)
    assert kept[-1].startswith("line 01999 ")
    assert not any(t.startswith("line 00000 ") for t in kept)
    assert 400 < len(kept) < 600  # about a quarter, whole lines only
    assert got.skipped_lines == 0  # the partial first line is dropped, not counted
    assert got.sessions[0].truncated


def test_a_multi_gigabyte_file_is_never_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:
        handle.truncate(4 << 30)  # sparse: 4 GiB of NULs cost no disk and must not be read
        handle.seek(0, os.SEEK_END)
        handle.write(b"\n" + json.dumps(record("user", "the newest words")).encode() + b"\n")
    set_age(path, timedelta(hours=1))
    got = gather(tmp_path, NOW, 3)
    assert texts(got) == ["the newest words"]
    assert got.sessions[0].truncated


# --- read_bounded ------------------------------------------------------------------------


def test_read_bounded_short_file_is_whole(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Memory\n- é\n", encoding="utf-8")
    assert read_bounded(tmp_path / "MEMORY.md", 100) == "# Memory\n- é\n"


def test_read_bounded_cuts_and_says_so_within_the_limit(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("é" * 5000, encoding="utf-8")
    text = read_bounded(tmp_path / "MEMORY.md", 1000)
    assert len(text) == 1000
    assert text.endswith(CUT_MARKER)
    assert text.startswith("é" * (1000 - len(CUT_MARKER)))


def test_read_bounded_replaces_invalid_bytes_and_reads_missing_as_empty(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_bytes(b"ok \xff\xfe end")
    assert read_bounded(tmp_path / "USER.md", 100) == "ok \ufffd\ufffd end"
    assert read_bounded(tmp_path / "absent.md", 100) == ""
    assert read_bounded(tmp_path / "USER.md", 3) == "ok "
