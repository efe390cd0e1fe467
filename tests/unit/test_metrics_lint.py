"""The in-test Prometheus linter (``tests/metrics_lint.py``) catches what promtool catches, and the
suite's own metric names pass it. When promtool is installed, it must agree on every sample here."""

from __future__ import annotations

import pytest

# Imported for what importing does: each module registers its process's metrics in the registry.
import gateway_http.http_metrics  # noqa: F401
import services.dreaming.records.metrics
import services.kb.metrics
import services.watcher.main  # noqa: F401
from gateway.metrics import exposition
from metrics_lint import lint, promtool, promtool_problems

BAD = {
    "abbreviated unit": (
        "# HELP gateway_kb_index_bytes Bytes.\n# TYPE gateway_kb_index_bytes gauge\ngateway_kb_index_bytes 1\n",
        "gateway_kb_index_bytes has the abbreviated unit 'kb' in its name",
    ),
    "counter without _total": (
        "# HELP gateway_runs Runs.\n# TYPE gateway_runs counter\ngateway_runs 1\n",
        'gateway_runs is a counter: its name should end in "_total"',
    ),
    "gauge with _total": (
        "# HELP gateway_open_total Open.\n# TYPE gateway_open_total gauge\ngateway_open_total 1\n",
        'gateway_open_total is not a counter: its name should not end in "_total"',
    ),
    "non-base unit": (
        "# HELP gateway_wait_milliseconds Wait.\n# TYPE gateway_wait_milliseconds gauge\ngateway_wait_milliseconds 1\n",
        "gateway_wait_milliseconds uses the unit 'milliseconds': use the base unit 'seconds'",
    ),
    "no help": (
        "# TYPE gateway_sessions gauge\ngateway_sessions 1\n",
        "gateway_sessions has no help text",
    ),
    "camelCase label": (
        '# HELP gateway_sessions Sessions.\n# TYPE gateway_sessions gauge\ngateway_sessions{agentId="a"} 1\n',
        "gateway_sessions has the label 'agentId', not written in snake_case",
    ),
    "type in name": (
        "# HELP gateway_load_gauge Load.\n# TYPE gateway_load_gauge gauge\ngateway_load_gauge 1\n",
        "gateway_load_gauge has the metric type 'gauge' in its name",
    ),
    "le outside a histogram": (
        '# HELP gateway_depth Depth.\n# TYPE gateway_depth gauge\ngateway_depth{le="1"} 1\n',
        'gateway_depth is not a histogram: only histograms have the label "le"',
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_linter_flags_each_rule(case: str) -> None:
    text, problem = BAD[case]
    assert problem in lint(text)
    path = promtool()
    if path is not None:  # the real linter must see a problem too
        status, printed = promtool_problems(path, text)
        assert status != 0 and printed, (case, printed)


def test_every_metric_the_suite_declares_passes_the_rules() -> None:
    text = exposition()[0].decode()
    assert "gateway_knowledge_refreshes_total" in text and "gateway_dream_runs_total" in text
    assert lint(text) == []
    path = promtool()
    if path is not None:
        assert promtool_problems(path, text) == (0, "")
