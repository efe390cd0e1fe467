"""The watcher's reads of the dreaming service for the console's list (ListAgents).

Each agent's ``GetDreamStatus`` is asked with the internal token, many at a time (at most
``CONCURRENCY`` in flight), and kept for ``TTL_S``: a console polling every few seconds costs
the dreaming service about one status per agent per refresh at most. An agent the dreaming
service does not answer for gets a summary with ``known`` false and the reason; the others
are unaffected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import aio_channel
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, watcher_pb2

CONCURRENCY = 16
TTL_S = 2.0
STATUS_DEADLINE_S = 3.0


def summary_pb(status: dreaming_pb2.DreamStatus) -> watcher_pb2.DreamSummary:
    """The console's summary of one GetDreamStatus answer."""
    last, health = status.last_run, status.health
    return watcher_pb2.DreamSummary(
        known=True, scheduled=status.scheduled, mode=status.mode, next_run_at=status.next_run_at,
        last_run_id=last.run_id, last_run_at=last.finished_at or last.started_at, last_status=last.status,
        last_reason=last.reason, pending_proposals=len(status.pending),
        ops_applied=last.ops_applied, ops_skipped=last.ops_skipped, ops_proposed=last.ops_proposed,
        failures_last_7_days=health.failures_last_7_days, last_failure_at=health.last_failure_at,
        last_failure_reason=health.last_failure_reason, not_promoted=health.not_promoted, promoted=health.promoted,
    )


def unknown(reason: str) -> watcher_pb2.DreamSummary:
    return watcher_pb2.DreamSummary(known=False, reason=reason)


class DreamStatusReader:
    """Dream summaries by agent, from the dreaming service at ``address``."""

    def __init__(
        self, address: str, internal_token: str, *, ttl_s: float = TTL_S, concurrency: int = CONCURRENCY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = address
        self._metadata = ((INTERNAL_TOKEN_HEADER, internal_token),)
        self._ttl_s = ttl_s
        self._clock = clock
        self._limit = asyncio.Semaphore(concurrency)
        self._channel: grpc.aio.Channel | None = None
        self._kept: dict[str, tuple[float, watcher_pb2.DreamSummary]] = {}

    async def summaries(self, agent_ids: Iterable[str]) -> dict[str, watcher_pb2.DreamSummary]:
        """The summary of each of ``agent_ids``; never raises for a dreaming service that fails."""
        now = self._clock()
        wanted = list(agent_ids)
        fresh = {a: kept[1] for a in wanted if (kept := self._kept.get(a)) is not None and now - kept[0] < self._ttl_s}
        missing = [a for a in wanted if a not in fresh]
        answers = await asyncio.gather(*(self._one(a) for a in missing))
        for agent_id, summary in zip(missing, answers, strict=True):
            self._kept[agent_id] = (now, summary)
            fresh[agent_id] = summary
        if len(self._kept) > 2 * len(wanted) + 64:  # agents removed from the config
            self._kept = {a: self._kept[a] for a in wanted}
        return fresh

    async def _one(self, agent_id: str) -> watcher_pb2.DreamSummary:
        if self._channel is None:
            self._channel = aio_channel(self._address)
        stub = dreaming_pb2_grpc.DreamingStub(self._channel)
        async with self._limit:
            try:
                status = await stub.GetDreamStatus(
                    dreaming_pb2.GetDreamStatusRequest(agent_id=agent_id), timeout=STATUS_DEADLINE_S, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as err:
                return unknown(f"the dreaming service answered {err.code().name}: {err.details() or ''}".rstrip(": "))
        return summary_pb(status)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
