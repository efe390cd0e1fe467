"""The deadline of the call being served, for code that waits on something of its own (a pool, a server).

``gateway.rpc.unary`` sets it from the gRPC deadline the caller sent (``start``); code running for the call,
in its task or in a worker thread started with the task's context (``contextvars.copy_context``), bounds its
own waits by it (``within``). No deadline sent: the code's own bound stands.
"""

from __future__ import annotations

import contextvars
import time

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("gateway_call_deadline", default=None)


def start(remaining_s: float | None) -> contextvars.Token[float | None]:
    """The current call has ``remaining_s`` seconds left (None: no deadline); a token for ``reset``."""
    return _deadline.set(None if remaining_s is None else time.monotonic() + remaining_s)


def reset(token: contextvars.Token[float | None]) -> None:
    _deadline.reset(token)


def within(bound_s: float) -> float:
    """``bound_s``, or less when the current call's deadline comes sooner (never below 0)."""
    deadline = _deadline.get()
    if deadline is None:
        return bound_s
    return max(0.0, min(bound_s, deadline - time.monotonic()))
