"""The process's prometheus_client registry, made when ``gateway.metrics`` first needs it.

Imported only then (it imports prometheus_client): see ``gateway.metrics``, "Made when first needed".
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.metrics_core import Metric

disable_created_metrics()  # the *_created series double a scrape and say nothing an operator alerts on


class _Applying(CollectorRegistry):
    """What requests queued (``gateway.metrics.observe_later``) is applied before every read."""

    def collect(self) -> Iterator[Metric]:
        from gateway.metrics import apply_pending

        apply_pending()
        yield from super().collect()


def make_registry() -> CollectorRegistry:
    """An empty registry that applies the queued observations before every read."""
    return _Applying(auto_describe=True)
