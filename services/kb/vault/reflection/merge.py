"""One merge of a weekly reflection run: its guards, the pruned archive, the writes and the journal
(docs/concepts/vault.md "Weekly reflection", Guards and The pruned archive).

Pure domain code over the vault's store, run as one write decision of the vault. ``check`` refuses a
malformed request (InvalidArgument) before anything is read. ``merge`` then, in order:

1. **The claim**: the run must hold the vault's claim (FailedPrecondition otherwise), and the cluster
   must be one of its plan, or one a recorded run proposed a merge of (an accept, made by a later run);
   ``replaces`` must be notes of that cluster (of that proposal), and ``name`` a note of ``replaces`` or
   a free name. Anything else is refused: a reviewer's answer never reaches beyond the cluster it was
   shown.
2. **Compare-and-swap**: every note of ``replaces`` must still hold the bytes whose SHA-256 the plan
   gave; otherwise the outcome is ``changed`` and the cluster is left alone.
3. **Contradictions**: the frontmatter claims of the replaced notes and the merged note must not
   contradict (``graph.build.contradictions``); those are for a person (the contradictions report).
4. **The screen**: the merged content passes the secret guard and the tombstone check, as a shared
   note's create does (the caller's ``screen``). **Trust**: when a replaced note is untrusted
   (``provenance: untrusted``, as the index reads it) the merged note must be too.
5. **Twins**: a replaced note whose ``stale__`` twin exists cannot be retired; refused.
6. **Bounded**: the distinct lines of fact of the replaced notes the merged note drops (``lines``) may be
   at most ``max_drop_share`` of them.
7. ``dry_run`` stops here (``merged``: every guard passed, nothing written).
8. **Journal** the merge first (every note's bytes before and after), so a merge cut short is still
   reverted exactly, with how far its writes move the vault's revision (``runs.REVISION_DELTA``: the
   digests of the notes it writes, the pruned archive's append included, less those of the bytes they
   replace), by which the run's record tells its own writes from another writer's; then **archive**
   the dropped lines in the pruned archive (``names.PRUNED_ARCHIVE``) and **probe** each with a vault
   search: one not found among the first hits undoes the archive and the journal and refuses the
   merge. A line only untrusted notes held goes to the untrusted archive (``names.PRUNED_UNTRUSTED``,
   whose frontmatter says ``provenance: untrusted``), so it keeps its trust. Then the merged note is
   written (compare-and-swap) and every other replaced note is moved to ``stale__<name>`` with a
   retirement marker (compare-and-swap against the planned bytes). A write that finds a note changed
   undoes what landed: ``changed``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Final

from gateway.atomic import WriteConflict
from gateway.errors import FailedPrecondition, GatewayError, InvalidArgument
from services.kb.graph.build import contradictions
from services.kb.graph.parse import parse_note
from services.kb.index.chunking import split_lines
from services.kb.index.entries import parse_frontmatter
from services.kb.vault.names import (
    PRUNED_ARCHIVE, PRUNED_UNTRUSTED, is_reserved, note_path, retired_name, validate_name)
from services.kb.vault.note_index import classify_note
from services.kb.vault.notes import MAX_NOTE_BYTES
from services.kb.vault.reflection.lines import dropped_lines, fact_lines
from services.kb.vault.reflection.plan import note_digest, sha256, shifted
from services.kb.vault.reflection.runs import AUDIT_SCAN, REVISION_DELTA
from services.kb.vault.retirement import add_marker, marker_line
from services.kb.vault.store import MergeJournal, VaultStore, Writer

MERGED: Final = "merged"
REFUSED: Final = "refused"
CHANGED: Final = "changed"
DEFAULT_DROP_SHARE: Final = 0.5
MAX_REPLACES: Final = 200
PROBE_WORDS: Final = 16
PROBE_HITS: Final = 20
RUN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
CLUSTER_ID: Final = re.compile(r"C-[0-9a-f]{12}")
_SHA: Final = re.compile(r"[0-9a-f]{64}")
_WORDS: Final = re.compile(r"[^\W_]+")
AUTHOR: Final = "vault-reflection"

Screen = Callable[[str], str]  # merged content → why it may not be written ("" when it may)


@dataclass(frozen=True)
class MergeRequest:
    run_id: str
    cluster_id: str
    name: str
    content: str
    replaces: tuple[str, ...]
    expected: dict[str, str]
    max_drop_share: float = DEFAULT_DROP_SHARE
    reason: str = ""
    dry_run: bool = False


@dataclass(frozen=True)
class MergeResult:
    outcome: str
    reason: str = ""
    retired: tuple[str, ...] = ()
    pruned_lines: int = 0
    distinct_lines: int = 0
    merge_id: str = ""


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise InvalidArgument(f"run_id: {run_id[:40]!r} is not a run id (letters, digits and ._:+-, at most 128)")
    return run_id


def check(request: MergeRequest) -> MergeRequest:
    """``request`` with its names canonical and its share defaulted; InvalidArgument naming what is wrong."""
    check_run_id(request.run_id)
    if not CLUSTER_ID.fullmatch(request.cluster_id):
        raise InvalidArgument(f"cluster_id: {request.cluster_id[:40]!r} is not a cluster id (C- and 12 hex digits)")
    name = validate_name(request.name)
    size = len(request.content.encode("utf-8"))
    if size > MAX_NOTE_BYTES:
        raise InvalidArgument(f"content: {size:,} bytes; a shared note is at most {MAX_NOTE_BYTES:,}")
    if not request.content.strip():
        raise InvalidArgument("content is empty: a merge writes the merged note's full content")
    if not request.replaces:
        raise InvalidArgument("replaces is empty: name the notes of the cluster the merged note replaces")
    if len(request.replaces) > MAX_REPLACES:
        raise InvalidArgument(f"replaces: {len(request.replaces)} notes; at most {MAX_REPLACES}")
    replaces = tuple(dict.fromkeys(validate_name(r) for r in request.replaces))
    expected: dict[str, str] = {}
    for raw, value in request.expected.items():
        expected[validate_name(raw)] = value.lower()
    for r in replaces:
        if not _SHA.fullmatch(expected.get(r, "")):
            raise InvalidArgument(f"expected_sha256: no SHA-256 (64 hex digits) for {r!r}, a note of replaces")
    share = request.max_drop_share or DEFAULT_DROP_SHARE
    if not 0 <= share <= 1:
        raise InvalidArgument(f"max_drop_share: {request.max_drop_share} is not a share from 0 to 1")
    return MergeRequest(request.run_id, request.cluster_id, name, request.content, replaces, expected, share,
                        request.reason, request.dry_run)


def _refused(reason: str, counts: dict[str, int] | None = None) -> MergeResult:
    return MergeResult(REFUSED, reason, pruned_lines=(counts or {}).get("pruned_lines", 0),
                       distinct_lines=(counts or {}).get("distinct_lines", 0))


def _scope(store: VaultStore, r: MergeRequest) -> str:
    """Step 1's refusal ("" when the request stays in its cluster); FailedPrecondition without the claim."""
    state = store.reflection_state()
    if state.claim_run != r.run_id:
        held = f"run {state.claim_run!r} holds it" if state.claim_run else "no run holds it"
        raise FailedPrecondition(f"run {r.run_id!r} does not hold the vault's reflection claim ({held}); plan again")
    planned = state.plan.get(r.cluster_id)
    listed = planned.get("notes") if planned is not None else None
    members = {str(n) for n in listed} if isinstance(listed, list) else _proposed(store, r.cluster_id)
    if members is None:
        return f"cluster {r.cluster_id} is neither in run {r.run_id}'s plan nor a proposal of a recorded run"
    outside = [n for n in r.replaces if n not in members]
    if outside:
        return f"replaces names notes outside cluster {r.cluster_id}: " + ", ".join(repr(n) for n in outside[:5])
    if r.name not in r.replaces and store.exists(r.name):
        return f"a note named {r.name!r} exists and is not one of replaces; the merge would overwrite it"
    if is_reserved(r.name):
        return f"{r.name!r} is reserved"
    return ""


