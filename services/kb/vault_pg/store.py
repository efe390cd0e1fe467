"""The PostgreSQL vault store: ``services.kb.vault.store.VaultStore`` over the ``notes`` table of one
project (docs/concepts/vault.md "PostgreSQL schema"; the rows beside the notes are ``rows``').

A note name of the vault's API maps to a row: ``stale__<name>`` is the row ``<name>`` with ``retired``
true. A note's bytes are UTF-8 text held as ``head`` (its frontmatter block verbatim) and ``body`` (the
rest, which the generated ``search`` column indexes in the same statement: a note and its index change
in one transaction). A create is an ``INSERT ... ON CONFLICT DO NOTHING``: of concurrent creates of one
name from any number of hosts exactly one wins (``notes_one_per_state``), the others get WriteConflict.
An update locks the row, compares the bytes the caller read and writes only while the row's ``version``
is still the one it locked (compare-and-swap). ``writing`` is one transaction holding the vault's
advisory lock (``schema.lock_vault``): every call made inside it runs on its connection, so a
near-duplicate check and the create it guards cannot interleave with another host's. A server that
cannot be reached is ``Unavailable`` naming the vault (``pool.reachable``), never an internal error; a
transaction whose COMMIT was sent when its connection broke is ``Unavailable`` saying its outcome is
unknown (``_transaction``): it is never retried, the caller reads the note again.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from gateway.atomic import WriteConflict
from gateway.dependencies import Dependency
from gateway.errors import InvalidArgument, Unavailable
from gateway.forgetting import Tombstone
from gateway.markdown import frontmatter_end
from services.kb.archive.retrieval_log import FOLD_AT_ROWS, Retrieved
from services.kb.index.entries import DEFAULT_IMPORTANCE, entry_hash, parse_frontmatter
from services.kb.index.frontmatter import FrontmatterError, load_frontmatter
from services.kb.index.hits import SearchHit, make_snippet
from services.kb.index.provenance import classify
from services.kb.index.query import has_unsegmented
from services.kb.index.search import SearchResult, clamp_limit
from services.kb.vault.names import RETIRED_PREFIX, is_retired, live_name, note_path
from services.kb.vault.store import (
    Ages, Authors, Claim, MergeJournal, NoteStat, NoteState, PromotionRecord, ReflectionAudit, ReflectionState, Writer)
from services.kb.vault_pg import fts
from services.kb.vault_pg import reflection as pg_reflection
from services.kb.vault_pg import tombstones as pg_tombstones
from services.kb.vault_pg import rows as pg_rows
from services.kb.vault_pg.pool import Conn, connection, reachable
from services.kb.vault_pg.schema import lock_vault

TOKENIZERS: Final = ("unicode61", "trigram")
_CONTENT: Final = "head || body"


def row_key(name: str) -> tuple[str, bool]:
    """The (row name, retired) a note name of the API maps to."""
    return live_name(name), is_retired(name)


def api_name(name: str, retired: bool) -> str:
    return RETIRED_PREFIX + name if retired else name


def split_note(data: bytes) -> tuple[str, str, dict[str, object]]:
    """(head, body, frontmatter fields) of a note's bytes; InvalidArgument when PostgreSQL cannot hold them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"a shared note must be UTF-8 text (byte {exc.start} is not)") from exc
    if "\x00" in text:
        raise InvalidArgument("a shared note cannot contain a NUL character")
    lines = text.split("\n")
    end = frontmatter_end([line.removesuffix("\r") for line in lines])
    if end is None:
        return "", text, {}
    head = "\n".join(lines[: end + 1]) + ("\n" if end + 1 < len(lines) else "")
    try:
        fields: dict[str, object] = dict(load_frontmatter("\n".join(lines[1:end]), first_line=2))
    except FrontmatterError:
        fields = {}
    return head, text[len(head):], fields


