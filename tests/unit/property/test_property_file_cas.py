"""Properties of the file API's compare-and-swap writes (``services/file_api/files.py``).

Whatever the contents (any UTF-8, any size up to a few pages) and whichever hash each writer
sends (the current one, a stale one, the hash of no bytes, none at all):

- a write succeeds exactly when it sent no hash or the hash of the content on disk, and then the
  file holds exactly its bytes; a refused write leaves the file byte for byte as it was, and no
  temp file behind;
- a reader running beside the writers only ever sees a whole content some writer wrote (or the
  file's first content), never a mix or a prefix: the file is never half-written.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from services.file_api import files

CONTENTS = st.text(max_size=3000).map(lambda text: text.encode("utf-8"))
HASH_CHOICES = st.sampled_from(["current", "stale", "empty", "none"])


def _expected(choice: str, current: bytes, stale: bytes) -> str | None:
    return {"current": files.sha256_hex(current), "stale": files.sha256_hex(stale),
            "empty": files.EMPTY_SHA256, "none": None}[choice]


@given(first=CONTENTS, writes=st.lists(st.tuples(CONTENTS, HASH_CHOICES), max_size=8))
def test_a_write_lands_whole_exactly_when_its_hash_is_the_files(first: bytes, writes: list[tuple[bytes, str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "MEMORY.md").write_bytes(first)
        on_disk, previous = first, b"never written \x00"
        for data, choice in writes:
            expected = _expected(choice, on_disk, previous)
            allowed = expected is None or expected == files.sha256_hex(on_disk)
            try:
                files.write_file(workspace, "MEMORY.md", data, expected_sha256=expected)
                written = True
            except files.FileChanged:
                written = False
            assert written == allowed
            previous, on_disk = on_disk, data if written else on_disk
            assert (workspace / "MEMORY.md").read_bytes() == on_disk
        assert [p.name for p in workspace.iterdir()] == ["MEMORY.md"]


@settings(max_examples=25)
@given(contents=st.lists(st.binary(min_size=1, max_size=200_000).map(lambda b: b.hex().encode()), min_size=2, max_size=5, unique=True))
def test_a_reader_beside_the_writers_never_sees_a_half_written_file(contents: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        (workspace / "MEMORY.md").write_bytes(contents[0])
        whole = set(contents)
        seen: list[bytes] = []
        done = threading.Event()

        def read() -> None:
            while not done.is_set():
                seen.append(files.read_bytes(workspace, "MEMORY.md") or b"")

        def write(data: bytes) -> None:
            current = files.read_bytes(workspace, "MEMORY.md") or b""
            with contextlib.suppress(files.FileChanged):  # a loser of the race writes nothing
                files.write_file(workspace, "MEMORY.md", data, expected_sha256=files.sha256_hex(current))

        reader = threading.Thread(target=read)
        reader.start()
        writers = [threading.Thread(target=write, args=(data,)) for data in contents[1:] * 3]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        done.set()
        reader.join()
        assert seen and set(seen) <= whole
        assert (workspace / "MEMORY.md").read_bytes() in whole
