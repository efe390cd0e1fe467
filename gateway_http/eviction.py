"""Which connection the shim closes to make room at its connection cap (docs/concepts/apis.md).

A connection is *waiting* while no request of its own is being handled: from the moment it
opens, or from the end of its last answer, until the headers of its next request are whole.
A connection that sends nothing, one that trickles its headers and an idle keep-alive are all
waiting; one whose request is being handled (its body arriving, the backend called, its answer
being written) is not. At the cap, a new connection closes the connection that has waited
longest; it is refused only when none is waiting.

Oldest first is what keeps eviction from being turned against a prompt client: a connection
is never evicted while a connection older than it waits, so to close one an attacker must open
as many connections as the cap between its opening and its request, which a prompt client
sends with its first packets. A waiting connection keeps the moment it began to wait, whatever
it sends until its headers are whole, so trickling bytes buys it nothing.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)


class WaitingConnections(Generic[C]):
    """The waiting connections of one shim process, longest waiting first.

    Moments must be given in the order they happen (an event loop's clock): each ``wait`` goes
    to the end, so the first entry is always the one that has waited longest, found at once
    however many wait.
    """

    def __init__(self) -> None:
        self._since: dict[C, float] = {}

    def wait(self, connection: C, now: float) -> None:
        """``connection`` waits from ``now`` on; one waiting already keeps its earlier moment."""
        if connection not in self._since:
            self._since[connection] = now

    def done(self, connection: C) -> None:
        """``connection`` no longer waits (its headers are whole, or it is closing); no error if it did not."""
        self._since.pop(connection, None)

    def evict(self) -> C | None:
        """Take out and return the connection that has waited longest (None when none waits)."""
        victim = next(iter(self._since), None)
        if victim is not None:
            del self._since[victim]
        return victim

    def __len__(self) -> int:
        return len(self._since)
