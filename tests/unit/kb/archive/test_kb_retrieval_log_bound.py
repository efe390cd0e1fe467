"""The retrieval log's bound: a million hits over simulated months never leave more than
``FOLD_AT_ROWS`` unfolded rows, and the lifecycle rows (all the staleness GC reads of the log) come
out as if every hit had been kept and folded once at the end."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import apsw

from services.kb.archive.retrieval_log import FOLD_AT_ROWS, Recorder, fold_retrievals, unfolded_rows
from services.kb.index.excerpt import EntryRef
from services.kb.index.schema import lifecycle_key
from services.kb.vault import sqlite_rows
from services.kb.vault.gc import NoteRef

HITS = 1_000_000
BATCH = 3_331  # not a divisor of the bound: a fold comes at a batch that overshoots it
DAY_S = 86_400.0
START = 1_750_000_000.0
ENTRIES = 400

Expected = dict[str, tuple[int, float, float]]  # key -> (count, first, last)


def drive(db_path: Path, conn: apsw.Connection, make_hits: Callable[[list[int]], list[object]],
          fold: Callable[[apsw.Connection], object], keys: list[str]) -> Expected:
    """Submit HITS hits in batches spread over 180 days through a Recorder folding with ``fold``;
    after every batch the log must be under the bound. The expected lifecycle, computed here."""
    rng = random.Random(7)
    now = [START]
    recorder = Recorder(linger_s=0.0, clock=lambda: now[0], fold=fold)
    expected: Expected = {}
    folds_seen = 0
    try:
        for sent in range(0, HITS, BATCH):
            now[0] = START + 180 * DAY_S * sent / HITS
            # Most hits on a few entries, some entries only in the first month (the GC's candidates).
            pool = ENTRIES if now[0] < START + 30 * DAY_S else ENTRIES // 2
            picks = [min(int(rng.paretovariate(1.2)) - 1, pool - 1) for _ in range(min(BATCH, HITS - sent))]
            assert recorder.submit(db_path, make_hits(picks), "search") == len(picks)  # type: ignore[arg-type]
            assert recorder.flush(timeout=30)
            left = unfolded_rows(conn)
            assert left < FOLD_AT_ROWS, f"{left} rows unfolded after {sent + len(picks)} hits"
            folds_seen += left < len(picks)
            for pick in picks:
                count, first, _ = expected.get(keys[pick], (0, now[0], now[0]))
                expected[keys[pick]] = (count + 1, first, now[0])
    finally:
        recorder.close()
    assert folds_seen >= HITS // (FOLD_AT_ROWS + BATCH)  # the bound, not a nightly fold, kept the log short
    return expected


def test_a_million_hits_keep_the_archive_log_bounded_and_the_lifecycle_exact(
    conn: apsw.Connection, db_path: Path
) -> None:
    hashes = [f"{n:064x}" for n in range(1, ENTRIES + 1)]
    expected = drive(db_path, conn, lambda picks: [EntryRef(f"memory/n{p}.md", hashes[p], 1, 1) for p in picks],
                     fold_retrievals, hashes)
    fold_retrievals(conn)  # the night's fold: what the GC then reads
    assert unfolded_rows(conn) == 0
    rows = {
        bytes(key).hex(): (count, first, last)
        for key, count, first, last in conn.execute(
            "SELECT entry_hash, retrieval_count, first_seen, last_retrieved FROM kb_lifecycle")
    }
    assert rows == {lifecycle_key(h).hex(): v for h, v in expected.items()}  # type: ignore[union-attr]


def test_a_million_hits_keep_the_vault_log_bounded_and_the_lifecycle_exact(vconn: apsw.Connection,
                                                                          vault_dir: Path) -> None:
    names = [f"note-{n}" for n in range(ENTRIES)]
    db_path = vault_dir / "kb.sqlite"
    expected = drive(db_path, vconn, lambda picks: [NoteRef(f"notes/{names[p]}.md", f"h{p}") for p in picks],
                     sqlite_rows.fold_retrievals, names)
    assert sqlite_rows.claim_day(vconn, "2026-06-30", "{}").summary is None  # the GC's own fold
    states = sqlite_rows.lifecycle(vconn)
    assert {n: (s.retrieval_count, s.last_retrieved) for n, s in states.items()} == {
        n: (count, last) for n, (count, _, last) in expected.items()}
