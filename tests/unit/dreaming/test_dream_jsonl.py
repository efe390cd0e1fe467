"""The journal and audit files after a torn append: only the torn line is lost."""

from __future__ import annotations

from pathlib import Path

from services.dreaming.records import jsonl


def test_a_torn_last_line_costs_only_itself(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    jsonl.append(path, [{"n": 1}], max_bytes=1 << 20, keep_bytes=1 << 19)
    with path.open("ab") as handle:
        handle.write(b'{"n": 2, "text": "cut by a ki')  # a process killed mid-append
    jsonl.append(path, [{"n": 3}, {"n": 4}], max_bytes=1 << 20, keep_bytes=1 << 19)
    assert [r["n"] for r in jsonl.read(path)] == [1, 3, 4]


def test_appends_to_a_whole_file_add_no_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for n in range(3):
        jsonl.append(path, [{"n": n}], max_bytes=1 << 20, keep_bytes=1 << 19)
    assert path.read_text() == '{"n":0}\n{"n":1}\n{"n":2}\n'


def test_heal_drops_torn_lines_and_keeps_every_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    jsonl.append(path, [{"n": 1}], max_bytes=1 << 20, keep_bytes=1 << 19)
    with path.open("ab") as handle:
        handle.write(b'{"n": 2, "text": "cut by a ki')
    jsonl.append(path, [{"n": 3}], max_bytes=1 << 20, keep_bytes=1 << 19)
    with path.open("ab") as handle:
        handle.write(b'{"n": 4, "te')  # killed again, and nothing appended since
    assert jsonl.heal(path) == 2
    assert path.read_text() == '{"n":1}\n{"n":3}\n'
    assert jsonl.heal(path) == 0  # a whole file is left as it is


def test_heal_keeps_a_whole_last_record_that_lost_only_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"n":1}\n{"n":2}')
    assert jsonl.heal(path) == 0
    assert path.read_text() == '{"n":1}\n{"n":2}\n'


def test_heal_of_a_missing_file_is_a_no_op(tmp_path: Path) -> None:
    assert jsonl.heal(tmp_path / "journal.jsonl") == 0
    assert not (tmp_path / "journal.jsonl").exists()
