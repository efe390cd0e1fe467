"""What a dream status needs of an agent's audit.jsonl, kept per agent while the file is unchanged.

A status (GetDreamStatus, and the console's list through GetDreamSummaries) needs two things of
the audit: the ledger of proposals (``pending.read_ledger``) and what the run health needs about
the last run (``health.audit_facts``). Both mean parsing the whole file (up to
``audit.AUDIT_MAX_BYTES``), so their digest is kept under a key of the file's identity (device
and inode), its size and mtime_ns, and the last run's id: an append changes the size, a trim or
a heal rewrites the file atomically (a new inode), a new run changes the last run, and the next
status reads the file again. What depends on the time or on the memory files is never kept: the
pending proposals are judged against MEMORY.md and USER.md as they are now, and the 7-day
failure window is applied at each status.

At most ``DIGESTS_KEPT`` agents' digests are kept, the least recently used dropped first. The
table is shared by the worker threads that compute statuses: it is locked, the reading is not.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from services.dreaming.history.health import AuditFacts, audit_facts
from services.dreaming.history.pending import Ledger, read_ledger
from services.dreaming.records import audit, jsonl

DIGESTS_KEPT = 1024

Identity = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


@dataclass(frozen=True)
class Digest:
    """The ledger of proposals and the health's facts about one last run. Shared: never mutated."""

    ledger: Ledger
    facts: AuditFacts


def digest_of(records: list[audit.Record], run_id: str) -> Digest:
    """The digest of ``records`` (audit.jsonl, oldest first) for the last run ``run_id``."""
    return Digest(read_ledger(records), audit_facts(records, run_id))


def _identity(stat: os.stat_result) -> Identity:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _read(path: Path) -> tuple[list[audit.Record], Identity | None]:
    """The records of ``path`` and the identity they were read at; None when the file is missing
    (no records) or changed while it was read."""
    try:
        with open(path, "rb") as handle:
            before = _identity(os.fstat(handle.fileno()))
            raw = handle.read()
            after = _identity(os.fstat(handle.fileno()))
    except FileNotFoundError:
        return [], None
    return jsonl.parse(raw.decode("utf-8", errors="replace")), before if before == after else None


class AuditDigests:
    """Digests by agent (module docstring), at most ``kept`` of them."""

    def __init__(self, kept: int = DIGESTS_KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._table: OrderedDict[str, tuple[Identity, str, Digest]] = OrderedDict()
        self.reads = 0  # files read: misses

    def __len__(self) -> int:
        return len(self._table)

    def get(self, agent_id: str, workspace: Path, run_id: str) -> Digest:
        """The digest of ``agent_id``'s audit.jsonl in ``workspace`` for the last run ``run_id``: the
        kept one while the file and the run are the same, else read now. Raises OSError when the
        file cannot be read."""
        path = workspace / audit.AUDIT
        try:
            now: Identity | None = _identity(os.stat(path))
        except FileNotFoundError:
            now = None
        with self._lock:
            kept = self._table.get(agent_id)
            if kept is not None and (kept[0], kept[1]) == (now, run_id):
                self._table.move_to_end(agent_id)
                return kept[2]
        records, identity = _read(path)
        digest = digest_of(records, run_id)
        with self._lock:
            self.reads += 1
            if identity is not None:
                self._table[agent_id] = (identity, run_id, digest)
                self._table.move_to_end(agent_id)
                while len(self._table) > self._kept:
                    self._table.popitem(last=False)
        return digest
