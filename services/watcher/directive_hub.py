"""Fan-out of directives to the agent's WatchDirectives subscribers."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from services.watcher.sessions import Directive

QUEUE_LIMIT = 1000


class DirectiveHub:
    """One bounded queue per subscriber; a subscriber that stops reading loses the oldest directives."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[Directive]]] = defaultdict(set)

    def subscribe(self, agent_id: str) -> asyncio.Queue[Directive]:
        queue: asyncio.Queue[Directive] = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers[agent_id].add(queue)
        return queue

    def unsubscribe(self, agent_id: str, queue: asyncio.Queue[Directive]) -> None:
        self._subscribers[agent_id].discard(queue)
        if not self._subscribers[agent_id]:
            del self._subscribers[agent_id]

    def publish(self, directives: list[Directive]) -> None:
        for directive in directives:
            for queue in self._subscribers.get(directive.agent_id, ()):
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(directive)
