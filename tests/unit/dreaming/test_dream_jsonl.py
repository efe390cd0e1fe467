"""The journal and audit files after a torn append: only the torn line is lost."""

from __future__ import annotations

from pathlib import Path

from services.dreaming import jsonl


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
