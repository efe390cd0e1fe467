"""The file API's PUT record (gateway/put_record.py): written under the folder's lock before the rename, read back by hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gateway.put_record import PutRecord, last_put, puts_dir, record_put
from services.file_api.files import write_file


def test_a_put_record_is_read_back_and_a_bad_one_is_none(tmp_path: Path) -> None:
    assert last_put(tmp_path, "MEMORY.md") is None
    record_put(tmp_path, "MEMORY.md", b"# Memory\n", 1234)
    assert last_put(tmp_path, "MEMORY.md") == PutRecord(hashlib.sha256(b"# Memory\n").hexdigest(), 1234)
    assert (puts_dir(tmp_path) / "MEMORY.md.json").stat().st_mode & 0o777 == 0o600
    (puts_dir(tmp_path) / "USER.md.json").write_text('{"sha256": "x"}')
    assert last_put(tmp_path, "USER.md") is None


def test_the_record_is_made_before_the_file_is_renamed_into_place(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    write_file(workspace, "MEMORY.md", b"old\n")
    seen: list[bytes] = []

    def record() -> None:
        seen.append((workspace / "MEMORY.md").read_bytes())
        record_put(tmp_path, "MEMORY.md", b"new\n", 5)

    write_file(workspace, "MEMORY.md", b"new\n", before_rename=record)
    assert seen == [b"old\n"] and (workspace / "MEMORY.md").read_bytes() == b"new\n"
    assert last_put(tmp_path, "MEMORY.md") == PutRecord(hashlib.sha256(b"new\n").hexdigest(), 5)
