"""What a forget matches, the marker it leaves, and the tombstones that keep the text from coming back
(docs/concepts/forget.md).

A forget names its target as a **text** or a **pattern** (``Target.parse``):

- A text matches wherever its words occur in order, whatever the case and whatever whitespace
  (line breaks included) separates them: ``"Alice's  phone"`` finds ``alice's\\nPHONE``. Punctuation
  inside the text must match as written.
- A pattern is a regular expression in Python's syntax, searched as given (multi-line) by the ``regex``
  package, which can stop a search: one that can match the empty string is refused, since it would
  mark every position of every file, and so is one whose search of any one text takes longer than
  ``MATCH_TIMEOUT_S`` (nested repeats such as ``(a+)+b`` take exponential time on some texts: without
  the limit, any key that may forget could hold an agent's run lock, or a KB thread, for hours).

Every match is replaced by ``marker(tombstone_id)``, ``[forgotten F-…]``.

A **tombstone** records what was forgotten without the text: a salted SHA-256 of the text's
*normalized words* (NFKC, case-folded, only letters and digits kept, runs of them joined by one space)
and how many words that is. ``Tombstones.matches`` slides a window of that many words over any text
and hashes each window, so a reviewer's proposal or an agent's write that brings the words back is
recognised, with its punctuation and line breaks changed or not, while the file of tombstones holds no
word of it. An agent's tombstone is salted with the home's own salt (``forget/salt``, 32 random bytes,
mode 0600); a shared one (scope ``*``) carries a salt of its own (``salt``: 32 random bytes drawn for
its forget), so any host can check it with nothing from the home that wrote it: either way a digest
cannot be looked up in a table made elsewhere. Tombstones live in ``forget/tombstones.json`` under the
home, written atomically; a tombstone's ``scope`` is one agent's id, or ``*`` for the shared vault.

**The vault's tombstones.** A shared tombstone is kept in the vault too (``services.kb.vault.tombstones``),
and each host's KB mirrors the vault's into ``forget/vault-tombstones.json`` (``VAULT_FILE``, the same
format, the KB's to write). ``matches`` and ``apply_to`` read both files, so every process of a host
checks the shared tombstones written on any host with no call to anyone.

**Checking is cheap.** ``matches`` reads the file only when its stat (inode, size, mtime, ctime) changed
since the last read in this process, so a check of a text against unchanged tombstones costs a ``stat``
and the text's own words. Each tombstone also keeps ``lead``: the first 4 hex digits of a salted hash
of its first word (16 bits: it tells a guess of that word from 1 in 65,536 others, which the salt
beside it and the full digest already allow for the whole text). ``matches`` hashes each distinct word
of the text once and hashes a window only where a tombstone's lead matches its first word, so a check
costs about one hash per distinct word whatever the number of agents' tombstones, plus one per distinct
word per shared forget, whose salt is its own; windows are hashed only at the starts of a word whose lead
a tombstone has (docs/concepts/forget.md "Where tombstones are checked").
A tombstone written without a lead is checked at every window.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import secrets
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from gateway.atomic import WriteConflict, write_atomic
from gateway.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    import regex

MAX_TEXT_CHARS: Final = 4096
MAX_PATTERN_CHARS: Final = 512
MIN_TEXT_CHARS: Final = 4  # letters and digits: forgetting "a" or "is" would deface every file
SHARED_SCOPE: Final = "*"
FORGET_DIR: Final = "forget"
TOMBSTONES_FILE: Final = "tombstones.json"
VAULT_FILE: Final = "vault-tombstones.json"  # the vault's tombstones, as this host's KB last mirrored them
SALT_FILE: Final = "salt"
ID_PREFIX: Final = "F-"
_ID_HEX: Final = 12
_WORD = re.compile(r"\w+")
_WRITE_TRIES: Final = 5
MATCH_TIMEOUT_S: Final = 2.0  # one search or rewrite of one text: a pattern past it is refused
LEAD_HEX: Final = 4


def _engine() -> ModuleType:
    """The ``regex`` package, imported at the first target (the services check tombstones from their
    start, and most never compile a target: their import budget leaves it out)."""
    import regex

    return regex


def words(text: str) -> list[str]:
    """The normalized words of ``text``: NFKC, case-folded, runs of letters and digits (``_`` counts as one)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def marker(tombstone_id: str) -> str:
    """What replaces each match: ``[forgotten F-…]``."""
    return f"[forgotten {tombstone_id}]"


