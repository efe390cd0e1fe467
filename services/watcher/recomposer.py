"""Recomposition passes: coalesce changes per agent, compose, write, tell sessions.

A change marks its agent dirty and wakes the worker at once. The worker
composes every dirty agent (in one worker thread, off the event loop); what
arrives meanwhile is folded into the next pass, so a burst of writes costs
at most one extra composition and the last one always sees the final
content. CLAUDE.md is rewritten only when its bytes change, and sessions
are told only then.

The pass over every agent at start (``mark_later``) waits behind changes:
it goes ``BACKLOG_STEP`` agents at a time, each step only when no change is
waiting, so a write right after a start with many agents is composed as
soon as the step in hand ends, not after every agent's.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from gateway.config import AgentConfig
from gateway.metrics import REGISTRY, Counter, Histogram
from services.watcher.compose import Composition, compose, write_if_changed
from services.watcher.restart_policy import ChangeClass, classify
from services.watcher.sessions import Directive, SessionRegistry

log = structlog.get_logger()

RECOMPOSITIONS = Counter(
    "gateway_watcher_recompositions_total",
    "Compositions of an agent's CLAUDE.md: written (its bytes changed), unchanged, or failed.",
    ("outcome",), registry=REGISTRY, children=[("written",), ("unchanged",), ("failed",)],
)
COMPOSE_SECONDS = Histogram(
    "gateway_watcher_compose_duration_seconds", "Time one composition took (compose and write).", registry=REGISTRY
)
BACKLOG_STEP = 16  # agents of the start pass composed between two looks for changes


@dataclass(frozen=True)
class PassResult:
    agent_id: str
    written: bool
    changed_files: tuple[str, ...]
    change_class: ChangeClass | None
    generation: int
    problems: tuple[str, ...]


def compose_agent(agent: AgentConfig) -> tuple[bool, tuple[str, ...], Composition | None]:
    """Compose and write the agent's CLAUDE.md. ``(written, problems, composition)``, the composition
    None when the workspace does not exist; never raises for bad files."""
    result = compose(agent.workspace, agent.memory, agent.knowledge.archive.enabled)
    problems = tuple(f.problem for f in result.files if f.problem)
    if not agent.workspace.is_dir():
        return False, (*problems, f"workspace {agent.workspace} does not exist"), None
    return write_if_changed(agent.workspace, result.text), problems, result


class Recomposer:
    def __init__(
        self,
        agents: Callable[[], dict[str, AgentConfig]],
        registry: SessionRegistry,
        publish: Callable[[list[Directive]], None],
        record: Callable[[AgentConfig, Composition], object] | None = None,
    ) -> None:
        self._agents = agents
        self._registry = registry
        self._publish = publish
        self._record = record  # lineage.Lineage.record: each composition written, in this thread
        self._dirty: dict[str, set[str]] = {}
        self._backlog: dict[str, None] = {}  # agents to compose when nothing else waits (ordered set)
        self._wake = asyncio.Event()
        self._generations: dict[str, int] = {}
        self._problems: dict[str, tuple[str, ...]] = {}  # last logged, so each is logged once
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compose")
        self.idle = asyncio.Event()
        self.idle.set()

    def mark(self, agent_id: str, files: set[str] | None = None) -> None:
        """Queue a recomposition of ``agent_id``; ``files`` are the changed names (for the policy)."""
        self._dirty.setdefault(agent_id, set()).update(files or ())
        self.idle.clear()
        self._wake.set()

    def mark_later(self, agent_ids: Iterable[str]) -> None:
        """Queue recompositions that may wait for changes (the pass over every agent at start)."""
        self._backlog.update(dict.fromkeys(agent_ids))
        if self._backlog:
            self.idle.clear()
            self._wake.set()

    def forget(self, agent_ids: Iterable[str]) -> None:
        """Drop what is kept of agents removed from the config."""
        for agent_id in agent_ids:
            self._dirty.pop(agent_id, None)
            self._backlog.pop(agent_id, None)
            self._generations.pop(agent_id, None)
            self._problems.pop(agent_id, None)

    def agents(self) -> frozenset[str]:
        """The agents anything is kept for (queued, or a generation, or logged problems)."""
        return frozenset(self._dirty) | frozenset(self._backlog) | frozenset(self._generations) | frozenset(self._problems)

    def generation(self, agent_id: str) -> int:
        return self._generations.get(agent_id, 0)

    async def run(self, stop: asyncio.Event) -> None:
        """Process dirty agents until ``stop`` is set."""
        loop = asyncio.get_running_loop()
        try:
            while not stop.is_set():
                if not self._dirty and not self._backlog:
                    self.idle.set()
                    waker = asyncio.ensure_future(self._wake.wait())
                    stopper = asyncio.ensure_future(stop.wait())
                    await asyncio.wait({waker, stopper}, return_when=asyncio.FIRST_COMPLETED)
                    waker.cancel()
                    stopper.cancel()
                    self._wake.clear()
                    continue
                batch = self._next_batch()
                agents = self._agents()
                for agent_id, files in batch.items():
                    agent = agents.get(agent_id)
                    if agent is None:
                        continue
                    result = await loop.run_in_executor(self._executor, self._one, agent, files)
                    if result is not None:
                        self._after(result)
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _next_batch(self) -> dict[str, set[str]]:
        """Every change waiting; when there is none, the next step of the backlog."""
        if self._dirty:
            batch, self._dirty = self._dirty, {}
            for agent_id in batch:
                self._backlog.pop(agent_id, None)
            return batch
        step = list(itertools.islice(self._backlog, BACKLOG_STEP))
        for agent_id in step:
            del self._backlog[agent_id]
        return {agent_id: set() for agent_id in step}

    def _one(self, agent: AgentConfig, files: set[str]) -> PassResult | None:
        start = time.perf_counter()
        try:
            written, problems, composition = compose_agent(agent)
        except OSError as exc:
            log.error("compose_failed", agent=agent.id, error=str(exc))
            RECOMPOSITIONS.child("failed").inc()
            return None
        COMPOSE_SECONDS.observe(time.perf_counter() - start)
        if composition is not None and self._record is not None:
            try:
                self._record(agent, composition)
            except OSError as exc:  # lineage is a record of CLAUDE.md, never a reason to hold it back
                log.warning("lineage_not_recorded", agent=agent.id, error=str(exc))
        RECOMPOSITIONS.child("written" if written else "unchanged").inc()
        changed = tuple(sorted(files))
        if written:
            self._generations[agent.id] = self._generations.get(agent.id, 0) + 1
        log.info(
            "composed",
            agent=agent.id,
            written=written,
            changed=list(changed),
            ms=round((time.perf_counter() - start) * 1000, 3),
        )
        if problems != self._problems.get(agent.id, ()):
            for problem in problems:
                log.warning("compose_problem", agent=agent.id, problem=problem)
            if not problems:
                log.info("compose_problems_cleared", agent=agent.id)
            self._problems[agent.id] = problems
        return PassResult(agent.id, written, changed, classify(changed), self.generation(agent.id), problems)

    def _after(self, result: PassResult) -> None:
        if not result.written or result.change_class is None:
            return
        directives = self._registry.apply_change(result.agent_id, result.change_class, result.changed_files, result.generation)
        for d in directives:
            log.info("directive", agent=d.agent_id, session=d.session_id, kind=d.kind.name, change=d.change_class.name)
        self._publish(directives)
