"""bench/footprint.py: its /proc readings, and the lines it says against the goals of
docs/benchmarks/footprint.md from figures given by hand."""

from __future__ import annotations

import os

from bench_modules import bench

footprint = bench("footprint")
footprint_report = bench("footprint_report")
rest_cases = bench("rest_cases")


def _case(target: str, method: str, conns: int, rps: float, p50: float, by_process: dict[str, float]) -> object:
    result = rest_cases.Result(target, method, conns, rps, p50, p50 * 3, int(rps * 5), 0)
    path = sum(v for n, v in by_process.items() if n == "file_api" or n.startswith("http"))
    measured = footprint_report.Measured(result, path, sum(by_process.values()), by_process)
    return footprint_report.Case(target, method, conns, measured)


def test_rss_and_pss_of_a_live_process_and_none_for_a_gone_one() -> None:
    rss, pss = footprint.rss_pss(os.getpid())
    assert 0 < pss <= rss
    assert footprint.rss_pss(2**22 + 1) is None


def test_the_report_says_each_goal_and_sums_the_workers_shims() -> None:
    at_rest = {"launcher": (18.0, 12.0), "file_api": (45.0, 30.0), "http": (49.0, 33.0), "http-2": (49.0, 33.0)}
    after = {name: (rss * 1.1, pss) for name, (rss, pss) in at_rest.items()}
    cases = [_case("suite", "GET", 1, 2500, 0.38, {"http": 200.0, "file_api": 150.0, "watcher": 5.0}),
             _case("floor (bare shim + bare gRPC)", "GET", 1, 3000, 0.30, {"bare_shim": 150.0, "bare": 100.0})]
    workers = [_case("1 worker", "GET", 32, 3000, 9.0, {"http": 200.0, "file_api": 150.0}),
               _case("2 workers", "GET", 32, 2900, 9.5, {"http": 110.0, "http-2": 110.0, "file_api": 150.0})]
    markdown, lines = footprint_report.report({"suite": "test"}, at_rest, after, {"http": 0.1, "file_api": 0.1}, 60,
                                              cases, workers, False)
    assert lines[:5] == [
        "PASS the suite's RSS at rest <= 250 MiB: 161.0 MiB (4 processes; PSS 108.0 MiB)",
        "PASS no service over 50 MiB RSS at rest: the largest, http, 49.0 MiB",
        "PASS the launcher under 20 MiB RSS: 18.0 MiB",
        "PASS RSS after this run's load within 1.3x of at rest: 177.1 MiB (1.10x; the goal is stated after the soak's 20 minutes)",
        "PASS CPU at rest <= 0.3% of a core, all processes over 60 s: 0.20%",
    ]
    assert "PASS GET c1 p50 <= 0.4 ms: 0.38 ms" in lines
    assert "PASS CPU per GET (c1; the shim and the file API) <= 400 µs: 350 µs" in lines
    assert "PASS 2 workers keep GET c32 throughput (>= 0.95x of 1 worker): 2,900 vs 3,000 req/s (0.97x)" in lines
    assert "| 2 workers | 32 | 2,900 | 9.50 | 28.50 | 0 | 220 | 150 | 370 |" in markdown
