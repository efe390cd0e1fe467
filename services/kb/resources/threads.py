"""Waiting on a worker thread from asyncio without letting a cancellation cut the wait short."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

T = TypeVar("T")


async def until_done(work: asyncio.Future[T]) -> T:
    """``work``'s result. When the awaiting task is cancelled (an RPC's deadline, its caller gone),
    the cancellation goes on only once ``work`` has finished: a worker thread cannot be stopped,
    and the lock of the writer connection it uses (a vault's, an archive's) must stay held as
    long as it does (else the next use of that connection would run beside it)."""
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        while not work.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([work])
        if not work.cancelled():
            work.exception()  # retrieved: its error is the cancelled caller's no more
        raise