class PostgresVaultStore:
    """``VaultStore`` of ``project`` through ``pool`` (this process's, shared by every project); ``tokenizer``
    chooses the search path (``TOKENIZERS``)."""

    def __init__(self, pool: ConnectionPool[Conn], project: str, tokenizer: str = "unicode61",
                 health: Dependency | None = None) -> None:
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"unknown vault tokenizer {tokenizer!r}")
        self._pool = pool
        self._health = health
        self._project = project
        self._tokenizer = tokenizer
        self._what = f"the shared vault of project {project!r}"
        self._local = threading.local()
        self._known = False
        self._logged: int | None = None  # rows in the project's retrieval log, as far as this process knows
        self._logged_lock = threading.Lock()

    @property
    def project(self) -> str:
        return self._project

    @property
    def pool(self) -> ConnectionPool[Conn]:
        return self._pool

    # --- connections and transactions -------------------------------------------------------
    @contextlib.contextmanager
    def _conn(self) -> Iterator[Conn]:
        held: Conn | None = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        with reachable(self._what, self._pool, self._health), connection(self._pool, self._health) as conn:
            yield conn

    def _ensure_vault(self, conn: Conn) -> None:
        """The project's ``vaults`` row, committed on its own (outside the caller's transaction, whose
        rollback must not take it), once per store."""
        if not self._known and conn.info.transaction_status == TransactionStatus.IDLE:
            conn.execute("INSERT INTO vaults (project, tokenizer) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                         (self._project, self._tokenizer))
            self._known = True

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Conn]:
        """A transaction (a savepoint inside ``writing``) on a vault that exists."""
        with self._conn() as conn:
            self._ensure_vault(conn)
            with self._transaction(conn):
                yield conn

    @contextlib.contextmanager
    def _transaction(self, conn: Conn) -> Iterator[None]:
        """``conn.transaction()`` (a savepoint inside another), its COMMIT's broken connection made Unavailable
        saying the outcome is unknown: the server may have committed before the connection broke."""
        outermost = conn.info.transaction_status == TransactionStatus.IDLE
        committing = False
        try:
            with conn.transaction():
                yield
                committing = outermost
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if not committing or isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            reason = "its PostgreSQL server went away while this write was being committed"
            if self._health is not None:
                self._health.failed(reason)
            raise Unavailable(f"{self._what} is unavailable: {reason}, so whether it was made is unknown; "
                              "read the note again before retrying") from exc

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with reachable(self._what, self._pool, self._health), connection(self._pool, self._health) as conn:
            self._ensure_vault(conn)
            with self._transaction(conn):
                lock_vault(conn, self._project)
                self._local.conn = conn
                try:
                    yield
                finally:
                    self._local.conn = None

    # --- notes ----------------------------------------------------------------------------
    def _row(self, conn: Conn, name: str, *, lock: bool = False) -> tuple[int, int, bytes] | None:
        """(id, version, bytes) of note ``name``; locked until the transaction ends when ``lock``."""
        key, retired = row_key(name)
        found = conn.execute(
            f"SELECT id, version, {_CONTENT} FROM notes WHERE project = %s AND name = %s AND retired = %s"
            + (" FOR UPDATE" if lock else ""), (self._project, key, retired)).fetchone()
        return None if found is None else (int(found[0]), int(found[1]), str(found[2]).encode("utf-8"))

    def read(self, name: str) -> bytes | None:
        with self._conn() as conn:
            found = self._row(conn, name)
        return None if found is None else found[2]

    def exists(self, name: str) -> bool:
        return self.read(name) is not None

    def _insert(self, conn: Conn, name: str, data: bytes) -> int | None:
        """The new row's id; None when the name is taken."""
        head, body, fields = split_note(data)
        key, retired = row_key(name)
        found = conn.execute(
            "INSERT INTO notes (project, name, retired, retired_at, head, body, frontmatter) "
            "VALUES (%s, %s, %s, CASE WHEN %s THEN now() END, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
            (self._project, key, retired, retired, head, body, Jsonb(fields))).fetchone()
        return None if found is None else int(found[0])

    def _locked(self, conn: Conn, name: str, expected: bytes) -> tuple[int, int]:
        """(id, version) of note ``name``, locked, while it still holds ``expected`` (else WriteConflict)."""
        found = self._row(conn, name, lock=True)
        if found is None or found[2] != expected:
            raise WriteConflict(f"shared note {name!r} changed since it was read; nothing was written")
        return found[0], found[1]

    def _delete_names(self, conn: Conn, names: Iterable[str]) -> int:
        gone = 0
        for name in names:
            key, retired = row_key(name)
            gone += conn.execute("DELETE FROM notes WHERE project = %s AND name = %s AND retired = %s",
                                 (self._project, key, retired)).rowcount
        return gone

    def write(self, name: str, data: bytes, *, expected: bytes | None, drop: Sequence[str] = ()) -> None:
        with self._tx() as conn:
            if expected is None:
                if self._insert(conn, name, data) is None:
                    raise WriteConflict(f"shared note {name!r} exists already; nothing was written")
            else:
                note_id, version = self._locked(conn, name, expected)
                head, body, fields = split_note(data)
                conn.execute(
                    "UPDATE notes SET head = %s, body = %s, frontmatter = %s, version = version + 1, updated_at = now() "
                    "WHERE id = %s AND version = %s", (head, body, Jsonb(fields), note_id, version))
            for other in drop:
                pg_rows.carry_authors(conn, self._project, row_key(other), row_key(name))
            self._delete_names(conn, drop)

    def delete(self, name: str, *, expected: bytes | None = None) -> bool:
        with self._tx() as conn:
            if expected is not None and self._row(conn, name) is not None:
                self._locked(conn, name, expected)
            return self._delete_names(conn, [name]) > 0

    def move(self, source: str, target: str, data: bytes, *, expected: bytes) -> None:
        with self._tx() as conn:
            self._locked(conn, source, expected)
            if self._insert(conn, target, data) is None:
                raise WriteConflict(f"shared note {target!r} exists already; nothing was moved")
            pg_rows.carry_authors(conn, self._project, row_key(source), row_key(target))
            self._delete_names(conn, [source])

    def names(self, *, include_retired: bool) -> list[str]:
        with self._conn() as conn:
            found = conn.execute("SELECT name, retired FROM notes WHERE project = %s" + ("" if include_retired else
                                 " AND NOT retired"), (self._project,)).fetchall()
        return sorted(api_name(str(n), bool(r)) for n, r in found)

    def stat(self, name: str, head_bytes: int) -> NoteStat | None:
        key, retired = row_key(name)
        with self._conn() as conn:
            found = conn.execute(
                f"SELECT left({_CONTENT}, %s), octet_length(head) + octet_length(body), extract(epoch FROM updated_at) "
                "FROM notes WHERE project = %s AND name = %s AND retired = %s",
                (head_bytes, self._project, key, retired)).fetchone()
        if found is None:
            return None
        return NoteStat(str(found[0]).encode("utf-8")[:head_bytes], int(found[1]), float(found[2]))

    def contents(self, head_bytes: int) -> list[tuple[str, bytes, float]]:
        """Every note (retired ones too) as (name, its first ``head_bytes`` bytes or more, last change in
        epoch s), in one statement: what the graph compiles (``graph.build.compile_notes``)."""
        with self._conn() as conn:
            found = conn.execute(
                f"SELECT name, retired, left({_CONTENT}, %s), extract(epoch FROM updated_at) FROM notes "
                "WHERE project = %s", (head_bytes, self._project)).fetchall()
        return [(api_name(str(n), bool(r)), str(text).encode("utf-8"), float(at)) for n, r, text, at in found]

    def ages(self) -> Ages:
        ages = Ages({}, set())
        with self._conn() as conn:
            for name, retired, at in conn.execute(
                    "SELECT name, retired, extract(epoch FROM updated_at) FROM notes WHERE project = %s", (self._project,)):
                if retired:
                    ages.twins.add(str(name))
                else:
                    ages.live[str(name)] = float(at)
        return ages

    def keep_time(self, name: str, at: float) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE notes SET updated_at = to_timestamp(%s) WHERE project = %s AND name = %s AND retired = %s",
                         (at, self._project, *row_key(name)))

    # --- the full-text index ----------------------------------------------------------------
    def search(self, query: str, limit: int | None) -> SearchResult:
        """Notes matching every word first; when fewer than ``limit`` do, the notes matching some of them
        after those (the SQLite vault's OR fallback: ``fts.fallback_words``), each group by rank."""
        size = clamp_limit(limit)
        words = fts.search_words(fts.query_text(query))
        unsegmented = self._tokenizer == "trigram" or has_unsegmented(query)
        every: fts.Statement = fts.trigram(words) if unsegmented else (fts.FULL_TEXT_SQL, {"query": query})
        with self._conn() as conn:
            found = [(*row, 1) for row in self._rows(conn, every, size)]
            if len(found) < size and len(words) > 1:
                skip = [str(row[0]) for row in found]
                some = fts.trigram(words, skip=skip) if unsegmented else fts.full_text_any(words, skip)
                found += [(*row, 0) for row in self._rows(conn, some, size)] if some is not None else []
        return SearchResult([self._hit(str(n), bool(r), float(rank), str(h), str(b), words, bonus)
                             for n, r, rank, h, b, bonus in found], 0, False)

    def _rows(self, conn: Conn, statement: fts.Statement, size: int) -> list[TupleRow]:
        sql, params = statement
        return list(conn.execute(sql, {**params, "project": self._project, "limit": size}).fetchall())

    def _hit(self, name: str, retired: bool, rank: float, head: str, body: str, words: tuple[str, ...],
             bonus: int) -> SearchHit:
        """``bonus``: 1 for a note matching every word (it outranks every partial match), else 0."""
        path = note_path(api_name(name, retired))
        lines = (head + body).split("\n")
        fm = parse_frontmatter(lines)
        importance = fm.importance if fm.importance is not None else DEFAULT_IMPORTANCE
        relevance = max(rank, 0.0) / (1 + max(rank, 0.0)) * (0.8 + 0.02 * importance)
        return SearchHit(path, fm.end_line + 1, max(len(lines) - (not lines[-1]), fm.end_line + 1),
                         make_snippet(body, words), relevance + bonus, classify(path, fm.provenance), importance,
                         entry_hash(body))

    def term_counts(self, terms: Sequence[str]) -> dict[str, int] | None:
        asked = {term: q for term in terms if (q := fts.prefix_term(term)) is not None}
        counts = dict.fromkeys(terms, 0)
        if asked:
            with self._conn() as conn:
                found = conn.execute(fts.TERM_COUNTS_SQL, (self._project, list(asked.values()))).fetchall()
            counts.update(zip(asked, (int(n) for (n,) in found), strict=True))
        return counts

    def chunk_count(self) -> int | None:
        with self._conn() as conn:
            found = conn.execute("SELECT count(*) FROM notes WHERE project = %s", (self._project,)).fetchone()
        return int(found[0]) if found else 0

    def recall(self, terms: Sequence[str], rows: int) -> list[tuple[str, str]]:
        query = fts.prefix_query(list(terms))
        if query is None:
            return []
        with self._conn() as conn:
            found = conn.execute(
                "SELECT n.name, n.retired, n.body FROM notes AS n, to_tsquery('simple', %s) AS q(query) "
                "WHERE n.project = %s AND n.search @@ q.query ORDER BY ts_rank_cd(n.search, q.query) DESC, n.name "
                "LIMIT %s", (query, self._project, rows)).fetchall()
        return [(api_name(str(n), bool(r)), str(body)) for n, r, body in found]

    # --- authors, recall and the GC ---------------------------------------------------------
    def record_author(self, name: str, writer: Writer, *, created: bool) -> None:
        with self._tx() as conn:
            pg_rows.record_author(conn, self._project, name, writer, created=created)

    def forget_author(self, name: str) -> None:
        with self._tx() as conn:
            pg_rows.forget_author(conn, self._project, name)

    def authors(self, names: Iterable[str]) -> dict[str, Authors]:
        with self._conn() as conn:
            return pg_rows.authors(conn, self._project, sorted(set(names)))

    def promotion(self, request_id: str) -> PromotionRecord | None:
        with self._conn() as conn:
            return pg_rows.promotion(conn, self._project, request_id)

    def record_promotion(self, record: PromotionRecord) -> bool:
        with self._tx() as conn:
            return pg_rows.record_promotion(conn, self._project, record)

    def forget_promotions(self, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
        """``rows.forget_promotions`` over this vault's promotion records."""
        with self._tx() as conn:
            return pg_rows.forget_promotions(conn, self._project, scrub, apply)

    def forget_reflection(self, scrub: Callable[[str], tuple[str, int]], apply: bool) -> int:
        """``reflection.forget`` over this vault's reflection journal and audit."""
        with self._tx() as conn:
            return pg_reflection.forget(conn, self._project, scrub, apply)

    def forget_names(self, rename: Callable[[str], str | None], apply: bool) -> tuple[list[tuple[str, str]], list[str], int]:
        """``rows.rename_rows`` over this vault, in one transaction: no note is left, nor read again."""
        with self._tx() as conn:
            moved, rows = pg_rows.rename_rows(conn, self._project, rename, apply)
        return moved, [], rows

    def vacuum_full(self, tables: Sequence[str]) -> tuple[int, int]:
        """``VACUUM (FULL)`` of ``tables`` (of the vault's schema) on a connection outside any transaction,
        without the statement timeout (it rewrites every row of every vault); their bytes on disk (with
        indexes and TOAST) before and after. Needs the tables' owner (or MAINTAIN, PostgreSQL 17)."""
        names = sql.SQL(", ").join(sql.Identifier(t) for t in tables)
        size = sql.SQL(" + ").join(sql.SQL("pg_total_relation_size({})").format(sql.Literal(t)) for t in tables)
        with self._conn() as conn:
            before = int(conn.execute(sql.SQL("SELECT {}").format(size)).fetchone()[0])  # type: ignore[index]
            timeout = str(conn.execute("SHOW statement_timeout").fetchone()[0])  # type: ignore[index]
            conn.commit()
            conn.autocommit = True
            try:
                conn.execute("SET statement_timeout = 0")
                conn.execute(sql.SQL("VACUUM (FULL) {}").format(names))
                after = int(conn.execute(sql.SQL("SELECT {}").format(size)).fetchone()[0])  # type: ignore[index]
            finally:
                conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))
                conn.autocommit = False
        return before, after

    def promotion_undone(self, request_id: str, outcome: str, at: float) -> None:
        with self._tx() as conn:
            pg_rows.promotion_undone(conn, self._project, request_id, outcome, at)

    def log_retrievals(self, hits: Iterable[Retrieved], kind: str, at: float) -> int:
        """Append the hits to the retrieval log; when the log reaches ``FOLD_AT_ROWS`` (counted once, then
        by what this process appends), fold it in the same transaction, as the SQLite vault's recorder does."""
        with self._tx() as conn:
            written = pg_rows.log_retrievals(conn, self._project, hits, kind, at)
            with self._logged_lock:
                logged = pg_rows.logged_rows(conn, self._project) if self._logged is None else self._logged + written
                if logged >= FOLD_AT_ROWS:
                    pg_rows.fold_retrievals(conn, self._project)
                    logged = 0
                self._logged = logged
            return written

    def claim_day(self, day: str, started: str) -> Claim:
        with self._tx() as conn:
            return pg_rows.claim_day(conn, self._project, day, started)

    def lifecycle(self) -> dict[str, NoteState]:
        with self._conn() as conn:
            return pg_rows.lifecycle(conn, self._project)

    def set_retired(self, name: str, at: float | None) -> None:
        with self._tx() as conn:
            pg_rows.set_retired(conn, self._project, name, at)

    def finish_day(self, summary: str) -> None:
        with self._tx() as conn:
            pg_rows.finish_day(conn, self._project, summary)


    # --- the weekly reflection (``reflection``) ---------------------------------------------
    def claim_reflection(self, run_id: str, now: float, expires_at: float) -> str:
        with self._tx() as conn:
            return pg_reflection.claim(conn, self._project, run_id, now, expires_at)

    def reflection_state(self) -> ReflectionState:
        with self._conn() as conn:
            return pg_reflection.state(conn, self._project)

    def set_reflection_plan(self, run_id: str, plan: dict[str, dict[str, object]]) -> None:
        with self._tx() as conn:
            pg_reflection.set_plan(conn, self._project, run_id, plan)

    def finish_reflection(self, run: ReflectionAudit, watermark: str | None, reviewed: Sequence[str]) -> None:
        with self._tx() as conn:
            pg_reflection.finish(conn, self._project, run, watermark, reviewed)

    def add_reflection_audit(self, record: ReflectionAudit) -> None:
        with self._tx() as conn:
            pg_reflection.add_audit(conn, self._project, record)

    def reflection_audit(self, limit: int, run_id: str = "") -> list[ReflectionAudit]:
        with self._conn() as conn:
            return pg_reflection.audit(conn, self._project, limit, run_id)

    def journal_merge(self, merge: MergeJournal) -> None:
        with self._tx() as conn:
            pg_reflection.journal(conn, self._project, merge)

    def drop_merge(self, merge_id: str) -> None:
        with self._tx() as conn:
            pg_reflection.drop(conn, self._project, merge_id)

    def merges(self, run_id: str) -> list[MergeJournal]:
        with self._conn() as conn:
            return pg_reflection.merges(conn, self._project, run_id)

    # --- the vault's tombstones (``tombstones``) ---------------------------------------------
    def share_tombstones(self, rows: Sequence[Tombstone]) -> int:
        with self._tx() as conn:
            return pg_tombstones.share(conn, self._project, rows)

    def lift_tombstone(self, tombstone_id: str, at: str) -> int:
        with self._tx() as conn:
            return pg_tombstones.lift(conn, self._project, tombstone_id, at)

    def tombstones(self, *, lifted: bool = False) -> list[Tombstone]:
        with self._conn() as conn:
            return pg_tombstones.held(conn, self._project, lifted)

    def tombstones_mark(self) -> tuple[int, int]:
        with self._conn() as conn:
            return pg_tombstones.mark(conn, self._project)
