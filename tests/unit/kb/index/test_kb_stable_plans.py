"""Every SQLite connection the KB opens has stable plans (``schema.stable_plans``).

Without SQLite's query planner stability guarantee, FTS5 prepares the statements it runs inside
every MATCH again at each query (a bound value may change their plan), which costs a third of a
MATCH's time and keeps a freshly made statement in each connection's cache among short-lived
allocations. The guarantee is a setting of each connection, so each way the KB opens one is
checked: an archive's writer and reader, the vault's index and the retrieval log's writer.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apsw
from kb_helpers import settings, write

from services.kb.archive import retrieval_log
from services.kb.index.indexer import refresh
from services.kb.index.schema import open_reader, stable_plans
from services.kb.index.search import search

ASK = -1  # SQLITE_DBCONFIG_*: a negative value reads the setting without changing it


def stable(conn: apsw.Connection) -> bool:
    return conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, ASK) == 1


def test_an_archive_writer_and_reader_have_stable_plans(conn: apsw.Connection, db_path: Path) -> None:
    assert stable(conn)
    reader = open_reader(db_path)
    try:
        assert stable(reader)
    finally:
        reader.close()


def test_the_vault_index_has_stable_plans(vconn: apsw.Connection) -> None:
    assert stable(vconn)


def test_the_retrieval_log_writer_has_stable_plans(conn: apsw.Connection, db_path: Path) -> None:
    log_conn = retrieval_log._open_writer(db_path, 1000)
    try:
        assert stable(log_conn)
    finally:
        log_conn.close()


def test_a_plain_connection_does_not_have_them_until_asked(tmp_path: Path) -> None:
    plain = apsw.Connection(str(tmp_path / "plain.sqlite"))
    try:
        assert not stable(plain)  # the check above would pass for nothing if SQLite set it by default
        stable_plans(plain)
        assert stable(plain)
    finally:
        plain.close()


def test_searches_answer_the_same_run_after_run(conn: apsw.Connection, workspace: Path) -> None:
    write(workspace, "MEMORY.md", "# MEMORY\n\n- zebra crossing at the river delta\n- alpha and omega\n")
    write(workspace, "memory/topics/delta.md", "# Delta\n\n- the river delta floods in spring\n- zebra herds\n")
    refresh(conn, workspace, settings())
    queries = ("zebra", "river delta", "alpha OR omega", "spring", "zebra river", "nothing-here")
    first = [[dataclasses.astuple(h) for h in search(conn, workspace, q, 5, check_stale=False).hits] for q in queries]
    for _ in range(3):  # the same statements again, bound to other values in between
        again = [[dataclasses.astuple(h) for h in search(conn, workspace, q, 5, check_stale=False).hits] for q in queries]
        assert again == first
    assert first[0] and first[1] and not first[-1]
