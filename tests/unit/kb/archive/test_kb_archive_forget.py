"""A forget in an agent's archive: the sources that hold the target, reindexed once dreaming rewrote them,
and not one 8-character run of the text left in ``kb.sqlite``, its WAL or its shared memory, while every
other fact is still found."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from forget_support import PLANTED, TOMBSTONE, residue, scrub_file

from gateway.config import build
from gateway.errors import InvalidArgument
from gateway.forgetting import Target, marker
from services.kb.archive import forget as archive_forget
from services.kb.archive.archives import Archives
from services.kb.archive.arguments import changed_sources, check_tombstone_id
from services.kb.archive.retrieval_log import record_retrievals

FILES = {
    "MEMORY.md": f"# Memory\n\n- The quokka lives on Rottnest Island.\n- {PLANTED}.\n",
    "memory/2026-11-02.md": f"# Day\n\nMet an old friend today.\n\n{PLANTED.replace(' under ', chr(10) + 'under ')}\n\n"
                            "The nightly backup runs at 03:00 from the vault host.\n",
    "memory/archive/pruned.md": f"# Pruned\n\n- {PLANTED.upper()}\n- Tamarind chutney goes with the dal.\n",
}
OTHER_FACTS = ("quokka", "backup", "tamarind")


def _archives(tmp_path: Path) -> tuple[Archives, Path]:
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    workspace = tmp_path / "agents" / "a" / "workspace"
    for rel, text in FILES.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text, encoding="utf-8")
    return Archives(config.agents), workspace


async def _hits(archives: Archives, query: str) -> list[str]:
    result, _ = await archives.search("a", query, 10, False)
    return [h.path for h in result.hits]


def test_an_applied_forget_leaves_no_byte_of_the_text_and_keeps_every_other_fact(tmp_path: Path) -> None:
    archives, workspace = _archives(tmp_path)
    kb = tmp_path / "agents" / "a" / "kb.sqlite"
    target = Target.parse(PLANTED, None)

    async def scenario() -> archive_forget.purge.StoreForget:
        await archives.refresh("a")
        found = await archives.search("a", "Quabbleworth heron", 10, False)
        record_retrievals(kb, found[0].hits, "search")  # the log keeps paths and hashes only
        assert len(found[0].hits) == 3
        for rel in FILES:
            assert scrub_file(workspace / rel, target) == 1
        await archives.refresh("a", list(FILES))  # what any refresh does: rows deleted, bytes left
        assert residue([kb]), "a plain reindex leaves the text in the file: the check below could not fail"
        result = await archive_forget.forget(archives, "a", target, TOMBSTONE, list(FILES), apply=True)
        assert await _hits(archives, "Quabbleworth") == []
        assert await _hits(archives, "AKIAZX7QPLMNB4RTYUWE") == []
        for word in OTHER_FACTS:
            assert await _hits(archives, word), word
        assert await _hits(archives, f'"{marker(TOMBSTONE)}"')  # the marker is what the index holds now
        return result

    try:
        result = asyncio.run(scenario())
    finally:
        archives.close()
    assert result.store == "archive" and result.left == []
    assert result.places == []  # dreaming rewrote and named every file; the refresh above had indexed them
    assert result.purge is not None and result.purge.bytes_after > 0
    assert residue([kb]) == []


def test_a_dry_run_reports_sources_counts_and_lines_and_changes_nothing(tmp_path: Path) -> None:
    archives, workspace = _archives(tmp_path)

    async def scenario() -> tuple[archive_forget.purge.StoreForget, list[str]]:
        await archives.refresh("a")
        result = await archive_forget.forget(archives, "a", Target.parse(PLANTED, None), "", [], apply=False)
        return result, await _hits(archives, "Quabbleworth")

    try:
        result, still = asyncio.run(scenario())
    finally:
        archives.close()
    assert [(p.where, p.kind, p.count, p.lines) for p in result.places] == [
        ("MEMORY.md", "source", 1, (4,)),
        ("memory/2026-11-02.md", "source", 1, (5,)),
        ("memory/archive/pruned.md", "source", 1, (3,)),
    ]
    assert result.purge is None and result.left == []
    assert PLANTED.lower() not in repr(result).lower()
    assert sorted(still) == sorted(FILES)
    assert {rel: (workspace / rel).read_text(encoding="utf-8") for rel in FILES} == FILES


def test_an_apply_reindexes_what_the_index_holds_and_names_files_that_still_hold_it(tmp_path: Path) -> None:
    """Nothing named as changed: the sources found in the index are reindexed; one not rewritten on disk
    (dreaming missed it) is ``left``, by path and count, and its words stay searchable."""
    archives, workspace = _archives(tmp_path)
    target = Target.parse(PLANTED, None)

    async def scenario() -> archive_forget.purge.StoreForget:
        await archives.refresh("a")
        scrub_file(workspace / "MEMORY.md", target)
        scrub_file(workspace / "memory/2026-11-02.md", target)
        return await archive_forget.forget(archives, "a", target, TOMBSTONE, [], apply=True)

    try:
        result = asyncio.run(scenario())
    finally:
        archives.close()
    assert [p.where for p in result.places] == list(FILES)
    assert [(p.where, p.count) for p in result.left] == [("memory/archive/pruned.md", 1)]


def test_an_archive_never_built_has_nothing_to_forget(tmp_path: Path) -> None:
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    archives = Archives(config.agents)
    try:
        result = asyncio.run(archive_forget.forget(archives, "a", Target.parse(PLANTED, None), TOMBSTONE, [], apply=True))
    finally:
        archives.close()
    assert (result.places, result.left, result.purge) == ([], [], None)
    assert not (tmp_path / "agents" / "a" / "kb.sqlite").exists()


def test_changed_paths_keep_the_sources_and_refuse_paths_outside_the_workspace() -> None:
    assert changed_sources(["SOUL.md", ".dreaming/journal.jsonl", "memory/a.md", "MEMORY.md", "memory/a.md"]) == [
        "MEMORY.md", "memory/a.md"]
    for bad in ("/etc/passwd", "memory/../../x.md", "", "memory\\x.md"):
        with pytest.raises(InvalidArgument, match="changed_paths"):
            changed_sources([bad])
    assert check_tombstone_id(TOMBSTONE) == TOMBSTONE
    for bad in ("", "F-XYZ", "F-0123456789abc", "0123456789ab"):
        with pytest.raises(InvalidArgument, match="tombstone_id"):
            check_tombstone_id(bad)


def test_a_forget_cut_off_before_its_purge_is_completed_by_the_same_forget_again(tmp_path: Path) -> None:
    """The reindex committed, the KB gone before the purge (kill -9): the rows are new, the bytes old;
    the same forget run again finds nothing to reindex and purges."""
    archives, workspace = _archives(tmp_path)
    kb = tmp_path / "agents" / "a" / "kb.sqlite"
    target = Target.parse(PLANTED, None)

    async def scenario() -> tuple[list[str], archive_forget.purge.StoreForget]:
        await archives.refresh("a")
        for rel in FILES:
            scrub_file(workspace / rel, target)
        async with archives.exclusive("a") as state:
            archive_forget.forget_in(state, target, TOMBSTONE, list(FILES), apply=True)  # its first step only
        cut_off = residue([kb])
        return cut_off, await archive_forget.forget(archives, "a", target, TOMBSTONE, list(FILES), apply=True)

    try:
        cut_off, again = asyncio.run(scenario())
    finally:
        archives.close()
    assert cut_off, "the reindex alone leaves the bytes"
    assert (again.places, again.left) == ([], []) and again.purge is not None
    assert residue([kb]) == []


def test_a_pattern_finds_what_it_matches_and_reports_only_places(tmp_path: Path) -> None:
    archives, _ = _archives(tmp_path)

    async def scenario() -> archive_forget.purge.StoreForget:
        await archives.refresh("a")
        return await archive_forget.forget(archives, "a", Target.parse(None, r"\b[0-9A-Z]{16}\b"), "", [], apply=False)

    try:
        result = asyncio.run(scenario())
    finally:
        archives.close()
    assert [(p.where, p.count) for p in result.places] == [(rel, 1) for rel in FILES]
    assert "ZX7Q" not in repr(result)


def test_a_file_named_with_the_text_is_left_until_renamed_then_its_old_path_is_scrubbed(tmp_path: Path) -> None:
    """A source's own path is answered (kind ``name``) and left; once the file is renamed, the same forget
    scrubs the old path the index keeps (a lifecycle row's first path, the retrieval log)."""
    archives, workspace = _archives(tmp_path)
    kb = tmp_path / "agents" / "a" / "kb.sqlite"
    named = workspace / "memory" / "Brasswick ledger.md"
    named.write_text("# Keys\n\nThe shed key hangs by the door.\n", encoding="utf-8")
    target = Target.parse("Brasswick ledger", None)

    async def scenario() -> tuple[archive_forget.purge.StoreForget, archive_forget.purge.StoreForget]:
        await archives.refresh("a")
        hits, _ = await archives.search("a", "shed key", 10, False)
        record_retrievals(kb, hits.hits, "search")
        await archives.fold("a")  # its first path now in kb_paths
        record_retrievals(kb, hits.hits, "get")  # and one row not folded yet
        first = await archive_forget.forget(archives, "a", target, TOMBSTONE, [], apply=True)
        named.rename(workspace / "memory" / "keys.md")  # the rename is dreaming's, or the operator's
        return first, await archive_forget.forget(archives, "a", target, TOMBSTONE, ["memory/keys.md"], apply=True)

    try:
        first, second = asyncio.run(scenario())
    finally:
        archives.close()
    assert [(p.where, p.kind) for p in first.left] == [("memory/Brasswick ledger.md", "name")]
    assert second.left == []
    assert residue([kb], "Brasswick") == []