def _proposed(store: VaultStore, cluster_id: str) -> set[str] | None:
    """The notes the recorded runs' proposals for ``cluster_id`` replace (an accept, in a later run);
    None when no run proposed a merge of that cluster."""
    found: set[str] | None = None
    for audit in store.reflection_audit(AUDIT_SCAN):
        proposals = audit.record.get("proposals") if audit.kind == "run" else None
        for proposal in proposals if isinstance(proposals, list) else ():
            if isinstance(proposal, dict) and proposal.get("cluster_id") == cluster_id:
                replaces = proposal.get("replaces")
                found = (found or set()) | ({str(n) for n in replaces} if isinstance(replaces, list) else set())
    return found


def _read(store: VaultStore, r: MergeRequest) -> dict[str, bytes] | str:
    """Step 2: the replaced notes' bytes, or why the cluster changed."""
    found: dict[str, bytes] = {}
    for name in r.replaces:
        data = store.read(name)
        if data is None:
            return f"{name!r} is gone since the plan"
        if sha256(data) != r.expected[name]:
            return f"{name!r} changed since the plan"
        found[name] = data
    return found


def _texts(before: dict[str, bytes]) -> dict[str, str] | None:
    try:
        return {name: data.decode("utf-8") for name, data in before.items()}
    except UnicodeDecodeError:
        return None


