"""The watcher's reads of the dreaming service for the console's list (ListAgents).

The summaries of every agent not asked for in the last ``TTL_S`` are asked in one
``GetDreamSummaries`` call with the internal token (``BATCH`` ids a call at most, the
dreaming service's bound), and kept for ``TTL_S``: a console polling every few seconds
costs the dreaming service one call per refresh at most. An agent the dreaming service does
not answer for (the call fails, or its config does not know the agent) gets a summary with
``known`` false and the reason; the others are unaffected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import grpc

from gateway.auth import INTERNAL_TOKEN_HEADER
from gateway.channels import aio_channel
from gateway.v1 import dreaming_pb2, dreaming_pb2_grpc, watcher_pb2

BATCH = 1000  # services.dreaming.servicer.MAX_SUMMARY_IDS
TTL_S = 2.0
SUMMARIES_DEADLINE_S = 5.0  # a first call reads every agent's audit.jsonl; later ones are kept digests


def summary_pb(status: dreaming_pb2.DreamStatus) -> watcher_pb2.DreamSummary:
    """The console's summary of one agent's status, as GetDreamSummaries (or GetDreamStatus) gives it."""
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
        self, address: str, internal_token: str, *, ttl_s: float = TTL_S, batch: int = BATCH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._address = address
        self._metadata = ((INTERNAL_TOKEN_HEADER, internal_token),)
        self._ttl_s = ttl_s
        self._batch = batch
        self._clock = clock
        self._channel: grpc.aio.Channel | None = None
        self._kept: dict[str, tuple[float, watcher_pb2.DreamSummary]] = {}

    async def summaries(self, agent_ids: Iterable[str]) -> dict[str, watcher_pb2.DreamSummary]:
        """The summary of each of ``agent_ids``; never raises for a dreaming service that fails."""
        now = self._clock()
        wanted = list(dict.fromkeys(agent_ids))
        fresh = {a: kept[1] for a in wanted if (kept := self._kept.get(a)) is not None and now - kept[0] < self._ttl_s}
        missing = [a for a in wanted if a not in fresh]
        chunks = [missing[i : i + self._batch] for i in range(0, len(missing), self._batch)]
        for answers in await asyncio.gather(*(self._ask(chunk) for chunk in chunks)):
            for agent_id, summary in answers.items():
                self._kept[agent_id] = (now, summary)
                fresh[agent_id] = summary
        if len(self._kept) > 2 * len(wanted) + 64:  # agents removed from the config
            self._kept = {a: self._kept[a] for a in wanted}
        return fresh

    async def _ask(self, agent_ids: list[str]) -> dict[str, watcher_pb2.DreamSummary]:
        """One GetDreamSummaries call: a summary for each of ``agent_ids``."""
        if self._channel is None:
            self._channel = aio_channel(self._address)
        stub = dreaming_pb2_grpc.DreamingStub(self._channel)
        try:
            reply = await stub.GetDreamSummaries(
                dreaming_pb2.GetDreamSummariesRequest(agent_ids=agent_ids), timeout=SUMMARIES_DEADLINE_S, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as err:
            failed = unknown(f"the dreaming service answered {err.code().name}: {err.details() or ''}".rstrip(": "))
            return dict.fromkeys(agent_ids, failed)
        out = {a: unknown(f"the dreaming service has no status for it: {why}") for a, why in reply.unknown.items()}
        out.update((s.agent_id, summary_pb(s)) for s in reply.statuses)
        silent = unknown("the dreaming service gave no status for it")
        return {a: out.get(a, silent) for a in agent_ids}

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
