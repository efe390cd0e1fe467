"""The benches' arithmetic: percentiles, and the long runs' slopes and verdicts (bench/soak.py,
bench/capacity.py). Pure functions, no I/O.

A unit test (tests/unit/test_bench_long_run.py) fails when a figure or a PASS/FAIL decision is
computed wrong. Percentiles are nearest-rank, everywhere in the benches.

How a long run's goal is judged (the docs' capacity page says the same):

- **Growth** of a series (RSS, open files, threads) over a run is its Theil-Sen slope (the
  median of the slopes between every two samples taken after the warm-up) times the time they
  span. A transient (a burst of sockets while the machine stalls, one high RSS sample before a
  collection) moves the median little, where it would tilt a least-squares line; a steady rise
  moves it fully. The difference between the last and the first sample is shown beside it.
- **Flat** (open files, threads): a growth of at most ``max(FLAT_ABS, FLAT_REL x median)``.
- **p99 stable**: the p99 of the requests of the last window (5 minutes, or half the measured
  span when that is shorter) at most ``P99_RATIO`` times the p99 of the first window after the
  warm-up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

RSS_GROWTH_MB = 10.0
FLAT_ABS = 8.0  # open files or threads: a few sockets or worker threads come and go
FLAT_REL = 0.05
WAL_REST_MB = 8.0
P99_RATIO = 1.5
P99_WINDOW_S = 300.0
SETTLE_WINDOW_S = 5.0
SETTLE_SHARE = 0.05  # the six processes together below 5% of one core: start-up is over
MB = 1024 * 1024


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (any order), ``q`` in 0..100; nan when empty."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(len(ordered) * q / 100))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.text}"


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (units of y per unit of x); 0.0 for fewer than two
    distinct x values. Raises ValueError when the lengths differ."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    n = len(xs)
    if n < 2:
        return 0.0
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def median_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Theil-Sen slope: the median of ``(y_j - y_i) / (x_j - x_i)`` over every pair with ``x_i < x_j``
    (0.0 when there is no such pair). Raises ValueError when the lengths differ."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(len(xs)) for j in range(i + 1, len(xs)) if xs[j] > xs[i])
    if not slopes:
        return 0.0
    mid = len(slopes) // 2
    return slopes[mid] if len(slopes) % 2 else (slopes[mid - 1] + slopes[mid]) / 2


def fitted_growth(ts: Sequence[float], ys: Sequence[float]) -> float:
    """How much the series grew over the span of ``ts`` by its Theil-Sen line: median slope x span."""
    if len(ts) < 2:
        return 0.0
    return median_slope(ts, ys) * (ts[-1] - ts[0])


def median(values: Sequence[float]) -> float:
    """The nearest-rank median (nan for no values)."""
    return percentile(sorted(values), 50)


def growth_verdict(name: str, ts: Sequence[float], ys_mb: Sequence[float], limit_mb: float = RSS_GROWTH_MB) -> Verdict:
    """RSS of one process (MB, sampled at ``ts`` seconds): PASS when its fitted growth is at most
    ``limit_mb`` (FAIL with no samples: nothing was shown)."""
    if not ys_mb:
        return Verdict(False, f"{name} RSS growth: no samples")
    grown = fitted_growth(ts, ys_mb)
    span_min = (ts[-1] - ts[0]) / 60 if len(ts) > 1 else 0.0
    per_hour = grown / span_min * 60 if span_min > 0 else 0.0
    delta = ys_mb[-1] - ys_mb[0]
    return Verdict(
        grown <= limit_mb,
        f"{name} RSS growth <= {limit_mb:g} MB over the run: {grown:+.1f} MB fitted over {span_min:.1f} min "
        f"({per_hour:+.0f} MB/h; first {ys_mb[0]:.1f} -> last {ys_mb[-1]:.1f} MB, {delta:+.1f})",
    )


def flat_limit(ys: Sequence[float]) -> float:
    """The growth a series of open files or threads may show and still count as flat."""
    return max(FLAT_ABS, FLAT_REL * median(ys)) if ys else FLAT_ABS


def flat_verdict(name: str, what: str, ts: Sequence[float], ys: Sequence[float]) -> Verdict:
    """Open files or threads of one process: PASS when the fitted growth is within ``flat_limit``."""
    if not ys:
        return Verdict(False, f"{name} {what} flat: no samples")
    grown = fitted_growth(ts, ys)
    limit = flat_limit(ys)
    return Verdict(
        grown <= limit,
        f"{name} {what} flat (growth <= {limit:.0f}): {grown:+.1f} fitted; first {ys[0]:.0f}, last {ys[-1]:.0f}, "
        f"max {max(ys):.0f}",
    )


def windows(start: float, end: float, window_s: float = P99_WINDOW_S) -> tuple[tuple[float, float], tuple[float, float]]:
    """The first and last window of ``[start, end]``: ``window_s`` long, or half the span when that is
    shorter (so the two never overlap)."""
    length = min(window_s, max(0.0, end - start) / 2)
    return (start, start + length), (end - length, end)


def in_window(points: Sequence[tuple[float, float]], window: tuple[float, float]) -> list[float]:
    """The values of the ``(t, value)`` points with ``window[0] <= t <= window[1]``, ascending."""
    lo, hi = window
    return sorted(v for t, v in points if lo <= t <= hi)


def p99_verdict(points: Sequence[tuple[float, float]], start: float, end: float,
                ratio: float = P99_RATIO, window_s: float = P99_WINDOW_S) -> Verdict:
    """``points``: ``(t, latency ms)`` of every request. PASS when the last window's p99 is at most
    ``ratio`` times the first window's (both windows inside ``[start, end]``)."""
    first, last = windows(start, end, window_s)
    a, b = in_window(points, first), in_window(points, last)
    minutes = (first[1] - first[0]) / 60
    if not a or not b:
        return Verdict(False, f"p99 of the last {minutes:.1f} min within {ratio:g}x the first: too few requests "
                              f"({len(a)} and {len(b)})")  # fmt: skip
    p_first, p_last = percentile(a, 99), percentile(b, 99)
    return Verdict(
        p_last <= ratio * p_first,
        f"p99 of the last {minutes:.1f} min within {ratio:g}x the first {minutes:.1f} min after the warm-up: "
        f"{p_last:.1f} ms vs {p_first:.1f} ms ({p_last / p_first:.2f}x; {len(b):,} and {len(a):,} requests)"
        if p_first > 0 else f"p99 first window is 0 ms ({len(a)} requests)",
    )


