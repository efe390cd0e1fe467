"""An archive's search connection holds a page cache of a few pages (``search.tune_reader``).

SQLite gives a connection's page cache its first pages as one block of up to 20 pages (330 KB at
the archives' 16 KiB pages), allocated whole and written a page at a time as reads need them. With
a cache bound of 32 MiB every search connection had such a block, and the KB's resident memory
grew as searches of growing archives wrote more of each (docs/capacity.md "Where the KB's memory
goes"). A search connection now keeps ``READER_CACHE_PAGES`` pages, so its block is that size.
"""

from __future__ import annotations

from pathlib import Path

import apsw
from kb_helpers import settings, write

from services.kb.index.indexer import refresh
from services.kb.index.schema import PAGE_BYTES, open_reader
from services.kb.index.search import READER_CACHE_PAGES, VAULT_READER_CACHE_KIB, search, tune_reader

WORDS = [f"w{i:05d}" for i in range(20_000)]
CONNECTIONS = 20


def archive(conn: apsw.Connection, workspace: Path) -> None:
    """Notes of 6,000 distinct words each: an index of many more pages than a search cache holds."""
    for n in range(40):
        body = " ".join(WORDS[(n * 331 + k) % len(WORDS)] for k in range(6_000))
        write(workspace, f"memory/n{n}.md", f"# N{n}\n\n{body}\n")
    report = refresh(conn, workspace, settings())
    assert not report.errors


def test_a_search_connection_is_tuned_to_its_few_pages_and_no_map(conn: apsw.Connection, db_path: Path,
                                                                    workspace: Path) -> None:
    archive(conn, workspace)
    reader = open_reader(db_path)
    try:
        tune_reader(reader)
        assert reader.execute("PRAGMA cache_size").fetchall()[0][0] == READER_CACHE_PAGES
        assert reader.execute("PRAGMA mmap_size").fetchall()[0][0] == 0
        tune_reader(reader, -VAULT_READER_CACHE_KIB)  # the vault's: a bound in KiB
        assert reader.execute("PRAGMA cache_size").fetchall()[0][0] == -VAULT_READER_CACHE_KIB
    finally:
        reader.close()


def test_a_search_connection_holds_less_than_sqlites_first_block_of_pages(
    conn: apsw.Connection, db_path: Path, workspace: Path
) -> None:
    """What SQLite has allocated for a search connection after a few searches, all of it (the
    connection, its schema, statements and page cache), is less than the 20-page block alone
    that a connection with a larger cache gets: the block made while the connection read its
    schema, at SQLite's default cache size, was handed back by ``tune_reader``."""
    archive(conn, workspace)
    readers: list[apsw.Connection] = []
    before = apsw.memory_used()
    try:
        for i in range(CONNECTIONS):
            reader = open_reader(db_path)
            readers.append(reader)
            tune_reader(reader)
            for k in range(5):
                assert search(reader, workspace, WORDS[(i * 977 + k * 31) % len(WORDS)], 5, check_stale=False).hits
        per_connection = (apsw.memory_used() - before) / CONNECTIONS
    finally:
        for reader in readers:
            reader.close()
    assert per_connection < 20 * PAGE_BYTES, per_connection
