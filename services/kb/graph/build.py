"""The graph layer: a deterministic (no LLM) compile of a vault's notes into reports.

docs/concepts/vault.md "Shared vault", Graph layer: every ``*.md`` directly in ``notes_dir`` is a node named
by its file stem; ``stale__*`` notes are retired (nodes and link targets, but
left out of the contradiction, stale and low-confidence reports: they are
already out of service). Dot files and symlinks are not notes (a link could
reach outside the vault); the reports folder is never read as a source.

Limits (docs/architecture.md "Limits and defaults"): a note over 512 KB is skipped (still a node, so
links to it are not dangling) and reported; frontmatter over 64 KB is ignored
and reported (see ``parse``). Each file is opened and read once.

Link resolution: an exact name, else a unique case-insensitive match, else the
retired twin ``stale__<target>``; otherwise the edge is dangling. A note
linking to itself is not an edge.

Stale: ``updatedAt`` (else the file's mtime, through the injected ``mtime``) at
least 90 days before ``now``. Low confidence: a page or claim confidence below
0.5. Contradictions: claims sharing an id (across notes or within one) whose
whitespace-normalised, case-folded texts differ, or whose case-folded statuses
differ; a claim without text (or status) does not count as differing on it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gateway.atomic import write_atomic
from services.kb.graph.model import Contradiction, Edge, GraphReport, LowConfidence, Node, Problem, StalePage
from services.kb.graph.parse import Claim, ParsedNote, parse_note
from services.kb.graph.reports import render_all

MAX_NOTE_BYTES = 512 * 1024  # docs/architecture.md "Limits and defaults": graph layer
STALE_AFTER = timedelta(days=90)
LOW_CONFIDENCE = 0.5
RETIRED_PREFIX = "stale__"


def build_reports(
    notes_dir: Path,
    reports_dir: Path,
    now: datetime,
    *,
    mtime: Callable[[Path], float] = os.path.getmtime,
) -> GraphReport:
    """Compile ``notes_dir`` (``compile_graph``) and write the five reports into ``reports_dir`` (``write_reports``).

    Raises ValueError when ``reports_dir`` is ``notes_dir`` (the reports are never read as notes),
    and OSError when ``notes_dir`` exists but cannot be listed or a report cannot be written.
    """
    started = time.perf_counter()
    with contextlib.suppress(OSError):
        if notes_dir.resolve() == reports_dir.resolve():
            raise ValueError("the reports folder must not be the notes folder")
    return write_reports(compile_graph(notes_dir, now, mtime=mtime), reports_dir, started)


def build_reports_from_notes(notes: Iterable[tuple[str, bytes, float]], reports_dir: Path, now: datetime) -> GraphReport:
    """Compile notes given as rows (``compile_notes``) and write the five reports into ``reports_dir``
    (``write_reports``): a vault kept in a database. OSError when a report cannot be written."""
    started = time.perf_counter()
    return write_reports(compile_notes(notes, now), reports_dir, started)


def write_reports(report: GraphReport, reports_dir: Path, started: float) -> GraphReport:
    """Write ``report``'s five files into ``reports_dir`` (created); ``report`` with the files it changed
    (``written``) and the seconds since ``started`` (a ``time.perf_counter`` value).

    The same notes give the same bytes, and a report whose bytes are unchanged is not rewritten.
    """
    reports_dir.mkdir(parents=True, exist_ok=True)
    for file_name, text in render_all(report).items():
        data = text.encode("utf-8")
        target = reports_dir / file_name
        try:
            current: bytes | None = target.read_bytes()
        except FileNotFoundError:
            current = None
        if current != data:
            write_atomic(target, data)
            report.written.append(file_name)
    report.seconds = time.perf_counter() - started
    return report


def compile_graph(notes_dir: Path, now: datetime, *, mtime: Callable[[Path], float] = os.path.getmtime) -> GraphReport:
    """The graph of ``notes_dir``, written nowhere (rules in the module docstring).

    ``now`` (naive means UTC) dates the stale check; ``mtime`` gives a note's modification
    time when it has no valid ``updatedAt``. Defects in notes are reported, never raised.
    Raises OSError when ``notes_dir`` exists but cannot be listed; a missing ``notes_dir``
    is an empty vault.
    """
    started = time.perf_counter()
    parsed, nodes, problems = _load(notes_dir)
    return _compile(parsed, nodes, problems, now, lambda name: mtime(notes_dir / f"{name}.md"), started, "file mtime")


def compile_notes(notes: Iterable[tuple[str, bytes, float]], now: datetime) -> GraphReport:
    """The graph of notes given as (name, bytes, last change in epoch s) rather than files (a vault kept in
    a database), written nowhere: the rules of ``compile_graph``, the last change standing for the mtime."""
    started = time.perf_counter()
    parsed: list[ParsedNote] = []
    nodes: list[Node] = []
    problems: list[Problem] = []
    changed: dict[str, float] = {}
    for name, data, at in sorted(notes):
        changed[name] = at
        _add(name, data, parsed, nodes, problems)
    return _compile(parsed, nodes, problems, now, changed.__getitem__, started, "last change")


def _compile(parsed: list[ParsedNote], nodes: list[Node], problems: list[Problem], now: datetime,
             mtime: Callable[[str], float], started: float, fallback: str) -> GraphReport:
    """The graph of the notes loaded; ``mtime`` (named ``fallback`` in a stale page) stands in for a missing
    ``updatedAt``."""
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    edges = _edges(parsed, {node.name for node in nodes})
    live = [note for note in parsed if not note.name.startswith(RETIRED_PREFIX)]
    stale = _stale(live, now, mtime, fallback, problems)
    return GraphReport(
        nodes=nodes,
        edges=edges,
        dangling=[edge for edge in edges if edge.dangling],
        contradictions=_contradictions(live),
        stale=stale,
        low_confidence=_low_confidence(live),
        problems=sorted(problems, key=lambda p: p.note),
        written=[],
        seconds=time.perf_counter() - started,
    )


def _load(notes_dir: Path) -> tuple[list[ParsedNote], list[Node], list[Problem]]:
    try:
        with os.scandir(notes_dir) as listing:
            entries = sorted((e for e in listing if e.name.endswith(".md") and not e.name.startswith(".")),
                             key=lambda e: e.name)
    except FileNotFoundError:
        return [], [], []
    parsed: list[ParsedNote] = []
    nodes: list[Node] = []
    problems: list[Problem] = []
    for entry in entries:
        name = entry.name[:-3]
        if not name:
            continue
        if entry.is_symlink():
            problems.append(Problem(name, "symbolic link (not followed; not a note)"))
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            with open(entry.path, "rb") as handle:
                data = handle.read(MAX_NOTE_BYTES + 1)
        except OSError as exc:
            problems.append(Problem(name, f"unreadable ({exc.strerror or exc.__class__.__name__}; skipped)"))
            nodes.append(Node(name, None, name.startswith(RETIRED_PREFIX), skipped=True))
            continue
        _add(name, data, parsed, nodes, problems)
    return parsed, nodes, problems


def _add(name: str, data: bytes, parsed: list[ParsedNote], nodes: list[Node], problems: list[Problem]) -> None:
    """Note ``name`` of bytes ``data`` (at least its first ``MAX_NOTE_BYTES`` + 1) parsed into the lists."""
    retired = name.startswith(RETIRED_PREFIX)
    if len(data) > MAX_NOTE_BYTES:
        problems.append(Problem(name, f"larger than {MAX_NOTE_BYTES // 1024} KB (skipped)"))
        nodes.append(Node(name, None, retired, skipped=True))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        problems.append(Problem(name, "not valid UTF-8 (undecodable bytes replaced)"))
    note = parse_note(name, text)
    problems.extend(Problem(name, message) for message in note.problems)
    parsed.append(note)
    nodes.append(Node(name, note.title, retired, skipped=False))


def _edges(parsed: list[ParsedNote], names: set[str]) -> list[Edge]:
    folded: dict[str, list[str]] = {}
    for name in sorted(names):
        folded.setdefault(name.casefold(), []).append(name)
    edges: set[Edge] = set()
    for note in parsed:
        for target in note.links:
            resolved = _resolve(target, names, folded)
            if resolved == note.name:
                continue
            edges.add(Edge(note.name, resolved or target, resolved is None))
    return sorted(edges, key=lambda e: (e.source, e.target))


def _resolve(target: str, names: set[str], folded: dict[str, list[str]]) -> str | None:
    if target in names:
        return target
    same = folded.get(target.casefold(), [])
    if len(same) == 1:
        return same[0]
    if RETIRED_PREFIX + target in names:
        return RETIRED_PREFIX + target
    return None


def contradictions(parsed: list[ParsedNote]) -> list[Contradiction]:
    """The contradictions among ``parsed`` (module docstring), as the contradictions report finds them."""
    return _contradictions(parsed)


def _contradictions(parsed: list[ParsedNote]) -> list[Contradiction]:
    by_id: dict[str, list[Claim]] = {}
    for note in parsed:
        for claim in note.claims:
            by_id.setdefault(claim.id, []).append(claim)
    found: list[Contradiction] = []
    for claim_id in sorted(by_id):
        claims = by_id[claim_id]
        if len(claims) < 2:
            continue
        texts = {" ".join(c.text.split()).casefold() for c in claims if c.text is not None}
        statuses = {c.status.strip().casefold() for c in claims if c.status is not None}
        diverges = tuple(kind for kind, values in (("text", texts), ("status", statuses)) if len(values) > 1)
        if diverges:
            ordered = sorted(claims, key=lambda c: (c.note, c.text or "", c.status or "", c.confidence or 0.0))
            found.append(Contradiction(claim_id, diverges, tuple(ordered)))
    return found


def _stale(parsed: list[ParsedNote], now: datetime, mtime: Callable[[str], float], fallback: str,
           problems: list[Problem]) -> list[StalePage]:
    stale: list[StalePage] = []
    for note in parsed:
        updated, source = note.updated_at, "updatedAt"
        if updated is None:
            source = fallback
            try:
                updated = datetime.fromtimestamp(mtime(note.name), UTC)
            except (OSError, ValueError, OverflowError) as exc:
                problems.append(Problem(note.name, f"no updatedAt and no readable mtime ({exc}); staleness unknown"))
                continue
        age = now - updated
        if age >= STALE_AFTER:
            stale.append(StalePage(note.name, updated, source, age.days))
    return sorted(stale, key=lambda s: (s.updated_at, s.note))


def _low_confidence(parsed: list[ParsedNote]) -> list[LowConfidence]:
    low: list[LowConfidence] = []
    for note in parsed:
        if note.confidence is not None and note.confidence < LOW_CONFIDENCE:
            low.append(LowConfidence(note.name, note.confidence, None, None))
        low.extend(LowConfidence(note.name, c.confidence, c.id, c.text)
                   for c in note.claims if c.confidence is not None and c.confidence < LOW_CONFIDENCE)
    return sorted(low, key=lambda x: (x.confidence, x.note, x.claim_id or ""))
