"""services.file_api.files.write_file with ``expected_sha256``: the file API's compare-and-swap
(docs/concepts/apis.md, "Compare-and-swap writes")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gateway.errors import InvalidArgument
from services.file_api import files

OLD = b"# Memory\n\n- the ferry leaves at noon\n"


def put(workspace: Path, data: bytes, expected: str | None) -> None:
    files.write_file(workspace, "MEMORY.md", data, expected_sha256=expected)


def temp_files(workspace: Path) -> list[str]:
    return [p.name for p in workspace.iterdir() if p.name.endswith(".gwtmp")]


def test_the_hash_read_lets_the_write_through(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(OLD)
    put(tmp_path, b"new", files.sha256_hex(OLD))
    assert (tmp_path / "MEMORY.md").read_bytes() == b"new"


def test_a_stale_hash_writes_nothing_and_says_the_file_changed(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(OLD)
    with pytest.raises(files.FileChanged, match="MEMORY.md changed since it was read") as info:
        put(tmp_path, b"new", files.sha256_hex(b"what the caller saw"))
    assert info.value.code == "ABORTED"
    assert (tmp_path / "MEMORY.md").read_bytes() == OLD
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("before", [None, b""])
def test_the_hash_of_no_bytes_matches_a_missing_or_empty_file(tmp_path: Path, before: bytes | None) -> None:
    if before is not None:
        (tmp_path / "MEMORY.md").write_bytes(before)
    put(tmp_path, b"first", files.EMPTY_SHA256)
    assert (tmp_path / "MEMORY.md").read_bytes() == b"first"
    with pytest.raises(files.FileChanged):
        put(tmp_path, b"second", files.EMPTY_SHA256)
    assert (tmp_path / "MEMORY.md").read_bytes() == b"first"


def test_a_write_between_the_hash_check_and_the_rename_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another writer lands after write_file has checked the hash but before write_atomic's
    # own compare under the folder lock: that compare refuses, and the other write stays.
    (tmp_path / "MEMORY.md").write_bytes(OLD)
    real_read = files.read_bytes

    def read_then_other_writer(workspace: Path, name: str) -> bytes | None:
        data = real_read(workspace, name)
        (workspace / name).write_bytes(b"the other writer")
        return data

    monkeypatch.setattr(files, "read_bytes", read_then_other_writer)
    with pytest.raises(files.FileChanged):
        put(tmp_path, b"mine", files.sha256_hex(OLD))
    assert (tmp_path / "MEMORY.md").read_bytes() == b"the other writer"
    assert temp_files(tmp_path) == []


def test_of_writers_sending_the_same_hash_exactly_one_wins(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(OLD)
    expected = files.sha256_hex(OLD)
    start = threading.Barrier(8)
    outcomes: dict[int, str] = {}

    def writer(n: int) -> None:
        start.wait()
        try:
            put(tmp_path, f"writer {n}\n".encode() * 1000, expected)
            outcomes[n] = "won"
        except files.FileChanged:
            outcomes[n] = "refused"

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [n for n, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8 and len(winners) == 1
    assert (tmp_path / "MEMORY.md").read_bytes() == f"writer {winners[0]}\n".encode() * 1000
    assert temp_files(tmp_path) == []


def test_no_expected_hash_writes_unconditionally(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(OLD)
    put(tmp_path, b"over", None)
    assert (tmp_path / "MEMORY.md").read_bytes() == b"over"


def test_an_expected_hash_is_64_hex_digits_read_in_lowercase() -> None:
    upper = files.sha256_hex(OLD).upper()
    assert files.check_expected_sha256(upper) == files.sha256_hex(OLD)
    for bad in ("", "abc", files.sha256_hex(OLD) + "0", "g" * 64, " " + files.sha256_hex(OLD)[1:]):
        with pytest.raises(InvalidArgument, match=r"expected_sha256 \(expectedSha256\) must be 64 hex digits"):
            files.check_expected_sha256(bad)


def test_read_bytes_tells_a_missing_file_from_an_empty_one(tmp_path: Path) -> None:
    assert files.read_bytes(tmp_path, "MEMORY.md") is None
    (tmp_path / "MEMORY.md").write_bytes(b"")
    assert files.read_bytes(tmp_path, "MEMORY.md") == b""
    assert files.read_file(tmp_path, "MEMORY.md") == ""
