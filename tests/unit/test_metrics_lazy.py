"""Metrics are made when first needed (``gateway.metrics``, "Made when first needed"): declaring them,
registering collectors and observing while the registry drops load no prometheus_client; the first
read makes every declared metric, its preset children and the collectors, in declaration order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DROPPED = """
import sys
import services.kb.metrics as kb, services.watcher.main as watcher, services.dreaming.records.metrics as dreams
import gateway_http.http_metrics
from gateway.metrics import REGISTRY, observe_rpc, observe_shortage
REGISTRY.drop()
watcher.LIVE_SESSIONS.set_function(lambda: 3)
kb.register_index_sizes(lambda: [])
kb.observe_refresh("walk", 0.5)
kb.observe_search("memory", 0.1)
dreams.observe_outcome("failed")
observe_rpc("Search", "OK", 0.01)
observe_shortage("open-files")
assert "prometheus_client" not in sys.modules, "loaded while dropping"
"""

MADE_AT_READ = """
import sys
import services.kb.metrics as kb, services.watcher.main as watcher
from gateway.metrics import exposition
watcher.LIVE_SESSIONS.set_function(lambda: 3)
kb.register_index_sizes(lambda: [])
assert "prometheus_client" not in sys.modules, "loaded before a read"
text = exposition()[0].decode()
assert 'gateway_knowledge_refreshes_total{mode="walk"} 0.0' in text  # a preset child, before any observation
assert "gateway_watcher_live_sessions 3.0" in text  # the function set before the gauge was made
assert "# TYPE gateway_knowledge_index_bytes gauge" in text
names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
assert names.index("gateway_rpc_duration_seconds") < names.index("gateway_open_files") < names.index("gateway_knowledge_refreshes_total")
"""


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_process_whose_registry_drops_never_loads_prometheus_client() -> None:
    _run(DROPPED)


def test_the_first_read_makes_every_metric_with_its_preset_children_and_collectors_in_order() -> None:
    _run(MADE_AT_READ)
