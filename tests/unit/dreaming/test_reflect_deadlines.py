"""The deadlines dreaming gives the KB's reflection calls (services/dreaming/peer_client.py): a plan of a
10,000-note vault took 50 to over 120 s on two busy cores (bench/vault_reflection.py), and a plan cut
short by its deadline failed the run while the KB kept the claim; the plan's deadline leaves room for a
vault several times that size, the merges keep theirs."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.v1 import kb_pb2
from services.dreaming import peer_client


class Stub:
    def __init__(self) -> None:
        self.timeouts: dict[str, float] = {}

    def __getattr__(self, method: str) -> Any:
        async def call(request: object, *, timeout: float, metadata: object) -> Any:
            self.timeouts[method] = timeout
            return kb_pb2.VaultReflectionPlan() if method == "PlanVaultReflection" else kb_pb2.MergeVaultNotesResponse()
        return call


def test_a_plan_gets_ten_minutes_or_more_and_a_merge_its_own_deadline() -> None:
    async def calls() -> dict[str, float]:
        kb = peer_client.KbIndex("127.0.0.1:1", "token")
        stub = Stub()
        kb._stub = stub  # type: ignore[assignment]
        await kb.plan_reflection(kb_pb2.PlanVaultReflectionRequest(project="team", run_id="R-1"))
        await kb.merge_notes(kb_pb2.MergeVaultNotesRequest(project="team", run_id="R-1"))
        await kb._channel.close()
        return stub.timeouts

    timeouts = asyncio.run(calls())
    assert timeouts["PlanVaultReflection"] >= 600.0
    assert timeouts["MergeVaultNotes"] == peer_client.REFLECT_DEADLINE_S < timeouts["PlanVaultReflection"]