def _contradiction(texts: dict[str, str], merged: str, name: str) -> str:
    parsed = [parse_note(n, t) for n, t in texts.items()] + [parse_note(f"{name} (merged)", merged)]
    found = contradictions(parsed)
    return "; ".join(f"claim {c.claim_id!r} ({' and '.join(c.diverges)} differ)" for c in found[:3])


def untrusted(name: str, content: str) -> bool:
    """Whether the index takes note ``name`` of ``content`` for untrusted (its frontmatter says so, or
    cannot be read)."""
    provenance = parse_frontmatter(split_lines(content.removeprefix("\ufeff"))).provenance
    return classify_note(note_path(name), provenance) == "untrusted"


UNTRUSTED_HEAD: Final = "---\nprovenance: untrusted\n---\n"


def probe_words(line: str) -> str:
    """The query a dropped line is probed with: its first distinct words (letters and digits)."""
    words = list(dict.fromkeys(w.casefold() for w in _WORDS.findall(line)))
    return " ".join(words[:PROBE_WORDS])


def found_by_search(store: VaultStore, line: str, name: str = PRUNED_ARCHIVE) -> bool:
    """Whether a vault search for ``line``'s words finds note ``name`` among its first hits."""
    query = probe_words(line)
    return bool(query) and any(hit.path == note_path(name) for hit in store.search(query, PROBE_HITS).hits)


def _archive_block(r: MergeRequest, merge_id: str, lines: tuple[str, ...], now: datetime) -> str:
    when = now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sources = ", ".join(n for n in r.replaces)[:300].replace("-->", "—>")
    head = f"<!-- pruned: {when} run {r.run_id} merge {merge_id} cluster {r.cluster_id} from {sources} -->"
    return head + "\n" + "\n".join(lines) + "\n"


def _appended(archive: str, old: bytes | None, block: str) -> bytes:
    """Pruned archive ``archive`` of bytes ``old`` (None: not made yet) with ``block`` appended (the
    untrusted one starts with its frontmatter)."""
    text = ("" if archive == PRUNED_ARCHIVE else UNTRUSTED_HEAD) if old is None else old.decode("utf-8", errors="replace")
    head = text.rstrip("\n")
    joined = head + ("\n" if head.endswith("---") else "\n\n") if head else ""
    return (joined + block).encode("utf-8")


def _unarchive(store: VaultStore, archive: str, old: bytes | None) -> None:
    current = store.read(archive)
    if current is None:
        return
    if old is None:
        store.delete(archive, expected=current)
    else:
        store.write(archive, old, expected=current)


