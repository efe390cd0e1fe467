"""The LRU of open archives (services.kb.resources.handles): a cap, least recently used first, never one in use."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from services.kb.resources import handles as handles_module
from services.kb.resources.handles import MIN_CAP, OpenHandles, default_cap, files_needed


class Holder:
    """Stands for an archive: counts how often its connections were closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closes = 0
        self.open = False
        self.closed_in: list[str] = []
        self.released = 0

    def use(self) -> None:
        self.open = True

    def detach(self) -> Callable[[], None]:
        was_open, self.open = self.open, False

        def close() -> None:
            self.closes += was_open
            self.closed_in.append(threading.current_thread().name)

        return close

    def release_caches(self) -> None:
        self.released += 1

    def __repr__(self) -> str:
        return self.name


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def quick_waits(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """``handles.run``'s waits, recorded (their timeouts) and each cut to 10 ms of real time (the tests' clocks are fakes)."""
    timeouts: list[float | None] = []
    real = handles_module.wait_any

    async def quick(events: tuple[asyncio.Event, ...], timeout: float | None = None) -> None:
        timeouts.append(timeout)
        await real(events, None if timeout is None else 0.01)

    monkeypatch.setattr(handles_module, "wait_any", quick)
    return timeouts


def test_the_cap_closes_the_least_recently_used_one() -> None:
    async def scenario() -> tuple[list[int], int]:
        handles = OpenHandles(8)
        holders = [Holder(f"h{i}") for i in range(20)]
        for h in holders[:8]:
            async with handles.use(h):
                h.use()
        async with handles.use(holders[0]):  # h0 is the most recently used now
            assert handles.is_open(holders[0])
        for h in holders[8:]:
            async with handles.use(h):
                h.use()
        await asyncio.sleep(0.05)
        count = handles.open_count()
        handles.close_all()
        return [h.closes for h in holders], count

    closes, count = run(scenario())
    assert count <= 8
    assert closes[1] == 1  # least recently used: closed
    assert sum(closes) >= 20 - 8


def test_one_in_use_is_never_closed_and_a_newcomer_waits_for_a_release() -> None:
    async def scenario() -> tuple[int, bool, bool, int]:
        handles = OpenHandles(MIN_CAP)
        pinned = [Holder(f"p{i}") for i in range(MIN_CAP)]
        release = asyncio.Event()
        entered = 0

        async def hold(h: Holder) -> None:
            nonlocal entered
            async with handles.use(h):
                h.use()
                entered += 1
                await release.wait()

        tasks = [asyncio.ensure_future(hold(h)) for h in pinned]
        while entered < MIN_CAP:
            await asyncio.sleep(0)
        newcomer = Holder("new")
        got_in = asyncio.Event()

        async def come() -> None:
            async with handles.use(newcomer):
                got_in.set()

        waiting = asyncio.ensure_future(come())
        await asyncio.sleep(0.05)
        waited = not got_in.is_set()
        closed_while_pinned = sum(h.closes for h in pinned)
        release.set()
        await asyncio.gather(*tasks, waiting)
        handles.close_all()
        return closed_while_pinned, waited, got_in.is_set(), handles.open_count()

    closed, waited, got_in, left = run(scenario())
    assert (closed, waited, got_in, left) == (0, True, True, 0)


def test_a_holder_in_use_by_two_callers_stays_open_until_both_are_done() -> None:
    async def scenario() -> int:
        handles = OpenHandles(MIN_CAP)
        shared = Holder("shared")
        async with handles.use(shared):
            shared.use()
            async with handles.use(shared):  # a refresh inside a search: the same slot
                assert handles.is_open(shared)
            for i in range(3 * MIN_CAP):
                other = Holder(f"x{i}")
                async with handles.use(other):
                    assert handles.is_open(other)
            await asyncio.sleep(0.05)
            closes = shared.closes
        handles.close_all()
        return closes

    assert run(scenario()) == 0


def test_idle_ones_are_closed_in_the_closer_thread_and_opened_again_on_use() -> None:
    now = [0.0]

    async def scenario() -> tuple[int, int, int, list[str]]:
        handles = OpenHandles(100, clock=lambda: now[0], idle_s=60.0)
        a, b = Holder("a"), Holder("b")
        async with handles.use(a):
            a.use()
        now[0] = 30.0
        async with handles.use(b):
            b.use()
        now[0] = 61.0
        first = await handles.close_idle()  # a: 61 s unused; b: 31 s
        now[0] = 200.0
        async with handles.use(a):  # opened again
            a.use()
        second = await handles.close_idle()  # b only: a was just used
        left = handles.open_count()
        handles.close_all()
        return first, second, left, [a.closed_in[0], b.closed_in[0]]

    first, second, left, threads = run(scenario())
    assert (first, second, left) == (1, 1, 1)  # a, then b; a is open again
    assert threads == ["kb-close_0", "kb-close_0"]  # idle closes run off the event loop



def test_the_caches_of_holders_not_in_use_are_released_every_minute_and_never_of_one_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Archives in steady use are never idle: their page caches are handed back once a minute, and
    the searches' memos and the freed memory with them; one in use at that moment keeps its caches."""
    now = [0.0]
    trims: list[float] = []
    timeouts = quick_waits(monkeypatch)
    monkeypatch.setattr(handles_module, "give_back", lambda: trims.append(now[0]))
    memos: list[float] = []

    async def scenario() -> tuple[int, int, int]:
        handles = OpenHandles(100, clock=lambda: now[0], idle_s=1e9, release_s=60.0,
                              on_release=lambda: memos.append(now[0]))
        busy, quiet = Holder("busy"), Holder("quiet")
        async with handles.use(quiet):
            quiet.use()
        stop = asyncio.Event()
        sweeper = asyncio.ensure_future(handles.run(stop))
        async with handles.use(busy):
            busy.use()
            now[0] = 30.0
            await asyncio.sleep(0.05)
            early = quiet.released  # not a minute yet
            now[0] = 61.0
            await asyncio.sleep(0.05)
        stop.set()
        await sweeper
        handles.close_all()
        return early, quiet.released, busy.released

    early, quiet_released, busy_released = run(scenario())
    assert (early, quiet_released, busy_released) == (0, 1, 0)
    assert trims == [61.0]
    assert memos == [61.0]  # the searches' memos dropped with the page caches
    assert timeouts[0] == 30.0  # run began at 30 s: it first wakes when the release is due, at 60 s


def test_the_sweep_sleeps_while_nothing_is_open_and_wakes_when_the_next_close_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KB at rest, every archive closed, has no timer running: ``run`` waits for an open with no
    timeout; once one is open it wakes when that one's idle close (or a release) is due."""
    now = [0.0]
    timeouts = quick_waits(monkeypatch)
    monkeypatch.setattr(handles_module, "give_back", lambda: None)

    async def scenario() -> tuple[list[float | None], list[float | None], int]:
        handles = OpenHandles(100, clock=lambda: now[0], idle_s=60.0, release_s=600.0)
        stop = asyncio.Event()
        sweeper = asyncio.ensure_future(handles.run(stop))
        await asyncio.sleep(0.1)
        at_rest = list(timeouts)
        now[0] = 1000.0
        a = Holder("a")
        async with handles.use(a):
            a.use()
        await asyncio.sleep(0.02)
        now[0] = 1030.0
        await asyncio.sleep(0.02)
        now[0] = 1061.0  # a: idle for 61 s
        for _ in range(100):
            if handles.open_count() == 0:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        open_left = handles.open_count()
        stop.set()
        await sweeper
        return at_rest, timeouts[len(at_rest):], open_left

    at_rest, after, open_left = run(scenario())
    assert at_rest == [None]  # one wait, for an open: no timer
    assert after[0] == 60.0 and open_left == 0  # woken for a's idle close, then closed it
    assert after[-1] is None  # all closed again: back to waiting for an open

def test_a_lower_cap_and_a_shed_close_down_to_it() -> None:
    async def scenario() -> tuple[int, int, int]:
        handles = OpenHandles(40)
        holders = [Holder(f"h{i}") for i in range(30)]
        for h in holders:
            async with handles.use(h):
                h.use()
        shed = handles.shed()  # three quarters of 30
        await asyncio.sleep(0.05)
        after_shed = handles.open_count()
        handles.cap = 5
        newcomer = Holder("new")
        async with handles.use(newcomer):
            assert handles.is_open(newcomer)
        await asyncio.sleep(0.05)
        left = handles.open_count()
        handles.close_all()
        return shed, after_shed, left

    shed, after_shed, left = run(scenario())
    assert shed == 22 and after_shed <= 22 - 2
    assert left <= 5


def test_the_default_cap_follows_the_open_files_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_cap(256) == (256 - handles_module.RESERVED_FILES) // handles_module.FILES_PER_ARCHIVE
    assert default_cap(64) == MIN_CAP
    assert default_cap(-1) == handles_module.MAX_DEFAULT_CAP
    assert default_cap(10_000_000) == handles_module.MAX_DEFAULT_CAP
    assert files_needed(default_cap(1024)) <= 1024
