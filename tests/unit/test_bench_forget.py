"""bench/forget.py's pieces that decide what it plants and what its floor does (bench/forget_home.py,
bench/forget_floor.py): the planted share, the text's runs, and the floor's bare purge of a real archive,
which must leave no 8-character run of the text in the copy's bytes and every other fact in place. The
bench itself runs the suite and is not a test."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench_modules import bench
from forget_support import residue

from gateway.config import build
from services.kb.archive.archives import Archives

forget_home = bench("forget_home")
forget_floor = bench("forget_floor")
TEXT = forget_home.TEXT


def test_the_text_is_planted_in_its_share_spread_over_the_range() -> None:
    ten = forget_home.planted_indexes(1000, 0.01, 2)
    assert len(ten) == 10 and ten == sorted(ten) and ten[0] > 0 and ten[-1] < 1000
    assert min(b - a for a, b in zip(ten, ten[1:])) == 100
    assert len(forget_home.planted_indexes(50, 0.01, 2)) == 2  # the minimum
    assert len(forget_home.planted_indexes(10_000, 0.02, 10)) == 200


def test_every_run_of_the_text_is_eight_characters_of_it() -> None:
    runs = forget_home.runs()
    assert all(len(run) == 8 and run in TEXT for run in runs)
    assert {TEXT[i : i + 8] for i in range(len(TEXT) - 7)} == set(runs)


def test_the_floor_purges_a_real_archive_copy_and_keeps_the_rest(tmp_path: Path) -> None:
    config = build({"agents": [{"id": "a"}]}, tmp_path)
    workspace = tmp_path / "agents" / "a" / "workspace"
    files = {"MEMORY.md": f"# Memory\n\n- The quokka lives on Rottnest Island.\n- {TEXT}.\n",
             "memory/archive/pruned.md": f"# Pruned\n\n- 2026-11-29: {TEXT}\n- Tamarind chutney goes with the dal.\n",
             "memory/notes-0.md": "# Notes\n\nThe nightly backup runs at 03:00.\n"}
    for rel, text in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text, encoding="utf-8")
    archives = Archives(config.agents)

    async def index() -> None:
        await archives.refresh("a")

    try:
        asyncio.run(index())
    finally:
        archives.close()
    kb = tmp_path / "agents" / "a" / "kb.sqlite"
    copies = forget_floor.copy(tmp_path / "floor", [kb], [workspace / rel for rel in files])
    assert residue(copies.databases, TEXT), "the copy holds the text: the check below could not fail"
    floor = forget_floor.run(copies, TEXT)
    assert (floor.files, floor.chunks) == (2, 2)
    assert floor.bytes_before > 0 and floor.bytes_after > 0
    assert residue(copies.databases + copies.files, TEXT) == []
    data = copies.databases[0].read_bytes().lower()
    assert all(word in data for word in (b"quokka", b"tamarind", b"backup", forget_floor.MARKER.lower().encode()))
    assert residue([kb], TEXT), "the floor worked on the copy only"
