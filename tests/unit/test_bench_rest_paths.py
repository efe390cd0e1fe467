"""bench/rest_paths.py: the read path's table puts each transport's suite beside its floor, and its
verdicts say when the floor itself is above the goal."""

from __future__ import annotations

from bench_modules import bench

rest_paths = bench("rest_paths")


def case(transport: str, pair: str, method: str, clients: int, p50_ms: float, cpu_us: float) -> object:
    return rest_paths.PathCase(transport, pair, method, clients, 1000.0, p50_ms, 2 * p50_ms, cpu_us, 0)


def test_each_transport_is_a_suite_line_and_a_floor_line_with_its_verdicts() -> None:
    figures = [
        case("unix", "suite", "GET", 1, 0.35, 380.0), case("unix", "floor", "GET", 1, 0.30, 350.0),
        case("unix", "suite", "GET", 32, 9.0, 300.0), case("unix", "suite", "PUT", 32, 40.0, 900.0),
        case("tcp", "suite", "GET", 1, 0.70, 740.0), case("tcp", "floor", "GET", 1, 0.72, 730.0),
    ]
    markdown, verdicts = rest_paths.paths_markdown(figures)
    rows = [line for line in markdown.splitlines() if line.startswith(("| unix", "| tcp"))]
    assert [row.split(" | ")[:2] for row in rows] == [["| unix", "REST shim + file API"], ["| unix", "floor: bare shim + bare gRPC"],
                                                       ["| tcp", "REST shim + file API"], ["| tcp", "floor: bare shim + bare gRPC"]]
    assert "| 0.35 | 380 | 1,000 | 18.00 | 300 | 1,000 | 80.00 | 0 |" in rows[0]
    assert rows[1].endswith("| n/a | n/a | 0 |")  # the floor answers GET only
    assert verdicts[0].startswith("PASS unix: GET c1 p50 <= 0.4 ms")
    assert verdicts[2].startswith("FAIL tcp: GET c1 p50") and verdicts[2].endswith("(the floor itself is above the goal)")
