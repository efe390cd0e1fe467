"""Dreaming's LiftTombstone of a shared tombstone (docs/concepts/forget.md "Shared tombstones across hosts"):
lifted in the vault first (the KB's ShareTombstones), then in the home; a KB that cannot answer lifts
nothing; a shared tombstone known from the vault's mirror only (made on another host) is listed and lifted;
an agent's own tombstone never reaches the KB."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from dreaming_stage import NoWatcher, Stage
from servicer_context import Context

from gateway.auth import Authenticator
from gateway.config import build
from gateway.config_migrations import CURRENT_VERSION
from gateway.forgetting import FORGET_DIR, SHARED_SCOPE, VAULT_FILE, Tombstone, Tombstones, write_file
from gateway.v1 import dreaming_pb2
from services.dreaming import nightly
from services.dreaming.dreamer import Dreamer
from services.dreaming.peer_client import PeerUnavailable
from services.dreaming.schedule.state import StateStore
from services.dreaming.servicer import Dreaming

ADMIN = (("x-api-key", "admin-key"),)


class Ctx(Context):
    """``Context`` with the trailing metadata an UNAVAILABLE answer sets."""

    trailing: tuple[tuple[str, str], ...] = ()

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.trailing = metadata


@dataclass
class FakeKb:
    """ShareTombstones only: records each lift, or raises ``error``."""

    error: Exception | None = None
    lifts: list[str] = field(default_factory=list)

    async def share_tombstones(self, agent_id: str, tombstones: Sequence[Tombstone], lift: str = "") -> None:
        if self.error is not None:
            raise self.error
        self.lifts.append(lift)


def servicer(home: Path, kb: FakeKb) -> Dreaming:
    config = build({"configVersion": CURRENT_VERSION,
                    "gateway": {"api": {"keys": [{"name": "admin", "key": "admin-key", "agents": "*", "write": True}]}},
                    "agents": [{"id": "alfred"}]}, home)
    stage = Stage()
    deps = nightly.Deps(index=stage, review=stage.review, now=lambda: stage.now, forgetter=kb)  # type: ignore[arg-type]
    dreamer = Dreamer(lambda: config, StateStore(home), deps, NoWatcher())
    return Dreaming(dreamer, lambda: (config, Authenticator(config.api.keys, "token")))


def lift(s: Dreaming, tombstone_id: str) -> tuple[Any, Ctx]:
    context = Ctx(ADMIN)
    try:
        return asyncio.run(s.LiftTombstone(dreaming_pb2.LiftTombstoneRequest(agent_id="alfred", tombstone_id=tombstone_id),
                                           context)), context
    except grpc.aio.AbortError:
        return None, context


def test_a_shared_tombstone_is_lifted_in_the_vault_then_in_the_home(tmp_path: Path) -> None:
    kb = FakeKb()
    stones = Tombstones(tmp_path)
    stones.add("F-0000000000a1", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="admin", places=1)
    stones.add("F-0000000000a2", ["alfred's own secret words"], scope="alfred", at="t", by="admin", places=1)
    reply, context = lift(servicer(tmp_path, kb), "F-0000000000a1")
    assert context.aborted == [] and [t.tombstone_id for t in reply.tombstones] == ["F-0000000000a1"]
    assert kb.lifts == ["F-0000000000a1"] and [t.id for t in stones.all()] == ["F-0000000000a2"]
    lift(servicer(tmp_path, kb), "F-0000000000a2")
    assert kb.lifts == ["F-0000000000a1"] and stones.all() == []  # an agent's own: the home's only


def test_a_kb_that_cannot_answer_lifts_nothing(tmp_path: Path) -> None:
    kb = FakeKb(error=PeerUnavailable("kb: UNAVAILABLE: down", "UNAVAILABLE"))
    stones = Tombstones(tmp_path)
    stones.add("F-0000000000b1", ["Marguerite Pellworth"], scope=SHARED_SCOPE, at="t", by="admin", places=1)
    _, context = lift(servicer(tmp_path, kb), "F-0000000000b1")
    assert context.aborted and context.aborted[0][0] == grpc.StatusCode.UNAVAILABLE
    assert "nothing was lifted" in context.aborted[0][1] and [t.id for t in stones.all()] == ["F-0000000000b1"]


def test_a_shared_tombstone_from_another_host_is_listed_and_lifted_in_the_vault(tmp_path: Path) -> None:
    [theirs] = Tombstones(tmp_path / "host-a").add("F-0000000000c1", ["Marguerite Pellworth"], scope=SHARED_SCOPE,
                                                  at="t", by="admin", places=1)
    write_file(tmp_path / FORGET_DIR / VAULT_FILE, [theirs])  # as this host's KB mirrored it
    kb = FakeKb()
    s = servicer(tmp_path, kb)
    listed = asyncio.run(s.ListTombstones(dreaming_pb2.ListTombstonesRequest(agent_id="alfred"), Context(ADMIN)))
    assert [(t.tombstone_id, t.scope) for t in listed.tombstones] == [("F-0000000000c1", SHARED_SCOPE)]
    reply, context = lift(s, "F-0000000000c1")
    assert context.aborted == [] and kb.lifts == ["F-0000000000c1"]
    assert [t.tombstone_id for t in reply.tombstones] == ["F-0000000000c1"]
