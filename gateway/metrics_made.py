"""The process's prometheus_client registry, made when ``gateway.metrics`` first needs it.

Imported only then (it imports prometheus_client): see ``gateway.metrics``, "Made when first needed".
Only the library's core is loaded here (its metrics, registry and samples), not its package
``__init__`` (``gateway.lean_import``), which imports ``prometheus_client.exposition`` and with it
the library's HTTP servers, its push-gateway client and what they import from the standard library
(http.server, wsgiref, urllib.request, email, gzip…: about 2 MiB a process). ``exposition`` is
loaded at the first scrape that asks for the text format (``encoder_for``); docs/operations.md
"Memory at rest".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from gateway.lean_import import without_init

without_init("prometheus_client")  # a process that imported the whole package keeps it

from prometheus_client.metrics import disable_created_metrics  # noqa: E402  (after without_init)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric  # noqa: E402
from prometheus_client.openmetrics import exposition as openmetrics  # noqa: E402
from prometheus_client.registry import CollectorRegistry  # noqa: E402
from prometheus_client.utils import parse_version  # noqa: E402

__all__ = ["GaugeMetricFamily", "encoder_for", "kind", "make_registry"]

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



def encoder_for(accept: str) -> tuple[Callable[[CollectorRegistry], bytes], str]:
    """The encoder and content type prometheus_client chooses for a scraper's ``Accept`` header
    (``prometheus_client.exposition.choose_encoder``). When its choice is OpenMetrics (Prometheus
    asks for it first), the encoder is the library's ``openmetrics.exposition.generate_latest``,
    chosen here as the library chooses it, so ``prometheus_client.exposition`` (the module of the
    text format, with the library's HTTP servers and what they import: 2.2 MiB) is not loaded; any
    other choice is the library's own. tests/unit/test_metrics_port.py holds the two to the same
    answers."""
    for accepted in (accept or "").split(","):
        parts = accepted.split(";")
        kind = parts[0].strip()
        if kind == "application/openmetrics-text":
            version, escaping = _parameter(parts, "version"), _escaping(parts)
            if not version:
                return partial(openmetrics.generate_latest, escaping=openmetrics.UNDERSCORES, version="1.0.0"), \
                    openmetrics.CONTENT_TYPE_LATEST
            if parse_version(version) >= (1, 0, 0):
                return (partial(openmetrics.generate_latest, escaping=escaping, version=version),
                        f"application/openmetrics-text; version={version}; charset=utf-8; escaping={escaping}")
        elif kind == "text/plain":
            version = _parameter(parts, "version")
            if version and parse_version(version) >= (1, 0, 0):
                break
    from prometheus_client.exposition import choose_encoder

    chosen: tuple[Callable[[CollectorRegistry], bytes], str] = choose_encoder(accept)
    return chosen


def _parameter(parts: list[str], name: str) -> str:
    for part in parts:
        key, equals, value = part.strip().partition("=")
        if equals and key == name:
            return value
    return ""


def _escaping(parts: list[str]) -> str:
    value = _parameter(parts, "escaping")
    known = (openmetrics.ALLOWUTF8, openmetrics.UNDERSCORES, openmetrics.DOTS, openmetrics.VALUES)
    return value if value in known else str(openmetrics.UNDERSCORES)
