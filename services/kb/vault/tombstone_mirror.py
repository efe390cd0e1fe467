"""This host's mirror of the vault's tombstones (docs/concepts/forget.md "Shared tombstones across hosts").

A shared forget keeps its tombstones in the vault (``VaultStore.share_tombstones``), where every host sharing
the vault finds them; the checks read files, never the vault (``gateway.forget_guard``: a ``stat`` per check).
``Mirror`` bridges the two: it writes the tombstones the vaults hold (lifted ones left out) into
``<home>/forget/vault-tombstones.json`` of each home it serves (``gateway.forgetting.VAULT_FILE``, written
atomically, mode 0600, only when its content changes), at the KB's start, after each forget and lift
through this KB, and, on a PostgreSQL vault (other hosts write it), every ``tombstonesEveryS`` seconds,
when one cheap query (how many tombstones, how many lifted: ``tombstones_mark``) says they changed.

A shared forget made on this host also left its tombstones in the home's own file (``forget/tombstones.json``,
dreaming's): a tombstone lifted in the vault, on whichever host, is taken out of it here too
(``Tombstones.drop_shared``, compare-and-swap), so a lift made anywhere reaches every host.

Each change of the mirror also calls ``on_change`` (the KB rewrites its reflection reports from the vault's
audit, which the forget scrubbed: a report file of this host may still hold the text; docs/concepts/vault.md
"Weekly reflection", The report).

A vault that cannot be read leaves the mirror as it was: a tombstone is never dropped because the server
is away, and a lift reaches this host at the first check after it comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import structlog

from gateway.forgetting import FORGET_DIR, VAULT_FILE, Tombstone, Tombstones, read_file, write_file
from services.kb.vault.registry_base import SharedVaults

log = structlog.get_logger()


def iso_now() -> str:
    """Now, ISO 8601 in UTC (a lift's ``lifted_at``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Mirror:
    """The vaults' tombstones mirrored into the homes ``vaults`` serves (module docstring)."""

    def __init__(self, vaults: SharedVaults[Any]) -> None:
        self._vaults = vaults
        self._mark: tuple[tuple[str, int, int], ...] | None = None
        self._lock = asyncio.Lock()
        self.on_change: Callable[[], Awaitable[None]] | None = None  # after a refresh that changed a mirror

    async def refresh(self, *, force: bool = True) -> int:
        """Write the vaults' tombstones into each home's mirror (unless ``force`` is off and the vaults'
        mark is unchanged since the last refresh); how many the mirror holds, -1 when nothing was read."""
        async with self._lock:
            mark = await self._vaults.tombstones_mark()  # before the rows: a change between is seen next time
            if not force and mark == self._mark:
                return -1
            rows = await self._vaults.held_tombstones()
            lifted = {t.id for t in await self._vaults.held_tombstones(lifted=True)}
            changed = await asyncio.to_thread(self._write, rows, lifted)
            self._mark = mark
        if changed and self.on_change is not None:
            await self.on_change()
        return len(rows)

    def _write(self, rows: list[Tombstone], lifted: set[str]) -> bool:
        """Each home's mirror written where it differs; whether any was."""
        changed = False
        for home in self._vaults.tombstone_homes():
            if lifted and (dropped := Tombstones(home).drop_shared(lifted)):
                log.info("kb_vault_tombstones_lifted_here", home=str(home), dropped=dropped)
            path = home / FORGET_DIR / VAULT_FILE
            if path.exists() and read_file(path) == rows:
                continue
            write_file(path, rows)
            changed = True
            log.info("kb_vault_tombstones_mirrored", home=str(home), held=len(rows))
        return changed

    async def refresh_quietly(self, *, force: bool = True) -> None:
        """``refresh``, its failure logged (the mirror left as it was)."""
        try:
            await self.refresh(force=force)
        except Exception as exc:  # noqa: BLE001 - a vault away: the mirror kept, retried at the next check
            log.warning("kb_vault_tombstones_not_mirrored", error=f"{type(exc).__name__}: {exc}")

    async def run(self, stop: asyncio.Event, every_s: float | None) -> None:
        """Refresh at start, then every ``every_s`` seconds when the vault changed (None: never again, the
        vault being this host's alone) until ``stop``."""
        await self.refresh_quietly()
        while every_s is not None and not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=every_s)
            except TimeoutError:
                await self.refresh_quietly(force=False)
