"""Helpers of the kill -9 tests (``test_crash_*.py``): self-checking contents, the kill, the
temp files and the SQLite checks after it, and the tally each test records in the hardening table.

A content written by these tests is ``stamp(label, seq, size)``: a header naming the label,
the sequence number and the SHA-256 of the body, then a body of about ``size`` bytes. Read
back, ``parse`` gives (label, seq) when the content is whole, None when it is torn (its body
does not match its header, or the header is cut).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
from hardening_report import record
from suite_support import Suite

from gateway.atomic import is_legacy_temp_name, is_temp_name

_HEADER = re.compile(r"<!-- crash-test (?P<label>[\w.-]+) #(?P<seq>\d+) sha256=(?P<sha>[0-9a-f]{64}) -->\n")
FTS_TABLES = ("kb_chunks_fts", "kb_chunks_cjk")  # services/kb/index/schema.py


def stamp(label: str, seq: int, size: int, *, unique_words: bool = False) -> str:
    """A content that says what it is: its label, its sequence number, the hash of its body.

    ``unique_words``: each line carries a word found in no other content (so the shared
    vault's near-duplicate check finds no note like it); else the lines repeat one sentence."""
    if unique_words:
        lines = [f"- {label} write {seq} line {i}: {_word(label, seq, i)}\n" for i in range(max(1, size // 40))]
        body = "".join(lines)
    else:
        line = f"- {label} write {seq}: the quick brown fox jumps over the lazy dog {seq:08d}\n"
        body = line * max(1, size // len(line))
    return f"<!-- crash-test {label} #{seq} sha256={hashlib.sha256(body.encode()).hexdigest()} -->\n{body}"


def _word(label: str, seq: int, i: int) -> str:
    return "w" + hashlib.blake2s(f"{label}/{seq}/{i}".encode(), digest_size=6).hexdigest()


def word_of(label: str, seq: int) -> str:
    """A word only content (label, seq) made with ``unique_words`` holds (a search finds it there)."""
    return _word(label, seq, 0)


def parse(text: str) -> tuple[str, int] | None:
    """(label, seq) of a whole ``stamp`` content; None when torn."""
    match = _HEADER.match(text)
    if match is None or hashlib.sha256(text[match.end():].encode()).hexdigest() != match["sha"]:
        return None
    return match["label"], int(match["seq"])


def kill9(suite: Suite, name: str) -> None:
    """SIGKILL process ``name`` of ``suite`` and reap it (no shutdown code runs)."""
    proc = suite.procs.pop(name)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def temp_files(folder: Path, recursive: bool = False) -> list[str]:
    """Temp files of ``write_atomic`` (this version's or an earlier one's) in ``folder``."""
    if not folder.is_dir():
        return []
    listed = [(Path(r), names) for r, _, names in os.walk(folder)] if recursive else [(folder, os.listdir(folder))]
    found = [(root / name).relative_to(folder).as_posix() for root, names in listed for name in names
             if is_temp_name(name) or is_legacy_temp_name(name)]
    return sorted(found)


def until(predicate: Callable[[], bool], limit_s: float) -> bool:
    """Poll ``predicate`` about every millisecond for at most ``limit_s``; whether it came true.
    To aim a kill at a moment (a temp file, a backup appearing), never to time anything."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return False


def has_temp_file(folder: Path) -> bool:
    """Whether a temp file of ours is in ``folder`` now."""
    try:
        return any(is_temp_name(n) for n in os.listdir(folder))
    except FileNotFoundError:
        return False


def swept(suite: Suite, name: str) -> list[dict[str, object]]:
    """Every temp file the ``temp_sweep`` events of ``name``'s log (all its starts) say were removed."""
    return [item for line in suite.log_lines(name) if line.get("event") == "temp_sweep" for item in line["removed"]]  # type: ignore[union-attr]


@contextlib.contextmanager
def index_copy(db: Path) -> Iterator[apsw.Connection]:
    """A connection to a copy of index ``db`` (the database and its WAL), taken while no process
    has the index open (the KB dead or stopped). Opened read-write, so SQLite recovers the WAL
    into the copy as the next start would with the original."""
    with tempfile.TemporaryDirectory(prefix="kb-check-") as tmp:
        copy = Path(tmp) / db.name
        shutil.copyfile(db, copy)
        wal = db.with_name(db.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        conn = apsw.Connection(str(copy))
        try:
            yield conn
        finally:
            conn.close()


def integrity_problems(db: Path) -> list[str]:
    """``PRAGMA integrity_check`` and the FTS5 integrity checks of index ``db``, on a copy
    (``index_copy``); the problems found, [] when it is sound."""
    with index_copy(db) as conn:
        return problems_of(conn)


def problems_of(conn: apsw.Connection) -> list[str]:
    """What ``PRAGMA integrity_check`` and the FTS5 integrity checks of an index find wrong."""
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
    for table in FTS_TABLES:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is None:
            problems.append(f"{table}: missing")
            continue
        try:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        except apsw.Error as exc:
            problems.append(f"{table}: {exc}")
    return problems


@dataclass
class Tally:
    """The figures of one writer's kill -9 rounds, for the hardening table."""

    section: str
    rounds: int = 0
    kills_mid_write: int = 0
    acknowledged: int = 0
    lost: int = 0
    torn: int = 0
    temps_at_kill: int = 0  # temp files of ours present just before a kill
    temps_swept: int = 0  # removed by the start-up sweeps

    def kill(self, in_flight: bool, temps: list[str]) -> None:
        """Count one round's kill: mid-write when a write was in flight or a temp file existed."""
        self.rounds += 1
        self.temps_at_kill += len(temps)
        if in_flight or temps:
            self.kills_mid_write += 1

    def record(self, notes: str) -> None:
        record(self.section, rounds=self.rounds, kills_mid_write=self.kills_mid_write, acknowledged=self.acknowledged,
               lost=self.lost, torn=self.torn, notes=notes)
