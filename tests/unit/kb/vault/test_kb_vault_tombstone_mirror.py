"""This host's mirror of the vault's tombstones (``vault.tombstone_mirror``; docs/concepts/forget.md "Shared
tombstones across hosts"): written into each home when the vault's change, mode 0600, read by every check;
a lift in the vault takes the tombstone out of the home's own file too; a vault away leaves it as it was."""

from __future__ import annotations

import asyncio
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway.errors import Unavailable
from gateway.forgetting import FORGET_DIR, SHARED_SCOPE, VAULT_FILE, Tombstone, Tombstones
from services.kb.vault.tombstone_mirror import Mirror


@dataclass
class FakeVaults:
    """The registry's tombstone calls over one list of rows (``lifted``: their ids lifted)."""

    homes: list[Path]
    rows: list[Tombstone] = field(default_factory=list)
    lifted: set[str] = field(default_factory=set)
    reads: int = 0
    down: bool = False

    def tombstone_homes(self) -> list[Path]:
        return self.homes

    async def tombstones_mark(self) -> tuple[tuple[str, int, int], ...]:
        if self.down:
            raise Unavailable("the shared vault of project 'global' cannot be reached")
        return (("global", len(self.rows), len(self.lifted)),)

    async def held_tombstones(self, *, lifted: bool = False) -> list[Tombstone]:
        self.reads += 1
        return [t for t in self.rows if (t.id in self.lifted) == lifted]


def shared(home: Path, forget_id: str, text: str) -> Tombstone:
    [t] = Tombstones(home).add(forget_id, [text], scope=SHARED_SCOPE, at="2026-12-07T05:00:00Z", by="admin", places=1)
    return t


def test_the_vaults_tombstones_reach_every_check_of_another_home_and_leave_it_when_lifted(tmp_path: Path) -> None:
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    made = shared(host_a, "F-0000000000a1", "Marguerite Pellworth")
    vaults = FakeVaults([host_b], [made])
    mirror = Mirror(vaults)  # type: ignore[arg-type]
    assert not Tombstones(host_b).matches("Marguerite PELLWORTH again", "bea")
    assert asyncio.run(mirror.refresh()) == 1
    path = host_b / FORGET_DIR / VAULT_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "pellworth" not in path.read_text().lower()
    assert [t.id for t in Tombstones(host_b).matches("Marguerite PELLWORTH again", "bea")] == ["F-0000000000a1"]

    reads = vaults.reads
    assert asyncio.run(mirror.refresh(force=False)) == -1 and vaults.reads == reads  # unchanged: one cheap query
    vaults.lifted.add(made.id)
    assert asyncio.run(mirror.refresh(force=False)) == 0
    assert Tombstones(host_b).matches("Marguerite PELLWORTH again", "bea") == []


def test_a_lift_in_the_vault_takes_the_tombstone_out_of_the_home_that_made_it(tmp_path: Path) -> None:
    """The host that made a shared forget keeps its tombstone in its own file too; a lift made on another
    host reaches it through the vault."""
    home = tmp_path / "a"
    made = shared(home, "F-0000000000b2", "Marguerite Pellworth")
    mine = Tombstones(home).add("F-0000000000c3", ["ada's own secret text"], scope="ada", at="t", by="k", places=1)
    vaults = FakeVaults([home], [made], lifted={made.id})
    asyncio.run(Mirror(vaults).refresh())  # type: ignore[arg-type]
    assert Tombstones(home).all() == mine and not Tombstones(home).matches("Marguerite Pellworth", "ada")


def test_a_vault_away_leaves_the_mirror_as_it_was(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "b"
    vaults = FakeVaults([home], [shared(tmp_path / "a", "F-0000000000d4", "Marguerite Pellworth")])
    mirror = Mirror(vaults)  # type: ignore[arg-type]
    asyncio.run(mirror.refresh())
    vaults.down, vaults.rows = True, []
    asyncio.run(mirror.refresh_quietly(force=False))
    assert [t.id for t in Tombstones(home).matches("marguerite pellworth", "bea")] == ["F-0000000000d4"]
    with pytest.raises(Unavailable):
        asyncio.run(mirror.refresh())


def test_run_refreshes_at_start_and_then_only_on_a_timer_when_asked(tmp_path: Path) -> None:
    home = tmp_path / "b"
    vaults = FakeVaults([home], [shared(tmp_path / "a", "F-0000000000e5", "Marguerite Pellworth")])

    async def once() -> None:
        stop = asyncio.Event()
        await Mirror(vaults).run(stop, None)  # type: ignore[arg-type]  # SQLite: at start only, then returns

    asyncio.run(once())
    assert (home / FORGET_DIR / VAULT_FILE).exists() and vaults.reads == 2
