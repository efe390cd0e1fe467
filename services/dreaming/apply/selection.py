"""Which of the reviewer's proposals a run applies (``maxChangesPerRun``).

- ``maxChangesPerRun: 0`` selects nothing (dreaming is a no-op).
- A proposal the reviewer repeated (same op, file, anchor, text and topic, so
  the same id) counts once.
- Under budget: the first ``maxChangesPerRun`` proposals, in the reviewer's
  order.
- Over budget (MEMORY.md or USER.md was over its soft budget when the run
  began): shrink ops on an over-budget file (removes, and replaces with
  shorter text) are chosen first, and up to ``OVER_BUDGET_EXTRA_SHRINK_OPS``
  more of them than ``maxChangesPerRun`` may be chosen, since removals are the
  way back under budget. The applier still checks every one against the
  bounded-loss cap.

Chosen proposals keep the reviewer's order; the rest are reported as skipped
with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from services.dreaming.model.values import DURABLE, Proposal

OVER_BUDGET_EXTRA_SHRINK_OPS = 10


def _is_shrink(p: Proposal, over: Collection[str]) -> bool:
    return p.tier == DURABLE and p.file in over and p.shrinks


def select(
    proposals: Sequence[Proposal], max_changes: int, over_budget_files: Collection[str]
) -> tuple[list[Proposal], list[tuple[Proposal, str]]]:
    """``(chosen, [(left out, why)])`` (module docstring)."""
    unique: list[Proposal] = []
    left: list[tuple[Proposal, str]] = []
    seen: set[str] = set()
    for p in proposals:
        if p.id in seen:
            left.append((p, "the same op was proposed twice in this run"))
            continue
        seen.add(p.id)
        unique.append(p)
    if max_changes <= 0:
        return [], left + [(p, "maxChangesPerRun is 0: dreaming makes no changes") for p in unique]
    if over_budget_files:
        shrink = [p for p in unique if _is_shrink(p, over_budget_files)]
        others = [p for p in unique if not _is_shrink(p, over_budget_files)]
        take = shrink[: max_changes + OVER_BUDGET_EXTRA_SHRINK_OPS]
        room = max(0, max_changes - len(take))
        take += others[:room]
        cap = f"maxChangesPerRun is {max_changes} (over budget: up to {OVER_BUDGET_EXTRA_SHRINK_OPS} more shrink ops)"
    else:
        take = unique[:max_changes]
        cap = f"maxChangesPerRun is {max_changes}"
    chosen_ids = {p.id for p in take}
    chosen = [p for p in unique if p.id in chosen_ids]
    left += [(p, f"not chosen: {cap}") for p in unique if p.id not in chosen_ids]
    return chosen, left
