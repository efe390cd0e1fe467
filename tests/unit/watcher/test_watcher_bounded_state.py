"""What the watcher keeps stays bounded: sessions past their retention, sessions over the per-agent
cap, and everything of an agent removed from the config are forgotten (registry, recomposer, the
directive hub's streams); the pass over every agent at start waits behind changes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.config import load_config
from gateway.home import ensure_home
from services.watcher.directive_hub import DirectiveHub
from services.watcher.recomposer import BACKLOG_STEP, Recomposer
from services.watcher.restart_policy import ChangeClass, DirectiveKind
from services.watcher.sessions import MAX_SESSIONS_PER_AGENT, RETENTION_MS, Directive, SessionRegistry

HOUR_MS = 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def test_a_session_with_no_call_for_its_retention_is_forgotten() -> None:
    clock = Clock()
    registry = SessionRegistry(clock=clock)
    registry.register("alfred", "crashed", busy=True)  # its runtime died without EndSession
    registry.register("alfred", "alive", busy=False)
    clock.now += RETENTION_MS - HOUR_MS
    registry.report("alfred", "alive", busy=True)  # a call keeps a session
    clock.now += HOUR_MS
    assert registry.forget_stale() == 1
    assert [r.session_id for r in registry.live("alfred")] == ["alive"]
    clock.now += RETENTION_MS
    assert registry.forget_stale() == 1
    assert registry.live("alfred") == [] and registry.count() == 0
    assert registry.last_activity("alfred") > 0  # the agent's last activity stays (dreaming's quiet window)


def test_an_agent_keeps_at_most_its_cap_of_sessions_the_least_recently_active_goes() -> None:
    clock = Clock()
    registry = SessionRegistry(clock=clock)
    for n in range(MAX_SESSIONS_PER_AGENT):
        clock.now += 1
        registry.register("alfred", f"s{n}", busy=False)
    clock.now += 1
    registry.report("alfred", "s0", busy=True)  # s0 is recent again: s1 is now the least recently active
    clock.now += 1
    registry.register("alfred", "newest", busy=False)
    live = {r.session_id for r in registry.live("alfred")}
    assert len(live) == MAX_SESSIONS_PER_AGENT
    assert "s1" not in live and {"s0", "s2", "newest"} <= live


def test_ended_sessions_leave_no_empty_entries_and_removed_agents_leave_nothing() -> None:
    registry = SessionRegistry(clock=Clock())
    registry.register("alfred", "a", busy=False)
    registry.register("bob", "b", busy=True)
    registry.end("alfred", "a")
    assert registry.agents() == {"alfred", "bob"}  # alfred's last activity, bob's session
    registry.forget_agents(["bob"])
    assert registry.agents() == {"alfred"} and registry.live("bob") == [] and registry.last_activity("bob") == 0


def test_the_hub_ends_the_streams_of_a_removed_agent() -> None:
    async def main() -> None:
        hub = DirectiveHub()
        bobs = [hub.subscribe("bob") for _ in range(2)]
        alfreds = hub.subscribe("alfred")
        hub.close(["bob"])
        assert [queue.get_nowait() for queue in bobs] == [None, None]
        assert hub.agents() == {"alfred"}
        hub.unsubscribe("bob", bobs[0])  # the stream's own cleanup afterwards is harmless
        directive = Directive("alfred", "s", DirectiveKind.RESTART_NOW, ChangeClass.OTHER, (), "", 1)
        hub.publish([directive])
        assert alfreds.get_nowait() == directive

    asyncio.run(main())


def test_the_recomposer_forgets_removed_agents_and_composes_the_start_pass_behind_changes(tmp_path: Path) -> None:
    assert ensure_home(tmp_path) is not None
    config = load_config(tmp_path)
    alfred = config.agents[0]
    alfred.workspace.mkdir(parents=True, exist_ok=True)
    (alfred.workspace / "SOUL.md").write_text("# Soul\n\nplain\n")
    agents = {alfred.id: alfred}
    order: list[str] = []

    async def main() -> None:
        recomposer = Recomposer(lambda: agents, SessionRegistry(clock=Clock()), lambda _d: None)
        one = recomposer._one

        def recorded(agent, files):  # type: ignore[no-untyped-def]
            order.append(f"{agent.id}:{','.join(sorted(files))}")
            return one(agent, files)

        recomposer._one = recorded  # type: ignore[method-assign]
        stop = asyncio.Event()
        # The start pass for many agents (only alfred is configured: the others are skipped
        # unseen), then a change: the change is composed after the first step, not after all.
        recomposer.mark_later([f"gone{n}" for n in range(BACKLOG_STEP * 3)] + [alfred.id])
        recomposer.mark(alfred.id, {"SOUL.md"})
        task = asyncio.create_task(recomposer.run(stop))
        await asyncio.wait_for(recomposer.idle.wait(), 10)
        assert order == [f"{alfred.id}:SOUL.md"]  # once, with its change; the backlog's entry is dropped
        assert recomposer.generation(alfred.id) == 1
        recomposer.forget([alfred.id])
        assert recomposer.agents() == frozenset()
        stop.set()
        await task

    asyncio.run(main())
