"""The SQLite vault store: notes as files under ``notes/``, their index in ``kb.sqlite`` beside them
(docs/architecture.md "The vault store"; the layout and the index are ``note_index``'s).

A note is ``notes/<name>.md``, written through ``gateway.atomic`` (temp then rename, compare-and-swap
against the bytes read), then reindexed at once in one short ``BEGIN IMMEDIATE`` transaction, so the
next search sees it. Writers in other processes are kept safe by the same two rules; a note is never
half written. A symbolic link that leaves the vault is not read (FailedPrecondition): the vault's API
never reaches files elsewhere. The rows beside the index (authors, the retrieval log, the GC's
lifecycle and its day, the answers of promotion requests) are ``sqlite_rows``'. A promotion's answer is
recorded after its note landed (a file is not in the index's transaction): a KB killed in between leaves
the note without the answer, and the request repeated finds the fact already in the note (``unchanged``). ``writing`` adds nothing here: the registry's per-vault
lock serialises this process's writes and compare-and-swap the other processes'.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

import apsw
import structlog

from gateway.atomic import WriteConflict, folder_lock, write_atomic
from gateway.config import ArchiveSettings
from gateway.errors import FailedPrecondition
from gateway.forgetting import Tombstone
from services.kb.archive.retrieval_log import Retrieved
from services.kb.index.search import SearchResult
from services.kb.vault import note_index, sqlite_reflection, sqlite_rows, sqlite_tombstones
from services.kb.vault.names import NOTE_SUFFIX, NOTES_DIR, is_retired, live_name, name_from_path
from services.kb.vault.store import (
    Ages, Authors, Claim, MergeJournal, NoteStat, NoteState, PromotionRecord, ReflectionAudit, ReflectionState, Writer)

FORGET_MOVE_TRIES: Final = 5
RECALL_SQL: Final = (
    "SELECT s.path, c.text FROM kb_chunks_fts f JOIN kb_chunks c ON c.id = f.rowid "
    "JOIN kb_sources s ON s.id = c.source_id WHERE kb_chunks_fts MATCH ? ORDER BY f.rank LIMIT ?"
)

log = structlog.get_logger()


def note_file(vault_dir: Path, name: str) -> Path:
    """The file of a validated note name."""
    return vault_dir / NOTES_DIR / f"{name}{NOTE_SUFFIX}"


def read_note(path: str | Path) -> bytes:
    """The bytes of the note file ``path``; FailedPrecondition for a link whose target leaves the
    vault (the index leaves it out too). FileNotFoundError when there is no such file."""
    path = os.fspath(path)
    if os.path.islink(path):
        vault_real = os.path.realpath(os.path.dirname(os.path.dirname(path)))
        if os.path.commonpath([os.path.realpath(path), vault_real]) != vault_real:
            raise FailedPrecondition(f"{NOTES_DIR}/{os.path.basename(path)} is a link to a file outside the vault; "
                                     "the vault does not follow it")
    with open(path, "rb") as handle:
        return handle.read()


class SqliteVaultStore:
    """``store.VaultStore`` over ``vault_dir``; ``conn`` is its index (None: note files only, for reads
    that need no index), ``settings`` its tokenizer and chunking."""

    def __init__(self, vault_dir: Path, conn: apsw.Connection | None,
                 settings: ArchiveSettings = note_index.VAULT_INDEX_SETTINGS) -> None:
        self.directory = vault_dir
        self._conn = conn
        self._settings = settings

    @property
    def project(self) -> str:
        return self.directory.name

    @property
    def conn(self) -> apsw.Connection:
        if self._conn is None:
            raise RuntimeError("this vault store was opened without its index")
        return self._conn

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        yield

    # --- notes ----------------------------------------------------------------------------
    def _file(self, name: str) -> Path:
        return note_file(self.directory, name)

    def _file_name(self, name: str) -> str:
        """``_file`` as a string, for the reads a search or a near-duplicate check makes of many notes:
        a ``Path`` interns each part of itself, so every name read would pass through the
        interpreter's table of interned strings, which grows by steps as new names go through it
        (docs/capacity.md "Where the KB's memory goes")."""
        return os.path.join(self.directory, NOTES_DIR, name + NOTE_SUFFIX)

    def read(self, name: str) -> bytes | None:
        try:
            return read_note(self._file_name(name))
        except (FileNotFoundError, IsADirectoryError):
            return None

    def exists(self, name: str) -> bool:
        return os.path.lexists(self._file_name(name))

    def _reindex(self, names: Iterable[str]) -> None:
        note_index.reindex_notes(self.conn, self.directory, names, settings=self._settings)

    def write(self, name: str, data: bytes, *, expected: bytes | None, drop: Sequence[str] = ()) -> None:
        path = self._file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, expected=expected)
        for other in drop:  # only now that the write landed
            self._file(other).unlink(missing_ok=True)
        self._reindex([name, *drop])

    def delete(self, name: str, *, expected: bytes | None = None) -> bool:
        path = self._file(name)
        try:
            if expected is None:
                path.unlink()
            else:
                with folder_lock(path.parent):
                    if read_note(path) != expected:
                        raise WriteConflict(f"{path.name} changed on disk since it was read; nothing was removed")
                    path.unlink()
        except (FileNotFoundError, IsADirectoryError):
            return False
        self._reindex([name])
        return True

    def move(self, source: str, target: str, data: bytes, *, expected: bytes) -> None:
        write_atomic(self._file(target), data, expected=None)
        current = None
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            current = read_note(self._file(source))
        if current != expected:
            self._file(target).unlink(missing_ok=True)
            raise WriteConflict(f"shared note {source!r} changed while it was being moved; nothing was moved")
        self._file(source).unlink(missing_ok=True)
        self._reindex([source, target])

    def forget_names(self, rename: Callable[[str], str | None], apply: bool) -> tuple[list[tuple[str, str]], list[str], int]:
        moved: list[tuple[str, str]] = []
        left: list[str] = []
        for name in self.names(include_retired=True):
            new = rename(name)
            if new is None:
                continue
            done = self._move_forgotten(name, new) if apply else True
            if done:
                moved.append((name, new))
            elif done is not None:
                left.append(name)
        return moved, left, sqlite_rows.rename_rows(self.conn, rename, apply)

    def _move_forgotten(self, name: str, new: str) -> bool | None:
        """Move note ``name`` to ``new`` (compare-and-swap, retried): True; False when it kept changing or
        will not be read (a link out of the vault); None when it is gone."""
        for _ in range(FORGET_MOVE_TRIES):
            try:
                data = self.read(name)
                if data is None:
                    return None
                self.move(name, new, data, expected=data)
            except FailedPrecondition:
                return False
            except WriteConflict:
                continue
            return True
        return False

    def names(self, *, include_retired: bool) -> list[str]:
        found: list[str] = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.directory / NOTES_DIR) as entries:
            for entry in entries:
                name = entry.name[: -len(NOTE_SUFFIX)]
                if not entry.name.endswith(NOTE_SUFFIX) or (is_retired(name) and not include_retired):
                    continue
                with contextlib.suppress(OSError):
                    if not entry.is_dir():
                        found.append(name)
        return sorted(found)

    def stat(self, name: str, head_bytes: int) -> NoteStat | None:
        path, real = self._file(name), os.path.realpath(self.directory)
        try:
            if os.path.commonpath([os.path.realpath(path), real]) != real:
                return None
            with open(path, "rb") as handle:
                head = handle.read(head_bytes)
                st = os.fstat(handle.fileno())
        except OSError:  # gone since the listing, or unreadable
            return None
        return NoteStat(head, st.st_size, st.st_mtime)

    def ages(self) -> Ages:
        """The files directly in ``notes/`` ending in ``.md``, not starting with ``.`` (the index's
        sources); a live note that is a symlink is left out (retiring would replace the link)."""
        ages = Ages({}, set())
        with contextlib.suppress(FileNotFoundError), os.scandir(self.directory / NOTES_DIR) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(NOTE_SUFFIX):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                if not entry.is_file():
                    continue
                name = entry.name[: -len(NOTE_SUFFIX)]
                if is_retired(name):
                    ages.twins.add(live_name(name))
                elif not entry.is_symlink():
                    ages.live[name] = st.st_mtime
        return ages

    def keep_time(self, name: str, at: float) -> None:
        """The file's mtime, the note then reindexed so the index agrees with the file."""
        with contextlib.suppress(FileNotFoundError):
            os.utime(self._file(name), (at, at))
            self._reindex([name])

    # --- the full-text index ----------------------------------------------------------------
    def search(self, query: str, limit: int | None) -> SearchResult:
        return note_index.search_vault(self.conn, query, limit)

    def term_counts(self, terms: Sequence[str]) -> dict[str, int] | None:
        try:
            self.conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.kb_vocab_rows USING fts5vocab(main, kb_chunks_fts, row)")
            counts = {}
            for term in terms:
                row = next(self.conn.execute(
                    "SELECT coalesce(sum(doc), 0) FROM temp.kb_vocab_rows WHERE term >= ? AND term < ?",
                    (term, term + "\U0010ffff")))
                counts[term] = int(row[0])
            return counts
        except apsw.Error as exc:  # no index yet, or a read-only quirk
            log.info("vault_similar_vocab_unavailable", error=str(exc))
            return None

    def chunk_count(self) -> int | None:
        try:
            return int(next(self.conn.execute("SELECT count(*) FROM kb_chunks"))[0])
        except apsw.Error:
            return None

    def recall(self, terms: Sequence[str], rows: int) -> list[tuple[str, str]]:
        expression = " OR ".join('"' + term.replace('"', '""') + '"*' for term in terms)
        try:
            found = list(self.conn.execute(RECALL_SQL, (expression, rows)))
        except apsw.SQLError as exc:
            log.warning("vault_similar_query_failed", error=str(exc))
            return []
        named = ((name_from_path(str(path)), str(text)) for path, text in found)
        return [(name, text) for name, text in named if name is not None]

    # --- authors, recall and the GC ---------------------------------------------------------
    def record_author(self, name: str, writer: Writer, *, created: bool) -> None:
        sqlite_rows.record_author(self.conn, name, writer, created=created)

    def forget_author(self, name: str) -> None:
        sqlite_rows.forget_author(self.conn, name)

    def authors(self, names: Iterable[str]) -> dict[str, Authors]:
        return sqlite_rows.authors(self.conn, names)

    def promotion(self, request_id: str) -> PromotionRecord | None:
        return sqlite_rows.promotion(self.conn, request_id)

    def record_promotion(self, record: PromotionRecord) -> bool:
        return sqlite_rows.record_promotion(self.conn, record)

    def promotion_undone(self, request_id: str, outcome: str, at: float) -> None:
        sqlite_rows.promotion_undone(self.conn, request_id, outcome, at)

    def log_retrievals(self, hits: Iterable[Retrieved], kind: str, at: float) -> int:
        return sqlite_rows.log_retrievals(self.conn, hits, kind, at)

    def claim_day(self, day: str, started: str) -> Claim:
        return sqlite_rows.claim_day(self.conn, day, started)

    def lifecycle(self) -> dict[str, NoteState]:
        return sqlite_rows.lifecycle(self.conn)

    def set_retired(self, name: str, at: float | None) -> None:
        sqlite_rows.set_retired(self.conn, name, at)

    def finish_day(self, summary: str) -> None:
        sqlite_rows.finish_day(self.conn, summary)

    # --- the weekly reflection (``sqlite_reflection``) --------------------------------------
    def claim_reflection(self, run_id: str, now: float, expires_at: float) -> str:
        return sqlite_reflection.claim(self.conn, run_id, now, expires_at)

    def reflection_state(self) -> ReflectionState:
        return sqlite_reflection.state(self.conn)

    def set_reflection_plan(self, run_id: str, plan: dict[str, dict[str, object]]) -> None:
        sqlite_reflection.set_plan(self.conn, run_id, plan)

    def finish_reflection(self, run: ReflectionAudit, watermark: str | None, reviewed: Sequence[str]) -> None:
        sqlite_reflection.finish(self.conn, run, watermark, reviewed)

    def add_reflection_audit(self, record: ReflectionAudit) -> None:
        sqlite_reflection.add_audit(self.conn, record)

    def reflection_audit(self, limit: int, run_id: str = "") -> list[ReflectionAudit]:
        return sqlite_reflection.audit(self.conn, limit, run_id)

    def journal_merge(self, merge: MergeJournal) -> None:
        sqlite_reflection.journal(self.conn, merge)

    def drop_merge(self, merge_id: str) -> None:
        sqlite_reflection.drop(self.conn, merge_id)

    def merges(self, run_id: str) -> list[MergeJournal]:
        return sqlite_reflection.merges(self.conn, run_id)

    # --- the vault's tombstones (``sqlite_tombstones``) ---------------------------------------
    def share_tombstones(self, rows: Sequence[Tombstone]) -> int:
        return sqlite_tombstones.share(self.conn, rows)

    def lift_tombstone(self, tombstone_id: str, at: str) -> int:
        return sqlite_tombstones.lift(self.conn, tombstone_id, at)

    def tombstones(self, *, lifted: bool = False) -> list[Tombstone]:
        return sqlite_tombstones.held(self.conn, lifted)

    def tombstones_mark(self) -> tuple[int, int]:
        return sqlite_tombstones.mark(self.conn)