@dataclass(frozen=True)
class Target:
    """What one forget looks for: exactly one of ``text`` and ``pattern`` (``parse`` checks)."""

    text: str | None = None
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str | None, pattern: str | None) -> Target:
        """The target of a request; InvalidArgument naming what is wrong (never echoing the text)."""
        text = text or None
        pattern = pattern or None
        if (text is None) == (pattern is None):
            raise InvalidArgument("give exactly one of text and pattern")
        if text is not None:
            if len(text) > MAX_TEXT_CHARS:
                raise InvalidArgument(f"text is {len(text)} characters; at most {MAX_TEXT_CHARS}")
            if sum(len(w) for w in words(text)) < MIN_TEXT_CHARS:
                raise InvalidArgument(f"text must hold at least {MIN_TEXT_CHARS} letters or digits")
            return cls(text=text)
        assert pattern is not None
        if len(pattern) > MAX_PATTERN_CHARS:
            raise InvalidArgument(f"pattern is {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
        engine = _engine()
        try:
            compiled = engine.compile(pattern, engine.MULTILINE)
        except engine.error as exc:
            raise InvalidArgument(f"pattern is not a valid regular expression: {exc}") from None
        if compiled.search("", timeout=MATCH_TIMEOUT_S) is not None:
            raise InvalidArgument("pattern matches the empty string: it would mark every position of every file")
        return cls(pattern=pattern)

    def compiled(self) -> regex.Pattern[str]:
        """The compiled search (module docstring), built once per target: a forget searches every note and
        chunk of a vault (tens of thousands of texts), and escaping the text again for each cost more than
        the searches themselves (docs/benchmarks/forget.md)."""
        return self._compiled

    @functools.cached_property
    def _compiled(self) -> regex.Pattern[str]:
        engine = _engine()
        if self.pattern is not None:
            compiled: regex.Pattern[str] = engine.compile(self.pattern, engine.MULTILINE)
            return compiled
        assert self.text is not None
        parts = self.text.split()
        literal: regex.Pattern[str] = engine.compile(r"\s+".join(engine.escape(p) for p in parts), engine.IGNORECASE)
        return literal

    def _too_slow(self, text: str) -> InvalidArgument:
        return InvalidArgument(
            f"pattern took longer than {MATCH_TIMEOUT_S:g} s over one text of {len(text)} characters; "
            "a pattern with nested repeats can take exponential time: simplify it (files already rewritten "
            "by this forget keep their marker)")

    def finditer(self, text: str) -> list[regex.Match[str]]:
        """The non-empty matches in ``text``, left to right, not overlapping. InvalidArgument when the
        search takes longer than ``MATCH_TIMEOUT_S`` (module docstring)."""
        try:
            found = self.compiled().finditer(text, concurrent=True, timeout=MATCH_TIMEOUT_S)
            return [m for m in found if m.end() > m.start()]
        except TimeoutError:
            raise self._too_slow(text) from None

    def replace(self, text: str, replacement: str) -> str:
        """``text`` with every match replaced by ``replacement`` (InvalidArgument as ``finditer``)."""
        try:
            return str(self.compiled().sub(lambda _: replacement, text, concurrent=True, timeout=MATCH_TIMEOUT_S))
        except TimeoutError:
            raise self._too_slow(text) from None

    def scrub(self, text: str, tombstone_id: str) -> tuple[str, int]:
        """``text`` with every match replaced by the marker, and how many were replaced
        (InvalidArgument as ``finditer``)."""
        count = 0

        def one(match: regex.Match[str]) -> str:
            nonlocal count
            if match.end() == match.start():
                return str(match.group(0))
            count += 1
            return marker(tombstone_id)

        try:
            return self.compiled().sub(one, text, concurrent=True, timeout=MATCH_TIMEOUT_S), count
        except TimeoutError:
            raise self._too_slow(text) from None


@dataclass(frozen=True)
class Tombstone:
    """One forgotten text, without it: ``digest`` (salted, of its normalized words) and ``words``."""

    id: str
    digest: str
    words: int
    scope: str  # an agent's id, or SHARED_SCOPE
    at: str  # ISO 8601, UTC
    by: str  # the key's name
    places: int  # how many places the forget changed
    lead: str = ""  # ``_lead`` of its first word (module docstring); "" in a tombstone written without one
    salt: str = ""  # its own salt, hex (a shared tombstone's); "" for the home's (``forget/salt``)


def _digest(salt: bytes, normalized: Iterable[str]) -> str:
    return hashlib.sha256(salt + " ".join(normalized).encode()).hexdigest()


def _lead(salt: bytes, word: str) -> str:
    """The first ``LEAD_HEX`` hex digits of a salted hash of one normalized word (kept apart from
    ``_digest``'s by its separator: no window's digest is a lead's)."""
    return hashlib.sha256(salt + b"\x00" + word.encode()).hexdigest()[:LEAD_HEX]


StatKey = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


@dataclass(frozen=True)
class _Group:
    """The tombstones of one salt, indexed for ``matches``: per scope, per lead, the tombstones' (length,
    digest) pairs; ``unled`` those with no lead."""

    led: dict[str, dict[str, dict[tuple[int, str], Tombstone]]]  # scope → lead → (words, digest) → tombstone
    unled: dict[str, dict[int, dict[str, Tombstone]]]  # scope → words → digest → tombstone


@dataclass(frozen=True)
class _Snapshot:
    """A tombstones file as last read: its stat, and its tombstones grouped by salt (a tombstone of the
    home's salt is left out while the home has none)."""

    key: StatKey | None
    groups: dict[bytes, _Group]


_EMPTY: Final = _Snapshot(None, {})
_snapshots: dict[Path, _Snapshot] = {}
_snapshots_lock = threading.Lock()


def _group(rows: Iterable[Tombstone], home_salt: bytes | None) -> dict[bytes, _Group]:
    groups: dict[bytes, _Group] = {}
    for t in rows:
        salt = bytes.fromhex(t.salt) if t.salt else home_salt
        if salt is None:
            continue
        g = groups.setdefault(salt, _Group({}, {}))
        if t.lead:
            g.led.setdefault(t.scope, {}).setdefault(t.lead, {}).setdefault((t.words, t.digest), t)
        else:
            g.unled.setdefault(t.scope, {}).setdefault(t.words, {}).setdefault(t.digest, t)
    return groups


def read_file(path: Path) -> list[Tombstone]:
    """The tombstones of one file (``[]`` when there is none); a record's fields this version does not know
    are left out, so a file written by a later version still reads."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    return [_record(row) for row in json.loads(raw)]


_FIELDS: Final = frozenset(Tombstone.__dataclass_fields__)


def _record(row: dict[str, object]) -> Tombstone:
    return Tombstone(**{k: v for k, v in row.items() if k in _FIELDS})  # type: ignore[arg-type]


def write_file(path: Path, rows: Iterable[Tombstone], expected: bytes | None | object = ...) -> None:
    """Write ``rows`` to ``path`` atomically, mode 0600 (``expected``: compare-and-swap against those bytes,
    None for no file; ``...``: whatever is there)."""
    data = json.dumps([asdict(t) for t in rows], indent=1).encode() + b"\n"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, data, expected=expected, mode=0o600, keep_mode=False)


class Tombstones:
    """The home's tombstones (``<home>/forget/``): read, add, lift, and check a text against them."""

    def __init__(self, home: Path) -> None:
        self._dir = home / FORGET_DIR
        self._file = self._dir / TOMBSTONES_FILE
        self._vault_file = self._dir / VAULT_FILE

    def _salt(self, create: bool) -> bytes | None:
        path = self._dir / SALT_FILE
        with contextlib.suppress(FileNotFoundError):
            return bytes.fromhex(path.read_text().strip())
        if not create:
            return None
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(WriteConflict):  # another process made it first: theirs is the salt
            write_atomic(path, secrets.token_hex(32).encode() + b"\n", expected=None, mode=0o600, keep_mode=False)
        return bytes.fromhex(path.read_text().strip())

    def _read(self) -> tuple[bytes | None, list[Tombstone]]:
        try:
            raw = self._file.read_bytes()
        except FileNotFoundError:
            return None, []
        return raw, [_record(row) for row in json.loads(raw)]

    def _write(self, before: bytes | None, rows: list[Tombstone]) -> None:
        write_file(self._file, rows, before)

    def all(self) -> list[Tombstone]:
        """Every tombstone, oldest first."""
        return self._read()[1]

    def new_id(self) -> str:
        """A fresh tombstone id (the marker's before the tombstone is written)."""
        return ID_PREFIX + secrets.token_hex(_ID_HEX // 2)

    def add(self, tombstone_id: str, texts: Iterable[str], *, scope: str, at: str, by: str, places: int) -> list[Tombstone]:
        """Record one tombstone per distinct normalized text in ``texts`` (all under ``tombstone_id``,
        suffixed ``.2``, ``.3``… after the first); the ones written. A text with no word is skipped. A
        shared one (scope ``*``) is salted with a salt of its own, drawn here (module docstring)."""
        own = secrets.token_bytes(32) if scope == SHARED_SCOPE else None
        salt = own if own is not None else self._salt(create=True)
        assert salt is not None
        distinct: dict[str, list[str]] = {}
        for text in texts:
            normalized = words(text)
            if normalized:
                distinct.setdefault(" ".join(normalized), normalized)
        for _ in range(_WRITE_TRIES):  # compare-and-swap: a concurrent add or lift is re-read, never lost
            before, rows = self._read()
            # tombstoned already: a shared text under a salt of its own (one under the home's salt, written
            # before shared tombstones had their own, is made again, so that it can go to the vault)
            home_salt = None if own is not None else salt
            made = []
            for n, normalized in enumerate(distinct.values()):
                if any(t.scope == scope and t.words == len(normalized) and (t.salt or home_salt) and t.digest == _digest(
                        bytes.fromhex(t.salt) if t.salt else home_salt or b"", normalized) for t in rows):
                    continue
                made.append(Tombstone(tombstone_id if n == 0 else f"{tombstone_id}.{n + 1}", _digest(salt, normalized),
                                      len(normalized), scope, at, by, places, _lead(salt, normalized[0]),
                                      own.hex() if own is not None else ""))
            if not made:
                return []
            try:
                self._write(before, [*rows, *made])
            except WriteConflict:
                continue
            return made
        raise WriteConflict(f"{self._file} kept changing while a tombstone was added")

    def set_places(self, tombstone_id: str, places: int) -> int:
        """Set ``places`` on the tombstones of one forget (``tombstone_id`` and its ``.N`` siblings), written
        before the forget knew it; how many it set (0 when they were lifted meanwhile)."""
        for _ in range(_WRITE_TRIES):
            before, rows = self._read()
            mine = [t for t in rows if t.id == tombstone_id or t.id.startswith(tombstone_id + ".")]
            if all(t.places == places for t in mine):
                return len(mine)
            try:
                self._write(before, [replace(t, places=places) if t in mine else t for t in rows])
            except WriteConflict:
                continue
            return len(mine)
        raise WriteConflict(f"{self._file} kept changing while a forget's places were set")

    def lift(self, tombstone_id: str) -> Tombstone:
        """Remove a tombstone (and its ``.N`` siblings); the first removed. NotFound when there is none."""
        for _ in range(_WRITE_TRIES):
            before, rows = self._read()
            gone = [t for t in rows if t.id == tombstone_id or t.id.startswith(tombstone_id + ".")]
            if not gone:
                raise NotFound(f"no tombstone {tombstone_id!r}")
            try:
                self._write(before, [t for t in rows if t not in gone])
            except WriteConflict:
                continue
            return gone[0]
        raise WriteConflict(f"{self._file} kept changing while a tombstone was lifted")

    def mirrored(self) -> list[Tombstone]:
        """The vault's shared tombstones as this host's KB last mirrored them (``VAULT_FILE``)."""
        return read_file(self._vault_file)

    def drop_shared(self, ids: Iterable[str]) -> int:
        """Remove the shared tombstones ``ids`` (lifted in the vault, maybe by another host) from the home's
        file; how many were removed."""
        ids = set(ids)
        for _ in range(_WRITE_TRIES):
            before, rows = self._read()
            gone = [t for t in rows if t.scope == SHARED_SCOPE and t.id in ids]
            if not gone:
                return 0
            try:
                self._write(before, [t for t in rows if t not in gone])
            except WriteConflict:
                continue
            return len(gone)
        raise WriteConflict(f"{self._file} kept changing while lifted shared tombstones were removed")

    def _snapshot(self, path: Path) -> _Snapshot:
        """The file as last read by this process, read again when its stat changed (module docstring)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return _EMPTY
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = _snapshots.get(path)
        if cached is not None and cached.key == key:
            return cached
        with _snapshots_lock:  # one reader re-reads; the others wait for its snapshot
            cached = _snapshots.get(path)
            if cached is not None and cached.key == key:
                return cached
            rows = read_file(path)
            home_salt = self._salt(create=False) if any(not t.salt for t in rows) else None
            snapshot = _Snapshot(key, _group(rows, home_salt))
            _snapshots[path] = snapshot
            return snapshot

    def _groups(self) -> list[tuple[bytes, _Group]]:
        """The home's tombstones and the vault's mirror, by salt (a ``stat`` of each file when unchanged)."""
        return [*self._snapshot(self._file).groups.items(), *self._snapshot(self._vault_file).groups.items()]

    def apply_to(self, scope: str) -> bool:
        """Whether any tombstone applies to agent ``scope`` (its own or a shared one): a ``stat`` of each file
        when unchanged, so a caller can skip reading what it would check."""
        return any(s in g.led or s in g.unled for _, g in self._groups() for s in (scope, SHARED_SCOPE))

    def matches(self, text: str, scope: str) -> list[Tombstone]:
        """The tombstones whose words occur, in order, in ``text``: those of agent ``scope`` and the
        shared ones, the home's and the vault's (for ``scope`` ``*``: the shared ones only), in the order
        found, each id once. Costs a ``stat`` of each file when no tombstone applies (module docstring
        "Checking is cheap")."""
        scopes = dict.fromkeys((scope, SHARED_SCOPE))
        hits: list[tuple[int, Tombstone]] = []
        normalized: list[str] | None = None
        positions: dict[str, list[int]] = {}
        for salt, g in self._groups():
            led = [g.led[s] for s in scopes if s in g.led]
            unled = [g.unled[s] for s in scopes if s in g.unled]
            if led or unled:
                if normalized is None:
                    normalized = words(text)
                    for n, word in enumerate(normalized):
                        positions.setdefault(word, []).append(n)
                _match(salt, normalized, positions, led, unled, hits)
        hits.sort(key=lambda hit: hit[0])  # stable: by where each was found first
        found: dict[str, Tombstone] = {}
        for _, t in hits:
            found.setdefault(t.id, t)
        return list(found.values())


def _match(salt: bytes, normalized: list[str], positions: dict[str, list[int]],
           led: list[dict[str, dict[tuple[int, str], Tombstone]]], unled: list[dict[int, dict[str, Tombstone]]],
           hits: list[tuple[int, Tombstone]]) -> None:
    """Add to ``hits`` (where first found, the tombstone) the tombstones of one salt whose words occur in
    ``normalized`` (``positions``: each distinct word's starts). Each distinct word's lead is hashed once;
    windows are hashed only at the starts of a word whose lead a tombstone has."""

    def window(start: int, length: int) -> str | None:
        return _digest(salt, normalized[start : start + length]) if start + length <= len(normalized) else None

    if led:
        wanted = {lead for by_lead in led for lead in by_lead}
        prefix = hashlib.sha256(salt + b"\x00")  # _lead's, hashed once per salt
        for word, starts in positions.items():
            h = prefix.copy()
            h.update(word.encode())
            lead = h.hexdigest()[:LEAD_HEX]
            if lead not in wanted:
                continue
            for by_lead in led:
                for (length, digest), t in by_lead.get(lead, {}).items():
                    first = next((n for n in starts if window(n, length) == digest), None)
                    if first is not None:
                        hits.append((first, t))
    for start in range(len(normalized)) if unled else ():
        for by_length in unled:
            for length, digests in by_length.items():
                hit = digests.get(window(start, length) or "")
                if hit is not None:
                    hits.append((start, hit))