def _by_archive(texts: dict[str, str], dropped: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The dropped lines by the archive they go to: the untrusted one when only untrusted notes hold them."""
    trusted: set[str] = set()
    for name, text in texts.items():
        if not untrusted(name, text):
            trusted.update(fact_lines(name, text))
    lines = {name: fact_lines(name, text) for name, text in texts.items()}
    out: dict[str, list[str]] = {}
    for raw in dropped:
        form = next((f for table in lines.values() for f, r in table.items() if r == raw), raw)
        out.setdefault(PRUNED_ARCHIVE if form in trusted else PRUNED_UNTRUSTED, []).append(raw)
    return {archive: tuple(found) for archive, found in out.items()}


def merge(store: VaultStore, request: MergeRequest, now: datetime, screen: Screen) -> MergeResult:
    """One merge (module docstring); ``request`` checked (``check``). Never raises for a guard."""
    r = request
    refusal = _scope(store, r)
    if refusal:
        return _refused(refusal)
    before = _read(store, r)
    if isinstance(before, str):
        return MergeResult(CHANGED, before + "; the cluster is left alone")
    texts = _texts(before)
    if texts is None:
        return _refused("a note of replaces is not UTF-8 text")
    clash = _contradiction(texts, r.content, r.name)
    if clash:
        return _refused(f"contradicting frontmatter claims: {clash}; left for a person (reports/contradictions)")
    screened = screen(r.content)
    if screened:
        return _refused(screened)
    distrusted = [n for n, t in texts.items() if untrusted(n, t)]
    if distrusted and not untrusted(r.name, r.content):
        return _refused(f"{distrusted[0]!r} is untrusted (provenance: untrusted) and the merged note is not; "
                        "a merge never raises a note's trust")
    retire = [n for n in r.replaces if n != r.name]
    twins = [n for n in retire if store.exists(retired_name(n))]
    if twins:
        return _refused(f"{retired_name(twins[0])!r} exists, so {twins[0]!r} cannot be retired")
    drop = dropped_lines(texts, r.content)
    counts = {"pruned_lines": len(drop.dropped), "distinct_lines": drop.distinct}
    if drop.share > r.max_drop_share + 1e-9:
        return _refused(f"the merge drops {len(drop.dropped)} of the cluster's {drop.distinct} distinct lines of "
                        f"fact ({drop.share:.0%}); at most {r.max_drop_share:.0%}", counts)
    if r.dry_run:
        return MergeResult(MERGED, "every guard passed (dry run: nothing written)", tuple(retire),
                           len(drop.dropped), drop.distinct)
    return _apply(store, r, before, retire, _by_archive(texts, drop.dropped), now, counts)


def _apply(store: VaultStore, r: MergeRequest, before: dict[str, bytes], retire: list[str],
           dropped: dict[str, tuple[str, ...]], now: datetime, counts: dict[str, int]) -> MergeResult:
    merge_id = "M-" + sha256(f"{r.run_id}\n{r.cluster_id}\n{r.name}\n{r.content}".encode())[:12]
    marker = marker_line(now, f"vault reflection: merged into {r.name} (run {r.run_id}, {merge_id})")
    merged = r.content.encode("utf-8")
    prior = before.get(r.name)
    notes: dict[str, dict[str, str | None]] = {
        r.name: {"before": None if prior is None else prior.decode("utf-8"), "after": r.content}}
    for name in retire:
        notes[name] = {"before": before[name].decode("utf-8"), "after": None}
        notes[retired_name(name)] = {"before": None, "after": add_marker(before[name], marker).decode("utf-8")}
    archives: dict[str, tuple[bytes | None, bytes]] = {}
    for archive, lines in dropped.items():
        old = store.read(archive)
        archives[archive] = (old, _appended(archive, old, _archive_block(r, merge_id, lines, now)))
    writes: list[tuple[str, bytes | None, bytes | None]] = [(r.name, prior, merged), *(
        (a, old, new) for a, (old, new) in archives.items())]
    for name in retire:
        writes += [(name, before[name], None), (retired_name(name), None, add_marker(before[name], marker))]
    at = now.timestamp()
    entry: dict[str, object] = {"cluster_id": r.cluster_id, "name": r.name, "reason": r.reason[:500],
                                "retired": retire, "notes": notes,
                                "pruned": [line for lines in dropped.values() for line in lines],
                                REVISION_DELTA: shifted("0", sum(note_digest(n, new) - note_digest(n, old)
                                                                 for n, old, new in writes))}
    store.journal_merge(MergeJournal(merge_id, r.run_id, at, entry))
    undo: list[Callable[[], None]] = []
    try:
        for archive, (old, appended) in archives.items():
            store.write(archive, appended, expected=old)
            undo.append(_unarchiver(store, archive, old))
        missing = [line for archive, lines in dropped.items() for line in lines
                   if not found_by_search(store, line, archive)]
        if missing:
            _undo(undo)
            store.drop_merge(merge_id)
            return _refused(f"recall probe: vault search does not find {len(missing)} of the {counts['pruned_lines']} "
                            "dropped lines in the pruned archive; nothing was merged", counts)
        store.write(r.name, merged, expected=prior)
        undo.append(lambda: _put_back(store, r.name, merged, prior))
        for name in retire:
            data = add_marker(before[name], marker)
            store.move(name, retired_name(name), data, expected=before[name])
            undo.append(_mover(store, retired_name(name), name, before[name], data))
    except WriteConflict as exc:
        _undo(undo)
        store.drop_merge(merge_id)
        return MergeResult(CHANGED, f"a note changed while the merge was written ({exc}); nothing was merged")
    store.record_author(r.name, Writer(AUTHOR, "internal", r.run_id, at), created=prior is None)
    return MergeResult(MERGED, "", tuple(retire), counts["pruned_lines"], counts["distinct_lines"], merge_id)


def _unarchiver(store: VaultStore, archive: str, old: bytes | None) -> Callable[[], None]:
    return lambda: _unarchive(store, archive, old)


def _mover(store: VaultStore, source: str, target: str, data: bytes, expected: bytes) -> Callable[[], None]:
    return lambda: store.move(source, target, data, expected=expected)


def _put_back(store: VaultStore, name: str, written: bytes, prior: bytes | None) -> None:
    if prior is None:
        store.delete(name, expected=written)
    else:
        store.write(name, prior, expected=written)


def _undo(steps: list[Callable[[], None]]) -> None:
    """Undo what landed, newest first; a step that cannot (changed again meanwhile) is left as it is."""
    for step in reversed(steps):
        try:
            step()
        except (WriteConflict, GatewayError, OSError):
            continue
