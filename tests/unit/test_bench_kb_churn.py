"""bench/kb_churn.py: its command-line parsing and the slopes it fits to the KB's memory trace."""

from __future__ import annotations

import math

import pytest
from bench_modules import bench

kb_churn = bench("kb_churn")


def test_slope_is_per_minute_and_needs_three_points() -> None:
    assert kb_churn.slope([(0.0, 100.0), (1.0, 102.0), (2.0, 104.0)]) == pytest.approx(2.0)
    assert kb_churn.slope([(0.0, 5.0), (1.0, 4.0), (2.0, 3.0), (3.0, 2.0)]) == pytest.approx(-1.0)
    assert math.isnan(kb_churn.slope([(0.0, 1.0), (1.0, 2.0)]))


def _row(t: float, rss: float) -> dict[str, float]:
    return {"t": t, "rss": rss, "anonymous": rss - 40, "heap_arena": 50.0, "heap_used": 45.0, "heap_free": 5.0,
            "heap_mapped": 60.0, "sqlite": 120.0, "py_arenas": 30, "py_blocks": 300_000 + 1000 * t / 60}


def test_figures_fit_every_sample_and_the_top_of_each_minute() -> None:
    # RSS swings by 10 MB within each minute (a release after the top) and its tops climb 1 MB a minute.
    rows = [_row(minute * 60 + s, 200 + minute + (10 if s == 50 else 0)) for minute in range(5) for s in range(0, 60, 10)]
    out = kb_churn.figures(rows)
    assert out["rss_tops"] == pytest.approx(1.0)
    assert out["rss"] == pytest.approx(1.0, abs=0.5)  # the swings bend the fit over every sample a little
    assert out["rest"] == pytest.approx(out["anonymous"])  # glibc's and Python's figures flat here
    assert out["heap_used"] == pytest.approx(0.0)
    assert out["py_blocks"] == pytest.approx(1.0)  # thousands a minute


def test_env_and_fixed_data_options_are_checked() -> None:
    assert kb_churn.parse_env(["b:KB_X=1", "b:KB_Y=a=b", "c:Z="]) == {"b": {"KB_X": "1", "KB_Y": "a=b"}, "c": {"Z": ""}}
    with pytest.raises(SystemExit, match="LABEL:KEY=VALUE"):
        kb_churn.parse_env(["b:KB_X"])
    assert kb_churn.parse_fixed(["b", "c:files", "d:shared"]) == {"b": "all", "c": "files", "d": "shared"}
    with pytest.raises(SystemExit, match="LABEL:files"):
        kb_churn.parse_fixed(["b:notes"])
