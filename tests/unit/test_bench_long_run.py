"""The long-run benches' arithmetic and verdicts (bench/harness/stats.py, bench/soak_report.py,
bench/capacity.py): percentiles, fitted growth, flatness, the p99 windows, the WAL and error
goals, and the growth per added agent. The benches themselves run the suite and are not tests."""

from __future__ import annotations

import math

import pytest
from bench_modules import bench


stats = bench("harness.stats")
MB = stats.MB


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert stats.percentile(values, 50) == 50.0
    assert stats.percentile(values, 99) == 99.0
    assert stats.percentile(values, 100) == 100.0
    assert stats.percentile([7.0], 99) == 7.0
    assert math.isnan(stats.percentile([], 50))
    assert stats.interval_summary([30.0, 10.0, 20.0]) == (20.0, 30.0)


def test_slope_and_fitted_growth() -> None:
    ts = [0.0, 30.0, 60.0, 90.0]
    assert stats.slope(ts, [1 + 2 * t for t in ts]) == pytest.approx(2.0)
    assert stats.slope(ts, [5.0] * 4) == 0.0
    assert stats.slope([3.0], [9.0]) == 0.0
    assert stats.slope([1.0, 1.0], [0.0, 5.0]) == 0.0  # no spread in x: no slope
    assert stats.fitted_growth([0.0, 600.0, 1200.0], [100.0, 103.0, 106.0]) == pytest.approx(6.0)
    with pytest.raises(ValueError):
        stats.slope([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        stats.median_slope([1.0, 2.0], [1.0])


def test_median_slope_ignores_a_transient_and_follows_a_steady_rise() -> None:
    ts = [30.0 * i for i in range(37)]
    sockets = [33.0] * 37
    sockets[-6:-2] = [64.0, 60.0, 62.0, 50.0]  # a burst of connections late in the run, gone again
    assert stats.slope(ts, sockets) * (ts[-1] - ts[0]) > 8  # a least-squares line would call it growth
    assert stats.fitted_growth(ts, sockets) == 0.0
    assert stats.median_slope([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 2.0, 4.0, 6.0, 8.0, 100.0]) == pytest.approx(2.0)
    assert stats.fitted_growth(ts, [1447 + 6 * t / 60 for t in ts]) == pytest.approx(108.0)
    assert stats.median_slope([5.0], [1.0]) == 0.0


def test_rss_growth_verdict_judges_the_fitted_line_not_two_samples() -> None:
    ts = [60.0 + 30 * i for i in range(37)]  # 18 minutes after a warm-up
    rising = [100 + 20 * i / 36 for i in range(37)]  # +20 MB over the run
    assert not stats.growth_verdict("kb", ts, rising).ok
    assert "kb RSS growth <= 10 MB" in stats.growth_verdict("kb", ts, rising).text
    assert stats.growth_verdict("kb", ts, [100 + 5 * i / 36 for i in range(37)]).ok
    # Flat with one high last sample: 11 MB between first and last, little on the fitted line.
    spiky = [100.0] * 36 + [111.0]
    verdict = stats.growth_verdict("http", ts, spiky)
    assert verdict.ok and "+11.0)" in verdict.text
    assert verdict.line().startswith("PASS http RSS growth")
    assert not stats.growth_verdict("kb", [], []).ok  # no samples shows nothing: not a pass


def test_flat_verdict_allows_a_few_files_and_five_percent() -> None:
    ts = [30.0 * i for i in range(20)]
    assert stats.flat_limit([1000.0] * 20) == 50.0
    assert stats.flat_limit([20.0] * 20) == stats.FLAT_ABS
    assert stats.flat_verdict("kb", "open files", ts, [1000.0 + (i % 3) for i in range(20)]).ok
    growing = [183.0 + 6 * i for i in range(20)]  # an agent's files never closed, every sample
    verdict = stats.flat_verdict("kb", "open files", ts, growing)
    assert not verdict.ok and "first 183, last 297" in verdict.text
    assert not stats.flat_verdict("kb", "threads", [], []).ok


def test_p99_windows_and_verdict() -> None:
    assert stats.windows(120.0, 1320.0) == ((120.0, 420.0), (1020.0, 1320.0))
    assert stats.windows(60.0, 180.0) == ((60.0, 120.0), (120.0, 180.0))  # short run: half the span each
    # 2% of each window slow: the p99 (rank 990 of 1,000) is a slow one.
    first = [(130.0 + i * 0.1, 5.0) for i in range(980)] + [(200.0 + i, 10.0) for i in range(20)]
    slow = [(1030.0 + i * 0.1, 5.0) for i in range(980)] + [(1100.0 + i, 16.0) for i in range(20)]
    ok = [(1030.0 + i * 0.1, 5.0) for i in range(980)] + [(1100.0 + i, 14.0) for i in range(20)]
    failing = stats.p99_verdict(first + slow, 120.0, 1320.0)
    assert not failing.ok and "16.0 ms vs 10.0 ms (1.60x" in failing.text
    assert stats.p99_verdict(first + ok, 120.0, 1320.0).ok
    assert not stats.p99_verdict(first, 120.0, 1320.0).ok  # nothing in the last window: not a pass


def test_wal_and_zero_verdicts() -> None:
    small = {"agents/a0000/kb.sqlite": 4 * MB, "shared/kb/global/kb.sqlite": 0}
    assert stats.wal_verdict(small).ok
    big = {**small, "agents/a0001/kb.sqlite": 16 * MB}
    verdict = stats.wal_verdict(big)
    assert not verdict.ok and "largest 16.0 MB (agents/a0001/kb.sqlite); 1 of 3 over" in verdict.text
    assert stats.wal_verdict({"x.sqlite": 8 * MB}).ok  # the limit itself passes
    assert stats.wal_verdict({}).ok
    assert stats.zero_verdict("5xx", 0).ok
    assert stats.zero_verdict("5xx", 3, "search").line() == "FAIL 0 5xx: 3 (search)"


def test_settled_once_the_last_window_is_quiet() -> None:
    busy = [(float(t), 0.5 * t) for t in range(11)]  # half a core, all along
    assert not stats.settled(busy)
    quiet = busy + [(11.0 + t, 5.0 + 0.01 * t) for t in range(1, 7)]  # then 1% of a core for 6 s
    assert stats.settled(quiet)
    assert not stats.settled(quiet[-3:])  # under 5 s of points: not judged yet
    assert not stats.settled([])
    assert stats.settled([(0.0, 1.0), (5.0, 1.25)])  # exactly 5% of a core over 5 s


def test_growth_per_added_agent() -> None:
    assert stats.per_agent_growth([100, 1000, 3000], [100.0, 1090.0, 3290.0]) == pytest.approx([1.1, 1.1])
    nan_in = stats.per_agent_growth([100, 1000, 3000], [1.0, float("nan"), 3.0])
    assert all(math.isnan(g) for g in nan_in)
    assert math.isnan(stats.per_agent_growth([100, 100], [1.0, 2.0])[0])
    assert stats.per_agent_growth([100], [1.0]) == []
    with pytest.raises(ValueError):
        stats.per_agent_growth([1, 2], [1.0])


def _samples(kb_mb_per_sample: float, wal_mb: float) -> list[dict[str, object]]:
    procs = ("launcher", "file_api", "watcher", "kb", "dreaming", "http")
    out: list[dict[str, object]] = []
    for i in range(41):
        t = 30.0 * i
        figures = {p: {"rss_mb": 60.0 + (kb_mb_per_sample * i if p == "kb" else 0), "anon_mb": 30.0, "fds": 30,
                       "threads": 12, "cpu_s": float(i)} for p in procs}  # fmt: skip
        out.append({"t": t, "phase": "warm-up" if t < 120 else "measured", "procs": figures, "load": 1.0,
                    "disk": {"wals": {"agents/a0000/kb.sqlite": int(wal_mb * MB)}}})  # fmt: skip
    out.append({"t": 1260.0, "phase": "rest", "procs": out[-1]["procs"], "load": 1.0,
                "disk": {"wals": {"agents/a0000/kb.sqlite": int(wal_mb * MB)}}})  # fmt: skip
    return out


def test_soak_verdicts_fail_the_growing_process_the_wal_and_errors_in_the_warm_up() -> None:
    report = bench("soak_report")
    traffic = bench("soak_traffic")
    rec = traffic.Recorder(0.0)
    rec.records = [traffic.Record(float(t), "rest:search", 5.0, 200, True) for t in range(0, 1200)]
    clean = {v.text.split(":")[0]: v.ok for v in report.verdicts(_samples(0.0, 2.0), rec, 120.0, 1200.0)}
    assert all(clean.values()), clean
    rec.records.append(traffic.Record(1.0, "rest:search", 3.0, 500, False))  # in the warm-up: still counted
    rec.records.append(traffic.Record(2.0, "check:search", 3.0, 0, False))  # the at-rest check is judged apart
    found = report.verdicts(_samples(0.5, 16.0), rec, 120.0, 1200.0)
    failed = [v.text for v in found if not v.ok]
    assert len(failed) == 4, failed
    assert failed[0].startswith("kb RSS growth <= 10 MB over the run: +18.0 MB")
    assert failed[1].startswith("each WAL <= 8 MB at rest: largest 16.0 MB")
    assert failed[2] == "0 errors (whole run, warm-up included): 1 (1 in the warm-up; 1,201 requests)"
    assert failed[3] == "0 5xx: 1"


def test_capacity_verdicts_and_growth_cells() -> None:
    capacity = bench("capacity")
    ok = capacity.SizeFigures(100, started=True, search_status={200: 100})
    broken = capacity.SizeFigures(1000, started=True, search_status={200: 167, 500: 833})
    never = capacity.SizeFigures(3000, failure="no ready line after 900s\n...")
    lines = [v.line() for v in capacity.verdicts([ok, broken, never])]
    assert lines[0].startswith("PASS 0 searches not answered at 100 agents")
    assert lines[1].startswith("FAIL 0 searches not answered at 1,000 agents (every agent searched): 833 (1,000 searches, 833 of them 5xx")
    assert lines[2] == "FAIL the suite is ready at 3,000 agents: no ready line after 900s"
    assert capacity._growth(6.94e-16, "ms") == "+0 ms"
    assert capacity._growth(1.1 * 1024, "KB") == "+1.13e+03 KB"
    assert capacity._cell(5.0) == "5" and capacity._cell(3.354) == "3.35" and capacity._cell(float("nan")) == "n/a"
