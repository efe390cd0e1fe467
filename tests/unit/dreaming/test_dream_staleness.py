"""The staleness GC's pure planner: the TTL boundary, the keeps, the cap and its order, supersession
(chains, keys, restores), restores on retrieval and the sync of lifecycle rows. Times are injected."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import Any

import pytest

from gateway.config import StalenessSettings
from services.dreaming.model.archive import IndexedEntry
from services.dreaming.passes.staleness import (
    AGED_OUT,
    DAY_S,
    SUPERSEDED,
    Block,
    kept_place,
    own_key,
    plan,
    references,
)

NOW = 1_800_000_000.0
TTL_DAYS = 90
TTL = TTL_DAYS * DAY_S


def settings(**changes: Any) -> StalenessSettings:
    base = StalenessSettings(enabled=True, stale_ttl_days=TTL_DAYS, keep_importance=7, min_retrieval_keep=1,
                             supersession=True, record_retrievals=True, max_invalidations_per_run=50)
    return dataclasses.replace(base, **changes)


_lines: dict[str, int] = {}


def entry(text: str, *, path: str = "memory/notes.md", age: float = 0.0, **life: Any) -> IndexedEntry:
    """An entry of ``path`` first seen ``age`` seconds before NOW (lines in order of creation)."""
    line = _lines.get(path, 0) + 2
    _lines[path] = line
    return IndexedEntry(path=path, start_line=line, end_line=line, entry_hash=hashlib.sha256(text.encode()).hexdigest(),
                 importance=life.pop("importance", 5), provenance=life.pop("provenance", "agent"), text=text,
                 first_seen=NOW - age, **life)


def gone(entries: Sequence[IndexedEntry], s: StalenessSettings | None = None, blocks: Sequence[Block] = (), now: float = NOW) -> list[str]:
    return [inv.entry.text for inv in plan(entries, blocks, s or settings(), now).invalidations]


def test_the_ttl_boundary_one_second_either_side() -> None:
    young = entry("- idle a second short of the TTL", age=TTL - 1)
    exact = entry("- idle exactly the TTL", age=TTL)
    old = entry("- idle a second past the TTL", age=TTL + 1)
    assert gone([young, exact, old]) == ["- idle a second past the TTL"]
    decided = plan([old], [], settings(), NOW).invalidations[0]
    assert (decided.rule, decided.idle_s, decided.idle_days) == (AGED_OUT, TTL + 1, TTL_DAYS)


def test_idle_counts_from_the_last_retrieval() -> None:
    retrieved = entry("- first seen long ago, retrieved lately", age=3 * TTL, last_retrieved=NOW - TTL + 1, retrieval_count=1)
    assert gone([retrieved], settings(min_retrieval_keep=5)) == []
    once = entry("- retrieved once, long ago", age=3 * TTL, last_retrieved=NOW - TTL - 1, retrieval_count=1)
    assert gone([once], settings(min_retrieval_keep=2)) == ["- retrieved once, long ago"]


def test_min_retrieval_keep() -> None:
    never = entry("- never retrieved", age=2 * TTL)
    twice = entry("- retrieved twice", age=2 * TTL, last_retrieved=NOW - 2 * TTL, retrieval_count=2)
    assert gone([never, twice], settings(min_retrieval_keep=1)) == ["- never retrieved"]
    assert gone([never, twice], settings(min_retrieval_keep=3)) == ["- never retrieved", "- retrieved twice"]
    assert gone([never, twice], settings(min_retrieval_keep=0)) == []  # nothing is retrieved fewer than 0 times


def test_keep_importance() -> None:
    keep = entry("- important", age=2 * TTL, importance=7)
    below = entry("- less so", age=2 * TTL, importance=6)
    assert gone([keep, below]) == ["- less so"]
    assert gone([keep, below], settings(keep_importance=6)) == []


@pytest.mark.parametrize("path", ["MEMORY.md", "USER.md", "memory/pinned/keys.md", "memory/pinned/deep/x.md",
                                  "memory/archive/pruned.md", "memory/archive/completed.md", "memory/archive/stale.md"])
def test_places_that_never_age_out(path: str) -> None:
    assert kept_place(path) is not None
    assert gone([entry("- ancient", path=path, age=10 * TTL)]) == []


def test_other_memory_files_do() -> None:
    for path in ("memory/notes.md", "memory/deep/topic.md", "memory/pinnedish.md", "memory/inbox/mail.md"):
        assert kept_place(path) is None
        assert gone([entry(f"- ancient in {path}", path=path, age=10 * TTL)]) == [f"- ancient in {path}"]


def test_the_cap_takes_the_oldest_idle_first_and_the_rest_resume_next_night() -> None:
    entries = [entry(f"- entry idle {d} days", age=(TTL_DAYS + d) * DAY_S) for d in (5, 40, 1, 30, 20)]
    first = plan(entries, [], settings(max_invalidations_per_run=2), NOW)
    assert [i.entry.text for i in first.invalidations] == ["- entry idle 40 days", "- entry idle 30 days"]
    assert [i.entry.text for i in first.waiting] == ["- entry idle 20 days", "- entry idle 5 days", "- entry idle 1 days"]
    left = [e for e in entries if e.text not in {i.entry.text for i in first.invalidations}]
    second = plan(left, [], settings(max_invalidations_per_run=2), NOW + DAY_S)
    assert [i.entry.text for i in second.invalidations] == ["- entry idle 20 days", "- entry idle 5 days"]
    left = [e for e in left if e.text not in {i.entry.text for i in second.invalidations}]
    third = plan(left, [], settings(max_invalidations_per_run=2), NOW + 2 * DAY_S)
    assert [i.entry.text for i in third.invalidations] == ["- entry idle 1 days"]
    assert plan(entries, [], settings(max_invalidations_per_run=0), NOW).invalidations == []


def test_a_backfilled_old_file_surges_once_and_the_cap_holds_it() -> None:
    """A source indexed before the lifecycle table existed is first seen at its mtime: a year old."""
    year = 365 * DAY_S
    backfilled = [entry(f"- backfilled note {n}", path="memory/old.md", age=year - n * DAY_S) for n in range(200)]
    fresh = [entry(f"- new note {n}", path="memory/new.md", age=n * DAY_S) for n in range(10)]
    first = plan(backfilled + fresh, [], settings(), NOW)
    assert len(first.invalidations) == 50 and len(first.waiting) == 150  # all 200 are due: 50 tonight
    assert first.invalidations[0].entry.text == "- backfilled note 0" and first.invalidations[0].idle_days == 365
    assert all(i.entry.path == "memory/old.md" for i in first.invalidations + first.waiting)


def test_own_keys_and_references() -> None:
    assert own_key("- #42: the deploy key is in vault A") == "#42"
    assert own_key("#42 a paragraph with its key") == "#42"
    assert own_key("- [x] [#7] a done task with a key") == "#7"
    assert own_key("1. **#0042** numbered") == "#42"
    assert own_key("- a note <!-- key: 9 -->") == "#9"
    assert own_key("- a note naming #42 in its middle") is None
    assert own_key("- #42abc is no key") is None
    assert references("- #43: replaces #42; Supersedes: #41 and OBSOLETES #40, replaces #42") == ["#42", "#41", "#40"]
    assert references("- this replaced #42 and supersede #41") == []


def test_a_superseded_entry_goes_whatever_its_importance_or_retrievals() -> None:
    old = entry("- #42: the deploy key is in vault A", age=DAY_S, importance=9, retrieval_count=30, last_retrieved=NOW - 5)
    new = entry("- #43: replaces #42 — the deploy key moved to vault B", age=1)
    result = plan([old, new], [], settings(), NOW)
    [inv] = result.invalidations
    assert (inv.entry, inv.rule, inv.by, inv.key) == (old, SUPERSEDED, new, "#42")
    assert result.keys == {new.entry_hash: "#42"}


def test_supersession_needs_an_older_target_and_skips_pinned_and_pruned() -> None:
    newer = entry("- #42: written after the entry that replaces it", age=1)
    claim = entry("- replaces #42", age=DAY_S)
    assert gone([newer, claim]) == []
    pinned = entry("- #42: pinned", path="memory/pinned/p.md", age=DAY_S)
    assert gone([pinned, entry("- replaces #42 again", age=1)]) == []
    target = entry("- #5: a target", age=DAY_S)
    assert gone([target, entry("- obsoletes #5", path="memory/archive/pruned.md", age=1)]) == []  # removed text: no authority
    assert gone([target, entry("- obsoletes #5", path="MEMORY.md", age=1)]) == ["- #5: a target"]
    assert gone([target, entry("- obsoletes #5 too", path="memory/archive/stale.md", age=1)]) == ["- #5: a target"]
    assert gone([target, entry("- obsoletes #5", age=1)], settings(supersession=False)) == []


def test_a_supersession_chain_moves_both_older_links() -> None:
    a = entry("- #1: the relay is on channel 40", age=3 * DAY_S)
    b = entry("- #2: replaces #1 — channel 41", age=2 * DAY_S)
    c = entry("- #3: replaces #2 — channel 42", age=DAY_S)
    result = plan([a, b, c], [], settings(), NOW)
    assert [(i.entry.text, i.by.text if i.by else "") for i in result.invalidations] == [
        (a.text, b.text), (b.text, c.text)]
    assert result.keys == {b.entry_hash: "#1", c.entry_hash: "#2"}
    # B already went to stale.md on an earlier night (the cap): C still supersedes it, and B still supersedes A.
    b_stale = dataclasses.replace(b, path="memory/archive/stale.md", invalid_at=NOW - DAY_S, supersedes_key="#1")
    assert gone([a, b_stale, c]) == [a.text]
    same_time = [entry("- #8: first", age=DAY_S), entry("- #9: replaces #8", age=DAY_S)]  # a tie: file order decides
    assert gone(same_time) == ["- #8: first"]


def test_a_restored_entry_is_not_superseded_again_by_an_older_superseder() -> None:
    old = entry("- #42: still wanted", age=3 * DAY_S, restored_at=NOW - DAY_S, retrieval_count=1, last_retrieved=NOW - DAY_S)
    by = entry("- replaces #42", age=2 * DAY_S)
    assert gone([old, by]) == []
    later = entry("- replaces #42 for real", age=DAY_S // 2)
    assert gone([old, by, later]) == [old.text]


def stale(text: str, origin: str, invalid_at: float, **life: Any) -> Block:
    return Block(entry(text, path="memory/archive/stale.md", age=TTL * 2, invalid_at=invalid_at, **life), origin, invalid_at)


def test_a_stale_entry_retrieved_after_its_invalidation_comes_back_uncapped() -> None:
    at = NOW - DAY_S
    after = [stale(f"- back {n}", "memory/notes.md", at, last_retrieved=at + 1, retrieval_count=1) for n in range(3)]
    before = stale("- retrieved just before it went", "memory/notes.md", at, last_retrieved=at - 1, retrieval_count=1)
    never = stale("- never retrieved", "memory/notes.md", at)
    result = plan([b.entry for b in after + [before, never]], after + [before, never], settings(max_invalidations_per_run=0), NOW)
    assert [r.block.entry.text for r in result.restores] == ["- back 0", "- back 1", "- back 2"]
    assert [r.retrieved_at for r in result.restores] == [at + 1] * 3


def test_no_restore_when_its_file_holds_it_again() -> None:
    at = NOW - DAY_S
    block = stale("- put back by hand", "memory/notes.md", at, last_retrieved=at + 5)
    live = dataclasses.replace(block.entry, path="memory/notes.md", start_line=3, end_line=3)
    assert plan([block.entry, live], [block], settings(), NOW).restores == []


def test_the_lifecycle_rows_follow_the_stale_files() -> None:
    at = NOW - DAY_S
    unmarked = stale("- moved, but the KB was not told", "memory/notes.md", at)
    unmarked = dataclasses.replace(unmarked, entry=dataclasses.replace(unmarked.entry, invalid_at=None))
    reverted = entry("- a revert put me back", invalid_at=at)
    result = plan([unmarked.entry, reverted], [unmarked], settings(), NOW)
    assert result.set_invalid == {unmarked.entry.entry_hash: at}
    assert result.clear_invalid == [reverted.entry_hash]


def test_off_means_nothing() -> None:
    old = entry("- ancient", age=10 * TTL)
    assert plan([old], [], settings(enabled=False), NOW) == plan([], [], settings(enabled=False), NOW)
    assert gone([old]) == [old.text]
