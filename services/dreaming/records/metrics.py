"""Dreaming's Prometheus metrics (gateway.metrics has the registry and the endpoint).

A run's ``outcome`` is one of a closed set: ``applied`` (an op was applied), ``proposed``,
``skipped`` (the run changed nothing, or the scheduler skipped the night), ``failed``
(an error, or the run was interrupted) and ``aborted_cas`` (a memory file changed under
the run, so the commit left it alone: it wins over the others, as it is the one to alert on).

An op's skip reason is a sentence for people (it quotes budgets, names files); the label
is the code of its fixed opening words (``REASONS``), ``other`` for any sentence the table
does not know. A test checks that every sentence the applier can raise has a code.
"""

from __future__ import annotations

from gateway.metrics import REGISTRY, Counter, Histogram
from services.dreaming.model.values import RunReport

OUTCOMES = ("applied", "proposed", "skipped", "failed", "aborted_cas")
CAS_ABORT = "aborted: "  # commit._abort: the file changed between the read and the write

# Opening words of a skip reason → its label (applier._Skip, selection, commit, passes, recall).
REASONS: tuple[tuple[str, str], ...] = (
    (CAS_ABORT, "aborted_cas"),
    ("the anchor occurs", "anchor_ambiguous"),
    ("the anchor was not found", "anchor_missing"),
    ("the anchor is in a pinned section", "pinned_section"),
    ("this op would leave lines of a pinned section", "pinned_section"),
    ("bounded loss", "bounded_loss"),
    ("this op would leave the file empty", "would_empty_file"),
    ("this op would take", "over_soft_budget"),
    ("over budget", "over_budget"),
    ("already in", "duplicate"),
    ("the same op was proposed twice", "duplicate"),
    ("maxChangesPerRun", "max_changes"),
    ("episodic ops need", "write_routing_off"),
    ("an episodic op must be", "bad_episodic_op"),
    ("not moved", "not_moved"),
    ("not written", "not_written"),
    ("secret: ", "secret"),  # gateway.secrets_guard.skip_reason: the secret guard
    ("forgotten: ", "forgotten"),  # gateway.forget_guard.skip_reason: a tombstone, or a forget's marker
)
REASON_CODES = ("none", "restored", "other", *dict.fromkeys(code for _, code in REASONS))

RUNS = Counter(
    "gateway_dream_runs_total", "Dreaming runs, by outcome.", ("outcome",), registry=REGISTRY,
    children=[(outcome,) for outcome in OUTCOMES],
)
OPS = Counter(
    "gateway_dream_ops_total", "Ops of dreaming runs applied or skipped, by result and reason code.", ("result", "reason"), registry=REGISTRY
)
REVIEWER_SECONDS = Histogram(
    "gateway_dream_reviewer_duration_seconds", "Time the reviewer command took in a run.",
    buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf")), registry=REGISTRY,
)


def reason_code(reason: str) -> str:
    """The label of a skip ``reason`` (module docstring); ``other`` when the table has none."""
    if reason.startswith("'") and " is not a memory file" in reason:  # f"{p.file!r} is not a memory file …"
        return "not_memory_file"
    for opening, code in REASONS:
        if reason.startswith(opening):
            return code
    return "other"


def run_outcome(report: RunReport) -> str:
    """The ``outcome`` label of a finished run (module docstring)."""
    if any(r.status == "skipped" and r.reason.startswith(CAS_ABORT) for r in report.ops):
        return "aborted_cas"
    return {"applied": "applied", "proposed": "proposed", "nothing": "skipped", "skipped": "skipped"}.get(report.status, "failed")


def observe_run(report: RunReport) -> None:
    """Count a finished run, its applied and skipped ops, and its reviewer's time."""
    RUNS.child(run_outcome(report)).inc()
    for r in report.ops:
        if r.status == "applied":
            OPS.labels("applied", "none").inc()
        elif r.status == "restored":  # applied, then put back by the recall check
            OPS.labels("skipped", "restored").inc()
        elif r.status == "skipped":
            OPS.labels("skipped", reason_code(r.reason)).inc()
    if report.reviewer is not None:
        REVIEWER_SECONDS.observe(report.reviewer.seconds)


def observe_outcome(outcome: str) -> None:
    """Count a run that never produced a report (the scheduler skipped the night, or the run raised)."""
    RUNS.child(outcome).inc()


# The vault's weekly reflection (docs/concepts/vault.md "Weekly reflection"): one run per vault.
REFLECTION_STATUSES = ("ok", "noop", "busy", "failed")
# Why a merge was refused: the KB's guard, read from the opening words of its reason (REFUSAL_WORDS).
REFLECTION_GUARDS = ("changed", "contradiction", "drop_share", "recall", "secret", "other")
REFUSAL_WORDS: tuple[tuple[str, str], ...] = (  # first match wins: a recall refusal names the dropped line it missed
    ("contradict", "contradiction"),
    ("recall", "recall"),
    ("probe", "recall"),
    ("secret", "secret"),
    ("drop", "drop_share"),
    ("share", "drop_share"),
    ("changed", "changed"),
)
REFLECTION_RUNS = Counter(
    "gateway_vault_reflection_runs_total", "Vault reflection runs, by status.", ("status",), registry=REGISTRY,
    children=[(status,) for status in REFLECTION_STATUSES],
)
REFLECTION_MERGES = Counter(
    "gateway_vault_reflection_merges_total", "Merges of vault reflection runs, applied (merged) or proposed.",
    ("result",), registry=REGISTRY, children=[("merged",), ("proposed",)],
)
REFLECTION_REFUSALS = Counter(
    "gateway_vault_reflection_refusals_total", "Merges of vault reflection runs a guard refused, by guard.",
    ("guard",), registry=REGISTRY, children=[(guard,) for guard in REFLECTION_GUARDS],
)
REFLECTION_REVIEWER_CALLS = Counter(
    "gateway_vault_reflection_reviewer_calls_total",
    "Reviewer calls of vault reflection runs (one per cluster), by whether a reply was read.",
    ("result",), registry=REGISTRY, children=[("ok",), ("failed",)],
)


def refusal_guard(reason: str, *, changed: bool = False) -> str:
    """The ``guard`` label of a refused merge (a note changed since the plan: ``changed``)."""
    if changed:
        return "changed"
    low = reason.lower()
    return next((code for words, code in REFUSAL_WORDS if words in low), "other")


def observe_reflection(status: str, *, merged: int = 0, proposed: int = 0, refused: tuple[str, ...] = (),
                       calls_ok: int = 0, calls_failed: int = 0) -> None:
    """Count one finished reflection run: its status, merges, refusals (their guard labels) and reviewer calls."""
    REFLECTION_RUNS.child(status if status in REFLECTION_STATUSES else "failed").inc()
    if merged:
        REFLECTION_MERGES.child("merged").inc(merged)
    if proposed:
        REFLECTION_MERGES.child("proposed").inc(proposed)
    for guard in refused:
        REFLECTION_REFUSALS.child(guard if guard in REFLECTION_GUARDS else "other").inc()
    if calls_ok:
        REFLECTION_REVIEWER_CALLS.child("ok").inc(calls_ok)
    if calls_failed:
        REFLECTION_REVIEWER_CALLS.child("failed").inc(calls_failed)
