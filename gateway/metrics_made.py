"""The process's prometheus_client registry, made when ``gateway.metrics`` first needs it.

Imported only then (it imports prometheus_client): see ``gateway.metrics``, "Made when first needed".
Only the library's core is loaded here (its metrics, registry and samples), not its package
``__init__`` (``gateway.lean_import``), which imports ``prometheus_client.exposition`` and with it
the library's HTTP servers, its push-gateway client and what they import from the standard library
(http.server, wsgiref, urllib.request, email, gzip…: about 2 MiB a process). ``exposition`` is loaded at the first scrape
(``gateway.metrics.exposition``, ``gateway.metrics_port``); docs/operations.md "Memory at rest".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gateway.lean_import import without_init

without_init("prometheus_client")  # a process that imported the whole package keeps it

from prometheus_client.metrics import disable_created_metrics  # noqa: E402  (after without_init)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric  # noqa: E402
from prometheus_client.registry import CollectorRegistry  # noqa: E402

__all__ = ["GaugeMetricFamily", "kind", "make_registry"]

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


def kind(name: str) -> Any:
    """prometheus_client's metric class ``name`` (``Counter``, ``Histogram``, ``Gauge``)."""
    import prometheus_client.metrics as made

    return getattr(made, name)

