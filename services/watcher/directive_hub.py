"""Fan-out of directives to the agent's WatchDirectives subscribers."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable

from services.watcher.sessions import Directive

QUEUE_LIMIT = 1000

# What a subscriber's queue yields: a directive, or ``None`` once its agent was removed from the config.
Item = Directive | None


class DirectiveHub:
    """One bounded queue per subscriber; a subscriber that stops reading loses the oldest directives."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[Item]]] = defaultdict(set)

    def subscribe(self, agent_id: str) -> asyncio.Queue[Item]:
        queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers[agent_id].add(queue)
        return queue

    def unsubscribe(self, agent_id: str, queue: asyncio.Queue[Item]) -> None:
        subscribers = self._subscribers.get(agent_id)
        if subscribers is None:
            return
        subscribers.discard(queue)
        if not subscribers:
            del self._subscribers[agent_id]

    def publish(self, directives: list[Directive]) -> None:
        for directive in directives:
            for queue in self._subscribers.get(directive.agent_id, ()):
                _put(queue, directive)

    def close(self, agent_ids: Iterable[str]) -> None:
        """End the streams of agents removed from the config: each of their queues yields ``None`` next."""
        for agent_id in agent_ids:
            for queue in self._subscribers.pop(agent_id, ()):
                _put(queue, None)

    def agents(self) -> frozenset[str]:
        """The agents with a subscriber now."""
        return frozenset(self._subscribers)


def _put(queue: asyncio.Queue[Item], item: Item) -> None:
    if queue.full():
        queue.get_nowait()
    queue.put_nowait(item)
