"""The process's prometheus_client registry, made when ``gateway.metrics`` first needs it.

Imported only then (it imports prometheus_client): see ``gateway.metrics``, "Made when first needed".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.metrics_core import Metric

disable_created_metrics()  # the *_created series double a scrape and say nothing an operator alerts on


class _Applying(CollectorRegistry):
    """``apply`` (what requests queued: ``gateway.metrics.apply_pending``) runs before every read."""

    def __init__(self, apply: Callable[[], None]) -> None:
        super().__init__(auto_describe=True)
        self._apply = apply

    def collect(self) -> Iterator[Metric]:
        self._apply()
        yield from super().collect()


def make_registry(apply: Callable[[], None]) -> CollectorRegistry:
    """An empty registry that calls ``apply`` before every read."""
    return _Applying(apply)
