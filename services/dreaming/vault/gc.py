"""The shared vault's GC in a dreaming run: the last step before the audit (docs/concepts/vault.md "Shared vault").

The KB owns the vault, so the GC runs there (``CollectVault``); dreaming only
asks, from each agent's **scheduled** run in **auto** mode when the agent's
shared KB is on. Agents of one project share a vault, so most of those calls
find the day's GC done already: the KB runs it once per vault per day, for
whichever agent asks first, and answers the others ``already ran today``.
Manual runs, accepts and propose-mode runs never ask (they must not use up the
vault's day, and propose mode writes nothing).

Whatever the KB answers is one note of the run (its report, DREAMS.md,
audit.jsonl), and the run's steps gain ``vault-gc`` before ``audit``. It
never fails the run: a KB that cannot answer is a note too, and the vault's
GC runs at the next agent's or the next night's run. A run cancelled while
the KB works (the service stops) is audited ``interrupted`` with what it did
before, and the cancellation goes on; the KB finishes the GC on its own (its
day is claimed before anything moves, so it never runs twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from gateway.config import AgentConfig
from services.dreaming.model.values import AUTO, INTERRUPTED, SCHEDULE, RunReport

STEP = "vault-gc"


class Vault(Protocol):
    """The KB's side (``peer_client.KbIndex``)."""

    async def collect_vault(self, agent_id: str) -> str:
        """Run the vault's GC for today unless it ran; the KB's one-line answer. Raises when the KB cannot answer."""
        ...


def asks(agent: AgentConfig, report: RunReport) -> bool:
    """Whether this run asks the KB for the vault's GC (module docstring)."""
    return report.trigger == SCHEDULE and report.mode == AUTO and agent.knowledge.shared.enabled


def _with_step(steps: tuple[str, ...]) -> tuple[str, ...]:
    """``steps`` with the GC's step before a closing ``audit``."""
    if steps and steps[-1] == "audit":
        return (*steps[:-1], STEP, "audit")
    return (*steps, STEP)


async def after_run(
    vault: Vault | None, agent: AgentConfig, report: RunReport, interrupted: Callable[[RunReport], object]
) -> RunReport:
    """``report`` with the vault GC's note and step, when this run asks (``asks``); unchanged otherwise.

    ``interrupted`` audits the run when it is cancelled while the KB works; then the
    cancellation goes on. Never raises anything else.
    """
    if vault is None or not asks(agent, report):
        return report
    steps = _with_step(report.steps)
    try:
        note = await vault.collect_vault(agent.id)
    except asyncio.CancelledError:
        interrupted(replace(
            report, status=INTERRUPTED, steps=steps,
            reason="cancelled while the KB ran the shared vault's GC (its caller went away or the service "
                   "stopped); everything above was done and checked",
        ))
        raise
    except Exception as exc:  # noqa: BLE001 - the KB could not answer: the run stands, the vault's GC runs another time
        note = (f"Shared vault GC not run: the KB could not answer ({exc}); it runs at the vault's next "
                "scheduled run.")
    return replace(report, notes=(*report.notes, note), steps=steps)