def wal_verdict(wal_bytes: dict[str, int], limit_mb: float = WAL_REST_MB, when: str = "at rest") -> Verdict:
    """Every SQLite ``-wal`` file (path -> bytes; a missing WAL counts 0) at most ``limit_mb``."""
    if not wal_bytes:
        return Verdict(True, f"each WAL <= {limit_mb:g} MB {when}: no WAL files")
    worst = max(wal_bytes, key=lambda p: wal_bytes[p])
    over = sum(1 for v in wal_bytes.values() if v > limit_mb * MB)
    total = sum(wal_bytes.values())
    return Verdict(
        over == 0,
        f"each WAL <= {limit_mb:g} MB {when}: largest {wal_bytes[worst] / MB:.1f} MB ({worst}); {over} of "
        f"{len(wal_bytes)} over; {total / MB:.1f} MB in all",
    )


def zero_verdict(what: str, count: int, detail: str = "") -> Verdict:
    """PASS when ``count`` is 0."""
    return Verdict(count == 0, f"0 {what}: {count:,}{f' ({detail})' if detail else ''}")


def settled(points: Sequence[tuple[float, float]], window_s: float = SETTLE_WINDOW_S, share: float = SETTLE_SHARE) -> bool:
    """``points``: ``(t, CPU seconds used so far)``, oldest first. True when they span at least
    ``window_s`` and the CPU used over the last ``window_s`` is at most ``share`` of one core."""
    if not points or points[-1][0] - points[0][0] < window_s:
        return False
    t_end, cpu_end = points[-1]
    start = [p for p in points if p[0] <= t_end - window_s][-1]
    return (cpu_end - start[1]) / (t_end - start[0]) <= share


def per_agent_growth(agents: Sequence[int], values: Sequence[float]) -> list[float]:
    """The growth per added agent between consecutive fleet sizes: ``(v[i+1]-v[i]) / (n[i+1]-n[i])``
    (nan where a value is nan or two sizes are equal). One fewer than the sizes."""
    if len(agents) != len(values):
        raise ValueError(f"{len(agents)} sizes for {len(values)} values")
    out = []
    for (n0, v0), (n1, v1) in zip(zip(agents, values, strict=True), zip(agents[1:], values[1:], strict=True), strict=False):
        if n1 == n0 or math.isnan(v0) or math.isnan(v1):
            out.append(float("nan"))
        else:
            out.append((v1 - v0) / (n1 - n0))
    return out


def interval_summary(latencies_ms: Sequence[float]) -> tuple[float, float]:
    """p50 and p99 of one interval's latencies (nan, nan when there were none)."""
    xs = sorted(latencies_ms)
    return percentile(xs, 50), percentile(xs, 99)
